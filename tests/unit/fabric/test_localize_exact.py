"""Each of the fabric placement's answers whole (`ok`, summary, values, tested), written out
by hand for small records: what an operator and the evidence JSON see, not a fragment of it
(issue 52: the survivors of mutation testing were the values and words no test read)."""

from __future__ import annotations

from gpuprov.checks.localize import NodeFinding, findings, rail_findings
from gpuprov.parsers.fabric import LATENCY, FabricRecord, GroupRun, Member, RailRun

A, B, C = "node01", "node02", "node03"


def member(node: str, problem: str | None = None) -> Member:
    return Member(node, f"198.18.0.{node[-1]}", "eth0", "DOWN" if problem else "UP",
                  not problem, problem)


def group(nodes, peak, ok=True, error=None) -> GroupRun:
    return GroupRun(tuple(nodes), ok, "gloo", len(nodes), ({"busbw_gbps": peak},) if ok else (),
                    peak, 5.0, error)


def record(members, group_run, pairs=(), floor=0.08, rails=()) -> FabricRecord:
    return FabricRecord("v1", floor, "the site's floor", list(members), group_run, list(pairs),
                        rails=list(rails))


def pair_view(run: GroupRun, bad: bool) -> dict:
    return {"nodes": list(run.nodes), "ok": run.ok, "peak_busbw_gbps": run.peak_busbw_gbps,
            "error": run.error, "bad": bad}


def test_a_member_with_a_problem_and_the_one_left_without_a_peer():
    found = findings(record([member(A), member(B, "fabric interface eth0 is DOWN")], None))
    assert found == {
        B: NodeFinding(False, "fabric interface eth0 is DOWN; not tested with its peers",
                       {"floor_gbps": 0.08, "floor_source": "the site's floor",
                        "interface": "eth0", "address": "198.18.0.2", "link_state": "DOWN"}),
        A: NodeFinding(True, "no peer left to test the fabric against",
                       {"floor_gbps": 0.08, "floor_source": "the site's floor", "group": None,
                        "group_sizes": []}, tested=False)}


def test_a_group_run_with_a_single_member_left_is_no_test_either():
    lone = group((A,), 0.5)
    found = findings(record([member(A)], lone))
    assert found[A] == NodeFinding(True, "no peer left to test the fabric against", {
        "floor_gbps": 0.08, "floor_source": "the site's floor",
        "group": {"nodes": [A], "ok": True, "peak_busbw_gbps": 0.5, "error": None},
        "group_sizes": [{"busbw_gbps": 0.5}]}, tested=False)


def test_a_group_exactly_at_its_floor_passes_and_one_without_a_figure_does_not():
    at_floor = findings(record([member(A), member(B)], group((A, B), 0.08)))
    assert at_floor[A].ok and at_floor[A].summary == (
        "all-reduce over 2 nodes (gloo): peak 0.08 GB/s bus bandwidth, floor 0.08")
    no_figure = findings(record([member(A), member(B)], group((A, B), None)))
    assert [f.ok for f in no_figure.values()] == [False, False]
    assert no_figure[A].summary == ("the group of 2 failed (peak no result below the floor "
                                    "0.08); no pairwise runs to tell which node is at fault")
    assert no_figure[A].values["group"]["peak_busbw_gbps"] is None


def test_a_node_at_fault_a_good_peer_and_the_values_every_node_carries():
    pairs = [group((A, B), 0.5), group((A, C), 0.02), group((B, C), 0.02)]
    found = findings(record([member(A), member(B), member(C)], group((A, B, C), 0.02), pairs))
    values = {"floor_gbps": 0.08, "floor_source": "the site's floor",
              "group": {"nodes": [A, B, C], "ok": True, "peak_busbw_gbps": 0.02, "error": None},
              "group_sizes": [{"busbw_gbps": 0.02}],
              "pairs": [pair_view(pairs[0], False), pair_view(pairs[1], True),
                        pair_view(pairs[2], True)],
              "best_pair_busbw_gbps": 0.5}
    assert found == {
        A: NodeFinding(True, f"its only bad pairs are with a node at fault ({C}: 0.02 GB/s)",
                       values),
        B: NodeFinding(True, f"its only bad pairs are with a node at fault ({C}: 0.02 GB/s)",
                       values),
        C: NodeFinding(False, f"{C} is at fault: every pair with it is slow or failed ({A}: "
                              f"0.02 GB/s, {B}: 0.02 GB/s; floor 0.08 GB/s, best pair 0.5 GB/s)",
                       values)}


