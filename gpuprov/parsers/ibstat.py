"""`ibstat`: each host channel adapter's ports, their state, rate and link layer.

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.39.1002
            Node GUID: 0x58a2e10300dae626
            ...
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    ...
                    Link layer: InfiniBand

The node GUID identifies the adapter (a replaced card has another; redacted captures
print `...`: unknown). The collector prints the same form from /sys/class/infiniband where
infiniband-diags is not installed. No adapter at all is an empty output (a node without
RDMA NICs); text with no `CA '…'` line is a ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.grep_listing import UNNAMED
from gpuprov.parsers.kind import EvidenceKind

_CA = re.compile(r"^CA '(?P<name>[^']+)'")
_PORT = re.compile(r"^Port (?P<port>\d+):$")
_FIELD = re.compile(r"^(?P<key>[A-Za-z ]+):\s*(?P<value>.*)$")
# ibstat's `Node GUID: 0x58a2e10300dae626` (tests/fixtures/ibstat/: real captures)
_GUID = re.compile(r"^0x[0-9a-f]{16}$")


@dataclass(frozen=True)
class NicPort:
    ca: str
    port: int
    state: str | None
    physical_state: str | None
    rate_gbps: float | None
    link_layer: str | None
    firmware: str | None
    ca_type: str | None
    node_guid: str | None = None      # the adapter's: 0x and 16 hex digits

    @property
    def name(self) -> str:
        return f"{self.ca} port {self.port}"


def _guid(value: str | None) -> str | None:
    return value.lower() if value and _GUID.match(value.lower()) else None


def parse_ibstat(text: str, source: str) -> list[NicPort]:
    ports: list[NicPort] = []
    ca: str | None = None
    ca_fields: dict[str, str] = {}
    port: int | None = None
    fields: dict[str, str] = {}

    def close_port() -> None:
        if ca is not None and port is not None:
            rate = fields.get("Rate")
            ports.append(NicPort(ca, port, fields.get("State"), fields.get("Physical state"),
                                 float(rate) if rate and re.fullmatch(r"[\d.]+", rate) else None,
                                 fields.get("Link layer"), ca_fields.get("Firmware version"),
                                 ca_fields.get("CA type"), _guid(ca_fields.get("Node GUID"))))

    for raw in text.splitlines():
        line = raw.strip()
        if m := _CA.match(line):
            close_port()
            ca, ca_fields, port, fields = m.group("name"), {}, None, {}
        elif ca is None:
            continue   # a prompt, the command, warnings before the first adapter
        elif m := _PORT.match(line):
            close_port()
            port, fields = int(m.group("port")), {}
        elif m := _FIELD.match(line):
            (fields if port is not None else ca_fields)[m.group("key").strip()] = \
                m.group("value").strip()
    close_port()
    if text.strip() and ca is None:
        raise ParseError(source, "not ibstat output: no `CA '<name>'` line")
    return ports


# ibstat where infiniband-diags is installed; else the same form from sysfs, which every
# node with the RDMA drivers has ("4: ACTIVE" -> "Active", "400 Gb/sec (4X NDR)" -> "400";
# node_guid "58a2:e103:00da:e626" -> ibstat's "0x58a2e10300dae626": Linux's
# drivers/infiniband/core/sysfs.c prints it as four groups of four hex digits; hca_type is
# ibstat's CA type, "MT" and the PCI device id in decimal, MT4129 on a ConnectX-7: Linux's
# drivers/infiniband/hw/mlx5/main.c hca_type_show, so ConnectX minimums locked by CA type
# apply without infiniband-diags too)
IBSTAT_COMMAND = (
    "if command -v ibstat >/dev/null 2>&1; then ibstat; else "
    "for d in /sys/class/infiniband/*; do [ -d \"$d\" ] || continue; "
    "echo \"CA '${d##*/}'\"; echo \"	CA type: $(cat $d/hca_type 2>/dev/null)\"; "
    "echo \"	Firmware version: $(cat $d/fw_ver 2>/dev/null)\"; "
    "echo \"	Node GUID: 0x$(tr -d : < $d/node_guid 2>/dev/null)\"; "
    "for p in $d/ports/*; do echo \"	Port ${p##*/}:\"; "
    "s=$(cut -d: -f2 $p/state | tr -d ' ' | sed -E 's/^(.)(.*)$/\\1\\L\\2/'); "
    "ph=$(cut -d: -f2 $p/phys_state | tr -d ' '); echo \"		State: $s\"; "
    "echo \"		Physical state: $ph\"; echo \"		Rate: $(cut -d' ' -f1 $p/rate)\"; "
    "echo \"		Link layer: $(cat $p/link_layer)\"; done; done; fi")

# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

NICS = EvidenceKind("ibstat.txt", "identity", parse_ibstat, "{ibstat_command}",
                    "`ibstat`, or the same form printed from /sys/class/infiniband where "
                    "infiniband-diags is not installed: every RDMA NIC port",
                    lab="kernel_view.py", when="nics")


# -- the adapters' PSIDs ------------------------------------------------------
# `/sys/class/infiniband/<CA>/board_id` holds the adapter's PSID, the firmware image's board
# identity (mlx5: the firmware's QUERY_ADAPTER vsd_contd_psid, Linux's
# drivers/net/ethernet/mellanox/mlx5/core/vport.c mlx5_query_board_id); ibv_devinfo prints
# that same file as `board_id` (rdma-core libibverbs/examples/devinfo.c). NVIDIA's own cards
# read `MT_` and ten digits (a ConnectX-7 of a real H200 node: MT_0000000838,
# deepseek-ai/DeepEP#355); an OEM's image carries its own prefix.
_BOARD_ID = re.compile(r"^\S*/(?P<ca>[^/\s]+)/board_id:(?P<psid>\S*)\s*$")


# a PSID alone: `grep -s .` (no -H) of a host with one adapter (parsers/grep_listing.py)
_LONE_PSID = re.compile(r"^(?P<psid>[^\s/:]+)$")


def parse_board_ids(text: str, source: str) -> dict[str, str]:
    """`grep -sH . …/infiniband/*/board_id`: each adapter's PSID by CA name; an empty listing
    is no adapter (its absence where the profile has NICs is the nics check's to judge).
    One PSID without a path (a single adapter, listed without -H) is keyed UNNAMED."""
    psids: dict[str, str] = {}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and (lone := _LONE_PSID.match(lines[0])) is not None:
        return {UNNAMED: lone.group("psid")}
    for line in lines:
        m = _BOARD_ID.match(line)
        if m is None or not m.group("psid"):
            raise ParseError(source, f"not a board_id listing line: {line[:120]}")
        psids[m.group("ca")] = m.group("psid")
    return psids


# no adapter: grep's exit 2 and an empty listing, read as no adapter; -H: the path even
# where one adapter is found
BOARD_ID_COMMAND = "grep -sH . /sys/class/infiniband/*/board_id || true"
BOARD_IDS = EvidenceKind("ib-board-id.txt", "identity", parse_board_ids,
                         "{ib_board_id_command}",
                         "each RDMA adapter's PSID (`grep -sH . /sys/class/infiniband/*/"
                         "board_id`), for firmware minimums locked by PSID",
                         lab="kernel_view.py", when="nics")
