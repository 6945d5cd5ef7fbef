"""What every evaluator gets: the evidence, the profile, the lock, and GPU naming."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprov.evidence import SMI_BEFORE, Evidence
from gpuprov.lock import Lock
from gpuprov.model import GpuRef
from gpuprov.parsers.smi_gpu import GpuSnapshot
from gpuprov.profiles import Profile


@dataclass
class Context:
    evidence: Evidence
    profile: Profile
    lock: Lock | None

    def gpus(self) -> list[GpuSnapshot]:
        smi = self.evidence.read(SMI_BEFORE)
        return smi.gpus if smi else []

    def gpu_ref(self, index: int) -> GpuRef:
        for g in self.gpus():
            if g.index == index:
                return GpuRef(g.index, g.bus_id, g.serial)
        return GpuRef(index)

    def gpu_label(self, index: int) -> str:
        ref = self.gpu_ref(index)
        return f"GPU {index} ({ref.bus_id or '?'}, serial {ref.serial or '?'})"
