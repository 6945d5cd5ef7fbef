"""The check registry: every check declares itself once, here is everything derived.

A check is one evaluator function decorated with `@check(...)`, which declares its id,
the collection stage after which it can be judged, the evidence it needs (absent →
`missing`, or `skip` for an optional stage's check; generated here), when it applies to a
profile (otherwise `skip` with the reason, generated here), the rule it applies and the
action a failure usually calls for, both for docs/checks.md. The evaluator gets the
`Context` and a `Results` builder bound to its id and default action, and returns one
`CheckResult`.

Checks live in the modules of `gpuprov.checks.evaluators`, which import this module;
`catalog.all_checks()` imports every one of them, so adding a check is adding a module (or
a function to one).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from gpuprov.checks import coverage
from gpuprov.checks.context import Context
from gpuprov.checks.tool_failures import tool_failure_action
from gpuprov.evidence import STAGES, EvidenceKind
from gpuprov.model import HARDWARE_ACTIONS, Action, CheckResult, GpuRef, Status, gpu_at_fault
from gpuprov.profiles import Profile

Problems = list[tuple[int | None, str]]


class Results:
    """Builds one check's results: its id and default action already bound."""

    def __init__(self, check_id: str, ctx: Context, action: Action):
        self.id, self.ctx, self.default_action = check_id, ctx, action

    def result(self, status: Status, summary: str, values: dict | None = None,
               gpu: GpuRef | None = None, action: Action | None = None) -> CheckResult:
        if status in (Status.FAIL, Status.WARN):
            action = action or self.default_action
        return CheckResult(self.id, status, summary, gpu=gpu, values=values or {},
                           action=action or Action.NONE)

    def passed(self, summary: str, values: dict | None = None) -> CheckResult:
        return self.result(Status.PASS, summary, values)

    def warn(self, summary: str, values: dict | None = None, gpu: GpuRef | None = None,
             action: Action | None = None) -> CheckResult:
        return self.result(Status.WARN, summary, values, gpu, action)

    def fail(self, summary: str, values: dict | None = None, gpu: GpuRef | None = None,
             action: Action | None = None) -> CheckResult:
        return self.result(Status.FAIL, summary, values, gpu, action)

    def unseen(self, summary: str, values: dict | None = None) -> CheckResult:
        """A fail for what the evidence cannot show (a tool absent, a file not collected,
        a probe that measured nothing): always the node's setup, never a part named
        (DESIGN.md "Cause, then action")."""
        return self.result(Status.FAIL, summary, values, None, Action.FIX_SETUP)

    def failed(self, problems: Problems, values: dict, action: Action | None = None
               ) -> CheckResult:
        """A fail listing the first three problems; it names the GPU when every problem
        is on the same one."""
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        summary = "; ".join(message for _, message in problems[:3]) + more
        return self.fail(summary, values, self.at_fault(i for i, _ in problems), action)

    def judged(self, findings: Problems, gaps: Problems, values: dict, passed: str,
               action: Action | None = None) -> CheckResult:
        """Findings about the hardware fail with their action (the GPU named when they are all
        on one), the gaps (what the evidence could not show) named after them; gaps alone
        fail as the setup's (DESIGN.md "Cause, then action"); neither: `passed`."""
        if findings:
            result = self.failed(findings, values, action)
            return beside(result, "unjudged", [g for _, g in gaps]) if gaps else result
        if gaps:
            return self.failed(gaps, values, Action.FIX_SETUP)
        return self.passed(passed, values)

    def at_fault(self, indices) -> GpuRef | None:
        return gpu_at_fault(indices, self.ctx.gpu_ref)


def beside(result: CheckResult, label: str, gaps: list[str], shown: int = 1) -> CheckResult:
    """A hardware finding with what the evidence could not show named after it (`also
    LABEL: …`): both are reported and the finding's action stands (DESIGN.md "Coverage")."""
    more = f" (+{len(gaps) - shown} more)" if len(gaps) > shown else ""
    return replace(result, summary=f"{result.summary}; also {label}: "
                                   f"{'; '.join(gaps[:shown])}{more}")


def shortfall_pct(value: float, median: float) -> float:
    """How far a GPU's figure falls below its node's median, in percent of the median."""
    return 100 * (median - value) / median if median else 0.0


