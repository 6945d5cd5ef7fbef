"""The evidence directory of one node's validation run (the contract in DESIGN.md).

Plain files a human can read. `Evidence` reads each file at most once and parses it
with the parser for its kind; a missing file is None (its checks become `missing`), a
malformed one raises ParseError naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from gpuprov.errors import InputError
from gpuprov.parsers.dmesg import XidEvent, parse_xids
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.gpu_burn import GpuBurnRun, parse_gpu_burn
from gpuprov.parsers.nvlink import (
    NvlinkErrors,
    NvlinkStatus,
    parse_nvlink_errors,
    parse_nvlink_status,
)
from gpuprov.parsers.probes import parse_ddp_smoke, parse_torch_env
from gpuprov.parsers.smi_gpu import SmiQuery, parse_smi_query
from gpuprov.parsers.system import parse_lsmod, parse_lspci, parse_packages, parse_systemctl
from gpuprov.parsers.topo import Topology, parse_topo
from gpuprov.parsers.versions import NvccVersion, parse_cudnn_header, parse_nvcc

META = "meta.json"
SMI_BEFORE = "nvidia-smi-q.xml"
SMI_AFTER = "nvidia-smi-q-after.xml"
# Where a node's nvidia-smi cannot write XML, the text form is kept instead.
SMI_TEXT_FALLBACK = {SMI_BEFORE: "nvidia-smi-q.txt", SMI_AFTER: "nvidia-smi-q-after.txt"}
# Where nvidia-smi itself failed (e.g. "Driver/library version mismatch"): its output.
SMI_ERROR = "nvidia-smi-error.txt"
TOPO = "nvidia-smi-topo.txt"
NVLINK_STATUS = "nvidia-smi-nvlink-status.txt"
NVLINK_ERRORS_BEFORE = "nvidia-smi-nvlink-errors-before.txt"
NVLINK_ERRORS_AFTER = "nvidia-smi-nvlink-errors-after.txt"
NVCC = "nvcc-version.txt"
CUDNN = "cudnn-version.h"
TORCH_ENV = "torch-env.json"
GPU_BURN = "gpu-burn.log"
DDP_JSON = "ddp-smoke.json"
DDP_LOG = "ddp-smoke.log"
DMESG = "dmesg.txt"
PACKAGES = "packages.txt"
LSMOD = "lsmod.txt"
LSPCI = "lspci.txt"
SYSTEMCTL = "systemctl.txt"

T = TypeVar("T")


class Evidence:
    def __init__(self, directory: Path):
        if not directory.is_dir():
            raise InputError(f"{directory}: not a readable evidence directory")
        self.dir = directory
        self._cache: dict[str, object] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    def has(self, name: str) -> bool:
        return self.path(name).is_file()

    def _parsed(self, name: str, parser: Callable[[str, str], T]) -> T | None:
        if name not in self._cache:
            path = self.path(name)
            if not path.is_file():
                self._cache[name] = None
            else:
                try:
                    text = path.read_text(errors="replace")
                except OSError as exc:
                    raise ParseError(str(path), f"cannot read: {exc.strerror}") from exc
                self._cache[name] = parser(text, str(path))
        return self._cache[name]  # type: ignore[return-value]

    @cached_property
    def meta(self) -> dict:
        path = self.path(META)
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ParseError(str(path), f"malformed JSON: {exc.msg}") from exc

    def smi(self, after: bool = False) -> SmiQuery | None:
        name = SMI_AFTER if after else SMI_BEFORE
        if not self.has(name) and self.has(SMI_TEXT_FALLBACK[name]):
            name = SMI_TEXT_FALLBACK[name]
        return self._parsed(name, parse_smi_query)

    def smi_error(self) -> str | None:
        """Why nvidia-smi gave no report: its first line of complaint, if it failed."""
        path = self.path(SMI_ERROR)
        if not path.is_file():
            return None
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        status = next((line for line in lines if line.startswith("exit status")), "")
        message = next((line for line in lines if line and not line.startswith(("$", "exit"))),
                       "no output")
        return f"nvidia-smi failed ({status or 'exit status unknown'}): {message}"

    def topo(self) -> Topology | None:
        return self._parsed(TOPO, parse_topo)

    def nvlink_status(self) -> NvlinkStatus | None:
        return self._parsed(NVLINK_STATUS, parse_nvlink_status)

    def nvlink_errors(self, after: bool) -> NvlinkErrors | None:
        name = NVLINK_ERRORS_AFTER if after else NVLINK_ERRORS_BEFORE
        return self._parsed(name, parse_nvlink_errors)

    def nvcc(self) -> list[NvccVersion] | None:
        return self._parsed(NVCC, parse_nvcc)

    def cudnn(self) -> str | None:
        return self._parsed(CUDNN, parse_cudnn_header)

    def torch_env(self) -> dict | None:
        return self._parsed(TORCH_ENV, parse_torch_env)

    def gpu_burn(self) -> GpuBurnRun | None:
        return self._parsed(GPU_BURN, parse_gpu_burn)

    def ddp(self) -> dict | None:
        return self._parsed(DDP_JSON, parse_ddp_smoke)

    def xids(self) -> list[XidEvent] | None:
        return self._parsed(DMESG, parse_xids)

    def packages(self) -> dict[str, str] | None:
        return self._parsed(PACKAGES, parse_packages)

    def lsmod(self) -> set[str] | None:
        return self._parsed(LSMOD, parse_lsmod)

    def lspci(self) -> list[str] | None:
        return self._parsed(LSPCI, parse_lspci)

    def systemctl(self) -> dict[str, dict[str, str]] | None:
        return self._parsed(SYSTEMCTL, parse_systemctl)
