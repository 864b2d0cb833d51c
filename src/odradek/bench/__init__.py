"""The benchmark harness behind ``odradek bench``.

It measures a broker the way Kafka's own performance tools and published benchmarks do, with real
clients in processes of their own so the load generator never shares a GIL with the broker:

- ``produce``: one confluent-kafka producer (acks=1), records/s, MB/s, delivery latency;
- ``consume``: one consumer reading back a loaded topic;
- ``latency``: end to end, producer at a fixed rate to consumer, send time carried in the value;
- ``fanout``: N consumers each reading the whole topic, as N consumer groups would;
- ``partitions``: produce throughput and broker RSS for 1, 10, 100, 1000 partitions;
- ``recovery``: restart time after ``kill -9`` as the unflushed log grows;
- ``raw``: pre-built record batches over pipelined connections, the broker's own ceiling.

Modules: :mod:`.options` (flags), :mod:`.broker` (the broker child process), :mod:`.wire` (a
pipelined raw Produce client), :mod:`.workers` (what runs in load processes), :mod:`.scenarios`,
:mod:`.report` (table, JSON) and :mod:`.charts` (PNGs), tied together by :mod:`.runner`.
MB means 10^6 bytes throughout.
"""
