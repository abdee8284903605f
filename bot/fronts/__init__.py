"""Front doors beside Slack's: each turns what a person or a program asks into a
`bot.intake.DebateRequest` and reads what the store keeps. `web` is the browser page and the
HTTP API of `debatebot web`."""
