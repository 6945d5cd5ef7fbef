"""What one fabric test measured: `fabric.json`, in the run's fabric directory and, with
`node` set, in every member's own evidence directory (so `gpuprov evaluate` re-judges a
node's `fabric` check from its directory alone).

A member is a node with its fabric address and interface, and the state of that interface
when the test began. A group run is one `torchrun` over some members: whether it finished,
and the all-reduce bus bandwidth at each size. The whole group runs first; pairs run only
when the group failed or fell below the floor. A per-rail run (`gpuprov fabric --rails`)
holds instead one `ib_write_bw` and one `ib_write_lat` result per rail (HCA) and node alone
(loopback), and per rail and pair of nodes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

BANDWIDTH, LATENCY = "ib_write_bw", "ib_write_lat"     # a rail run's test


@dataclass(frozen=True)
class Member:
    node: str
    address: str
    interface: str
    link_state: str | None = None     # the interface's operstate: UP, DOWN, …; None unread
    link_address: bool = False        # the fabric address is on the interface
    problem: str | None = None        # why the member cannot take part (down, unreachable…)


@dataclass(frozen=True)
class GroupRun:
    nodes: tuple[str, ...]
    ok: bool
    backend: str = "unknown"
    ranks: int = 0
    sizes: tuple[dict, ...] = ()      # {bytes, iterations, seconds, busbw_gbps}
    peak_busbw_gbps: float | None = None
    seconds: float = 0.0
    error: str | None = None
    nccl_env: dict = field(default_factory=dict)   # NCCL's settings as rank 0 saw them


@dataclass(frozen=True)
class RailRun:
    """One rail (HCA) between two nodes: `ib_write_bw` (or `ib_write_lat`) from the first to
    the second; with both the same node, that HCA alone (server and client on it, a
    loopback)."""
    rail: str                          # the HCA on both ends, e.g. mlx5_3
    nodes: tuple[str, str]             # (client, server)
    ok: bool
    average_gbps: float | None = None  # the client's BW average at its message size
    floor_gbps: float | None = None    # the lower of the two ends' profile floors
    error: str | None = None
    seconds: float = 0.0
    test: str = BANDWIDTH              # BANDWIDTH or LATENCY (records before it: bandwidth)
    latency_usec: float | None = None  # ib_write_lat's t_avg at its smallest message size
    ceiling_usec: float | None = None  # the higher of the two ends' profile ceilings

    @property
    def loopback(self) -> bool:
        return self.nodes[0] == self.nodes[1]


@dataclass
class FabricRecord:
    run_id: str
    floor_gbps: float | None           # the inter-node bus bandwidth floor judged against
    floor_source: str                  # where that floor came from
    members: list[Member] = field(default_factory=list)
    group: GroupRun | None = None
    pairs: list[GroupRun] = field(default_factory=list)
    seconds: float = 0.0
    node: str | None = None            # set in a member's copy: whose evidence this is
    rails: list[RailRun] = field(default_factory=list)   # `gpuprov fabric --rails`
    network_only: bool = False         # NCCL's P2P and SHM off: every byte over the NICs
    # the NVL72 rack whose NVLink domain the group is (validate --fabric runs each rack's
    # trays apart): a fault every pair shows is the rack's, named by it
    rack: str | None = None

    def as_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def member(self, node: str) -> Member | None:
        return next((m for m in self.members if m.node == node), None)


def parse_fabric_record(text: str, source: str) -> FabricRecord:
    try:
        data = json.loads(text)
        members = [Member(**m) for m in data["members"]]
        group = _run(data["group"]) if data.get("group") else None
        pairs = [_run(p) for p in data.get("pairs") or []]
        rails = [RailRun(**{**r, "nodes": tuple(r["nodes"])}) for r in data.get("rails") or []]
        return FabricRecord(data["run_id"], data.get("floor_gbps"), data["floor_source"],
                            members, group, pairs, data.get("seconds", 0.0), data.get("node"),
                            rails, bool(data.get("network_only")), data.get("rack"))
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(source, f"not a gpuprov fabric record: {exc}") from exc


def _run(data: dict) -> GroupRun:
    return GroupRun(**{**data, "nodes": tuple(data["nodes"]),
                       "sizes": tuple(data.get("sizes") or ())})


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

FABRIC = EvidenceKind("fabric.json", "fabric", parse_fabric_record, None,
                      "the rack's fabric test this node took part in (`validate --fabric`, "
                      "`gpuprov fabric`): every member's interface state, the group's and "
                      "any pairs' all-reduce bus bandwidth per size, the floor and its source",
                      lab="fabric.py")
