"""Share groups (KIP-932) on the partition leaders: share-partitions and their manager."""
