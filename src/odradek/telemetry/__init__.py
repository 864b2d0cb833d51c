"""Client telemetry (KIP-714): the metrics subscriptions clients are given, and the metrics they
push, decoded from OTLP, held for the broker's Prometheus endpoint. No I/O."""
