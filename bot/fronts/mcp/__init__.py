"""The MCP server for coding agents: tools to start, follow and verify debates (`server`), the
reads behind them (`reading`), the admission adapter into the intake (`admission`), the
allowed-directories check for context files (`paths`) and bearer auth over HTTP (`auth`)."""
