"""The one way in: every trigger builds a `DebateRequest`, and `Intake` admits it (the bot can
post where it should, the spec by the deployment's and the channel's policy, debates in flight,
monthly spend) and queues it with the messages it owes. Nothing here knows Bolt: the Slack
layer above builds requests; the store and the renderers below take values."""
