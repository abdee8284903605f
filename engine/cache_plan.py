"""Where a call's prompt is worth marking for the vendor's prompt cache: only where a later call
of the debate reads it, or where an earlier one wrote what this call can read.

Anthropic bills a cache write at 1.25× the input price (5-minute TTL, refreshed on every read)
and a read at 0.1× (Anthropic, prompt-caching: "Cache write tokens are 1.25 times the base input
tokens price", "Cache read tokens are 0.1 times"; at most 4 `cache_control` breakpoints; nothing
is written below the model's minimum cacheable length). An entry no later call reads costs a
quarter more than no cache at all: on the short case a one-round debate's rebuttal and moderator
wrote entries nobody read, and caching made the debate 13 % dearer (issue 47 item 4). A cache
entry is read only by a call to the same model with the same thinking and effort.

So a protocol that knows its order of calls gives the ledger a `Plan` (the calls it will make,
in order; a later round's calls are counted as coming when a later round is possible, so an
early stop can leave one entry unread). For each call the ledger marks:

- the preamble (the stable prefix every call shares) when a later planned call on the same model
  will read it, or an earlier call of the debate on it wrote it (marking it then reads, and
  writes nothing);
- the debate so far: its end when a later call of the same round on the same model extends it;
  otherwise, the end of the so far an earlier call of the round on that model wrote, which this
  call reads without writing more; otherwise nothing.

A call the plan does not know (a protocol with no plan) keeps the default: both marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.models import DebateSpec, ModelSettings, Role


@dataclass(frozen=True)
class Planned:
    """One call a protocol will make: its round (None: after the debate, like the independent
    judges, whatever round it ended in), role and speaker, and whether its prompt extends the
    round's debate so far (a judge reading a transcript of its own does not)."""

    round: int | None
    role: Role
    speaker: str = ""
    extends: bool = True

    def matches(self, round: int, role: Role, speaker: str) -> bool:
        return (self.round is None or self.round == round) and (self.role, self.speaker) == (
            role,
            speaker,
        )


@dataclass(frozen=True)
class CacheMarks:
    """What a request marks for the cache: the preamble, and which ends of the debate so far
    (offsets among the request's `shared_breaks`)."""

    preamble: bool = True
    so_far: list[int] | None = None
    """None: the provider's default, the end of the shared text."""


def cache_group(model: ModelSettings) -> tuple[str, str, str | None]:
    """What keys a vendor's cache entry beside the prompt: the provider, the model and the
    effort ("changing the thinking mode, the effort value ... invalidates message
    breakpoints"; thinking follows from the model's catalogue entry)."""
    return (model.provider, model.model, model.effort)


def judges_planned(spec: DebateSpec) -> list[Planned]:
    """The independent judges, asked after the debate."""
    return [
        Planned(None, Role.INDEPENDENT_JUDGE, f"judge-{n}", extends=False)
        for n in range(1, spec.judges + 1)
    ]


@dataclass
class Plan:
    """A debate's planned calls and what the ledger has asked so far, for `marks`."""

    spec: DebateSpec
    calls: Sequence[Planned]
    asked_groups: set[tuple[str, str, str | None]] = field(default_factory=set)
    written_so_far: dict[tuple[int, tuple[str, str, str | None]], list[int]] = field(
        default_factory=dict
    )

    def model_of(self, planned: Planned) -> ModelSettings:
        """The model a planned call asks: its participant's, a judge's named participant or,
        for a judge the spec names none for, the deciding (moderator's) model."""
        if planned.role is Role.INDEPENDENT_JUDGE:
            named = [
                p
                for p in self.spec.participants
                if p.role is Role.INDEPENDENT_JUDGE and p.name == planned.speaker
            ]
            if named:
                return named[0].model
            return self.spec.participant_for(Role.MODERATOR).model
        return self.spec.participant_for(planned.role, planned.speaker).model

    def marks(
        self, *, round: int, role: Role, speaker: str, model: ModelSettings, breaks: list[int]
    ) -> CacheMarks:
        """The marks of the call (`breaks`: the ends of its debate so far's sections), and
        what it will have written, for the calls after it."""
        at = next((n for n, p in enumerate(self.calls) if p.matches(round, role, speaker)), None)
        if at is None:
            return CacheMarks()
        group = cache_group(model)
        later = [p for p in self.calls[at + 1 :] if cache_group(self.model_of(p)) == group]
        preamble = bool(later) or group in self.asked_groups
        self.asked_groups.add(group)
        written = self.written_so_far.setdefault((round, group), [])
        so_far: list[int] = []
        if breaks and any(p.round == round and p.extends for p in later):
            so_far = [breaks[-1]]
            written.append(breaks[-1])
        else:
            readable = [end for end in written if end in breaks]
            so_far = [max(readable)] if readable else []
        return CacheMarks(preamble=preamble, so_far=so_far)
