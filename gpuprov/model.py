"""The typed results every part of gpuprov hands around: check results and the verdict
they add up to, a node's validation result, a host's provisioning outcome.

Pure data. The evaluators build these, the pipeline passes them on unchanged, the ledger
maps them to rows and back, the reports render them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    MISSING = "missing"
    SKIP = "skip"
    # a failure (or missing evidence) of a check the site observes (observe mode): judged
    # and reported as what it would have done, never a rejection
    OBSERVED = "observed"


# A node is accepted only when no check failed and no evidence was missing.
BLOCKING = frozenset({Status.FAIL, Status.MISSING})


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNREACHABLE = "unreachable"


class Outcome(StrEnum):
    """How one host's provisioning run ended."""
    CONVERGED = "converged"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    REBOOT_PENDING = "reboot-pending"
    # the module signing key waits for enrollment at the console (Secure Boot)
    MOK_ENROLLMENT_PENDING = "mok-enrollment-pending"


class Action(StrEnum):
    """What an operator should do about a failing check, least to most drastic."""
    NONE = "none"                        # nothing on the hardware: fix config, re-provision
    # what gpuprov could not see (a tool absent or broken on the node, evidence not collected
    # or partial, a stage that could not run): install or enable what the summary names,
    # then validate again; never a hardware action (DESIGN.md "Cause, then action")
    FIX_SETUP = "fix-setup"
    RESTART_WORKLOAD = "restart-workload"
    RESET_GPU = "reset-gpu"
    REBOOT = "reboot"
    RESEAT_OR_INSPECT = "reseat-or-inspect"
    RMA = "rma"


# the actions that say the hardware is at fault: only rejections carrying one count toward
# repeat offenders, quarantine and escalation (hardware_history.py, escalation.py)
HARDWARE_ACTIONS = frozenset({Action.RESET_GPU, Action.REBOOT, Action.RESEAT_OR_INSPECT,
                              Action.RMA})


def most_drastic(actions: Iterable[Action]) -> Action:
    """The furthest-reaching of several recommended actions (Action lists them in order)."""
    order = list(Action)
    return max(actions, key=order.index, default=Action.NONE)


@dataclass(frozen=True)
class GpuRef:
    """The GPU a result is about, by every name an operator may look it up by."""
    index: int | None
    bus_id: str | None = None
    serial: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def gpu_at_fault(indices: Iterable[int | None],
                 ref: Callable[[int], GpuRef]) -> GpuRef | None:
    """The GPU at fault when every problem is on the same one; None when several are, or
    one is node-wide (index None)."""
    distinct = set(indices)
    if len(distinct) != 1 or None in distinct:
        return None
    return ref(distinct.pop())  # type: ignore[arg-type]


@dataclass(frozen=True)
class CheckResult:
    id: str
    status: Status
    summary: str
    gpu: GpuRef | None = None
    values: dict = field(default_factory=dict)
    action: Action = Action.NONE
    # what an operator types to fix it and where the rule comes from, where the judge
    # states them (the doctor's fixes, the lock rules' sources); not in the report's JSON
    fix: str = ""
    source: str = ""

    def as_dict(self) -> dict:
        return {"id": self.id, "status": str(self.status), "summary": self.summary,
                "gpu": self.gpu.as_dict() if self.gpu else None, "values": self.values,
                "action": str(self.action)}

    @property
    def blocking(self) -> bool:
        return self.status in BLOCKING


def verdict(results: Iterable[CheckResult]) -> Verdict:
    return Verdict.REJECTED if any(r.blocking for r in results) else Verdict.ACCEPTED


# A node's parts, one typed record each, as gpuprov/checks/parts.py reads them from the
# evidence when the node is judged: what certificates, part swaps, fleet grouping and the
# RMA report read (never a check's values, whose keys follow its rule).
@dataclass(frozen=True)
class GpuRecord:
    """One GPU as the before-soak snapshot listed it (for RMA: its serial)."""
    index: int
    bus_id: str | None
    serial: str | None
    uuid: str | None
    name: str | None
    vbios: str | None = None


@dataclass(frozen=True)
class NicPort:
    """One compute RDMA port (the NVLink5 switch bridges are not among them)."""
    port: str                   # ibstat's CA and port: `mlx5_0 port 1`
    guid: str | None            # the adapter's Node GUID
    psid: str | None            # the board's PSID (board_id), where collected
    firmware: str | None


@dataclass(frozen=True)
class NvSwitchPart:
    """One NVSwitch on the host's PCI bus."""
    bus_id: str                 # 0000:05:00.0
    serial: str | None          # its PCIe Device Serial Number (lspci -vvv)
    firmware: str | None        # as the driver's procfs reports it, where collected


@dataclass(frozen=True)
class NodeResult:
    run_id: str
    node: str
    judged: Verdict
    verdict: Verdict | None        # None: the run has not finished (or was killed)
    profile: str
    reason: str
    evidence_dir: str
    started_at: float
    judged_at: float
    checks: list[CheckResult]
    gpus: list[GpuRecord]
    # each evidence file's SHA-256 when it was judged (Evidence.manifest); None: not
    # recorded (a validation judged before schema 13)
    evidence_manifest: dict[str, str] | None = None
    nics: list[NicPort] = field(default_factory=list)
    nvswitches: list[NvSwitchPart] = field(default_factory=list)
    # "full", or "recheck": only the stages the node's open holds needed (validate --recheck)
    scope: str = "full"

    def values_of(self, check_id: str) -> dict:
        """What one check measured ({} where the result has no such check)."""
        return next((c.values for c in self.checks if c.id == check_id), {})

    @property
    def failing(self) -> list[CheckResult]:
        return [c for c in self.checks if c.blocking]

    @property
    def observed(self) -> list[CheckResult]:
        """The checks that would have rejected the node, judged in observe mode."""
        return [c for c in self.checks if c.status == Status.OBSERVED]

    @property
    def hardware_failing(self) -> list[CheckResult]:
        """The failing checks that found a fault in the hardware (not in the node's setup,
        nor in what gpuprov could see)."""
        return [c for c in self.failing if c.action in HARDWARE_ACTIONS]


@dataclass(frozen=True)
class HostOutcome:
    host: str
    outcome: Outcome
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    reboot_pending: bool = False
    detail: str = ""
