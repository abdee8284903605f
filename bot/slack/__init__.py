"""The Slack surface on Bolt: the listeners and their middleware, the use cases they reach
(starting debates, reviews, App Home, channel settings), the HTTP and Socket Mode fronts, and
the parsing of `/debate` text and forms. What the bot says is rendered in `bot.messages`; the
Web API clients are `bot.slackweb`."""
