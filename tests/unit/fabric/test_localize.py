"""Which node or link the fabric test blames, on records shaped like the lab's real runs
(healthy gloo pairs about 0.5 GB/s, a shaped link about 0.024 GB/s)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from gpuprov.checks.localize import findings, pair_rounds
from gpuprov.parsers.fabric import FabricRecord, GroupRun, Member

FLOOR = 0.08


def members(*names: str, down: str | None = None) -> list[Member]:
    return [Member(n, f"198.18.0.{11 + i}", "eth0", "DOWN" if n == down else "UP", n != down,
                   "fabric interface eth0 is DOWN" if n == down else None)
            for i, n in enumerate(names)]


def run(nodes, peak: float | None, ok: bool = True, error: str | None = None) -> GroupRun:
    sizes = ({"bytes": 16777216, "iterations": 9, "seconds": 0.07, "busbw_gbps": peak},
             ) if ok else ()
    return GroupRun(tuple(nodes), ok, "gloo", len(nodes), sizes, peak if ok else None, 5.0,
                    error)


def pairs(names, slow: set[frozenset], failed: set[frozenset] = frozenset()) -> list[GroupRun]:
    out = []
    for a, b in itertools.combinations(names, 2):
        key = frozenset((a, b))
        if key in failed:
            out.append(run((a, b), None, ok=False, error="torchrun killed after 150s"))
        else:
            out.append(run((a, b), 0.024 if key in slow else 0.55))
    return out


def record(names, group: GroupRun | None, pair_runs=(), floor=FLOOR, down=None):
    return FabricRecord("v1", floor, "test", members(*names, down=down), group,
                        list(pair_runs))


NODES = ("node01", "node02", "node03")


def test_a_network_only_run_says_so_and_that_gloo_has_no_nvlink_to_turn_off():
    import dataclasses
    nccl = dataclasses.replace(run(NODES, 150.0), backend="nccl")
    said = findings(dataclasses.replace(record(NODES, nccl, floor=100), network_only=True))
    assert said["node01"].summary == ("all-reduce over 3 nodes (nccl, network only: P2P and "
                                      "SHM off): peak 150 GB/s bus bandwidth, floor 100")
    lab = findings(dataclasses.replace(record(NODES, run(NODES, 0.33)), network_only=True))
    assert "(gloo; network only asked: NCCL_P2P_DISABLE and NCCL_SHM_DISABLE act on NCCL)" \
        in lab["node01"].summary


def test_a_healthy_group_passes_everyone_with_its_peak_and_floor():
    found = findings(record(NODES, run(NODES, 0.33)))
    assert all(f.ok and f.tested for f in found.values())
    assert found["node02"].summary == ("all-reduce over 3 nodes (gloo): peak 0.33 GB/s bus "
                                       "bandwidth, floor 0.08")
    assert found["node02"].values["group"]["peak_busbw_gbps"] == 0.33


def test_a_group_below_the_floor_is_resolved_by_pairs_to_the_slow_node():
    slow = {frozenset(("node02", "node01")), frozenset(("node02", "node03"))}
    found = findings(record(NODES, run(NODES, 0.0239), pairs(NODES, slow)))
    assert not found["node02"].ok
    assert found["node02"].summary.startswith("node02 is at fault: every pair with it is slow")
    assert "node01: 0.024 GB/s" in found["node02"].summary
    assert found["node01"].ok and found["node03"].ok
    assert "with a node at fault" in found["node01"].summary
    assert [p["bad"] for p in found["node02"].values["pairs"]] == [True, False, True]


def test_one_bad_link_among_four_names_both_ends_and_clears_the_others():
    names = ("node01", "node02", "node03", "node04")
    found = findings(record(names, run(names, 0.03),
                            pairs(names, {frozenset(("node01", "node02"))})))
    assert [n for n, f in found.items() if not f.ok] == ["node01", "node02"]
    assert found["node01"].summary.startswith("bad link: node02: 0.024 GB/s")
    assert found["node03"].ok and "every pair with node03 was good" in found["node03"].summary


def test_a_pair_far_below_the_best_is_bad_even_above_a_lenient_floor():
    runs = [run(p.nodes, 0.2) if "node03" in p.nodes else p   # 0.2 < half of 0.55
            for p in pairs(NODES, set())]
    found = findings(record(NODES, run(NODES, None, ok=False, error="timed out"), runs,
                            floor=0.01))
    assert not found["node03"].ok and "node03 is at fault" in found["node03"].summary
    assert "floor 0.01 GB/s, best pair 0.55 GB/s" in found["node03"].summary
    assert found["node01"].ok and found["node02"].ok


def test_every_pair_bad_is_a_fabric_wide_fault_on_every_node():
    every = {frozenset(p) for p in itertools.combinations(NODES, 2)}
    found = findings(record(NODES, run(NODES, 0.02), pairs(NODES, every)))
    assert not any(f.ok for f in found.values())
    assert all("fabric-wide fault" in f.summary and f.wide for f in found.values())


def test_every_pair_of_a_rack_s_trays_bad_names_the_rack_and_one_slow_tray_names_it():
    """An NVL72 rack's trays, a group of their own (FabricRecord.rack): a fault every pair
    shows is the rack's NVLink fabric, named by the rack; a tray in only bad pairs, itself."""
    every = {frozenset(p) for p in itertools.combinations(NODES, 2)}
    rack = dataclasses.replace(record(NODES, run(NODES, 0.02), pairs(NODES, every)),
                               rack="rack-a")
    found = findings(rack)
    assert all(not f.ok and f.wide and f.summary.startswith(
        "rack rack-a: every pair of its trays is slow or failed (") and f.summary.endswith(
        "): the rack's NVLink fabric (its switch trays, or a floor it cannot meet), no "
        "tray's") for f in found.values()), found
    slow = {frozenset(("node02", "node01")), frozenset(("node02", "node03"))}
    one = findings(dataclasses.replace(rack, pairs=pairs(NODES, slow)))
    assert not one["node02"].ok and not one["node02"].wide
    assert one["node02"].summary.startswith("node02 is at fault")
    assert one["node01"].ok and one["node03"].ok


