"""What every evaluator gets, and small helpers for writing results."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprov.checks.result import CheckResult, Status
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.parsers.smi_gpu import GpuSnapshot
from gpuprov.profiles import Profile


@dataclass
class Context:
    evidence: Evidence
    profile: Profile
    lock: Lock | None

    def gpus(self) -> list[GpuSnapshot]:
        smi = self.evidence.smi()
        return smi.gpus if smi else []

    def gpu_ref(self, index: int) -> dict:
        for g in self.gpus():
            if g.index == index:
                return {"index": g.index, "bus_id": g.bus_id, "serial": g.serial}
        return {"index": index, "bus_id": None, "serial": None}

    def gpu_label(self, index: int) -> str:
        ref = self.gpu_ref(index)
        return f"GPU {index} ({ref['bus_id'] or '?'}, serial {ref['serial'] or '?'})"


def missing(check_id: str, *files: str) -> CheckResult:
    return CheckResult(check_id, Status.MISSING,
                       f"no evidence: {', '.join(files)} not collected")


def skip(check_id: str, why: str) -> CheckResult:
    return CheckResult(check_id, Status.SKIP, why)


def failed(ctx: Context, check_id: str, problems: list[tuple[int | None, str]],
           values: dict) -> CheckResult:
    """A fail listing the first problems; it names the GPU when every problem is on one."""
    indices = {i for i, _ in problems}
    gpu = ctx.gpu_ref(next(iter(indices))) if len(indices) == 1 and None not in indices else None
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    summary = "; ".join(message for _, message in problems[:3]) + more
    return CheckResult(check_id, Status.FAIL, summary, gpu=gpu, values=values)


def single_gpu(ctx: Context, indices: list[int]) -> dict | None:
    """The GPU at fault, when exactly one is."""
    return ctx.gpu_ref(indices[0]) if len(set(indices)) == 1 else None
