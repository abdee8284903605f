"""Decision cases with planted flaws and clean controls, one JSON object per line."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from engine.errors import EngineError
from engine.models import Decision


class CaseFileError(EngineError):
    """A case file that cannot be read; the message names the line and the field."""


class PlantedFlaw(BaseModel):
    id: str
    description: str
    keywords: list[str] = Field(min_length=1)


class EvalCase(BaseModel):
    """One decision document: its flaws, the verdict experts expect, and optionally the same
    document with its flaws fixed (the clean control)."""

    id: str = Field(min_length=1, max_length=80)
    task_type: str = "other"
    title: str = "Decision document"
    question: str = Field(min_length=1)
    context: str = Field(min_length=1)
    planted_flaws: list[PlantedFlaw] = Field(default_factory=list)
    fabricated_citation_probe: str | None = None
    expected_verdict: Decision | None = None
    clean_context: str | None = None
    clean_question: str | None = None
    clean_expected_verdict: Decision | None = None


def load_cases(path: Path) -> list[EvalCase]:
    """Every case of a JSON-lines file; blank lines are skipped, ids must be unique."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise CaseFileError(f"cannot read the case file {path}: {error.strerror}") from error
    cases: list[EvalCase] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cases.append(EvalCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as error:
            raise CaseFileError(f"{path}:{number}: not JSON ({error.msg})") from error
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()
            )
            raise CaseFileError(f"{path}:{number}: {problems}") from error
    ids = [case.id for case in cases]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise CaseFileError(f"{path}: case ids must be unique; repeated: {', '.join(repeated)}")
    if not cases:
        raise CaseFileError(f"{path} holds no cases")
    return cases