def test_a_failed_pair_counts_as_bad():
    failed = {frozenset(("node01", "node03")), frozenset(("node02", "node03"))}
    found = findings(record(NODES, run(NODES, None, ok=False, error="rank 2 timed out"),
                            pairs(NODES, set(), failed)))
    assert not found["node03"].ok and "node01: failed" in found["node03"].summary


def test_a_member_whose_link_is_down_fails_alone_and_the_rest_are_judged():
    found = findings(record(NODES, run(("node01", "node02"), 0.56), down="node03"))
    assert not found["node03"].ok
    assert found["node03"].summary == ("fabric interface eth0 is DOWN; not tested with its "
                                       "peers")
    assert found["node03"].values["link_state"] == "DOWN"
    assert found["node01"].ok and found["node02"].ok


def test_two_nodes_whose_group_failed_cannot_be_told_apart():
    names = ("node01", "node02")
    found = findings(record(names, run(names, None, ok=False, error="rank 1 timed out")))
    assert not found["node01"].ok and not found["node02"].ok
    assert "no pairwise runs to tell which node" in found["node01"].summary
    assert "rank 1 timed out" in found["node01"].summary


def test_a_node_left_without_peers_is_untested_not_passed():
    found = findings(record(("node01", "node02"), None, down="node02"))
    assert found["node01"].ok and not found["node01"].tested
    assert found["node01"].summary == "no peer left to test the fabric against"


def test_no_floor_judges_a_finished_group_as_passing_and_says_so():
    found = findings(record(NODES, run(NODES, 0.3), floor=None))
    assert found["node01"].ok and found["node01"].summary.endswith("no floor set")


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8])
def test_pair_rounds_cover_every_pair_once_in_disjoint_rounds(count):
    names = [f"node{i:02d}" for i in range(1, count + 1)]
    rounds = pair_rounds(names)
    seen = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, seen)) == sorted(map(sorted, itertools.combinations(names, 2)))
    for r in rounds:
        flat = [n for p in r for n in p]
        assert len(flat) == len(set(flat))
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
