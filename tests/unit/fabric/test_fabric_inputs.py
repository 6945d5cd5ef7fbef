"""The fabric record as evidence, the floor's precedence, members' places, the `fabric`
check over an evidence directory, and the CLI's bad input (exit 2, nothing contacted)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from gpuprov.checks.run import judge
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.inventory import Inventory
from gpuprov.model import Status
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric import FABRIC, FabricRecord, Member, RailRun, parse_fabric_record
from gpuprov.profiles import load_profile
from gpuprov.racks import RackSpec, rack_profile
from gpuprov.validation.fabric_rack import (
    check_members,
    fabric_groups,
    fabric_place,
    floor_for,
    nccl_floor,
)
from tests.conftest import gpuprov
from tests.evidence_builder import healthy_h100
from tests.unit.fabric.test_localize import NODES, pairs, record, run


def test_a_record_reads_back_as_written():
    slow = {frozenset(("node02", "node01")), frozenset(("node02", "node03"))}
    written = dataclasses.replace(record(NODES, run(NODES, 0.02), pairs(NODES, slow)),
                                  node="node02")
    assert parse_fabric_record(written.as_json(), "fabric.json") == written
    of_a_rack = dataclasses.replace(written, rack="rack-a")
    assert parse_fabric_record(of_a_rack.as_json(), "fabric.json").rack == "rack-a"


@pytest.mark.parametrize("text", ["", "{}", '{"run_id": "v1", "floor_source": "x", '
                                              '"members": [{"node": "a"}]}', "not json"])
def test_a_malformed_record_names_its_file(text):
    with pytest.raises(ParseError, match=r"^/ev/fabric.json: not a gpuprov fabric record"):
        parse_fabric_record(text, "/ev/fabric.json")


PROFILES = {"node01": load_profile("h100-sxm-8"), "node02": load_profile("a100-sxm-8"),
            "node03": load_profile("l40s-pcie-4")}


def test_the_floor_comes_from_the_option_then_the_inventory_then_the_lowest_profile():
    hosts = list(PROFILES)
    site = {h: {"gpuprov_fabric_busbw_min_gbps": "0.08"} for h in hosts}
    bare = {h: {} for h in hosts}
    assert floor_for(hosts, site, PROFILES, 5.0) == (5.0, "--fabric-floor")
    assert floor_for(hosts, site, PROFILES, None) == (
        0.08, "inventory gpuprov_fabric_busbw_min_gbps")
    floor, source = floor_for(hosts, bare, PROFILES, None)
    assert floor == 160 and source.startswith("profile a100-sxm-8 (the lowest of the members')")
    assert "0.8 x line rate" in source
    assert floor_for(["node03"], bare, PROFILES, None) == (
        None, "no floor: no member's profile sets fabric.busbw_min_gbps")


def test_each_rack_s_trays_are_a_group_held_to_the_rack_s_floor_the_rest_another():
    """validate --fabric over two NVL72 racks' trays and HGX nodes: three all-reduces, each
    rack's over its own NVLink domain at its rack profile's floor (a site's inventory value
    first), the HGX nodes' over the network at their profiles'."""
    gb200, gb300 = rack_profile("gb200-nvl72"), rack_profile("gb300-nvl72")
    racks = {"rack-a": RackSpec("rack-a", gb200, "domain", ("a1", "a2", "a3")),
             "rack-b": RackSpec("rack-b", gb300, "domain", ("b1", "b2"))}
    hosts = ["node01", "a1", "b1", "node02", "a2", "b2", "a3"]
    profiles = {**PROFILES, **dict.fromkeys(("a1", "a2", "a3"), load_profile("gb200-nvl72-tray")),
                **dict.fromkeys(("b1", "b2"), load_profile("gb300-nvl72-tray"))}
    variables = {h: {} for h in hosts}
    groups = fabric_groups(hosts, variables, profiles, None, racks)
    assert [(g.rack.name if g.rack else None, g.hosts) for g in groups] == [
        ("rack-a", ("a1", "a2", "a3")), ("rack-b", ("b1", "b2")), (None, ("node01", "node02"))]
    assert groups[0].floor[0] == 648 and groups[0].floor[1].startswith(
        "rack profile gb200-nvl72: 0.8 x 811 GB/s")
    assert groups[1].floor[0] == 749 and nccl_floor(groups[1].floor[1])
    assert groups[2].floor[0] == 160 and nccl_floor(groups[2].floor[1])
    site = {**variables, **{t: {"gpuprov_fabric_busbw_min_gbps": 700} for t in ("b1", "b2")}}
    assert fabric_groups(hosts, site, profiles, None, racks)[1].floor == (
        700, "inventory gpuprov_fabric_busbw_min_gbps")
    assert {g.floor for g in fabric_groups(hosts, variables, profiles, 5.0, racks)} == {
        (5.0, "--fabric-floor")}
    assert not nccl_floor("--fabric-floor")


def test_members_disagreeing_on_the_site_floor_is_an_input_error():
    variables = {"node01": {"gpuprov_fabric_busbw_min_gbps": 1},
                 "node02": {"gpuprov_fabric_busbw_min_gbps": 2}}
    with pytest.raises(InputError, match="differs between the members: node01=1, node02=2"):
        floor_for(["node01", "node02"], variables, PROFILES, None)


@pytest.mark.parametrize("variables, message", [
    ({}, "host n1: no gpuprov_fabric_address in the inventory"),
    ({"gpuprov_fabric_address": "198.18.0.11"}, "host n1: no gpuprov_fabric_interface"),
    ({"gpuprov_fabric_address": "node01-ib", "gpuprov_fabric_interface": "ib0"},
     "host n1: gpuprov_fabric_address 'node01-ib' is not an IP address"),
])
def test_a_member_without_a_place_on_the_fabric_is_named(variables, message):
    with pytest.raises(InputError, match=message):
        fabric_place("n1", variables)


def test_members_sharing_an_address_or_too_few_are_refused(tmp_path):
    ini = tmp_path / "hosts.ini"
    ini.write_text("[rack]\nn1 gpuprov_fabric_address=198.18.0.11 gpuprov_fabric_interface=ib0\n"
                   "n2 gpuprov_fabric_address=198.18.0.11 gpuprov_fabric_interface=ib0\n")
    inventory = Inventory(ini)
    with pytest.raises(InputError, match=r"hosts n1 and n2 share fabric address 198\.18\.0\.11"):
        check_members(inventory, ["n1", "n2"])
    with pytest.raises(InputError, match="needs at least 2 nodes, got 1: n1"):
        check_members(inventory, ["n1"])


def _judge_fabric(tmp_path, written: FabricRecord | None):
    node = healthy_h100(tmp_path / "node02")
    if written is not None:
        (node / FABRIC.file).write_text(written.as_json())
    [result] = judge(Evidence(node), load_profile("h100-sxm-8"), None, only=("fabric",)).checks
    return result


def test_the_check_fails_the_node_at_fault_from_its_own_directory(tmp_path):
    slow = {frozenset(("node02", "node01")), frozenset(("node02", "node03"))}
    written = dataclasses.replace(record(NODES, run(NODES, 0.02), pairs(NODES, slow)),
                                  node="node02")
    result = _judge_fabric(tmp_path, written)
    assert result.status == Status.FAIL and str(result.action) == "reseat-or-inspect"
    assert result.summary.startswith("node02 is at fault")
    assert result.values["members"] == list(NODES) and result.values["run_id"] == "v1"
    healthy = _judge_fabric(tmp_path / "b", dataclasses.replace(written, node="node01"))
    assert healthy.status == Status.PASS


def test_the_check_skips_without_a_fabric_run_and_warns_when_untested(tmp_path):
    skipped = _judge_fabric(tmp_path, None)
    assert skipped.status == Status.SKIP and "fabric stage not run" in skipped.summary
    alone = dataclasses.replace(record(("node01", "node02"), None, down="node01"), node="node02")
    assert _judge_fabric(tmp_path / "b", alone).status == Status.WARN
    stranger = dataclasses.replace(alone, node="node09")
    result = _judge_fabric(tmp_path / "c", stranger)
    assert result.status == Status.FAIL and "node09 is not a member of fabric run v1" in \
        result.summary


@pytest.mark.parametrize("command, args, message", [
    ("fabric", ["node01"], "the fabric test needs at least 2 nodes, got 1: node01"),
    ("fabric", ["--all"], "host node02: no gpuprov_fabric_address in the inventory"),
    ("validate", ["--all", "--fabric"], "host node02: no gpuprov_fabric_address in the "
                                         "inventory"),
    ("fabric", ["--all", "--fabric-floor", "-1"], "--fabric-floor"),
    ("fabric", ["--all", "--rails", "--network-only"],
     "--network-only applies to the all-reduce, not to --rails"),
])
def test_bad_fabric_input_is_one_line_exit_2_and_no_ledger(tmp_path, command, args, message):
    inventory = tmp_path / "rack.ini"
    inventory.write_text("[rack]\nnode01 gpuprov_profile=h100-sxm-8 gpuprov_fabric_address="
                         "198.18.0.11 gpuprov_fabric_interface=ib0\nnode02 "
                         "gpuprov_profile=h100-sxm-8\n")
    state = tmp_path / "state"
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state), "GPUPROV_INVENTORY": str(inventory)}
    result = gpuprov(command, *args, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (state / "ledger.sqlite3").exists()


def test_gpuprov_fabric_over_a_rack_s_trays_and_another_node_is_refused(tmp_path):
    """An NVL72 rack's all-reduce is its trays' alone: with a node outside the rack the run
    measures neither; one line naming each group, exit 2, no ledger."""
    inventory = tmp_path / "rack.ini"
    inventory.write_text(
        "[rack_a]\n" + "".join(f"t{i} gpuprov_fabric_address=198.18.0.{i} "
                               "gpuprov_fabric_interface=ib0\n" for i in (1, 2))
        + "[rack_a:vars]\ngpuprov_rack=rack-a\ngpuprov_rack_profile=gb200-nvl72\n"
        "gpuprov_profile=gb200-nvl72-tray\n[hgx]\nnode01 gpuprov_profile=h100-sxm-8 "
        "gpuprov_fabric_address=198.18.0.11 gpuprov_fabric_interface=ib0\n")
    state = tmp_path / "state"
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state), "GPUPROV_INVENTORY": str(inventory)}
    result = gpuprov("fabric", "t1", "t2", "node01", env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert ("the all-reduce of an NVL72 rack runs over its own trays: rack rack-a: t1, t2; "
            "other: node01: test each apart (validate --fabric does)") in line
    assert not (state / "ledger.sqlite3").exists()


def test_each_rail_run_lasts_perftest_s_default_or_the_members_one_site_value():
    from gpuprov.validation.fabric_rack import rail_settings

    hosts = ["node01", "node02"]
    rails = {"gpuprov_fabric_rails": ["mlx5_0"]}
    default = rail_settings("v1", hosts, {h: dict(rails) for h in hosts}, PROFILES)
    assert default.seconds == 5       # perftest's DEF_DURATION
    site = {h: {**rails, "gpuprov_fabric_ib_write_bw_seconds": 1} for h in hosts}
    assert rail_settings("v1", hosts, site, PROFILES).seconds == 1
    site["node02"]["gpuprov_fabric_ib_write_bw_seconds"] = 10
    with pytest.raises(InputError, match=r"^gpuprov_fabric_ib_write_bw_seconds differs between "
                                         r"the members: node01=1, node02=10$"):
        rail_settings("v1", hosts, site, PROFILES)
    for bad in ("5", 0, True, 2.5):
        site["node02"]["gpuprov_fabric_ib_write_bw_seconds"] = bad
        with pytest.raises(InputError, match=r"^host node02: gpuprov_fabric_ib_write_bw_seconds "
                                             r"must be a whole number of seconds, 1 or more; "
                                             rf"got {bad!r}$"):
            rail_settings("v1", hosts, site, PROFILES)


def _judge_rails(tmp_path, written: FabricRecord):
    node = healthy_h100(tmp_path / "node01")
    (node / FABRIC.file).write_text(written.as_json())
    [result] = judge(Evidence(node), load_profile("h100-sxm-8"), None,
                     only=("fabric_rails",)).checks
    return result


def test_a_fabric_run_that_measured_nothing_never_passes(tmp_path):
    """Issue 52: a one-node group, an all-reduce whose peak is NaN, a rail run with no
    figure, a rail of the profile's never tested: each fails (fix-setup), naming it."""
    lone = dataclasses.replace(record(("node02",), run(("node02",), 400.0)), node="node02")
    result = _judge_fabric(tmp_path / "a", lone)
    assert (result.status, str(result.action)) == (Status.FAIL, "fix-setup")
    assert "has 1 member(s): a one-node group measures no fabric" in result.summary
    nan = dataclasses.replace(record(NODES, run(NODES, float("nan"))), node="node02")
    result = _judge_fabric(tmp_path / "b", nan)
    assert result.status == Status.FAIL and "no bus bandwidth figure (nan)" in result.summary
    rails = [RailRun(f"mlx5_{k}", ("node01", "node01"), True, 390.0, 380.0) for k in range(8)]
    members = [Member(n, f"198.18.0.{i}", "eth0") for i, n in enumerate(("node01", "node02"), 11)]
    whole = FabricRecord("r", None, "rails", members, rails=rails, node="node01")
    assert _judge_rails(tmp_path / "c", whole).status == Status.PASS
    seven = dataclasses.replace(whole, rails=rails[:7])
    result = _judge_rails(tmp_path / "d", seven)
    assert result.status == Status.FAIL
    assert "node01: 7 of the profile's 8 rails tested" in result.summary
    blank = dataclasses.replace(whole, rails=[dataclasses.replace(rails[0], average_gbps=None),
                                              *rails[1:]])
    result = _judge_rails(tmp_path / "e", blank)
    assert result.status == Status.FAIL
    assert "ib_write_bw on mlx5_0 (node01 -> node01) finished with no figure (None)" in \
        result.summary
