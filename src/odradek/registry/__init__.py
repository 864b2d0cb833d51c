"""A schema registry served by the broker: Confluent Schema Registry's REST API over schemas
kept in the compacted ``_schemas`` topic (:mod:`.records`), with a pure core (:mod:`.state`,
:mod:`.schemas`), the Kafka-backed store (:mod:`.store`) and the HTTP listener (:mod:`.http`)."""
