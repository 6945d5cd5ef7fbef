"""Every check: the evaluators' modules imported (each registers its checks with the
registry as it is imported), in the order checks run and reports list them — by stage,
then module name, then definition. Apart from registry.py so that the registry, which the
evaluators import, does not import them back."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from gpuprov.checks import evaluators
from gpuprov.checks.registry import Check, declared
from gpuprov.evidence import STAGES


@cache
def all_checks() -> tuple[Check, ...]:
    for module in sorted(m.name for m in pkgutil.iter_modules(evaluators.__path__)):
        importlib.import_module(f"{evaluators.__name__}.{module}")
    checks = declared()
    by_module = sorted(range(len(checks)), key=lambda i: (
        STAGES.index(checks[i].stage), checks[i].module, i))
    return tuple(checks[i] for i in by_module)


def check_ids() -> tuple[str, ...]:
    return tuple(c.id for c in all_checks())


def stage_checks(stage: str) -> tuple[str, ...]:
    """The ids judged once `stage`'s evidence is in (validation/'s per-stage tests)."""
    return tuple(c.id for c in all_checks() if c.stage == stage)
