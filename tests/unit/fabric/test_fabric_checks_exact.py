"""The fabric checks as a node's evidence carries them, whole: status, action, summary and
the values written for the record (issue 52: what mutation testing found no test reading)."""

from __future__ import annotations

import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.fabric import FABRIC, FabricRecord, GroupRun, Member, RailRun
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import healthy_h100

A, B, C = "node01", "node02", "node03"
H100 = load_profile("h100-sxm-8")


def _judge(tmp_path, written: FabricRecord, check: str, profile=H100):
    node = healthy_h100(tmp_path / written.node)
    (node / FABRIC.file).write_text(written.as_json())
    [result] = judge(Evidence(node), profile, None, only=(check,)).checks
    return result


def _members(*names):
    return [Member(n, f"198.18.0.{n[-1]}", "eth0", "UP", True) for n in names]


def _group(nodes, peak):
    return GroupRun(tuple(nodes), True, "gloo", len(nodes), ({"busbw_gbps": peak},), peak, 5.0)


def test_a_healthy_group_passes_with_its_finding_s_values_and_the_run_s(tmp_path):
    written = FabricRecord("f1", 0.08, "the site's floor", _members(A, B, C),
                           _group((A, B, C), 0.3), node=B)
    result = _judge(tmp_path, written, "fabric")
    assert (result.status, str(result.action)) == ("pass", "none")
    assert result.summary == ("all-reduce over 3 nodes (gloo): peak 0.3 GB/s bus bandwidth, "
                              "floor 0.08")
    assert result.values == {
        "floor_gbps": 0.08, "floor_source": "the site's floor",
        "group": {"nodes": [A, B, C], "ok": True, "peak_busbw_gbps": 0.3, "error": None},
        "group_sizes": [{"busbw_gbps": 0.3}], "run_id": "f1", "members": [A, B, C]}


def test_a_node_left_without_a_peer_warns_and_one_outside_the_run_fails(tmp_path):
    down = Member(B, "198.18.0.2", "eth0", "DOWN", True, "fabric interface eth0 is DOWN")
    written = FabricRecord("f2", 0.08, "the site's floor", [*_members(A), down], None, node=A)
    result = _judge(tmp_path / "a", written, "fabric")
    assert (result.status, str(result.action), result.summary) == (
        "warn", "none", "no peer left to test the fabric against")
    assert result.values["members"] == [A, B] and result.values["run_id"] == "f2"
    stranger = FabricRecord("f3", 0.08, "the site's floor", _members(A, B),
                            _group((A, B), 0.3), node=C)
    result = _judge(tmp_path / "b", stranger, "fabric")
    assert (result.status, result.summary, result.values) == (
        "fail", f"{C} is not a member of fabric run f3", {"members": [A, B]})


def test_a_fault_every_pair_shows_charges_no_node_and_a_rack_s_names_the_rack(tmp_path):
    """Below the floor everywhere: the switch's (or the floor's), never a reseat of every
    node; an NVL72 rack's trays (their own group) name the rack."""
    slow = [_group(pair, 0.02) for pair in ((A, B), (A, C), (B, C))]
    written = FabricRecord("f4", 0.08, "the site's floor", _members(A, B, C),
                           _group((A, B, C), 0.02), slow, node=B)
    result = _judge(tmp_path / "hgx", written, "fabric")
    assert (result.status, str(result.action)) == ("fail", "none")
    assert "a fabric-wide fault (switch, or a floor this fabric cannot meet)" in result.summary
    tray = load_profile("gb200-nvl72-tray")
    result = _judge(tmp_path / "rack", FabricRecord(**{**written.__dict__, "rack": "rack-a"}),
                    "fabric", tray)
    assert (result.status, str(result.action)) == ("fail", "none")
    assert result.summary.startswith("rack rack-a: every pair of its trays is slow or failed")
    one = [_group((A, B), 0.3), _group((A, C), 0.02), _group((B, C), 0.02)]
    at_fault = FabricRecord("f5", 0.08, "the site's floor", _members(A, B, C),
                            _group((A, B, C), 0.02), one, node=C, rack="rack-a")
    result = _judge(tmp_path / "tray", at_fault, "fabric", tray)
    assert (result.status, str(result.action)) == ("fail", "reseat-or-inspect")
    assert result.summary.startswith(f"{C} is at fault")


