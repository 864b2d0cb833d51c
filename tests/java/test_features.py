"""``kafka-features`` (Kafka's FeatureCommand: ApiVersions' features, UpdateFeatures) against one
broker: describe shows what Kafka 4.4 finalizes; upgrade and downgrade change it for every
client."""

from __future__ import annotations

import re

from .support import FEATURES_TOOL, run_java


def described(bootstrap: str) -> dict[str, dict[str, str]]:
    out = run_java(FEATURES_TOOL, "--bootstrap-server", bootstrap, "describe")
    found = {}
    for line in out.strip().splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        found[fields["Feature"]] = fields
    return found


def test_describe_shows_the_finalized_features(bootstrap):
    features = described(bootstrap)
    assert {name: f["FinalizedVersionLevel"] for name, f in features.items()} == {
        "group.version": "1",
        "share.version": "1",
        "streams.version": "1",
        "transaction.version": "2",
        "eligible.leader.replicas.version": "1",
    }
    assert features["group.version"]["SupportedMinVersion"] == "0"
    assert features["group.version"]["SupportedMaxVersion"] == "1"


def test_downgrade_and_upgrade_are_seen_by_describe(bootstrap):
    out = run_java(
        FEATURES_TOOL, "--bootstrap-server", bootstrap, "downgrade", "--feature", "share.version=0"
    )
    assert "share.version was downgraded to 0" in out, out
    assert described(bootstrap)["share.version"]["FinalizedVersionLevel"] == "0"
    out = run_java(
        FEATURES_TOOL, "--bootstrap-server", bootstrap, "upgrade", "--feature", "share.version=1"
    )
    assert "share.version was upgraded to 1" in out, out
    features = described(bootstrap)
    assert features["share.version"]["FinalizedVersionLevel"] == "1"
    assert int(features["share.version"]["Epoch"]) == 2
