"""The Slack surface: listeners, Block Kit builders, the poster and the debate notifier."""
