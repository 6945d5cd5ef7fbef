"""A GPU's NVLink fabric health (issue 72): NVML's health mask decoded, and the rows
`nvidia-smi -q` prints under Fabric → Health.

The mask packs one slot per condition; each boolean slot reads 0 not supported, 1 true,
2 false, so an all-clear mask is *not* zero: `0xaa` is every one of the four conditions
false, a healthy GPU (NVIDIA/nccl#2186 prints it on a healthy GB200 NVL72 and was read as
"four paths down"). The incorrect-configuration slot carries a code. The layout is
nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* (NVIDIA/go-nvml's nvml.h as vendored in
NVIDIA/k8s-test-infra tests/mocknvml/vendor @3b2b865: shifts 0/2/4/6, width 0x3; the
configuration slot at shift 8, width 0xf, codes 0-5), codes 6-8 as NVIDIA's NVML mock
names them from a newer header (k8s-test-infra pkg/gpu/mocknvml/engine/fabric_health.go
@3b2b865). `nvidia-smi -q` renders the same slots as rows under Fabric → Health: Summary,
Bandwidth, Route Recovery in progress, Route Unhealthy, Access Timeout Recovery, Incorrect
Configuration (and Partition Assigned, not judged), as gpuprov's own H200 capture prints them
(all N/A there: tests/fixtures/nvidia-smi-q/h200-580.159.04-vm.txt); their values as a real
GB200 prints them (`Summary : Unhealthy`, `Bandwidth : Full`,
kubernetes-sigs/dra-driver-nvidia-gpu#626) and as the real nvidia-smi prints them over
NVIDIA's NVML mock (True / False, Full / Degraded; k8s-test-infra docs/configuration.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.text import NOT_AVAILABLE

# condition -> (shift, the row nvidia-smi prints it under); width 0x3 each
CONDITIONS = {
    "degraded_bandwidth": (0, "Bandwidth"),
    "route_recovery": (2, "Route Recovery in progress"),
    "route_unhealthy": (4, "Route Unhealthy"),
    "access_timeout_recovery": (6, "Access Timeout Recovery"),
}
CONDITION_WIDTH = 0x3
NOT_SUPPORTED, TRUE, FALSE = 0, 1, 2
CONFIGURATION_SHIFT, CONFIGURATION_WIDTH = 8, 0xF
CONFIGURATION_NONE = 1
CONFIGURATIONS = {0: None, 1: "none", 2: "incorrect sysguid", 3: "incorrect chassis serial number",
                  4: "no partition", 5: "insufficient NVLinks", 6: "incompatible GPU firmware",
                  7: "invalid location", 8: "GPU state invalid"}
# `-q -x` names the rows as elements (gpuprov's own H100 and H200 captures,
# shared/fixtures/real-node-h100/evidence/nvidia-smi-q.xml)
HEALTH_XML = {"summary": "Summary", "bandwidth": "Bandwidth",
              "route_recovery_in_progress": "Route Recovery in progress",
              "route_unhealthy": "Route Unhealthy",
              "access_timeout_recovery": "Access Timeout Recovery",
              "incorrect_configuration": "Incorrect Configuration"}
# nvidia-smi's Bandwidth row words its slot, the other rows say True / False
BANDWIDTH_WORDS = {"full": False, "degraded": True}


@dataclass(frozen=True)
class FabricHealth:
    """Each condition True (faulted), False (clear) or None (not supported or not shown);
    the configuration's finding ("none" when correct, None when not reported)."""
    degraded_bandwidth: bool | None = None
    route_recovery: bool | None = None
    route_unhealthy: bool | None = None
    access_timeout_recovery: bool | None = None
    incorrect_configuration: str | None = None
    summary: str | None = None      # nvidia-smi's Summary row: Healthy, Unhealthy, …

    @property
    def faults(self) -> list[str]:
        """What is wrong, in nvidia-smi's words; [] for a healthy (or unreported) GPU."""
        found = [row for name, (_, row) in CONDITIONS.items() if getattr(self, name)]
        if self.incorrect_configuration not in (None, "none"):
            found.append(f"Incorrect Configuration: {self.incorrect_configuration}")
        if not found and (self.summary or "").lower() not in ("healthy", *NOT_AVAILABLE):
            found.append(f"Summary: {self.summary}")    # a fault the rows do not classify
        return found

    @property
    def reported(self) -> bool:
        """Whether the driver reported any of it (older drivers: every slot not supported)."""
        return any(getattr(self, name) is not None for name in CONDITIONS) or bool(
            self.incorrect_configuration) or (self.summary or "").lower() not in NOT_AVAILABLE


def decode_mask(mask: int) -> FabricHealth:
    """The health NVML's mask says (NCCL prints it as `healthMask 0x…`)."""
    if mask < 0 or mask > 0xFFFFFFFF:
        raise ParseError("fabric health mask", f"{mask:#x} is not a 32-bit value")
    values = {}
    for name, (shift, _) in CONDITIONS.items():
        slot = (mask >> shift) & CONDITION_WIDTH
        if slot not in (NOT_SUPPORTED, TRUE, FALSE):
            raise ParseError("fabric health mask", f"{mask:#x}: the {name} slot reads "
                                                   f"{slot}, not 0, 1 or 2")
        values[name] = None if slot == NOT_SUPPORTED else slot == TRUE
    code = (mask >> CONFIGURATION_SHIFT) & CONFIGURATION_WIDTH
    if code not in CONFIGURATIONS:
        raise ParseError("fabric health mask", f"{mask:#x}: incorrect-configuration code "
                                               f"{code} is not one NVML defines")
    return FabricHealth(**values, incorrect_configuration=CONFIGURATIONS[code])


def from_rows(rows: dict[str, str]) -> FabricHealth:
    """The health `nvidia-smi -q` printed under Fabric → Health (row name -> value)."""
    def flag(row: str) -> bool | None:
        value = (rows.get(row) or "").strip().lower()
        if row == "Bandwidth":
            return BANDWIDTH_WORDS.get(value)
        return {"true": True, "false": False}.get(value)

    configuration = (rows.get("Incorrect Configuration") or "").strip()
    summary = (rows.get("Summary") or "").strip()
    return FabricHealth(**{name: flag(row) for name, (_, row) in CONDITIONS.items()},
                        incorrect_configuration=(None if configuration.lower() in NOT_AVAILABLE
                                                 else configuration.lower()),
                        summary=None if summary.lower() in NOT_AVAILABLE else summary)
