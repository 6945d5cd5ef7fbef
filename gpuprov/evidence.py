"""The evidence directory of one node's validation run: one table of every file in it.

Each `EvidenceKind` names its file, the stage that collects it, the command that produces
it on the node (a template over the node's `NodeSettings`; None where the collector does
more than run one command), its parser and what it holds. The collectors, `Evidence`'s
reader, the checks' `needs`, and docs/evidence.md all come from this table.

Plain files a human can read. `Evidence` reads each file at most once and parses it with
its kind's parser; a missing file is None (its checks become `missing`), a malformed one
raises ParseError naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from gpuprov.errors import InputError
from gpuprov.parsers.dcgm import parse_dcgm_diag
from gpuprov.parsers.dcgm_health import parse_dcgm_health
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric import parse_fabric_record
from gpuprov.parsers.fabric_manager import parse_fabric_manager_log
from gpuprov.parsers.gpu_burn import parse_gpu_burn
from gpuprov.parsers.ibstat import parse_ibstat
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.nccl_tests import parse_nccl_tests
from gpuprov.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status
from gpuprov.parsers.probes import parse_ddp_smoke, parse_torch_env
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.parsers.system import (
    parse_driver_module,
    parse_kernel_taint,
    parse_lsmod,
    parse_lspci,
    parse_packages,
    parse_systemctl,
)
from gpuprov.parsers.topo import parse_topo
from gpuprov.parsers.versions import parse_cudnn_header, parse_nvcc

# The collection stages, in the order a validation runs them; `fabric` is the rack's, after
# every node's own stages (gpuprov/validation/fabric_stage.py).
STAGES = ("identity", "snapshot", "soak", "ddp", "dcgm", "fabric")


@dataclass(frozen=True)
class EvidenceKind:
    file: str
    stage: str
    parser: Callable[[str, str], Any] | None
    command: str | None   # run on the node; `{field}` from NodeSettings
    holds: str
    fallback: str | None = None   # read instead when `file` is absent
    tool: str | None = None       # whose failure explains its absence (SMI_ERROR's tool)

    def __str__(self) -> str:
        return self.file


PACKAGE_PATTERNS = ("*nvidia*", "cuda-*", "libcudnn*", "cudnn*", "docker*", "containerd*",
                    "libnvidia-container*")
UNITS = ("nvidia-persistenced.service", "nvidia-fabricmanager.service", "docker.service",
         "containerd.service")

META = EvidenceKind("meta.json", "identity", None, None,
                    "node, profile, run id, start/end times, gpuprov version, versions lock, "
                    "every command run (exit status, seconds, file), stage timings, skips")
PACKAGES = EvidenceKind(
    "packages.txt", "identity", parse_packages,
    "dpkg-query -W -f='${{Package}}\\t${{Version}}\\n' "
    + " ".join(f"'{p}'" for p in PACKAGE_PATTERNS) + " 2>/dev/null; true",
    "`dpkg-query -W` of the NVIDIA, CUDA, cuDNN, container and Docker packages")
LSMOD = EvidenceKind("lsmod.txt", "identity", parse_lsmod, "{lsmod_command}", "loaded modules")
DRIVER_MODULE = EvidenceKind(
    "driver-module.txt", "identity", parse_driver_module,
    "echo \"kernel $({kernel_release_command})\"; "
    "echo \"module $({modinfo_command} -F version nvidia 2>/dev/null)\"; "
    "echo \"loaded $(cat {module_version_file} 2>/dev/null)\"",
    "the running kernel, the version of the nvidia module installed for it (`modinfo`) and "
    "of the one loaded")
LSPCI = EvidenceKind("lspci.txt", "identity", parse_lspci, "{lspci_command}",
                     "NVIDIA PCI functions (`lspci -nn -d 10de:`)")
SYSTEMCTL = EvidenceKind(
    "systemctl.txt", "identity", parse_systemctl,
    "systemctl show -p Id,LoadState,ActiveState,SubState,UnitFileState " + " ".join(UNITS),
    "state of the persistence daemon, fabric manager, Docker and containerd units")
NVCC = EvidenceKind("nvcc-version.txt", "identity", parse_nvcc,
                    "PATH=$PATH:/usr/local/cuda/bin nvcc --version", "`nvcc --version`")
CUDNN = EvidenceKind("cudnn-version.h", "identity", parse_cudnn_header, None,
                     "the installed `cudnn_version.h` (or `cudnn.h` for old cuDNN)")
SMI_BEFORE = EvidenceKind("nvidia-smi-q.xml", "identity", parse_smi_query, "nvidia-smi -q -x",
                          "`nvidia-smi -q -x` before the soak", fallback="nvidia-smi-q.txt",
                          tool="nvidia-smi")
SMI_ERROR = EvidenceKind("nvidia-smi-error.txt", "identity", None, None,
                         "nvidia-smi's own output when it failed before the soak (e.g. "
                         "\"Driver/library version mismatch\"), as earlier runs kept it; "
                         "every failed command now leaves `<file>.error` (the command, its "
                         "exit status and output) beside the file it did not write")
FABRIC_MANAGER_LOG = EvidenceKind(
    "fabricmanager.log", "identity", parse_fabric_manager_log,
    "tail -n 5000 {fabric_manager_log}",
    "the last 5,000 lines of nv-fabricmanager's log (NVSwitch systems; absent elsewhere)")
NICS = EvidenceKind("ibstat.txt", "identity", parse_ibstat, "{ibstat_command}",
                    "`ibstat`, or the same form printed from /sys/class/infiniband where "
                    "infiniband-diags is not installed: every RDMA NIC port")
TORCH_ENV = EvidenceKind("torch-env.json", "identity", parse_torch_env, None,
                         "the torch probe's JSON: torch, CUDA, cuDNN and NCCL versions, "
                         "device count, architecture list")
TOPO = EvidenceKind("nvidia-smi-topo.txt", "snapshot", parse_topo, "nvidia-smi topo -m",
                    "`nvidia-smi topo -m`", tool="nvidia-smi")
NVLINK_STATUS = EvidenceKind("nvidia-smi-nvlink-status.txt", "snapshot", parse_nvlink_status,
                             "nvidia-smi nvlink -s", "`nvidia-smi nvlink -s`",
                             tool="nvidia-smi")
NVLINK_ERRORS_BEFORE = EvidenceKind("nvidia-smi-nvlink-errors-before.txt", "snapshot",
                                    parse_nvlink_errors, "nvidia-smi nvlink -e",
                                    "`nvidia-smi nvlink -e` before the soak",
                                    tool="nvidia-smi")
KERNEL_LOG = EvidenceKind("dmesg.txt", "snapshot", parse_kernel_log, None,
                          "the kernel log with timestamps (`dmesg --time-format iso`, or "
                          "the node's `gpuprov_validate_kernel_log` file), again after the "
                          "soak")
KERNEL_TAINT = EvidenceKind("kernel-taint.txt", "snapshot", parse_kernel_taint,
                            "cat {taint_file}",
                            "the kernel's taint flags (`/proc/sys/kernel/tainted`), again "
                            "after the soak")
GPU_BURN = EvidenceKind("gpu-burn.log", "soak", parse_gpu_burn, None,
                        "full gpu-burn output (progress lines use `\\r`)")
SMI_AFTER = EvidenceKind("nvidia-smi-q-after.xml", "soak", parse_smi_query, "nvidia-smi -q -x",
                         "`nvidia-smi -q -x` after the soak (ECC / remap deltas)",
                         fallback="nvidia-smi-q-after.txt", tool="nvidia-smi")
NVLINK_ERRORS_AFTER = EvidenceKind("nvidia-smi-nvlink-errors-after.txt", "soak",
                                   parse_nvlink_errors, "nvidia-smi nvlink -e",
                                   "`nvidia-smi nvlink -e` after the soak",
                                   tool="nvidia-smi")
DDP_JSON = EvidenceKind("ddp-smoke.json", "ddp", parse_ddp_smoke, None,
                        "the DDP probe's result (or why torchrun gave none)")
DDP_LOG = EvidenceKind("ddp-smoke.log", "ddp", None, None, "torchrun's per-rank log")
NCCL_TESTS = EvidenceKind("nccl-tests.log", "ddp", parse_nccl_tests, None,
                          "nccl-tests' `all_reduce_perf -b 8M -e 1G -f 2 -g <GPUs>` output, "
                          "where the nccl_tests role installed it (absent elsewhere)")
DCGM_DIAG = EvidenceKind("dcgmi-diag.json", "dcgm", parse_dcgm_diag, None,
                         "`dcgmi diag -r LEVEL -j` (the profile's dcgm.level, or "
                         "--dcgm-level; default 2) where DCGM is installed (absent "
                         "elsewhere); what dcgmi printed, an error included",
                         fallback="dcgmi-diag.txt")   # the table form earlier runs kept
DCGM_HEALTH = EvidenceKind("dcgmi-health.json", "dcgm", parse_dcgm_health, None,
                           "`dcgmi health -c -j`: DCGM's health watches (`dcgmi health -s a`, "
                           "set before the soak) over the soak, DDP and diagnostic")
FABRIC = EvidenceKind("fabric.json", "fabric", parse_fabric_record, None,
                      "the rack's fabric test this node took part in (`validate --fabric`, "
                      "`gpuprov fabric`): every member's interface state, the group's and "
                      "any pairs' all-reduce bus bandwidth per size, the floor and its source")

KINDS: tuple[EvidenceKind, ...] = (
    META, PACKAGES, LSMOD, DRIVER_MODULE, LSPCI, SYSTEMCTL, NVCC, CUDNN, SMI_BEFORE, SMI_ERROR,
    FABRIC_MANAGER_LOG, NICS, TORCH_ENV,
    TOPO, NVLINK_STATUS, NVLINK_ERRORS_BEFORE, KERNEL_LOG, KERNEL_TAINT, GPU_BURN, SMI_AFTER,
    NVLINK_ERRORS_AFTER, DDP_JSON, DDP_LOG, NCCL_TESTS, DCGM_DIAG, DCGM_HEALTH, FABRIC,
)


class Evidence:
    def __init__(self, directory: Path):
        if not directory.is_dir():
            raise InputError(f"{directory}: not a readable evidence directory")
        self.dir = directory
        self._cache: dict[str, object] = {}

    def path(self, name: str | EvidenceKind) -> Path:
        return self.dir / str(name)

    def read(self, kind: EvidenceKind) -> Any:
        """The parsed file; None when it was not collected."""
        if kind.file not in self._cache:
            name = kind.file
            if kind.fallback and not self.path(name).is_file():
                name = kind.fallback
            path = self.path(name)
            if not path.is_file():
                self._cache[kind.file] = None
            else:
                try:
                    text = path.read_text(errors="replace")
                except OSError as exc:
                    raise ParseError(str(path), f"cannot read: {exc.strerror}") from exc
                self._cache[kind.file] = kind.parser(text, str(path)) if kind.parser else text
        return self._cache[kind.file]

    @cached_property
    def meta(self) -> dict:
        path = self.path(META)
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ParseError(str(path), f"malformed JSON: {exc.msg}") from exc

    def smi_error(self) -> str | None:
        """Why nvidia-smi gave no report before the soak: its first line of complaint."""
        return self.failure(SMI_BEFORE)

    def failure(self, kind: EvidenceKind) -> str | None:
        """Why `kind`'s command left no file: the tool's own first line of complaint and its
        exit status, from the error record the collector kept (`<file>.error`; earlier runs
        kept nvidia-smi's before the soak as `nvidia-smi-error.txt`). None when it did not
        fail."""
        names = [error_file(kind)]
        if kind.tool == "nvidia-smi":   # nvidia-smi failing first explains its later absences
            names += [error_file(SMI_BEFORE), SMI_ERROR.file]
        path = next((self.path(n) for n in names if self.path(n).is_file()), None)
        if path is None:
            return None
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        status = next((line for line in lines if line.startswith("exit status")), "")
        message = next((line for line in lines if line and not line.startswith(("$", "exit"))),
                       "no output")
        command = next((line[2:] for line in lines if line.startswith("$ ")), "")
        program = next((w for w in command.split() if "=" not in w), kind.file)
        tool = kind.tool or program.rsplit("/", 1)[-1]
        return f"{tool} failed ({status or 'exit status unknown'}): {message}"


def error_file(kind: EvidenceKind | str) -> str:
    """Where the collector keeps what a failed command printed instead of `kind`'s file."""
    return f"{kind}.error"


def error_record(command: str, status: int, output: str) -> str:
    """The error file's content: the command, its exit status, what it printed."""
    return f"$ {command}\nexit status {status}\n{output}"
