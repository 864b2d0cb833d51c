"""Topics as Apache Iceberg tables (``iceberg.mode``): every committed record of a topic also a
row of the table named after it, exactly once (see :mod:`.translator`)."""
