"""The ZooKeeper engine of the metadata store: the only code that talks to ZooKeeper (kazoo),
in Kafka's ZooKeeper layout: the store (topics, partition states, configs, ACLs, quotas) and
the membership (broker registration, controller election)."""
