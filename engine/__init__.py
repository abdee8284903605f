"""The debate engine: pure, async, no Slack, no database, no vendor SDK outside `providers/`."""
