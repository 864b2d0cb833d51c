"""The web console: a page of the cluster's brokers, topics, records and consumer groups, served
with ``/metrics`` by the broker (``metrics.listener``) or by ``odradek console``."""
