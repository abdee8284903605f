"""LLM adapters. Vendor SDKs are imported here and nowhere else in the engine."""
