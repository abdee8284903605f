"""What calibration takes from the confidence model as it stands: the default weights (used
until an admin adopts fitted ones), and where a verdict records the components and the weights
version that scored it.

Both are read here and nowhere else. The default weights below are a placeholder until the
evidence-based scoring (issue 36, item 1) defines its own defaults: then `DEFAULT_WEIGHTS`
points at them and `recorded` reads the fields that scoring stores with the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from engine.confidence import Component, ConfidenceComponents, ConfidenceWeights

PLACEHOLDER_DEFAULT_WEIGHTS = ConfidenceWeights(
    version="default-placeholder",
    intercept=-0.5,
    weights={
        Component.AGREEMENT: 2.5,
        Component.POSITION_BIAS: -1.0,
        Component.GROUNDING: 1.5,
        Component.UNANSWERED: -2.0,
        Component.OUTPUT_CHECKS: -3.0,
        Component.DECLARED: 0.5,
    },
    neutral={
        Component.AGREEMENT: 0.5,
        Component.POSITION_BIAS: 0.0,
        Component.GROUNDING: 0.5,
        Component.UNANSWERED: 0.5,
        Component.OUTPUT_CHECKS: 0.0,
        Component.DECLARED: 0.5,
    },
    source="placeholder until the evidence-based scoring's defaults land",
)
DEFAULT_WEIGHTS = PLACEHOLDER_DEFAULT_WEIGHTS
"""The weights that score verdicts while no fitted weights are adopted."""


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
