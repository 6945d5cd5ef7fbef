"""`nvidia-smi nvlink -s` (link state and speed) and `nvidia-smi nvlink -e` (error counters)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members
from gpuprov.parsers.text import GPU_HEADER, strip_ansi

_LINK_STATUS = re.compile(r"^\s*Link (?P<link>\d+): (?P<state><inactive>|[\d.]+ GB/s)\s*$")
_LINK_COUNTER = re.compile(r"^\s*Link (?P<link>\d+): (?P<counter>[^:]+): (?P<value>-?\d+|N/A)\s*$")
ALL_INACTIVE = "all links are inactive"


@dataclass
class GpuLinks:
    index: int
    name: str
    uuid: str
    speeds: dict[int, float | None] = field(default_factory=dict)  # None = <inactive>
    all_inactive: bool = False

    @property
    def active(self) -> list[int]:
        return [k for k, v in self.speeds.items() if v is not None]

    @property
    def inactive(self) -> list[int]:
        return [k for k, v in self.speeds.items() if v is None]


@dataclass
class NvlinkStatus:
    gpus: list[GpuLinks]

    @property
    def empty(self) -> bool:
        """No GPU printed any link: what NVLink-less systems (and broken ones) show."""
        return not any(g.speeds or g.all_inactive for g in self.gpus)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in strip_ansi(text).splitlines() if line.strip()]


def parse_nvlink_status(text: str, source: str) -> NvlinkStatus:
    gpus: list[GpuLinks] = []
    for line in _lines(text):
        gpu = GPU_HEADER.match(line)
        if gpu:
            gpus.append(GpuLinks(int(gpu.group("index")), gpu.group("name"), gpu.group("uuid")))
            continue
        link = _LINK_STATUS.match(line)
        if link and gpus:
            state = link.group("state")
            gpus[-1].speeds[int(link.group("link"))] = (
                None if state == "<inactive>" else float(state.split()[0])
            )
            continue
        if ALL_INACTIVE in line and gpus:
            gpus[-1].all_inactive = True
            continue
        if line.lstrip().startswith("Link") and gpus:
            raise ParseError(source, f"unrecognised link line: {line.strip()!r}")
    return NvlinkStatus(gpus)


@dataclass
class NvlinkErrors:
    # gpu index -> link -> counter name -> value
    counters: dict[int, dict[int, dict[str, int]]]
    uuids: dict[int, str]
    all_inactive: set[int] = field(default_factory=set)   # GPUs printing no link at all

    def counted(self) -> list[int]:
        """The GPUs it has a reading for: a numeric counter (every one `N/A` is none), or
        the driver's word that all their links are inactive."""
        return [g for g, links in self.counters.items()
                if any(links.values()) or g in self.all_inactive]

    def totals(self) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for gpu, links in self.counters.items():
            agg: dict[str, int] = {}
            for per_link in links.values():
                for name, value in per_link.items():
                    agg[name] = agg.get(name, 0) + value
            out[gpu] = agg
        return out


def parse_nvlink_errors(text: str, source: str) -> NvlinkErrors:
    counters: dict[int, dict[int, dict[str, int]]] = {}
    uuids: dict[int, str] = {}
    inactive: set[int] = set()
    current: int | None = None
    for line in _lines(text):
        gpu = GPU_HEADER.match(line)
        if gpu:
            current = int(gpu.group("index"))
            counters[current] = {}
            uuids[current] = gpu.group("uuid")
            continue
        counter = _LINK_COUNTER.match(line)
        if counter and current is not None:
            if counter.group("value") == "N/A":
                continue
            link = int(counter.group("link"))
            counters[current].setdefault(link, {})[counter.group("counter").strip()] = int(
                counter.group("value"))
            continue
        if ALL_INACTIVE in line:
            if current is not None:
                inactive.add(current)
            continue
        if current is None or line.lstrip().startswith("Link"):
            raise ParseError(source, f"unrecognised `nvlink -e` line: {line.strip()!r}")
    return NvlinkErrors(counters, uuids, inactive)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

NVLINK_STATUS = EvidenceKind("nvidia-smi-nvlink-status.txt", "snapshot", parse_nvlink_status,
                             "nvidia-smi nvlink -s", "`nvidia-smi nvlink -s`",
                             lab="sim/nvidia_smi.py", tool="nvidia-smi",
                             members=Members(GPU, lambda status: [
                                 g.index for g in status.gpus if g.speeds or g.all_inactive]))
NVLINK_ERRORS_BEFORE = EvidenceKind("nvidia-smi-nvlink-errors-before.txt", "snapshot",
                                    parse_nvlink_errors, "nvidia-smi nvlink -e",
                                    "`nvidia-smi nvlink -e` before the soak",
                                    lab="sim/nvidia_smi.py", tool="nvidia-smi",
                                    members=Members(GPU, NvlinkErrors.counted))
NVLINK_ERRORS_AFTER = EvidenceKind("nvidia-smi-nvlink-errors-after.txt", "soak",
                                   parse_nvlink_errors, "nvidia-smi nvlink -e",
                                   "`nvidia-smi nvlink -e` after the soak",
                                   lab="sim/nvidia_smi.py", tool="nvidia-smi",
                                   members=Members(GPU, NvlinkErrors.counted))
