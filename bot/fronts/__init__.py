"""Fronts other than Slack through which a debate is asked for and followed (the MCP server for
coding agents). A front sits beside the Slack surface: it submits through the one intake and
reads the store, and never runs the engine itself (the process that hosts it may)."""