def test_a_bad_link_without_a_floor_and_a_node_whose_pairs_were_all_good():
    pairs = [group((A, B), 0.01), group((A, C), 0.5), group((B, C), 0.5)]
    found = findings(record([member(A), member(B), member(C)],
                            group((A, B, C), None, ok=False, error="rank 1 timed out"), pairs,
                            floor=None))
    assert found[A] == NodeFinding(
        False, f"bad link: {B}: 0.01 GB/s (best pair 0.5 GB/s); both ends named",
        found[A].values)
    assert found[C] == NodeFinding(
        True, f"the group was slow or failed (rank 1 timed out); every pair with {C} was good "
              f"({A}: 0.5 GB/s, {B}: 0.5 GB/s)", found[A].values)
    assert found[A].values["floor_gbps"] is None and found[A].values["group_sizes"] == []


def test_every_pair_failed_is_fabric_wide_with_no_best_pair():
    pairs = [group((A, B), None, ok=False, error="killed"),
             # a run that failed after it measured: its figure is no best pair
             GroupRun((A, C), False, "gloo", 2, (), 0.9, 5.0, "rank 1 died"),
             group((B, C), None, ok=False, error="killed")]
    found = findings(record([member(A), member(B), member(C)],
                            group((A, B, C), None, ok=False, error="timed out"), pairs))
    assert found[A] == NodeFinding(
        False, f"every pair is slow or failed ({B}: failed, {C}: failed): a fabric-wide fault "
               "(switch, or a floor this fabric cannot meet)", found[A].values, wide=True)
    assert found[A].values["best_pair_busbw_gbps"] is None
    assert [p["bad"] for p in found[A].values["pairs"]] == [True, True, True]


def test_half_the_best_pair_is_not_slow_and_a_pair_without_a_figure_is():
    pairs = [group((A, B), 0.5), group((A, C), 0.25), group((B, C), None)]
    found = findings(record([member(A), member(B), member(C)],
                            group((A, B, C), None, ok=False, error="timed out"), pairs,
                            floor=0.01))
    assert [p["bad"] for p in found[A].values["pairs"]] == [False, False, True]
    assert not found[B].ok and found[B].summary.startswith(f"bad link: {C}: no result")


def rail(nodes, gbps=None, ok=True, floor=380.0, error=None, test="ib_write_bw", usec=None,
         ceiling=None) -> RailRun:
    return RailRun("mlx5_0", tuple(nodes), ok, gbps, floor, error, 1.0, test, usec, ceiling)


def test_rail_findings_whole_for_a_member_down_and_a_healthy_pair():
    runs = [rail((A, A), 390.0), rail((B, B), 390.0), rail((A, B), 380.0)]
    found = rail_findings(record([member(A), member(B), member(C, "unreachable over SSH")],
                                 None, rails=runs))
    view = [{"nodes": list(r.nodes), "loopback": r.loopback, "ok": True,
             "average_gbps": r.average_gbps, "floor_gbps": 380.0, "error": None, "bad": False}
            for r in runs]
    values = {"rails": {"mlx5_0": view}}
    assert found == {
        A: NodeFinding(True, "1 rail(s) at or above their floors alone (loopback) and with "
                             "every peer", values),
        B: NodeFinding(True, "1 rail(s) at or above their floors alone (loopback) and with "
                             "every peer", values),
        C: NodeFinding(False, "unreachable over SSH; not tested on its rails", values)}


def test_rail_latency_at_its_ceiling_passes_above_fails_and_words_every_limit():
    runs = [rail((A, B), test=LATENCY, usec=2.5, ceiling=2.5, floor=None),
            rail((B, A), test=LATENCY, usec=2.6, ceiling=2.5, floor=None),
            rail((A, C), test=LATENCY, usec=None, ceiling=None, floor=None, ok=False,
                 error="ib_write_lat exited 1")]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    view = found[A].values["rails"]["mlx5_0 (ib_write_lat)"]
    assert [v["bad"] for v in view] == [False, True, True]
    assert view[0] == {"nodes": [A, B], "loopback": False, "ok": True, "latency_usec": 2.5,
                       "ceiling_usec": 2.5, "error": None, "bad": False}
    assert "with node01: 2.6 µs, ceiling 2.5" in found[B].summary
    assert f"with {A}: failed: ib_write_lat exited 1" in found[C].summary
    assert ", ceiling" not in found[C].summary.split(f"with {A}: failed")[1]


