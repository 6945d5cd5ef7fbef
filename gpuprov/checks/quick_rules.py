"""The node-local quick check's rules (gpuprov/data/quick_check.yml), read once: which of
the acceptance's checks it judges, which of their failures can be transient (NVLink and the
fabric training after a boot), the settle window and the runs a transient finding must
last. The quick check (health/quick.py) and a recheck's settle window (holds.py) both read
them here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import yaml

from gpuprov.checks.catalog import all_checks
from gpuprov.resources import data_file


@dataclass(frozen=True)
class Rules:
    transient: frozenset[str]
    checks: tuple[str, ...]
    also_collect: tuple[str, ...]
    settle_s: float
    persist_runs: int


@cache
def rules() -> Rules:
    doc = yaml.safe_load(data_file("quick_check.yml").read_text())
    checks = doc["checks"]
    known = {c.id for c in all_checks()}
    unknown = sorted(set(checks) - known)
    if unknown:   # a renamed check must not silently drop out of the quick check
        raise ValueError(f"quick_check.yml: unknown check(s) {', '.join(unknown)}")
    return Rules(frozenset(k for k, v in checks.items() if v["transient"]), tuple(checks),
                 tuple(doc.get("also_collect") or ()), float(doc["defaults"]["settle_s"]),
                 int(doc["defaults"]["persist_runs"]))


def settle_for(checks: list[str]) -> float:
    """How long after boot a judgement of `checks` waits: the settle window where one of
    them can fail while the fabric trains, else none."""
    r = rules()
    return r.settle_s if r.transient & set(checks) else 0.0
