"""Background work: the durable debate worker, the endings it records with their messages, the
outbox delivery loop, and the scheduled jobs (review SLA and reminders, digest, retention,
stale leases, pull request comments)."""
