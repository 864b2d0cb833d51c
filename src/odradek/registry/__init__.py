"""A schema registry served by the broker: Confluent Schema Registry's REST API over schemas
kept in the compacted ``_schemas`` topic in Confluent's record format (:mod:`.records`).

A pure core (:mod:`.state`: subjects, versions, ids, deletes, levels, modes and replay;
:mod:`.schemas`, :mod:`.json_compat`, :mod:`.protobuf`: parsing and compatibility), the
Kafka-backed store (:mod:`.store`), and the HTTP listener on aiohttp (:mod:`.http`) with basic
authentication against the broker's users (:mod:`.auth`); the ids the broker validates
records' schema ids by (:mod:`.ids`)."""
