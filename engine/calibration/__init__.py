"""Calibration of the confidence on what people decided: labels, the scores that say how well a
confidence predicts a verdict's correctness (Brier, ECE, AUROC, the reliability diagram), the
escalation threshold they recommend, and fitting new confidence weights. Pure: the store and
the command line live in `bot/`."""