def test_rail_bandwidth_at_the_floor_passes_and_no_figure_fails_wording_no_floor():
    runs = [rail((A, B), 380.0), rail((A, C), None, floor=None), rail((B, C), 390.0)]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    assert [v["bad"] for v in found[A].values["rails"]["mlx5_0"]] == [False, False, False]
    runs = [rail((A, B), 380.0), rail((A, C), None), rail((B, C), 390.0)]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    assert [v["bad"] for v in found[A].values["rails"]["mlx5_0"]] == [False, True, False]
    assert found[C] == NodeFinding(False, "rail mlx5_0: bad link with node01: finished "
                                          "without a figure, floor 380, both ends named",
                                   found[C].values)
    assert found[B].ok and found[B].summary == ("1 rail(s) at or above their floors with every "
                                                "peer")


def test_a_failed_rail_run_without_a_floor_is_worded_without_one():
    """A run that failed before any floor was set for it (its ends' profiles name none):
    its error, and no floor."""
    runs = [rail((A, B), 380.0), rail((A, C), ok=False, floor=None,
                                      error="Couldn't connect to node03:18515"),
            rail((B, C), 390.0)]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    assert found[C].summary == ("rail mlx5_0: bad link with node01: failed: Couldn't connect "
                                "to node03:18515, both ends named")


D = "node04"


def test_every_pair_of_a_rail_bad_names_the_rail_or_with_two_nodes_says_so():
    runs = [rail((A, B), 100.0), rail((A, C), 100.0), rail((B, C), 100.0)]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    assert found[A].summary == (
        "rail mlx5_0: every pair slow or failed (with node02: 100 Gb/s, floor 380; with "
        "node03: 100 Gb/s, floor 380): the rail's switch, or a limit it cannot meet")
    runs = [rail((A, B), 100.0), rail((B, A), 100.0)]
    found = rail_findings(record([member(A), member(B)], None, rails=runs))
    assert found[A].summary == (
        "rail mlx5_0: every pair slow or failed (with node02: 100 Gb/s, floor 380; with "
        "node02: 100 Gb/s, floor 380): the two ends cannot be told apart")


def test_bad_links_and_an_hca_at_fault_name_the_peer_from_either_end():
    runs = [rail((A, B), 100.0), rail((A, C), 390.0), rail((A, D), 390.0),
            rail((B, C), 390.0), rail((B, D), 100.0), rail((C, D), 390.0)]
    found = rail_findings(record([member(A), member(B), member(C), member(D)], None,
                                 rails=runs))
    assert {n: (f.ok, f.summary) for n, f in found.items()} == {
        A: (False, "rail mlx5_0: bad link with node02: 100 Gb/s, floor 380, both ends named"),
        B: (False, "rail mlx5_0: bad link with node01: 100 Gb/s, floor 380; with node04: "
                   "100 Gb/s, floor 380, both ends named"),
        C: (True, "1 rail(s) at or above their floors with every peer"),
        D: (False, "rail mlx5_0: bad link with node02: 100 Gb/s, floor 380, both ends named")}
    runs = [rail((A, B), 100.0), rail((A, C), 100.0), rail((B, C), 390.0)]
    found = rail_findings(record([member(A), member(B), member(C)], None, rails=runs))
    assert found[A].summary == (
        "rail mlx5_0: node01 mlx5_0 is at fault, every pair with it slow or failed (with "
        "node02: 100 Gb/s, floor 380; with node03: 100 Gb/s, floor 380)")
    runs = [rail((A, A), 100.0), rail((B, B), 390.0), rail((A, B), 100.0)]
    found = rail_findings(record([member(A), member(B)], None, rails=runs))
    assert (found[A].ok, found[A].summary) == (
        False, "rail mlx5_0: node01 mlx5_0 is at fault, alone (loopback): 100 Gb/s, floor 380")


def test_a_node_at_fault_first_in_its_pairs_names_its_peers():
    pairs = [group((A, B), 0.02), group((A, C), 0.02), group((B, C), 0.5)]
    found = findings(record([member(A), member(B), member(C)], group((A, B, C), 0.02), pairs))
    assert {n: f.summary for n, f in found.items()} == {
        A: "node01 is at fault: every pair with it is slow or failed (node02: 0.02 GB/s, "
           "node03: 0.02 GB/s; floor 0.08 GB/s, best pair 0.5 GB/s)",
        B: "its only bad pairs are with a node at fault (node01: 0.02 GB/s)",
        C: "its only bad pairs are with a node at fault (node01: 0.02 GB/s)"}
    good = findings(record([member(A), member(B), member(C)],
                           group((A, B, C), None, ok=False, error="timed out"),
                           [group((A, B), 0.5), group((A, C), 0.5), group((B, C), 0.02)]))
    assert good[A] == NodeFinding(True, "the group was slow or failed (timed out); every pair "
                                        "with node01 was good (node02: 0.5 GB/s, node03: 0.5 "
                                        "GB/s)", good[A].values)
