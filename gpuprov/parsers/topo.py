"""`nvidia-smi topo -m` (and `-mp`): the link matrix, legend and affinities.

Real captures differ: tab- or space-separated, ANSI underline codes around the header,
header rows without a leading tab, NICs named `mlx5_N` or `NICn` (with a `NIC Legend`),
and an optional `GPU NUMA ID` column. Cells never contain spaces, so rows split on
whitespace; the header tells how many device columns there are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members
from gpuprov.parsers.text import strip_ansi

_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
_LEGEND_LINE = re.compile(r"^\s+(?P<code>X|SYS|NODE|PHB|PXB|PIX|NV#|NV\d+)\s+=\s+(?P<text>.+)$")
_NIC_LEGEND = re.compile(r"^\s*(?P<nic>NIC\d+):\s*(?P<name>\S+)\s*$")


@dataclass
class Topology:
    devices: list[str]
    matrix: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    legend: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.devices if not d.startswith("GPU")]

    def link(self, a: str, b: str) -> str:
        return self.matrix[a][b]

    def gpu_pairs(self):
        gpus = self.gpus
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                yield a, b, self.matrix[a][b]


def _is_header(tokens: list[str]) -> bool:
    """The column row: names GPU0, and is not GPU0's own row (`GPU0  X  …`)."""
    return "GPU0" in tokens and tokens[:2] != ["GPU0", "X"]


def parse_topo(text: str, source: str) -> Topology:
    lines = [strip_ansi(line).rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if _is_header(line.split())), None)
    if header_at is None:
        raise ParseError(source, "no `nvidia-smi topo -m` header row (GPU0 …)")
    header = lines[header_at]
    columns = [t for t in header.split() if _DEVICE.match(t)]
    matrix: dict[str, dict[str, str]] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    row_lines = lines[header_at + 1:]
    for line in row_lines:
        tokens = line.split()
        if not tokens:
            if matrix:
                break
            continue
        if not _DEVICE.match(tokens[0]):
            break
        name, cells = tokens[0], tokens[1:]
        if len(cells) < len(columns):
            raise ParseError(source, f"row {name} has {len(cells)} cells for "
                                     f"{len(columns)} devices (truncated?)")
        matrix[name] = dict(zip(columns, cells[: len(columns)], strict=True))
        extra = cells[len(columns):]
        if extra:
            cpu[name] = extra[0]
        if len(extra) > 1:
            numa[name] = extra[1]
    missing = [c for c in columns if c not in matrix]
    if missing:
        raise ParseError(source, f"no row for {', '.join(missing)} (truncated?)")
    for name, row in matrix.items():
        if row[name] != "X":
            raise ParseError(source, f"{name}'s own cell is {row[name]!r}, not X")
    legend: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    for line in lines:
        m = _LEGEND_LINE.match(line)
        if m:
            legend[m.group("code")] = m.group("text").strip()
        n = _NIC_LEGEND.match(line)
        if n:
            nic_names[n.group("nic")] = n.group("name")
    return Topology(columns, matrix, cpu, numa, legend, nic_names)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

TOPO = EvidenceKind("nvidia-smi-topo.txt", "snapshot", parse_topo, "nvidia-smi topo -m",
                    "`nvidia-smi topo -m`", lab="sim/nvidia_smi.py", tool="nvidia-smi",
                    members=Members(GPU, lambda topo: [int(g[3:]) for g in topo.gpus]))
