"""What every parser makes of every real capture in tests/fixtures, in full.

`parsed-outputs.json` holds each parser's whole output for each capture (the `-q` reports
also as the raw section tree both forms become); `test_parsed_outputs` holds today's output
equal to it. The targeted tests in this folder say why a value is right; this file is the
net that catches any change to what a parser reads off a real capture. Regenerate only for a
deliberate change, and read the diff: `python -m tests.unit.parsers.parsed_outputs`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

from gpuprov.parsers.dcgm import parse_dcgm_diag
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_manager import parse_fabric_manager_log
from gpuprov.parsers.gdrcopy import parse_gdrcopy_sanity
from gpuprov.parsers.gpu_burn import parse_gpu_burn
from gpuprov.parsers.ibstat import parse_ibstat
from gpuprov.parsers.imex import parse_imex_domain
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.nccl_tests import parse_nccl_tests
from gpuprov.parsers.nvlink import parse_nvlink_status
from gpuprov.parsers.pci_tree import parse_lspci_vvv
from gpuprov.parsers.perftest import parse_ib_write_bw, parse_ib_write_lat
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.parsers.smi_table import parse_smi_header
from gpuprov.parsers.smi_tree import parse_any
from gpuprov.parsers.system import parse_kernel_taint, parse_lspci
from gpuprov.parsers.topo import parse_topo
from gpuprov.parsers.versions import parse_nvcc
from tests.evidence_builder import FIXTURES

OUTPUTS = Path(__file__).parent / "parsed-outputs.json"
# syslog stamps carry no year: the kernel-log parser takes it from the clock
FROZEN_NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def _output(text: str) -> str:
    """The capture without its header lines, where its tool's output would not parse with
    them (lspci and perftest never print a `#` line)."""
    return text.split("\n\n", 1)[1] if text.startswith("# ") else text


def _lspci_vvv(text: str, source: str) -> object:
    return parse_lspci_vvv(_output(text), source)


def _perftest(text: str, source: str) -> object:
    """A latency report by its title (`… Latency Test`), else a bandwidth one."""
    parse = parse_ib_write_lat if "Latency Test" in text else parse_ib_write_bw
    return parse(_output(text), source)


def _gdrcopy(text: str, source: str) -> object:
    """A report, or (its stderr alone) the refusal: no summary is never a pass."""
    try:
        return parse_gdrcopy_sanity(text, source)
    except ParseError as exc:
        return {"refused": str(exc)}


def _smi_query(text: str, source: str) -> dict:
    return {"report": parse_smi_query(text, source), "tree": parse_any(text, source)}


PARSERS: dict[str, Callable[[str, str], object]] = {
    "dcgmi": parse_dcgm_diag,
    "dmesg-xid": parse_kernel_log,
    "fabricmanager": parse_fabric_manager_log,
    "gdrcopy": _gdrcopy,
    "gpu-burn": parse_gpu_burn,
    "ibstat": parse_ibstat,
    "imex": parse_imex_domain,
    "kernel-log": parse_kernel_log,
    "kernel-taint": parse_kernel_taint,
    "lspci": parse_lspci,
    "lspci-vvv": _lspci_vvv,
    "nccl-tests": parse_nccl_tests,
    "nvcc": parse_nvcc,
    "nvidia-smi": parse_smi_header,
    "nvidia-smi-q": _smi_query,
    "nvlink": parse_nvlink_status,
    "perftest": _perftest,
    "topo": parse_topo,
}


def plain(value: object) -> object:
    """A parser's output as JSON values: dataclasses by field, sets sorted, the rest as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


@contextmanager
def frozen_clock():
    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return FROZEN_NOW if tz else FROZEN_NOW.replace(tzinfo=None)
    with mock.patch("gpuprov.parsers.kernel_log.datetime", Frozen):
        yield


def captures() -> Iterator[tuple[str, Path]]:
    for folder in sorted(PARSERS):
        for path in sorted((FIXTURES / folder).iterdir()):
            yield f"{folder}/{path.name}", path


def parse_all() -> dict[str, object]:
    with frozen_clock():
        return {key: plain(PARSERS[key.split("/")[0]](path.read_text(), key))
                for key, path in captures()}


if __name__ == "__main__":
    OUTPUTS.write_text(json.dumps(parse_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUTS}")
