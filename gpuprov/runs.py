"""Run ids: sortable by start time, unique across controllers, the kind in the first letter
(`p` provision, `v` validate, `t` validation/'s testinfra run, `f` a fabric-only run)."""

from __future__ import annotations

import time
import uuid

KINDS = {"provision": "p", "validate": "v", "testinfra": "t", "fabric": "f"}


def new_run_id(kind: str) -> str:
    """e.g. v20261123-141502-3fa2c1"""
    return time.strftime(f"{KINDS[kind]}%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
