"""The configuration reference: every broker and topic setting of :mod:`odradek.config`, with
its type, default, meaning (the definition's doc) and where it differs from Kafka
(``KAFKA_DIFFERENCES``)."""

from __future__ import annotations

from odradek.config import (
    BROKER_CONFIGS,
    KAFKA_DIFFERENCES,
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigDef,
)
from odradek.docs import header, table

_INTRO = """\
# Configuration

odradek takes Kafka's own setting names. A broker reads a Java-style properties file
(`odradek serve --config server.properties`) and `-o key=value` overrides, which win over the
file. A setting it does not know is logged as a warning (naming the closest known one, if one
is close) and otherwise ignored; a known setting with a bad value stops the start with exit
status 2.

Settings not listed here are not implemented. Where the last column is empty, the setting has
Kafka's default and meaning. Per-listener overrides (`listener.name.<listener>.<setting>`, for
the `ssl.*` and `sasl.*` settings) are accepted as in Kafka.
"""

_TOPIC_INTRO = """\
## Topic settings

Set per topic at creation (`odradek topics create T --config K=V`, CreateTopics) or later
(`odradek configs alter`, AlterConfigs, IncrementalAlterConfigs), and kept with the topic's
metadata. A topic that does not set one takes its broker synonym's value, else the default.
"""

_BROKER_INTRO = """\
## Broker settings

Static: read at start, from the properties file and `-o`. *Dynamic* ones can also be changed
while the broker runs, per broker, with IncrementalAlterConfigs
(`odradek configs alter --entity-type brokers`). The topic settings' broker synonyms are listed
here too.
"""


def _default(definition: ConfigDef) -> str:
    if definition.default is None:
        return "(unset)"
    if definition.default == "":
        return '""'
    if definition.default == str(LONG_MAX):
        return "Long.MAX_VALUE"
    return f"`{definition.default}`"


def page() -> str:
    from odradek.config import DYNAMIC_BROKER_CONFIGS

    synonyms = {synonym: name for name, (_, synonym) in TOPIC_CONFIGS.items() if synonym}
    topic_rows = [
        [
            f"`{name}`",
            definition.kind.name.lower(),
            _default(definition),
            f"`{synonym}`" if synonym else "",
            definition.doc,
            KAFKA_DIFFERENCES.get(name, ""),
        ]
        for name, (definition, synonym) in sorted(TOPIC_CONFIGS.items())
    ]
    broker_rows = []
    for name, definition in sorted(BROKER_CONFIGS.items()):
        meaning = definition.doc
        if name in synonyms:
            meaning += f" (default of the topic setting `{synonyms[name]}`)"
        if name in DYNAMIC_BROKER_CONFIGS:
            meaning = "*Dynamic.* " + meaning
        broker_rows.append(
            [
                f"`{name}`",
                definition.kind.name.lower(),
                _default(definition),
                meaning,
                # A topic setting's broker synonym differs from Kafka as the topic setting does.
                KAFKA_DIFFERENCES.get(name) or KAFKA_DIFFERENCES.get(synonyms.get(name, ""), ""),
            ]
        )
    return (
        header("src/odradek/config.py")
        + _INTRO
        + "\n"
        + _TOPIC_INTRO
        + "\n"
        + table(
            ["Setting", "Type", "Default", "Broker synonym", "Meaning", "Differs from Kafka"],
            topic_rows,
        )
        + "\n"
        + _BROKER_INTRO
        + "\n"
        + table(["Setting", "Type", "Default", "Meaning", "Differs from Kafka"], broker_rows)
    )
