"""Background work: the durable debate worker (and, later, the scheduled jobs)."""
