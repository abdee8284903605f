"""Everything the bot says, rendered as values: Block Kit messages, forms, App Home, and the
messages a debate owes. Nothing here calls Slack or writes the store."""