def _rails(count, nodes=(A, A), gbps=390.0):
    return [RailRun(f"mlx5_{k}", nodes, True, gbps, 380.0) for k in range(count)]


def test_the_rails_untested_are_named_and_a_profile_without_nics_wants_none(tmp_path):
    written = FabricRecord("r1", None, "rails", _members(A, B), rails=[], node=A)
    written.rails = [RailRun("mlx5_0", (A, B), True, None, None, test="ib_write_lat",
                             latency_usec=None)]
    result = _judge(tmp_path / "a", written, "fabric_rails")
    assert result.status == "fail" and str(result.action) == "fix-setup"
    assert result.summary == (
        "ib_write_lat on mlx5_0 (node01 -> node02) finished with no figure (None); node01: 1 "
        "of the profile's 8 rails tested (mlx5_0)")
    none = FabricRecord("r2", None, "rails", _members(A, B),
                        rails=[RailRun("mlx5_0", (B, B), True, 390.0, 380.0)], node=A)
    result = _judge(tmp_path / "b", none, "fabric_rails")
    assert result.summary.endswith("node01: 0 of the profile's 8 rails tested (none)")
    # a profile without NICs asks for no rail: the one run is judged on its own
    data = {k: v for k, v in H100.data.items() if k != "nics"}
    bare = parse_profile(yaml.safe_dump(data), str(tmp_path / "bare.yml"))
    whole = FabricRecord("r3", None, "rails", _members(A, B), rails=_rails(1), node=A)
    result = _judge(tmp_path / "c", whole, "fabric_rails", bare)
    assert (result.status, result.summary) == (
        "pass", "1 rail(s) at or above their floors alone (loopback) and with every peer")
    assert result.values == {
        "rails": {"mlx5_0": [{"nodes": [A, A], "loopback": True, "ok": True,
                              "average_gbps": 390.0, "floor_gbps": 380.0, "error": None,
                              "bad": False}]},
        "run_id": "r3", "members": [A, B]}


def test_one_rail_slow_and_seven_unmeasured_names_the_slow_rail_and_its_action(tmp_path):
    """Issue 65: coverage no longer hides what was measured. One rail of eight tested, below
    its floor alone: the slow HCA is named with its hardware action, and the unmeasured
    rails beside it; the same rail at its floor leaves only the gap (fix-setup)."""
    slow = FabricRecord("r4", None, "rails", _members(A, B), node=A,
                        rails=[RailRun("mlx5_3", (A, A), True, 120.0, 380.0)])
    result = _judge(tmp_path / "a", slow, "fabric_rails")
    assert (result.status, str(result.action)) == ("fail", "reseat-or-inspect")
    assert result.summary.startswith("rail mlx5_3: node01 mlx5_3 is at fault"), result.summary
    assert result.summary.endswith("; also unmeasured: node01: 1 of the profile's 8 rails "
                                   "tested (mlx5_3)"), result.summary
    assert result.values["unmeasured"] == ["node01: 1 of the profile's 8 rails tested (mlx5_3)"]
    fine = FabricRecord("r5", None, "rails", _members(A, B), node=A,
                        rails=[RailRun("mlx5_3", (A, A), True, 390.0, 380.0)])
    result = _judge(tmp_path / "b", fine, "fabric_rails")
    assert (result.status, str(result.action), result.summary) == (
        "fail", "fix-setup", "node01: 1 of the profile's 8 rails tested (mlx5_3)")


def test_a_judgement_as_the_report_carries_it(tmp_path):
    """`Judgement.as_dict`: the node, its profile, the verdict's word and each check's own."""
    node = healthy_h100(tmp_path / "node07")
    judged = judge(Evidence(node), H100, None, only=("gpu_inventory",))
    [check] = judged.checks
    assert judged.as_dict() == {"node": "node07", "profile": "h100-sxm-8",
                                "verdict": "accepted", "checks": [check.as_dict()]}
