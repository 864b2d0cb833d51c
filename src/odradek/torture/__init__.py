"""``odradek torture``: a fault campaign against a real cluster, judged over its whole history.

Three layers, each testable alone:

- :mod:`~odradek.torture.history` and :mod:`~odradek.torture.checker`: what clients did and
  saw, as plain values, and the rules a Kafka cluster must keep over it (pure code);
- :mod:`~odradek.torture.schedule`: the nemesis's faults, a pure function of the seed;
- :mod:`~odradek.torture.network` (with :mod:`~odradek.torture.delay`, the slow links' packet
  holder), :mod:`~odradek.torture.disk`, :mod:`~odradek.torture.workload` and
  :mod:`~odradek.torture.runner`: the shell that makes network namespaces and bounded log dirs,
  starts ZooKeeper and the brokers, runs the clients and the nemesis, records the history and
  removes everything.
"""
