"""What `gpuprov lab up` recorded of this lab (its state file): its nodes and kinds, and
whether it has Slurm or is a rack. Read by every `gpuprov lab` command, so it imports
nothing heavier than the lab's paths (`lab ssh` and `lab inventory` need no more)."""

from __future__ import annotations

import json

from gpuprov.errors import InputError
from gpuprov.lab.paths import LabPaths


def value(paths: LabPaths, key: str):
    """What the last `lab up` recorded under KEY; None where the lab is down."""
    try:
        return json.loads(paths.state_file.read_text()).get(key)
    except FileNotFoundError:
        return None


def nodes(paths: LabPaths) -> dict[str, str]:
    """Node → kind, as the last `lab up` left them; empty where the lab is down."""
    return value(paths, "nodes") or {}


def require_node(paths: LabPaths, node: str) -> None:
    known = nodes(paths)
    if not known:
        raise InputError("the lab is not up: run `gpuprov lab up`")
    if node not in known:
        raise InputError(f"unknown node {node!r} (lab nodes: {', '.join(known)})")
