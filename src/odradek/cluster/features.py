"""Cluster features (KIP-584): what this broker supports, what a cluster finalizes by default, and
whether an UpdateFeatures change is allowed.

A feature is a name with integer levels; the cluster's *finalized* level of each is stored once, in
the metadata store (:meth:`~odradek.cluster.metadata.store.MetadataStore.finalized_features`), so
that every broker of a cluster tells clients the same levels in ApiVersions. A feature never
finalized (nothing stored yet) has the level Kafka 4.4 bootstraps a new cluster with
(:data:`DEFAULT_LEVELS`); level 0 means "off" and is never listed as finalized, as in Kafka.

``transaction.version`` decides what the clients do: at 2, Kafka 4's producers use transactions
version 2 (KIP-890 part 2: EndTxn v5, partitions added by Produce v12); below, version 1.
``eligible.leader.replicas.version`` at 1 turns on KIP-966's eligible leader replicas in the
controller (read when a controller takes over).

Pure functions and values: no I/O, any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"


@dataclass(frozen=True, slots=True)
class SupportedRange:
    """The levels of a feature this broker can run at (both ends inclusive)."""

    min_level: int
    max_level: int

    def allows(self, level: int) -> bool:
        return level == 0 or self.min_level <= level <= self.max_level


# Level 0 is everything's "off", so every range starts at 0 (as Kafka 4.4's do).
SUPPORTED: Mapping[str, SupportedRange] = {
    TRANSACTION_VERSION: SupportedRange(0, 2),
    GROUP_VERSION: SupportedRange(0, 1),
    SHARE_VERSION: SupportedRange(0, 1),
    STREAMS_VERSION: SupportedRange(0, 1),
    ELIGIBLE_LEADER_REPLICAS_VERSION: SupportedRange(0, 1),
}

# Kafka 4.4's levels for a new cluster (each feature's latest production level).
DEFAULT_LEVELS: Mapping[str, int] = {
    TRANSACTION_VERSION: 2,
    GROUP_VERSION: 1,
    SHARE_VERSION: 1,
    STREAMS_VERSION: 1,
    ELIGIBLE_LEADER_REPLICAS_VERSION: 1,
}


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster's finalized feature levels (only those above 0) and their epoch, which grows
    with every change (ApiVersions' ``FinalizedFeaturesEpoch``: clients keep the highest they
    see). Epoch 0 is the defaults, never stored."""

    levels: Mapping[str, int] = field(default_factory=dict)
    epoch: int = 0

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


DEFAULTS = FinalizedFeatures({k: v for k, v in DEFAULT_LEVELS.items() if v > 0}, 0)


def finalized(stored: FinalizedFeatures | None) -> FinalizedFeatures:
    """What the cluster runs at: what was stored, else the defaults."""
    return DEFAULTS if stored is None else stored


# UpdateFeatures' upgrade types (v1+; v0's allow_downgrade maps to SAFE or UPGRADE).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    level: int  # below 1: remove the feature (finalize it at 0)
    upgrade_type: int = UPGRADE


class UpdateRefused(Exception):
    """An update the controller refuses: nothing of the request is applied."""

    def __init__(self, feature: str, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.feature = feature
        self.error = error
        self.message = message


def apply_updates(current: FinalizedFeatures, updates: list[FeatureUpdate]) -> dict[str, int]:
    """The levels after ``updates`` (all or none: :class:`UpdateRefused` names the first that
    cannot be made). A downgrade must say so, as in Kafka: an UPGRADE that lowers a level, or a
    downgrade that raises one, is refused."""
    levels = dict(current.levels)
    seen: set[str] = set()
    for update in updates:
        name, level = update.name, max(update.level, 0)
        if name in seen:
            raise UpdateRefused(name, ErrorCode.invalid_request, f"Feature {name} was given twice.")
        seen.add(name)
        supported = SUPPORTED.get(name)
        if supported is None:
            raise UpdateRefused(
                name,
                ErrorCode.invalid_update_version,
                f"Invalid update version {level} for feature {name}. The broker does not "
                "support the given feature.",
            )
        if not supported.allows(level):
            raise UpdateRefused(
                name,
                ErrorCode.invalid_update_version,
                f"Invalid update version {level} for feature {name}. The broker only supports "
                f"versions {supported.min_level}-{supported.max_level}.",
            )
        if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise UpdateRefused(
                name, ErrorCode.invalid_request, f"Unknown upgrade type {update.upgrade_type}."
            )
        now = current.level(name)
        if level < now and update.upgrade_type == UPGRADE:
            raise UpdateRefused(
                name,
                ErrorCode.invalid_update_version,
                f"Invalid update version {level} for feature {name}. Can't downgrade the "
                "version of this feature without setting the upgrade type to either safe or "
                "unsafe downgrade.",
            )
        if level > now and update.upgrade_type != UPGRADE:
            raise UpdateRefused(
                name,
                ErrorCode.invalid_update_version,
                f"Invalid update version {level} for feature {name}. Can't downgrade to a "
                "newer version.",
            )
        if level == 0:
            levels.pop(name, None)
        else:
            levels[name] = level
    return levels
