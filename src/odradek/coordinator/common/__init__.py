"""What every coordinator shares (Kafka's coordinator-common): ``runtime`` (one
``CoordinatorRuntime`` per coordinator, its state machine a shard of it), ``internal_topic`` (the
compacted topic it writes), ``loader`` (loading and unloading as leadership moves),
``log_reader`` (reading a partition back) and ``timers`` (deadlines as data)."""
