"""Prompt templates (data): one file per role and protocol, pinned in `prompts.lock`."""
