"""The application around the engine: the Slack bot, its store, workers and CLI. The layers of
this package, lowest first, are listed in docs/architecture.md and enforced by
tests/unit/test_architecture.py."""
