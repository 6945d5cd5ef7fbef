"""`nvidia-imex-ctl -N`: an IMEX domain as one member sees it (issue 72).

The form, from real captures (tests/fixtures/imex/): a legend of the connectivity table's
letters, a timestamp, `Nodes:` with one `Node #N - ADDRESS - STATE` line per member, the
table (`Nodes From\\To` and a row of cells per member) and `Domain State: UP`. NVIDIA's
guide names the domain states UP and DEGRADED and a member's READY and UNAVAILABLE
(NVIDIA/k8s-test-infra docs/demo/compute-domain @3b2b865); newer releases add markers to the
legend, `!V!` a version mismatch and `!M!` a node-map mismatch (AWS ParallelCluster's
P6e-GB200 IMEX page, shared/reference/fleet-scale.md 3.2), read here as any other cell
that is not `C`. A table whose rows or columns do not match its members is partial
evidence: a ParseError, never a domain judged on what is there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import REAL_TOOL, EvidenceKind

CONNECTED = "C"
UP = "UP"
READY = "READY"
# the markers newer releases print (fleet-scale.md 3.2); the legend a capture prints wins
MARKERS = {"!V!": "version mismatch", "!M!": "node-map mismatch"}

_LEGEND = re.compile(r"^(\S{1,3}) - (.+?)(?: - .*)?$")
_NODE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)(?:\s+-\s+(.*))?$")
_HEADER = re.compile(r"^Nodes From\\To((?:\s+\d+)+)\s*$")
_ROW = re.compile(r"^(\d+)\s+(.+)$")
_STATE = re.compile(r"^Domain State:\s*(\S+)\s*$")


@dataclass(frozen=True)
class ImexNode:
    index: int
    address: str
    state: str              # READY, UNAVAILABLE, …
    detail: str = ""        # what a newer release prints after the state (its version)


@dataclass(frozen=True)
class ImexDomain:
    nodes: list[ImexNode]
    cells: dict[tuple[int, int], str]   # (from, to) -> the table's cell
    state: str                          # UP, DEGRADED, …
    legend: dict[str, str]

    def meaning(self, cell: str) -> str:
        return self.legend.get(cell) or MARKERS.get(cell) or "not in the legend"

    def not_connected(self) -> list[tuple[int, int, str]]:
        """Every (from, to, cell) of the table that is not Connected."""
        return [(a, b, cell) for (a, b), cell in sorted(self.cells.items())
                if cell != CONNECTED]

    def cut_off(self) -> list[int]:
        """The members connected to no other member (with others in the domain): every cell
        of their row and column, but their own, not Connected."""
        members = sorted(n.index for n in self.nodes)
        return [m for m in members if len(members) > 1 and all(
            self.cells[(m, o)] != CONNECTED and self.cells[(o, m)] != CONNECTED
            for o in members if o != m)]


def parse_imex_domain(text: str, source: str) -> ImexDomain:
    legend: dict[str, str] = {}
    nodes: list[ImexNode] = []
    columns: list[int] | None = None
    cells: dict[tuple[int, int], str] = {}
    state = None
    for raw in text.splitlines():
        line = raw.strip()
        if match := _NODE.match(line):
            nodes.append(ImexNode(int(match[1]), match[2], match[3], match[4] or ""))
        elif match := _HEADER.match(line):
            columns = [int(n) for n in match[1].split()]
        elif (match := _STATE.match(line)):
            state = match[1]
        elif columns is not None and state is None and (match := _ROW.match(line)):
            row = match[2].split()
            if len(row) != len(columns):
                raise ParseError(source, f"row {match[1]} of the connectivity table has "
                                         f"{len(row)} cells for {len(columns)} members")
            for column, cell in zip(columns, row, strict=True):
                cells[(int(match[1]), column)] = cell
        elif columns is None and (match := _LEGEND.match(line)) and not nodes:
            legend[match[1]] = match[2]
    if state is None:
        raise ParseError(source, "no `Domain State:` line (not nvidia-imex-ctl -N output, "
                                 "or cut short)")
    if not nodes:
        raise ParseError(source, "no `Node #` line: the domain's members are not listed")
    members = sorted(n.index for n in nodes)
    if columns is None or sorted(columns) != members or \
            sorted({a for a, _ in cells}) != members:
        raise ParseError(source, f"the connectivity table does not cover the {len(members)} "
                                 "members listed (partial output)")
    return ImexDomain(nodes, cells, state, legend)


_SHA256 = re.compile(r"^([0-9a-f]{64})\s+\S")


def parse_sha256sum(text: str, source: str) -> str:
    """`sha256sum FILE`'s digest (a node's nodes_config.cfg: one file for the rack)."""
    match = _SHA256.match(text.strip())
    if match is None:
        raise ParseError(source, "not `sha256sum FILE` output")
    return match[1]


# Collected on the trays of an NVL72 rack that runs an IMEX domain (the inventory asks for
# it: validation/rack.py imex_asked; never where IMEX is per job or absent: docs/rack.md).
# The peer list's path as NVIDIA's IMEX guide and Crusoe's IMEX setup page give it
# (docs.crusoecloud.com networking/nv-link/imex-setup: /etc/nvidia-imex/nodes_config.cfg).
IMEX_DOMAIN = EvidenceKind(
    "imex-domain.txt", "snapshot", parse_imex_domain, "nvidia-imex-ctl -N",
    "the IMEX domain as the tray sees it: its members and their state, the connectivity "
    "table, the domain's state", lab="sim/imex.py", when="imex")
IMEX_NODES_CONFIG = EvidenceKind(
    "imex-nodes-config.sha256", "snapshot", parse_sha256sum,
    "sha256sum /etc/nvidia-imex/nodes_config.cfg",
    "the digest of the tray's IMEX peer list (the same on every tray of a domain)",
    lab=REAL_TOOL, when="imex")
