"""Run every evaluator over one evidence directory: the single code path for verdicts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuprov.checks import health, identity, interconnect, workloads
from gpuprov.checks.context import Context
from gpuprov.checks.result import CHECK_IDS, CheckResult, Status, verdict
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import Profile

EVALUATORS: dict[str, Callable[[Context], CheckResult]] = {
    "gpu_inventory": identity.gpu_inventory,
    "driver_version": identity.driver_version,
    "cuda_compat": identity.cuda_compat,
    "cudnn": identity.cudnn,
    "torch_env": identity.torch_env,
    "nouveau": identity.nouveau,
    "persistence_mode": identity.persistence_mode,
    "fabric_manager": identity.fabric_manager,
    "nvlink_topology": interconnect.nvlink_topology,
    "nvlink_status": interconnect.nvlink_status,
    "nvlink_errors": interconnect.nvlink_errors,
    "pcie_link": interconnect.pcie_link,
    "ecc": health.ecc,
    "xid": health.xid,
    "clocks_throttle": health.clocks_throttle,
    "container_toolkit": identity.container_toolkit,
    "gpu_burn": workloads.gpu_burn,
    "ddp_smoke": workloads.ddp_smoke,
}
assert tuple(EVALUATORS) == CHECK_IDS

# Judged before the soak: a node that is not the right hardware with the right stack is
# not worth burning (validation skips the soak unless told otherwise).
IDENTITY_CHECKS = ("gpu_inventory", "driver_version", "cuda_compat", "cudnn", "torch_env",
                   "nouveau", "persistence_mode", "fabric_manager", "container_toolkit")


@dataclass
class Judgement:
    node: str
    profile: str
    verdict: str
    checks: list[CheckResult]

    def as_dict(self) -> dict:
        return {"node": self.node, "profile": self.profile, "verdict": self.verdict,
                "checks": [c.as_dict() for c in self.checks]}


def judge(evidence: Evidence, profile: Profile, lock: Lock | None,
          strict: bool = True, only: tuple[str, ...] = CHECK_IDS) -> Judgement:
    """Every check (or those in `only`), in CHECK_IDS order. strict: malformed evidence
    raises (evaluate's exit 2); otherwise it fails the checks that read it (a live node's
    broken output)."""
    ctx = Context(evidence, profile, lock)
    results = []
    for check_id, evaluate in EVALUATORS.items():
        if check_id not in only:
            continue
        try:
            results.append(evaluate(ctx))
        except ParseError as exc:
            if strict:
                raise
            results.append(CheckResult(check_id, Status.FAIL, f"unreadable evidence: {exc}"))
    node = evidence.meta.get("node") or evidence.dir.name
    return Judgement(node, profile.name, verdict(results), results)