def below_node_median(figures: Mapping[int, float], allowed_pct: float
                      ) -> tuple[float, dict[int, float]]:
    """The spread rule of gpu-burn, the clocks under load and nvbandwidth: the node median
    of the GPUs' figures, and each GPU `allowed_pct` % or more below it, with how far."""
    median = statistics.median(figures.values())
    return median, {i: pct for i, value in figures.items()
                    if (pct := shortfall_pct(value, median)) >= allowed_pct}


Evaluator = Callable[[Context, Results], CheckResult]
# A need is one evidence kind, or a tuple of alternatives any one of which will do.
Need = EvidenceKind | tuple[EvidenceKind, ...]


def _need_name(need: Need) -> str:
    return " or ".join(k.file for k in need) if isinstance(need, tuple) else need.file


def _absent(ctx: Context, need: Need) -> bool:
    kinds = need if isinstance(need, tuple) else (need,)
    return all(ctx.evidence.read(kind) is None for kind in kinds)


@dataclass(frozen=True)
class Check:
    id: str
    stage: str
    needs: tuple[Need, ...]
    evaluate: Evaluator
    rule: str                     # one line for docs/checks.md
    action: Action                # what a failure usually calls for
    applies: Callable[[Profile], bool] | None = None
    skip_reason: str = ""
    module: str = ""
    optional: bool = False        # its evidence absent: `skip` (a stage not asked for)
    # the lock's field naming what the check judges; set empty, the site installs none of
    # it (no Docker on a Slurm site with enroot): `skip`, never a failure (issue 53)
    locked: str | None = None

    def run(self, ctx: Context) -> CheckResult:
        results = Results(self.id, ctx, self.action)
        if self.applies is not None and not self.applies(ctx.profile):
            return results.result(Status.SKIP, self.skip_reason)
        if ctx.left_out(self.stage):
            return results.result(Status.SKIP, f"not rechecked: {self.stage} not run by this "
                                               "recheck (no open hold needs it)")
        if self.locked and ctx.lock is not None and not getattr(ctx.lock, self.locked):
            return results.result(Status.SKIP, f"the lock installs none ({self.locked} "
                                               "empty)")
        absent_needs = [need for need in self.needs if _absent(ctx, need)]
        # an optional stage's own output neither kept nor failed: the stage did not run,
        # whatever a helper file beside it says (gdrcopy's lsmod on a node without GDRCopy)
        own = self.needs[0] if self.needs else None
        if (self.optional and own in absent_needs and not _failures(ctx, own)
                and not _written_yet_absent(ctx, own)):
            absent_needs = [own]
        if absent_needs:
            # a tool that failed is never a skip; it fails, and its action follows its cause:
            # a GPU lost is the hardware's, a tool absent or broken is the node's setup
            failures = [f for need in absent_needs for f in _failures(ctx, need)]
            if failures:
                return results.fail(failures[0], {"tool_failures": failures},
                                    action=tool_failure_action(failures))
            # the run's record says it wrote the file, yet the file is not here: lost
            # evidence, never "not installed"
            ran = [f for need in absent_needs for f in _written_yet_absent(ctx, need)]
            if ran:
                return results.fail(f"{ran[0]} absent, though meta.json records the command "
                                    "that wrote it (evidence lost or deleted: validate again)",
                                    {"lost": ran}, action=Action.FIX_SETUP)
        # the run's own record of why a stage did not run (identity failed, tool absent)
        skipped = ctx.evidence.meta.get("skipped", {}).get(self.stage)
        if self.optional and absent_needs:
            return results.result(Status.SKIP, f"{self.stage} not run: {skipped}" if skipped
                                  else self.skip_reason)
        absent = [_need_name(need) for need in absent_needs]
        if absent:
            why = f" ({self.stage} not run: {skipped})" if skipped else ""
            return results.result(Status.MISSING,
                                  f"no evidence: {', '.join(absent)} not collected{why}",
                                  action=Action.FIX_SETUP)
        return _covered(ctx, self.needs, self.evaluate(ctx, results), results)


