"""The coordinators: state machines on internal topics, run by one runtime.

``coordinator_runtime`` is the runtime every coordinator is a shard of (loading as leadership
moves, writes answered once their records are committed, timers); ``coordinator``,
``consumer_protocol`` and their ``group``, ``records`` and ``messages`` are the group
coordinator (classic and KIP-848 groups, committed offsets) and ``runtime`` its place in a
broker; ``transactions`` and ``txn_records`` the transaction coordinator and ``txn_runtime`` its
place in a broker.
"""
