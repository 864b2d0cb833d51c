"""The coordinators: state machines on internal topics, shards of one runtime.

``common`` is what every coordinator shares (the runtime: loading as leadership moves, writes
answered once their records are committed, reads, timers; the internal topic, its loader and
reader); ``group`` the group coordinator (classic and KIP-848 groups, committed offsets) on
``__consumer_offsets``; ``transaction`` the transaction coordinator (its state machine, records,
marker channel and sender) on ``__transaction_state``.
"""
