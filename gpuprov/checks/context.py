"""What every evaluator gets: the evidence, the profile, the lock, and GPU naming."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprov.evidence import STAGES, Evidence
from gpuprov.lock import Lock
from gpuprov.model import GpuRef
from gpuprov.parsers.smi_gpu import SMI_BEFORE, GpuSnapshot
from gpuprov.parsers.system import SYSTEMCTL
from gpuprov.pci import BusId
from gpuprov.profiles import Profile


@dataclass
class Context:
    evidence: Evidence
    profile: Profile
    lock: Lock | None
    # the last stage collected so far (a run judged stage by stage); None: the whole run
    upto: str | None = None

    def reached(self, stage: str) -> bool:
        """Whether `stage` has been collected, so its evidence must be there unless the
        run says it skipped it."""
        return self.upto is None or STAGES.index(stage) <= STAGES.index(self.upto)

    def left_out(self, stage: str) -> bool:
        """A stage a recheck did not run (validate --recheck: its meta.json names the stages
        it ran): its checks are not judged here, their earlier passes stand."""
        recheck = self.evidence.meta.get("recheck")
        return bool(recheck) and stage not in recheck.get("stages", ())

    def required(self, stage: str) -> bool:
        """A stage's evidence is required once the stage was reached and not skipped."""
        return self.reached(stage) and stage not in self.evidence.meta.get("skipped", {})

    def gpus(self) -> list[GpuSnapshot]:
        smi = self.evidence.read(SMI_BEFORE)
        return smi.gpus if smi else []

    def gpu_indexes_by_address(self) -> dict[BusId, int]:
        """Each GPU nvidia-smi listed before the soak, by its PCI address: how files that
        name GPUs only by address (lspci, iommu_group) are matched to them."""
        return {BusId.parse(g.bus_id): g.index for g in self.gpus() if g.bus_id}

    def unit(self, name: str) -> dict[str, str] | None:
        """A systemd unit's properties as `systemctl show` printed them; None where the
        unit is not installed (or systemctl.txt was not collected)."""
        units = self.evidence.read(SYSTEMCTL) or {}
        unit = units.get(name) or units.get(f"{name}.service")
        if unit is None or unit.get("LoadState") == "not-found":
            return None
        return unit

    def gpu_ref(self, index: int) -> GpuRef:
        for g in self.gpus():
            if g.index == index:
                return GpuRef(g.index, g.bus_id, g.serial)
        return GpuRef(index)

    def gpu_label(self, index: int) -> str:
        ref = self.gpu_ref(index)
        return f"GPU {index} ({ref.bus_id or '?'}, serial {ref.serial or '?'})"
