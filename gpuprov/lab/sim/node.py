"""What a lab node's simulated GPU stack reads at run time.

Runs on the node (python3 + python3-yaml, which Ubuntu servers carry for cloud-init)
and on the controller (tests, `gpuprov lab fault`), so it holds paths and readers only.

- the hardware description, written by the lab (never by a role), and by the simulated
  hardware itself when its state changes under load (a GPU that falls off the bus during
  gpu-burn);
- the "loaded kernel module" version: what /sys/module/nvidia/version holds on a real
  server. It lives in /run, so a reboot (container restart) forgets it and the boot-time
  load of the installed module sets it again;
- the NVML library version: the versioned file name libnvidia-ml.so.<version> that the
  installed libnvidia-compute package ships, as on a real system;
- whether nvidia-persistenced / nv-fabricmanager run: their pid files.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import yaml

LAB_DIR = "/var/lib/gpuprov-lab"
DESCRIPTION = f"{LAB_DIR}/hardware.yml"
RUN_DIR = "/run/gpuprov-lab"
MODULE_VERSION = f"{RUN_DIR}/nvidia-module-version"
# the lab kernel's other loaded modules: one empty file each (kernel_view's modprobe, lsmod)
LOADED_MODULES_DIR = f"{RUN_DIR}/modules"
# the node's /proc/sys/kernel/tainted (under /run: a reboot clears it, as a real one does)
KERNEL_TAINT = f"{RUN_DIR}/kernel-tainted"
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
NVML_GLOB = f"{LIB_DIR}/libnvidia-ml.so.*.*"
PERSISTENCED_PID = "/run/nvidia-persistenced/nvidia-persistenced.pid"
# the mode the running daemon set (--persistence-mode / --no-persistence-mode)
PERSISTENCE_MODE = "/run/nvidia-persistenced/persistence-mode"
FABRICMANAGER_PID = "/run/nvidia-fabricmanager/nv-fabricmanager.pid"
KERNEL_LOG = "/var/log/kern.log"
# while the simulated gpu-burn runs: its pid, when it started, the GPUs it loads
BURN_STATE = f"{RUN_DIR}/gpu-burn.json"


def description(path: str = DESCRIPTION) -> dict:
    with open(path) as fh:
        return yaml.safe_load(fh)


def save_description(hw: dict, path: str | None = None) -> None:
    """The description after the hardware changed under load (a GPU lost in the soak)."""
    path = path or DESCRIPTION
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        yaml.safe_dump(hw, fh, sort_keys=False)
    os.replace(tmp, path)


def cuda_init_error(hw: dict) -> str | None:
    """Why cuInit would fail on this node, in CUDA's error names; None when it works."""
    module, nvml = loaded_module_version(), nvml_version()
    if module is None or nvml is None:
        return "CUDA_ERROR_NO_DEVICE"
    if module != nvml:
        return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
    if hw.get("nvswitch") and not running(FABRICMANAGER_PID):
        return "CUDA_ERROR_SYSTEM_NOT_READY"   # 802: NVSwitch fabric not set up
    if not hw["gpus"]:
        return "CUDA_ERROR_NO_DEVICE"
    return None


# what cuGetErrorString says for them (CUDA Driver API, CUresult)
CUDA_ERROR_TEXT = {"CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
                   "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "system has unsupported display driver / "
                                                         "cuda driver combination",
                   "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized"}


def gflops(hw: dict, mode: str = "fp32") -> float:
    """A healthy GPU's gpu-burn Gflop/s under `mode` (fp32, tensor, fp64): the kind's
    figure for that mode, or its one figure for every mode where it has one only."""
    figures = hw["gflops"]
    return float(figures[mode] if isinstance(figures, dict) else figures)


def lost_gpus(hw: dict) -> list[dict]:
    """GPUs the driver lost (fallen off the bus under load): every NVML call on one fails."""
    return [g for g in hw["gpus"] if g.get("lost")]


def read_value(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except FileNotFoundError:
        return None


def loaded_module_version() -> str | None:
    return read_value(MODULE_VERSION)


def library_version(paths: list[str]) -> str | None:
    """The version in a versioned library file name: libnvidia-ml.so.550.90.07 -> 550.90.07."""
    for path in sorted(paths):
        m = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)?)$", path)
        if m:
            return m.group(1)
    return None


def nvml_version() -> str | None:
    return library_version(glob.glob(NVML_GLOB))


def persistence_mode() -> bool:
    """Persistence mode is on while the daemon that turned it on runs."""
    return running(PERSISTENCED_PID) and read_value(PERSISTENCE_MODE) == "1"


def burn_load(path: str | None = None) -> tuple[float, set[int]] | None:
    """How long the running gpu-burn has loaded which GPUs; None when none runs (a killed
    one's state file left behind counts as none)."""
    try:
        with open(path or BURN_STATE) as fh:
            state = json.load(fh)
    except (FileNotFoundError, ValueError):
        return None
    if not _alive(int(state["pid"])):
        return None
    return max(time.time() - float(state["started"]), 0.0), set(state["gpus"])


@contextmanager
def burning(gpus: list[int], path: str | None = None) -> Iterator[None]:
    """gpu-burn's load on `gpus` for as long as the block runs (nvidia-smi reads it)."""
    path = path or BURN_STATE
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(f"{path}.tmp", "w") as fh:
        json.dump({"pid": os.getpid(), "started": time.time(), "gpus": gpus}, fh)
    os.replace(f"{path}.tmp", path)
    try:
        yield
    finally:
        with suppress(FileNotFoundError):
            os.remove(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid_file: str) -> bool:
    pid = read_value(pid_file)
    return pid is not None and pid.isdigit() and _alive(int(pid))
