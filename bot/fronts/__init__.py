"""Front doors beside Slack's: each turns what a person or a program asks into a
`bot.intake.DebateRequest`, submits it through the one intake and reads what the store keeps;
none runs the engine itself (the process that hosts it may). `web` is the browser page and the
HTTP API of `debatebot web`; `mcp` the MCP server for coding agents."""
