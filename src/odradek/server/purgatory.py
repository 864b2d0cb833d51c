"""The purgatory lives with the replica manager that owns the delayed operations
(:mod:`odradek.cluster.replication.purgatory`); named here too for the server's callers."""

from odradek.cluster.replication.purgatory import Purgatory, Replicating, Watchable

__all__ = ["Purgatory", "Replicating", "Watchable"]
