"""The checks, one concern per module; each registers itself with `@check` (registry.py)."""
