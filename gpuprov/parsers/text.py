"""Small helpers shared by the parsers."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NOT_AVAILABLE = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error"}
# the line opening each GPU's block in nvidia-smi's per-GPU subcommands (`nvlink -s`,
# `nvlink -e`, `c2c -s`): `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`
GPU_HEADER = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def number(value: str | None) -> float | None:
    """'81559 MiB' -> 81559.0, '16x' -> 16.0, 'N/A' -> None."""
    if value is None:
        return None
    value = value.strip()
    if value.lower() in NOT_AVAILABLE:
        return None
    match = re.match(r"^[-+]?\d+(?:\.\d+)?", value)
    return float(match.group()) if match else None


def integer(value: str | None) -> int | None:
    got = number(value)
    return None if got is None else int(got)


def yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("yes", "enabled", "active", "true", "on"):
        return True
    if v in ("no", "disabled", "not active", "false", "off"):
        return False
    return None
