"""`debatebot web`: a playground page and an HTTP API on one ASGI server (Starlette), reading
and asking through the same intake and store as every other front door (issue 43)."""
