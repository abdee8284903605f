"""What calibration takes from the confidence model as it stands: the default weights (used
until an admin adopts fitted ones), and where a verdict records the components and the weights
version that scored it.

Both are read here and nowhere else: `DEFAULT_WEIGHTS` is the scoring's own
(`engine.confidence`), and `recorded` reads the fields the scoring stores with the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from engine.confidence import ConfidenceComponents


def recorded(verdict: Mapping[str, Any]) -> tuple[ConfidenceComponents | None, str | None]:
    """The components and the weights version a verdict (as its JSON document holds it)
    recorded, each None when it recorded none (verdicts scored before components existed)."""
    raw = verdict.get("components")
    components = None
    if isinstance(raw, Mapping):
        values = raw.get("values", raw)
        try:
            components = ConfidenceComponents.model_validate({"values": values})
        except ValidationError:
            components = None
    version = verdict.get("weights_version")
    return components, version if isinstance(version, str) and version else None
