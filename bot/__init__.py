"""The application around the engine: settings, composition root, CLI (and later Slack, store)."""
