"""The group coordinator on ``__consumer_offsets``: ``coordinator`` (the state machine: classic
membership, loading, admin), ``offsets`` (committed offsets), ``consumer_protocol`` and
``consumer_group`` (KIP-848 consumer groups), ``assignors``, ``group`` (a group's data),
``records`` and ``consumer_records`` (the record formats), ``messages`` (what goes in and out)
and ``runtime`` (its place in a broker, as a shard of the coordinator runtime)."""
