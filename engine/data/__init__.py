"""Data files shipped with the engine (the price table)."""
