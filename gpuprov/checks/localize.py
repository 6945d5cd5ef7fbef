"""Which node or link a fabric test blames, from its record alone.

A member whose fabric interface is down, unaddressed or unreachable is at fault on its
own. Among the rest, a whole group that finished at or above the floor passes everyone.
Otherwise the pairs decide: a pair is bad when it failed, fell below the floor, or ran at
less than half the best pair (a link trained down is slow even above a lenient floor; the
best, not the median, because with few nodes most pairs include the slow one). A node is
at fault when every pair it was in is bad while some pair elsewhere is good; a bad pair
between two nodes not at fault is a bad link, and both ends are named; every pair bad is
a fabric-wide fault (switch, floor), named as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuprov.parsers.fabric import BANDWIDTH, LATENCY, FabricRecord, GroupRun, RailRun

# A pair under this share of the best pair is slow, whatever the floor says.
RELATIVE_SLOW = 0.5


@dataclass(frozen=True)
class NodeFinding:
    """Where the fabric test places one member: the fabric check's input, not a judgement
    of its own."""
    ok: bool
    summary: str
    values: dict = field(default_factory=dict)
    tested: bool = True   # False: no peer was left to test this node against
    # a fault every pair shows: the fabric's (its switches, its rack), no member's part
    wide: bool = False


def _gbps(value: float | None) -> str:
    return "no result" if value is None else f"{value:.3g} GB/s"


def _below_floor(run: GroupRun, floor: float | None) -> bool:
    return floor is not None and (run.peak_busbw_gbps or 0.0) < floor


def _pair_view(run: GroupRun) -> dict:
    return {"nodes": list(run.nodes), "ok": run.ok, "peak_busbw_gbps": run.peak_busbw_gbps,
            "error": run.error}


def _transport(record: FabricRecord) -> str:
    backend = record.group.backend if record.group else "unknown"
    if not record.network_only:
        return backend
    if backend == "nccl":
        return "nccl, network only: P2P and SHM off"
    return f"{backend}; network only asked: NCCL_P2P_DISABLE and NCCL_SHM_DISABLE act on NCCL"


def findings(record: FabricRecord) -> dict[str, NodeFinding]:
    """One finding per member of the record."""
    floor = record.floor_gbps
    base = {"floor_gbps": floor, "floor_source": record.floor_source}
    out: dict[str, NodeFinding] = {}
    for m in record.members:
        if m.problem:
            out[m.node] = NodeFinding(False, f"{m.problem}; not tested with its peers",
                                  {**base, "interface": m.interface, "address": m.address,
                                   "link_state": m.link_state})
    tested = [m.node for m in record.members if not m.problem]
    group = record.group
    group_values = {**base, "group": _pair_view(group) if group else None,
                    "group_sizes": list(group.sizes) if group else []}
    if len(tested) < 2 or group is None:
        for node in tested:
            out[node] = NodeFinding(True, "no peer left to test the fabric against",
                                group_values, tested=False)
        return out
    if group.ok and not _below_floor(group, floor):
        floor_text = f", floor {floor:g}" if floor is not None else ", no floor set"
        for node in tested:
            out[node] = NodeFinding(True, f"all-reduce over {len(group.nodes)} nodes "
                                      f"({_transport(record)}): peak "
                                      f"{_gbps(group.peak_busbw_gbps)} bus bandwidth"
                                      f"{floor_text}", group_values)
        return out
    why = group.error if not group.ok else (f"peak {_gbps(group.peak_busbw_gbps)} below the "
                                            f"floor {floor:g}")
    if not record.pairs:
        for node in tested:
            out[node] = NodeFinding(False, f"the group of {len(group.nodes)} failed ({why}); no "
                                       "pairwise runs to tell which node is at fault",
                                group_values)
        return out
    _judge_pairs(record, tested, why, group_values, out)
    return out


def _judge_pairs(record: FabricRecord, tested: list[str], why: str, values: dict,
                 out: dict[str, NodeFinding]) -> None:
    floor, pairs = record.floor_gbps, record.pairs
    finished = [p.peak_busbw_gbps for p in pairs if p.ok and p.peak_busbw_gbps is not None]
    best = max(finished) if finished else None

    def bad(p: GroupRun) -> bool:
        return (not p.ok or _below_floor(p, floor)
                or (best is not None and (p.peak_busbw_gbps or 0.0) < RELATIVE_SLOW * best))

    bad_pairs = [p for p in pairs if bad(p)]
    mine = {n: [p for p in pairs if n in p.nodes] for n in tested}
    # read only where some pair was good (every pair bad is a fabric-wide finding, first)
    at_fault = {n for n in tested if mine[n] and all(bad(p) for p in mine[n])}
    values = {**values, "pairs": [_pair_view(p) | {"bad": bad(p)} for p in pairs],
              "best_pair_busbw_gbps": best}

    reference = (f"floor {floor:g} GB/s, " if floor is not None else "") + \
        f"best pair {_gbps(best)}"

    def peers(node: str, runs: list[GroupRun]) -> str:
        return ", ".join(f"{next(n for n in p.nodes if n != node)}: "
                         f"{_gbps(p.peak_busbw_gbps) if p.ok else 'failed'}" for p in runs)

    for n in tested:
        own_bad = [p for p in mine[n] if bad(p)]
        if not own_bad:
            out[n] = NodeFinding(True, f"the group was slow or failed ({why}); every pair with "
                                   f"{n} was good ({peers(n, mine[n])})", values)
        elif len(bad_pairs) == len(pairs) and record.rack:
            out[n] = NodeFinding(False, f"rack {record.rack}: every pair of its trays is slow or "
                                    f"failed ({peers(n, own_bad)}): the rack's NVLink fabric "
                                    "(its switch trays, or a floor it cannot meet), no tray's",
                                 values, wide=True)
        elif len(bad_pairs) == len(pairs):
            out[n] = NodeFinding(False, f"every pair is slow or failed ({peers(n, own_bad)}): a "
                                    "fabric-wide fault (switch, or a floor this fabric cannot "
                                    "meet)", values, wide=True)
        elif n in at_fault:
            out[n] = NodeFinding(False, f"{n} is at fault: every pair with it is slow or failed "
                                    f"({peers(n, own_bad)}; {reference})",
                             values)
        else:
            links = [p for p in own_bad if not set(p.nodes) & (at_fault - {n})]
            if links:
                out[n] = NodeFinding(False, f"bad link: {peers(n, links)} ({reference}); "
                                        "both ends named", values)
            else:
                out[n] = NodeFinding(True, f"its only bad pairs are with a node at fault "
                                       f"({peers(n, own_bad)})", values)


def pair_rounds(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """Every pair once, in rounds of disjoint pairs (the circle method): a round's pairs
    run at once, so n nodes take n-1 rounds (n rounds when n is odd)."""
    ring = list(nodes) + ([None] if len(nodes) % 2 else [])
    rounds = []
    for _ in range(len(ring) - 1):
        half = len(ring) // 2
        pairs = [(ring[i], ring[-1 - i]) for i in range(half)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def _rail_bad(run: RailRun) -> bool:
    """Failed, below its floor (bandwidth) or above its ceiling (latency); a latency run
    with a ceiling but no figure is bad (never a pass)."""
    if not run.ok:
        return True
    if run.test == LATENCY:
        return run.ceiling_usec is not None and (run.latency_usec is None
                                                 or run.latency_usec > run.ceiling_usec)
    return run.floor_gbps is not None and (run.average_gbps or 0.0) < run.floor_gbps


def _rail_said(node: str, run: RailRun) -> str:
    if run.test == LATENCY:
        figure = None if run.latency_usec is None else f"{run.latency_usec:.3g} µs"
        limit = f", ceiling {run.ceiling_usec:g}" if run.ceiling_usec is not None else ""
    else:
        figure = None if run.average_gbps is None else f"{run.average_gbps:.4g} Gb/s"
        limit = f", floor {run.floor_gbps:g}" if run.floor_gbps is not None else ""
    got = (f"failed: {run.error}" if not run.ok else
           figure if figure is not None else "finished without a figure")
    if run.loopback:
        return f"alone (loopback): {got}{limit}"
    return f"with {next(x for x in run.nodes if x != node)}: {got}{limit}"


def rail_findings(record: FabricRecord) -> dict[str, NodeFinding]:
    """Per-rail `ib_write_bw` and `ib_write_lat` (gpuprov fabric --rails), each test of
    each rail placed on its own. A run is bad when it failed, fell below its floor (a
    pair's: the lower of its two ends' profile floors) or, for latency, rose above its
    ceiling (a pair's: the higher of its two ends').
    An HCA bad alone (its loopback) is at fault on its node, whatever its pairs say, and
    its pairs are explained by it. The remaining pairs place the rest: a node's HCA is at
    fault when every pair it is in there is bad while another pair is good; a bad pair
    between two nodes not at fault is a bad link, both ends named; every pair of a rail bad
    names the rail, or, with two nodes, the link between them (each HCA passed alone)."""
    members = [m.node for m in record.members if not m.problem]
    problems: dict[str, list[str]] = {n: [] for n in members}
    rails = sorted({r.rail for r in record.rails})
    views: dict[str, list[dict]] = {}
    # each test of each rail is placed on its own: bandwidth as `mlx5_3`, latency as
    # `mlx5_3 (ib_write_lat)`
    for hca, test in sorted({(r.rail, r.test) for r in record.rails}):
        runs = [r for r in record.rails if r.rail == hca and r.test == test]
        rail = hca if test == BANDWIDTH else f"{hca} ({test})"
        views[rail] = [{"nodes": list(r.nodes), "loopback": r.loopback, "ok": r.ok,
                        **({"latency_usec": r.latency_usec, "ceiling_usec": r.ceiling_usec}
                           if test == LATENCY else
                           {"average_gbps": r.average_gbps, "floor_gbps": r.floor_gbps}),
                        "error": r.error, "bad": _rail_bad(r)} for r in runs]
        alone = {r.nodes[0]: r for r in runs if r.loopback and r.nodes[0] in problems}
        hca_at_fault = {n for n, r in alone.items() if _rail_bad(r)}
        for n in sorted(hca_at_fault):
            problems[n].append(f"rail {rail}: {n} {hca} is at fault, "
                               f"{_rail_said(n, alone[n])}")
        pairs = [r for r in runs if not r.loopback and not set(r.nodes) & hca_at_fault]
        _place_rail_pairs(rail, hca, pairs, [n for n in members if n not in hca_at_fault],
                          set(alone), problems)
    values = {"rails": views}
    out: dict[str, NodeFinding] = {}
    for n in members:
        if problems[n]:
            out[n] = NodeFinding(False, "; ".join(problems[n]), values)
        else:
            own = [r for r in record.rails if n in r.nodes]   # no run of its own: untested
            how = ("alone (loopback) and with every peer" if any(r.loopback for r in own)
                   else "with every peer")
            limits = ("at or above their floors, within their latency ceilings"
                      if any(r.test == LATENCY for r in own) else "at or above their floors")
            out[n] = NodeFinding(True, f"{len(rails)} rail(s) {limits} {how}",
                                 values, tested=bool(own))
    for m in record.members:
        if m.problem:
            out[m.node] = NodeFinding(False, f"{m.problem}; not tested on its rails", values)
    return out


def _place_rail_pairs(rail: str, hca: str, runs: list[RailRun], members: list[str],
                      passed_alone: set[str], problems: dict[str, list[str]]) -> None:
    """One rail's pairs (one test's) between HCAs not at fault alone: who is at fault, or
    which link; `rail` names the rail and test, `hca` the adapter."""
    bad_runs = [r for r in runs if _rail_bad(r)]
    mine = {n: [r for r in runs if n in r.nodes] for n in members}
    # read only where some run was good (every run bad is the rail's finding, first)
    at_fault = {n for n in members if mine[n] and all(_rail_bad(r) for r in mine[n])}
    for n in members:
        own_bad = [r for r in mine[n] if _rail_bad(r)]
        if not own_bad:
            continue
        listed = "; ".join(_rail_said(n, r) for r in own_bad)
        if len(bad_runs) == len(runs) and len(members) == 2:
            ends = ("each HCA passed alone (loopback): the link between them (cable, "
                    "transceivers, the leaf's ports)" if set(members) <= passed_alone
                    else "the two ends cannot be told apart")
            problems[n].append(f"rail {rail}: every pair slow or failed ({listed}): {ends}")
        elif len(bad_runs) == len(runs):
            problems[n].append(f"rail {rail}: every pair slow or failed ({listed}): the "
                               "rail's switch, or a limit it cannot meet")
        elif n in at_fault:
            problems[n].append(f"rail {rail}: {n} {hca} is at fault, every pair with it "
                               f"slow or failed ({listed})")
        else:
            links = [r for r in own_bad if not set(r.nodes) & (at_fault - {n})]
            if links:
                problems[n].append(f"rail {rail}: bad link "
                                   f"{'; '.join(_rail_said(n, r) for r in links)}, both ends "
                                   "named")
