"""Everything the bot says, rendered as values: Block Kit messages, forms, App Home, and the
messages a debate owes. Nothing here calls Slack; only the notifier, which follows a run, writes
what it owes to the outbox."""
