"""Slack's Web API as the bot uses it: posting with pacing and classified failures, the
directory of people and channels, and file downloads. No Bolt here: listeners live in
`bot.slack`."""
