"""The transaction coordinator on ``__transaction_state``: ``coordinator`` (the state machine),
``records`` (its record format), ``markers`` (WriteTxnMarkers to the partitions' leaders and
KIP-890 verification elsewhere), ``marker_sender`` (markers, then the Complete record) and
``runtime`` (its place in a broker, as a shard of the coordinator runtime)."""
