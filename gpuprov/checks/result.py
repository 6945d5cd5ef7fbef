"""Check results and the verdict they add up to."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

# Stable ids, in the order checks run and reports list them (DESIGN.md).
CHECK_IDS = (
    "gpu_inventory", "driver_version", "cuda_compat", "cudnn", "torch_env", "nouveau",
    "persistence_mode", "fabric_manager", "nvlink_topology", "nvlink_status",
    "nvlink_errors", "pcie_link", "ecc", "xid", "clocks_throttle", "container_toolkit",
    "gpu_burn", "ddp_smoke",
)


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    MISSING = "missing"
    SKIP = "skip"


BLOCKING = {Status.FAIL, Status.MISSING}


@dataclass
class CheckResult:
    id: str
    status: Status
    summary: str
    gpu: dict | None = None  # {"index", "bus_id", "serial"} when one GPU is at fault
    values: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["status"] = str(self.status)
        return data


def verdict(results: list[CheckResult]) -> str:
    """Accepted only when no check failed and no evidence was missing."""
    return "rejected" if any(r.status in BLOCKING for r in results) else "accepted"
