"""The reliability diagram as a PNG: per bin, the share of verdicts that were right against
their mean confidence (a calibrated confidence lies on the diagonal), and below it how many
verdicts each bin holds. Drawn with matplotlib's Agg backend, which `debatebot eval`'s chart
uses too."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.calibration.metrics import ReliabilityBin

Series = tuple[str, Sequence[ReliabilityBin]]
"""A named set of bins: one line of the diagram."""


def write_reliability_png(path: Path, series: Sequence[Series], *, title: str) -> Path:
    """Draw `series` (the first one's counts below) to `path`; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (curve, counts) = plt.subplots(
        2, 1, figsize=(6.5, 7), dpi=110, gridspec_kw={"height_ratios": [3, 1]}, sharex=True
    )
    curve.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="calibrated")
    drawn = False
    for name, bins in series:
        points = [
            (b.mean_confidence, b.accuracy)
            for b in bins
            if b.count and b.mean_confidence is not None and b.accuracy is not None
        ]
        if points:
            drawn = True
            curve.plot([x for x, _ in points], [y for _, y in points], marker="o", label=f"{name}")
    if not drawn:
        curve.text(0.5, 0.5, "no labels yet", ha="center", transform=curve.transAxes)
    curve.set_ylabel("share of verdicts that were right")
    curve.set_title(title)
    curve.set_xlim(0, 1)
    curve.set_ylim(-0.02, 1.02)
    curve.grid(alpha=0.3)
    curve.legend(fontsize=8, loc="upper left")
    if series:
        name, bins = series[0]
        counts.bar(
            [(b.lower + b.upper) / 2 for b in bins],
            [b.count for b in bins],
            width=[(b.upper - b.lower) * 0.9 for b in bins],
            color="tab:blue",
            alpha=0.6,
        )
        counts.set_ylabel(f"verdicts ({name})")
    counts.set_xlabel("confidence")
    counts.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
