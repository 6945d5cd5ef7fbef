"""Run every registered check over one evidence directory: the single code path for
verdicts (`gpuprov evaluate`, `gpuprov validate` and validation/'s testinfra modules)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from gpuprov import settings
from gpuprov.checks.catalog import all_checks, check_ids
from gpuprov.checks.context import Context
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.model import Action, CheckResult, Status, Verdict, verdict
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import Profile


@dataclass
class Judgement:
    node: str
    profile: str
    verdict: Verdict
    checks: list[CheckResult]

    def as_dict(self) -> dict:
        return {"node": self.node, "profile": self.profile, "verdict": str(self.verdict),
                "checks": [c.as_dict() for c in self.checks]}

    def reason(self) -> str:
        """One line: each blocking check with its summary, then the observed ones'."""
        bad = [c for c in self.checks if c.blocking]
        observed = [c.id for c in self.checks if c.status == Status.OBSERVED]
        said = "; ".join(f"{c.id}: {c.summary}" for c in bad) or "all checks passed"
        return said + (f"; observed: would reject: {', '.join(observed)}" if observed else "")


# The checks observe mode may never soften: what a node is (its GPUs, their count and
# identity; the driver the lock pins and the CUDA it runs) and whether it is alive (the
# kernel's fatal GPU events; a GPU that needs a reset). Observed, a node with a GPU gone or
# an Xid 79 would be accepted, Slurm would resume it and `nodes` would show it accepted
# (issue 67). Observe mode is for a check whose site floor is being learned (load figures,
# fabric rates, a new fingerprint), not for what makes the node usable at all.
UNOBSERVABLE = {
    "gpu_inventory": "the GPUs' count and identity",
    "gpu_reset_required": "a GPU that needs a reset",
    "kernel_log": "the kernel's fatal GPU events",
    "driver_version": "the driver the lock pins",
    "cuda_compat": "the CUDA the driver runs",
    # an NVL72 tray is usable only as a member of its rack's NVLink domain
    "rack_tray": "the tray's place in its rack's NVLink domain",
    "rack": "the rack's NVLink domain, of which the tray is a part",
}


def observed_for(profile: str) -> frozenset[str]:
    """The checks the configuration observes for `profile`, each a registered check that
    may be observed."""
    observed = settings.observed_checks()(profile)
    unknown = sorted(observed - set(check_ids()))
    if unknown:
        raise InputError(f"{settings.config_path()}: observe: unknown check "
                         f"{unknown[0]!r} (see docs/checks.md)")
    bounded = sorted(observed & set(UNOBSERVABLE))
    if bounded:
        raise InputError(f"{settings.config_path()}: observe: {bounded[0]!r} cannot be "
                         f"observed: it judges {UNOBSERVABLE[bounded[0]]}")
    return observed


def _observed(result: CheckResult) -> CheckResult:
    return replace(result, status=Status.OBSERVED,
                   summary=f"observed: would reject: {result.summary}")


def judge(evidence: Evidence, profile: Profile, lock: Lock | None,
          strict: bool = True, only: Iterable[str] | None = None,
          upto: str | None = None, observe: Collection[str] | None = None) -> Judgement:
    """Every check (or those in `only`), in registry order. strict: malformed evidence
    raises (evaluate's exit 2); otherwise it fails the checks that read it (a live node's
    broken output). upto: the last stage collected so far (a run judged as it goes);
    later stages' evidence is not yet required. observe: the checks whose failures are
    reported as observed, never blocking (default: the configuration's, observe mode)."""
    observed = observed_for(profile.name) if observe is None else frozenset(observe)
    if observed & set(UNOBSERVABLE):
        raise ValueError(f"cannot observe {sorted(observed & set(UNOBSERVABLE))}")
    ctx = Context(evidence, profile, lock, upto)
    wanted = set(only) if only is not None else None
    results = []
    for spec in all_checks():
        if wanted is not None and spec.id not in wanted:
            continue
        try:
            results.append(spec.run(ctx))
        except ParseError as exc:
            if strict:
                raise
            # what the node's tool printed could not be read: a setup finding (DESIGN.md
            # "Cause, then action"), never a hardware action
            results.append(CheckResult(spec.id, Status.FAIL, f"unreadable evidence: {exc}",
                                       action=Action.FIX_SETUP))
    results = [_observed(r) if r.blocking and r.id in observed else r for r in results]
    node = evidence.meta.get("node") or evidence.dir.name
    return Judgement(node, profile.name, verdict(results), results)
