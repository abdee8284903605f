"""Prompt templates (data): one file per role and protocol, pinned in `prompts.lock`.

How a turn's prompt is laid out, and what each role sees (adversarial protocol):

1. System message, the same for every turn of a debate: `common/preamble.md` (the rules, then
   the question and documents as delimited, untrusted material).
2. User message: first *the debate so far* (`engine.protocols.record.DebateSoFar`, the one
   place the compaction rule and the id scheme live), then the role's own template from this
   folder.
   - The id legend and the proposition, in full.
   - Earlier rounds, as a compact record built in code: one line per argument, counter-argument,
     concession, settled and open point, under its id (`R1.C2`), cut to a bound, then the
     round's decision.
   - The current round's turns so far, in full, each point under its id: the critic sees the
     proposer's argument, the rebuttal sees both, the moderator sees all three.
   The framing turn comes first and sees only the material.

What turns share comes first and only grows: within a round, so every turn's prompt begins with
the previous turn's prompt up to its instructions, and from round to round, since records are
only appended. Providers serve that prefix from their prompt cache (`benchmarks/tokens.py`
measures the share per role, and tokens by round count). Stances debaters, consensus debaters
and panelists' revisions are shown their debate so far the same way, before their template, and
so are the structured judge's three calls (the whole debate, the same on each); the other judges'
templates carry their own sections, filled by their protocol module.
OpenAI and Anthropic, whose caches put the output schema before the messages, get one schema
for every call of a protocol (`engine/envelope.py`); the sentence naming the key a call fills is
added by the provider after the role's instructions, not by a template.
"""