def _covered(ctx: Context, needs: tuple[Need, ...], result: CheckResult,
             results: Results) -> CheckResult:
    """The evaluator's result held to coverage (coverage.py): evidence that leaves out a
    member fails, naming it; a failure the evaluator found stays with its own action, the
    gaps named after it and in its values (both are reported: issue 65)."""
    kinds = tuple(k for need in needs for k in (need if isinstance(need, tuple) else (need,)))
    found = coverage.gaps(ctx, kinds)
    if not found or result.status == Status.SKIP:
        return result
    named = [message for _, message in found]
    values = {**result.values, "not_covered": named}
    if result.status == Status.FAIL and result.action in HARDWARE_ACTIONS:
        return beside(replace(result, values=values), "not covered", named)
    if result.status == Status.FAIL:   # its own finding already says what it could not see
        return replace(result, values=values)
    # partial evidence: what gpuprov could not see, so a setup finding (collect it again)
    return results.failed(found, values, action=Action.FIX_SETUP)


def _written_yet_absent(ctx: Context, need: Need) -> list[str]:
    """The files of `need` the run's record (meta.json `commands`: each command and the
    file its output was kept as) says were written, yet that are not in the evidence."""
    kinds = need if isinstance(need, tuple) else (need,)
    written = {c.get("file") for c in ctx.evidence.meta.get("commands") or []
               if isinstance(c, dict) and c.get("file")}
    return [k.file for k in kinds if k.file in written]


def _failures(ctx: Context, need: Need) -> list[str]:
    kinds = need if isinstance(need, tuple) else (need,)
    return [f for k in kinds if (f := ctx.evidence.failure(k))]


_declared: list[Check] = []


# pragma: no mutate start
# Registration runs at import, before mutmut switches a mutant on, so its mutants could
# never be killed; test_registry.py and the derived tables test what it declares.
def check(id: str, *, stage: str, needs: tuple[Need, ...], rule: str,
          action: Action, applies: Callable[[Profile], bool] | None = None,
          skip_reason: str = "", optional: bool = False,
          locked: str | None = None) -> Callable[[Evaluator], Evaluator]:
    """Declares the decorated evaluator as check `id` (see the module docstring)."""
    if stage not in STAGES:
        raise ValueError(f"check {id}: unknown stage {stage!r}")

    def register(evaluate: Evaluator) -> Evaluator:
        if any(c.id == id for c in _declared):
            raise ValueError(f"check {id} declared twice")
        _declared.append(Check(id, stage, needs, evaluate, rule, action, applies, skip_reason,
                               evaluate.__module__.rsplit(".", 1)[-1], optional, locked))
        return evaluate
    return register
# pragma: no mutate end


def declared() -> tuple[Check, ...]:
    """The checks declared so far, in declaration order (catalog.py imports them all)."""
    return tuple(_declared)


# -- check sets over one probe's output (the doctor's host facts, drift's installed state) --

F = TypeVar("F")

@dataclass(frozen=True)
class HostCheck(Generic[F]):
    """One check of a set: the results (ids `id` or one of `also`) it finds in the facts;
    none is a pass. `rule` is its docs row."""
    id: str
    find: Callable[[F], list[CheckResult]]
    rule: str
    also: tuple[str, ...] = ()
    applies: Callable[[F], bool] | None = None


class CheckSet(Generic[F]):
    """Checks over the facts one read-only probe gathered from a host, declared like the
    validation's (`@set.check(id, rule=…)`: one id, one docs row, never declared twice) and
    judged in declaration order: every result a check finds, pass being none."""

    def __init__(self, name: str):
        self.name = name
        self.checks: list[HostCheck[F]] = []

    def check(self, id: str, *, rule: str, also: tuple[str, ...] = (),
              applies: Callable[[F], bool] | None = None
              ) -> Callable[[Callable[[F], list[CheckResult]]], Callable[[F], list[CheckResult]]]:
        def register(find: Callable[[F], list[CheckResult]]) -> Callable[[F], list[CheckResult]]:
            taken = {i for c in self.checks for i in (c.id, *c.also)}
            if {id, *also} & taken:
                raise ValueError(f"{self.name} check {id} declared twice")
            self.checks.append(HostCheck(id, find, rule, also, applies))
            return find
        return register

    def judge(self, facts: F) -> list[CheckResult]:
        found: list[CheckResult] = []
        for c in self.checks:
            if c.applies is not None and not c.applies(facts):
                continue
            for result in c.find(facts):
                if result.id not in (c.id, *c.also):   # the declaration is the docs' table
                    raise ValueError(f"{self.name} check {c.id} found undeclared {result.id}")
                found.append(result)
        return found
