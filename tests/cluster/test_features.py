"""Which UpdateFeatures changes are allowed, and what they leave finalized."""

from __future__ import annotations

import pytest

from odradek.cluster import features
from odradek.cluster.features import (
    GROUP_VERSION,
    SAFE_DOWNGRADE,
    TRANSACTION_VERSION,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    FinalizedFeatures,
    UpdateRefused,
)
from odradek.protocol.errors import ErrorCode


def test_nothing_stored_means_kafka_defaults_at_epoch_0() -> None:
    finalized = features.finalized(None)
    assert finalized.epoch == 0
    assert finalized.levels == {
        name: level for name, level in features.DEFAULT_LEVELS.items() if level > 0
    }
    assert set(finalized.levels) == {
        "transaction.version",
        "group.version",
        "share.version",
        "streams.version",
        "eligible.leader.replicas.version",
    }
    stored = FinalizedFeatures({GROUP_VERSION: 1}, 4)
    assert features.finalized(stored) is stored


def test_upgrades_and_declared_downgrades_apply_all_together() -> None:
    current = FinalizedFeatures({GROUP_VERSION: 1, TRANSACTION_VERSION: 1}, 3)
    levels = features.apply_updates(
        current,
        [FeatureUpdate(GROUP_VERSION, 0, UNSAFE_DOWNGRADE), FeatureUpdate(TRANSACTION_VERSION, 1)],
    )
    assert levels == {TRANSACTION_VERSION: 1}
    assert features.apply_updates(current, [FeatureUpdate(TRANSACTION_VERSION, 0, 2)]) == {
        GROUP_VERSION: 1
    }


@pytest.mark.parametrize(
    ("update", "error"),
    [
        (FeatureUpdate("no.such.feature", 1), ErrorCode.invalid_update_version),
        (FeatureUpdate(GROUP_VERSION, 7), ErrorCode.invalid_update_version),
        # lowering a level needs a downgrade type
        (FeatureUpdate(GROUP_VERSION, 0, UPGRADE), ErrorCode.invalid_update_version),
        # and raising one must not claim to be a downgrade
        (FeatureUpdate("share.version", 1, SAFE_DOWNGRADE), ErrorCode.invalid_update_version),
        (FeatureUpdate(GROUP_VERSION, 1, 9), ErrorCode.invalid_request),
    ],
)
def test_refused_updates_name_the_feature(update: FeatureUpdate, error: ErrorCode) -> None:
    current = FinalizedFeatures({GROUP_VERSION: 1}, 1)
    with pytest.raises(UpdateRefused) as refused:
        features.apply_updates(current, [FeatureUpdate(TRANSACTION_VERSION, 1), update])
    assert refused.value.error == error
    assert refused.value.feature == update.name


def test_a_feature_given_twice_is_refused() -> None:
    with pytest.raises(UpdateRefused):
        features.apply_updates(
            features.DEFAULTS, [FeatureUpdate(GROUP_VERSION, 1), FeatureUpdate(GROUP_VERSION, 1)]
        )
