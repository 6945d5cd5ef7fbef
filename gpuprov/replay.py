"""Replay: the stored evidence of past validations judged again under a changed lock or
profile, or under the installed gpuprov (`gpuprov replay`, docs/fleet-figures.md). What a
new floor, rule or version *would have done*, before it drains anything; nothing recorded.

A validation whose evidence directory is gone (pruned, moved) or unreadable, or that
records no lock where none is given, cannot be judged again: it is counted and named,
never skipped in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov.checks.run import judge, observed_for
from gpuprov.errors import GpuprovError
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.model import NodeResult, Verdict
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import Profile


@dataclass(frozen=True)
class Change:
    node: str
    run_id: str
    judged_at: float
    was: str
    now: str
    checks: dict[str, tuple[str | None, str]]   # id -> (status then, status now)

    def as_dict(self) -> dict:
        return {"node": self.node, "run_id": self.run_id, "judged_at": self.judged_at,
                "from": self.was, "to": self.now,
                "checks": {k: {"from": a, "to": b} for k, (a, b) in self.checks.items()}}


@dataclass
class Replay:
    replayed: int = 0
    changed: list[Change] = field(default_factory=list)
    not_judged: list[tuple[str, str, str]] = field(default_factory=list)  # node, run, why

    def as_dict(self) -> dict:
        return {"replayed": self.replayed, "changed": [c.as_dict() for c in self.changed],
                "not_judged": [{"node": n, "run_id": r, "why": w}
                               for n, r, w in self.not_judged]}


def _lock_of(evidence: Evidence, directory: str) -> Lock | None:
    recorded = evidence.meta.get("lock")
    if not recorded:
        return None
    return Lock.from_vars({f"gpuprov_{k}": v for k, v in recorded.items()},
                          f"{directory}/meta.json lock")


def replay(results: Iterable[NodeResult], profile_for: Callable[[NodeResult], Profile],
           lock: Lock | None = None) -> Replay:
    """Each finished, judged validation of `results` judged again from its evidence."""
    out = Replay()
    observed: dict[str, frozenset[str]] = {}   # the configuration read once per profile
    for r in sorted(results, key=lambda r: (r.judged_at, r.node)):
        if r.verdict not in (Verdict.ACCEPTED, Verdict.REJECTED):
            continue          # unfinished or unreachable: no judgement to compare with
        directory = Path(r.evidence_dir)
        if not (directory / "meta.json").is_file():
            out.not_judged.append((r.node, r.run_id, f"evidence gone ({directory})"))
            continue
        evidence = Evidence(directory)
        try:
            profile = profile_for(r)
        except GpuprovError as exc:   # a profile no longer shipped, say
            out.not_judged.append((r.node, r.run_id, f"profile: {exc}"))
            continue
        if profile.name not in observed:     # a bad configuration is bad input: raised
            observed[profile.name] = observed_for(profile.name)
        try:
            used = lock or _lock_of(evidence, str(directory))
            if used is None:
                out.not_judged.append((r.node, r.run_id, "records no versions lock (give "
                                                         "--lock)"))
                continue
            # as the run judged it: a malformed file fails the checks that read it
            judgement = judge(evidence, profile, used, strict=False,
                              observe=observed[profile.name])
        except (ParseError, GpuprovError) as exc:
            out.not_judged.append((r.node, r.run_id, f"unreadable: {exc}"))
            continue
        out.replayed += 1
        before = {c.id: str(c.status) for c in r.checks}
        after = {c.id: str(c.status) for c in judgement.checks}
        checks = {i: (before.get(i), after[i]) for i in after if before.get(i) != after[i]}
        if str(judgement.verdict) != str(r.verdict):
            out.changed.append(Change(r.node, r.run_id, r.judged_at, str(r.verdict),
                                      str(judgement.verdict), checks))
    return out
