"""`debatebot eval`'s pure part: decision cases, the arms compared at one budget (a single
answer, a majority vote, best-of-n, each debate protocol), and the scores computed from their
outputs. Files, progress, budgets and the report live in `bot.evaluation`."""
