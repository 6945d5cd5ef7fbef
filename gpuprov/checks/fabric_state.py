"""Why no GPU of an NVSwitch node finished registering with its fabric: the GPUs' fabric
states read beside fabric manager's unit and its own log, one rule for the checks that see
them (`fabric_manager`, `nvswitch`).

The driver reports Not Started only until it sends its first fabric probe, which it does
when it brings the GPU up; from then on, a GPU whose fabric manager never answers reads In
Progress, indefinitely (open-gpu-kernel-modules `gpu.c` gpuFabricProbeStart and
`subdevice_ctrl_gpu_kernel.c`; NVIDIA's fabric manager user guide: "In Progress …
FabricManager is likely not running or missing the NVLSM dependency"; NVIDIA/NVSentinel#889:
a node In Progress for 20 days). So on a node whose fabric manager is not running, with
persistence mode on, every GPU reads In Progress, and that is the node's setup: fix-setup,
never a GPU's reset or an RMA, unless fabric manager's own log (since it last started) shows
an NVSwitch at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.checks.context import Context
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_manager import FABRIC_MANAGER_LOG
from gpuprov.parsers.smi_gpu import GpuSnapshot
from gpuprov.parsers.system import SYSTEMCTL

UNIT = "nvidia-fabricmanager"
# NVML's fabric states before registration completes (nvml.h NVML_GPU_FABRIC_STATE_*),
# worded as nvidia-smi -q words In Progress in a real capture
# (tests/fixtures/nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu0-fabric-in-progress.txt); no
# capture of Not Started was found (docs/limits.md)
NOT_STARTED, IN_PROGRESS = "Not Started", "In Progress"
AWAITING = (NOT_STARTED, IN_PROGRESS)
# fabric manager's own report of an NVSwitch fault, as it logs one (the real line in
# tests/fixtures/fabricmanager/: "detected NVSwitch non-fatal error 12028 on fid 0 on
# NVSwitch pci bus id …"); only a fatal one blames the hardware for the fabric not coming up
_SWITCH_FAULT = re.compile(r"detected NVSwitch fatal error", re.IGNORECASE)


@dataclass(frozen=True)
class FabricWait:
    """No GPU registered, and why: `setup` says what to start or fix; `hardware` quotes
    fabric manager's log line that blames a switch (then the fabric is the hardware's)."""
    state: str            # the GPUs' state: Not Started, In Progress, or both
    unit_state: str       # the unit's ActiveState, "not installed", or "not collected"
    setup: str
    hardware: str = ""


def waiting(ctx: Context, gpus: list[GpuSnapshot]) -> FabricWait | None:
    """The fabric wait of a node none of whose GPUs completed registration, every one Not
    Started or In Progress, where fabric manager's state explains it: every GPU Not Started
    (fabric manager never ran), or fabric manager not active (or its state not collected).
    None where a GPU completed, or another state shows, or fabric manager is active: the
    GPUs' own registration is then what is judged."""
    states = {g.fabric_state for g in gpus}
    if not gpus or not states <= set(AWAITING):
        return None
    state = " / ".join(s for s in AWAITING if s in states)
    unit = ctx.unit(UNIT)
    unit_state = (unit.get("ActiveState") or "unknown") if unit else (
        "not collected" if ctx.evidence.read(SYSTEMCTL) is None else "not installed")
    if unit_state == "active" and states != {NOT_STARTED}:
        return None
    hardware = switch_fault(ctx)
    if unit_state == "active":   # every GPU Not Started with the unit up: it never trained
        setup = (f"fabric training not started on any of the {len(gpus)} GPUs though "
                 f"{UNIT} is active: restart it (on NVLink5, with its subnet manager)")
    elif unit_state == "not collected":
        setup = (f"every GPU's fabric state {state}, and {UNIT}'s state not collected "
                 "(systemctl.txt absent): fabric manager cannot be judged running")
    else:
        setup = (f"{UNIT} is {unit_state}: every one of the {len(gpus)} GPUs waits for it "
                 f"(fabric state {state}); start it (on NVLink5, with its subnet manager)")
    return FabricWait(state, unit_state, setup, hardware)


def switch_fault(ctx: Context) -> str:
    """Fabric manager's first error line since its last start that reports an NVSwitch
    fault; "" where none, or where the log is absent or unreadable (its own check says so)."""
    try:
        log = ctx.evidence.read(FABRIC_MANAGER_LOG)
    except ParseError:
        return ""
    if log is None:
        return ""
    return next((line for line in log.errors if _SWITCH_FAULT.search(line)), "")
