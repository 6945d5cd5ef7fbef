"""Issue 72: an NVL72 rack judged as one NVLink domain. The fabric health mask decoded
(NVIDIA/nccl#2186's `healthMask 0xaa` on a healthy GB200 NVL72), `nvidia-imex-ctl -N`
parsed from real captures, and the rack's judgement over 18 trays built from real GPU
reports (the H100 `nvidia-smi -q` capture, its fabric rows replaced by a real GB200's)."""

from dataclasses import replace
from pathlib import Path

import pytest

from gpuprov.checks.nvl_rack import TrayEvidence, judge_rack
from gpuprov.model import Action, Status, Verdict
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_health import decode_mask, from_rows
from gpuprov.parsers.imex import parse_imex_domain
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.racks import rack_profile
from gpuprov.slurm.topology_block import block_topology

FIXTURES = Path(__file__).parents[1] / "fixtures"
# a real GB200's fabric block (kubernetes-sigs/dra-driver-nvidia-gpu#626): clique 2 in
# cluster dc6e40c4-…; its Summary read Unhealthy there, a healthy one reads Healthy
GB200_UUID = "dc6e40c4-d722-4357-9ba6-5291dd461278"
OTHER_UUID = "9c6f5af3-53bf-49b5-a436-b66766c413c3"     # a GB200 of another rack (gpud#1106)
HEALTHY = {"Summary": "Healthy", "Bandwidth": "Full"}
GB200 = rack_profile("gb200-nvl72")


def _h100_gpus():
    text = (FIXTURES / "nvidia-smi-q" / "h100-sxm-x8-565.57.01-q.txt").read_text()
    return parse_smi_query(text, "h100").gpus


def _tray_gpus(clique=2, uuid=GB200_UUID, health=None, state="Completed", status="Success"):
    """Four GPUs of a tray: the real H100 report's GPUs, their fabric rows a GB200's."""
    return [replace(g, fabric_state=state, fabric_status=status, fabric_clique=clique,
                    fabric_cluster_uuid=uuid, fabric_health=from_rows(health or HEALTHY))
            for g in _h100_gpus()[:4]]


def _imex_text(addresses, down=(), state="UP"):
    """`nvidia-imex-ctl -N` for these members in the real capture's form
    (tests/fixtures/imex/): `down` members UNAVAILABLE and never connected."""
    legend = "\n".join((FIXTURES / "imex" / "gh200-570.00-ctl-N-2-nodes.txt").read_text()
                       .splitlines()[3:11])
    nodes = "\n".join(f"Node #{i:<3} - {a:<15} - {'UNAVAILABLE' if a in down else 'READY'}"
                      for i, a in enumerate(addresses))
    header = " Nodes From\\To  " + "  ".join(str(i) for i in range(len(addresses)))
    rows = "\n".join(f"{i:>8}        " + "  ".join(
        "N" if a in down or b in down else "C" for b in addresses)
        for i, a in enumerate(addresses))
    return f"{legend}\n3/25/2025 10:42:08.082\nNodes:\n{nodes}\n\n{header}\n{rows}\n" \
           f"Domain State: {state}\n"


def _rack(n=18, **changes):
    """n healthy trays; `changes`: tray -> fields of its TrayEvidence to replace."""
    addresses = [f"10.0.0.{i + 1}" for i in range(n)]
    domain = parse_imex_domain(_imex_text(addresses), "imex")
    trays = [TrayEvidence(f"tray{i + 1:02d}", addresses[i], _tray_gpus(), "570.172.08",
                          domain, "", "a" * 64, "570.172.08", "inactive") for i in range(n)]
    return [replace(t, **changes.get(t.tray, {})) for t in trays]


def _check(checks, check_id):
    return next(c for c in checks if c.id == check_id)


def test_a_health_mask_of_0xaa_is_healthy_not_four_paths_down():
    healthy = decode_mask(0xAA)         # NCCL's line on a healthy GB200 NVL72 (nccl#2186)
    assert (healthy.degraded_bandwidth, healthy.route_recovery, healthy.route_unhealthy,
            healthy.access_timeout_recovery) == (False, False, False, False)
    assert healthy.faults == [] and healthy.reported
    assert decode_mask(0x1AA).incorrect_configuration == "none"   # a newer driver's slot
    unhealthy = decode_mask(0x9A)       # the route-unhealthy slot 1 (true), the rest false
    assert unhealthy.route_unhealthy is True and unhealthy.faults == ["Route Unhealthy"]
    assert decode_mask(0x4AA).faults == ["Incorrect Configuration: no partition"]
    assert decode_mask(0x0).reported is False   # an H200's `healthMask 0x0` (DeepEP#143)
    with pytest.raises(ParseError, match="slot reads 3"):
        decode_mask(0xAB)


def test_nvidia_smi_health_rows_decode_like_the_mask():
    seen = from_rows({"Summary": "Unhealthy", "Bandwidth": "Full"})    # dra-driver#626
    assert seen.degraded_bandwidth is False and seen.faults == ["Summary: Unhealthy"]
    assert from_rows(HEALTHY).faults == []
    assert from_rows({"Summary": "Limited Capacity", "Bandwidth": "Degraded"}).faults == [
        "Bandwidth"]
    gpu = _h100_gpus()[0]           # an H100's fabric block: clique 0, a zero cluster UUID
    assert (gpu.fabric_clique, gpu.fabric_cluster_uuid) == (
        0, "00000000-0000-0000-0000-000000000000")
    assert gpu.fabric_health.reported is False     # Bandwidth N/A: not reported


def test_imex_ctl_N_parses_the_real_domains():
    two = parse_imex_domain((FIXTURES / "imex" / "gh200-570.00-ctl-N-2-nodes.txt").read_text(),
                            "two")
    assert two.state == "UP" and [(n.index, n.address, n.state) for n in two.nodes] == [
        (0, "10.136.206.47", "READY"), (1, "10.136.206.48", "READY")]
    assert two.not_connected() == [] and two.meaning("N") == "Never Connected"
    one = parse_imex_domain((FIXTURES / "imex" / "gh200-570.00-ctl-N-1-node.txt").read_text(),
                            "one")
    assert one.cells == {(0, 0): "C"}
    text = (FIXTURES / "imex" / "gh200-570.00-ctl-N-2-nodes.txt").read_text()
    with pytest.raises(ParseError, match="does not cover the 2 members"):
        parse_imex_domain(text.replace("       1        C  C\n", ""), "cut")
    with pytest.raises(ParseError, match="no `Domain State:` line"):
        parse_imex_domain(text.replace("Domain State: UP", ""), "cut")
    with pytest.raises(ParseError, match="has 1 cells for 2 members"):
        parse_imex_domain(text.replace("       1        C  C", "       1        C"), "cut")


def test_a_healthy_rack_is_accepted_tray_by_tray_and_as_a_rack():
    judged = judge_rack("rack-a", GB200, _rack())
    assert judged.verdict == Verdict.ACCEPTED
    assert {c.id: c.status for c in judged.rack_checks} == {
        "rack_fabric": Status.PASS, "imex_domain": Status.PASS, "imex_config": Status.PASS,
        "imex_version": Status.PASS, "rack_driver": Status.PASS}
    assert _check(judged.rack_checks, "imex_domain").summary == \
        "rack-a: IMEX domain UP, 18 trays READY and connected"


# one tray's fault: which check names it, on the tray (True) or the rack (False)
FAULTS = {
    # Azure/azhpc-images#506: Completed, Insufficient Resources, clique 0, a zero UUID
    "fabric-insufficient": ({"gpus": _tray_gpus(clique=0, uuid="00000000-0000-0000-0000-"
                                                "000000000000", status="Insufficient Resources")},
                            "fabric_registration", True, "status Insufficient Resources, "
                                                         "clique 0, no cluster UUID"),
    "foreign-cluster": ({"gpus": _tray_gpus(uuid=OTHER_UUID)}, "rack_fabric", False,
                        f"tray07 registered in cluster {OTHER_UUID}, the rack's is "
                        f"{GB200_UUID}"),
    "route-unhealthy": ({"gpus": [*_tray_gpus()[:3], replace(
        _tray_gpus()[3], fabric_health=decode_mask(0x9A))]}, "fabric_registration", True,
        "Route Unhealthy"),
    "imex-map-mismatch": ({"imex_config_sha256": "b" * 64}, "imex_config", False,
                          f"nodes_config.cfg differs: tray07 {'b' * 64}"),
    "imex-version-mismatch": ({"imex_version": "570.133.20"}, "imex_version", False,
                              "the IMEX version differs: tray07 570.133.20"),
    "tray-driver-mismatch": ({"driver_version": "580.95.05"}, "rack_driver", False,
                             "the driver differs: tray07 580.95.05 (the rest 570.172.08)"),
    "fm-on-gb": ({"fabric_manager": "active"}, "host_fabric_manager", True,
                 "nvidia-fabricmanager is active on a gb200-nvl72 tray"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_of_one_tray_rejects_the_rack_naming_the_tray_or_the_rack(fault):
    change, check_id, on_tray, words = FAULTS[fault]
    judged = judge_rack("rack-a", GB200, _rack(**{"tray07": change}))
    assert judged.verdict == Verdict.REJECTED
    where = judged.trays["tray07"] if on_tray else judged.rack_checks
    found = _check(where, check_id)
    assert found.status == Status.FAIL and words in found.summary, found.summary
    others = [t for t in judged.trays if t != "tray07"]
    assert all(judged.tray_verdict(t) == Verdict.ACCEPTED for t in others)
    if on_tray:
        assert judged.tray_verdict("tray07") == Verdict.REJECTED
    else:   # the rack's cause: no tray is rejected for it
        assert judged.tray_verdict("tray07") == Verdict.ACCEPTED


def test_a_peer_down_degrades_the_domain_and_names_the_tray():
    addresses = [f"10.0.0.{i + 1}" for i in range(18)]
    degraded = parse_imex_domain(_imex_text(addresses, down={"10.0.0.7"}, state="DEGRADED"),
                                 "imex")
    trays = _rack(**{t: {"imex": degraded} for t in (f"tray{i:02d}" for i in range(1, 19))})
    trays[6] = replace(trays[6], imex=None, imex_error="exited 1: connection refused")
    judged = judge_rack("rack-a", GB200, trays)
    domain = _check(judged.rack_checks, "imex_domain")
    assert domain.summary == ("rack-a: tray07 UNAVAILABLE (seen by all 17 trays that "
                              "answered); tray07 connected to no other member (seen by all 17 "
                              "trays that answered); domain DEGRADED (seen by all 17 trays "
                              "that answered)")
    member = _check(judged.trays["tray07"], "imex_member")
    assert member.status == Status.MISSING and member.action == Action.FIX_SETUP
    assert _check(judged.trays["tray01"], "imex_member").status == Status.PASS


def test_per_job_imex_and_no_imex_raise_no_imex_finding_on_an_idle_rack():
    idle = _rack(**{t: {"imex": None, "imex_config_sha256": None}
                    for t in (f"tray{i:02d}" for i in range(1, 19))})
    for mode in ("per-job", "none"):
        judged = judge_rack("rack-a", GB200, idle, imex=mode)
        assert judged.verdict == Verdict.ACCEPTED, [c for c in judged.rack_checks]
        assert {c.status for c in judged.rack_checks if c.id.startswith("imex_")} <= {
            Status.SKIP, Status.PASS}
        assert all(_check(judged.trays[t], "imex_member").status == Status.SKIP
                   for t in judged.trays)
    # where a domain is expected, the same idle rack is missing its evidence, not passed
    expected = judge_rack("rack-a", GB200, idle)
    assert _check(expected.rack_checks, "imex_domain").status == Status.MISSING


def test_no_gpu_of_the_rack_registered_is_the_rack_s_fault_not_18_trays():
    stuck = {t: {"gpus": _tray_gpus(state="In Progress", status="N/A", clique=None, uuid=None)}
             for t in (f"tray{i:02d}" for i in range(1, 19))}
    judged = judge_rack("rack-a", GB200, _rack(**stuck))
    assert judged.verdict == Verdict.REJECTED
    fabric = _check(judged.rack_checks, "rack_fabric")
    assert fabric.status == Status.FAIL and "no GPU of the 18 trays registered" in fabric.summary
    assert all(judged.tray_verdict(t) == Verdict.ACCEPTED for t in judged.trays)


def test_evidence_not_collected_is_missing_for_setup_never_a_hardware_action():
    judged = judge_rack("rack-a", GB200, _rack(**{"tray03": {"gpus": None,
                                                             "fabric_manager": None,
                                                             "driver_version": None}}))
    for check_id in ("tray_gpus", "fabric_registration", "host_fabric_manager"):
        found = _check(judged.trays["tray03"], check_id)
        assert (found.status, found.action) == (Status.MISSING, Action.FIX_SETUP)
    driver = _check(judged.rack_checks, "rack_driver")
    assert driver.status == Status.MISSING and "tray03" in driver.summary


def test_the_topology_block_holds_the_rack_s_registered_trays():
    trays = {f"tray{i:02d}": _tray_gpus() for i in range(1, 19)}
    trays["tray05"] = _tray_gpus(state="In Progress", status="N/A", uuid=None)
    text = block_topology({"rack-a": trays, "rack-b": {"b01": _tray_gpus(uuid=OTHER_UUID)}})
    lines = text.splitlines()
    assert "BlockName=rack-a Nodes=" + ",".join(
        t for t in sorted(trays) if t != "tray05") in lines
    assert "BlockName=rack-b Nodes=b01" in lines
    assert any(line.startswith("# tray05: left out") for line in lines)
    split = block_topology({"rack-c": {"c01": _tray_gpus(), "c02": _tray_gpus(uuid=OTHER_UUID)}})
    assert "BlockName=rack-c-9c6f5af3 Nodes=c02" in split and \
        "BlockName=rack-c-dc6e40c4 Nodes=c01" in split


def test_the_xml_report_s_fabric_block_is_read_as_the_text_s():
    # gpuprov's own H100 capture (-q -x, its fabric block N/A in a VM), the block's values
    # set as a registered GB200's with an unhealthy route
    xml = (Path(__file__).parents[2] / "tests" / "fixtures" / "real-node-h200" / "evidence"
           / "nvidia-smi-q.xml").read_text()
    for element, value in (("state", "Completed"), ("status", "Success"), ("cliqueId", "2"),
                           ("clusterUuid", GB200_UUID), ("summary", "Unhealthy"),
                           ("bandwidth", "Full"), ("route_unhealthy", "True")):
        assert f"<{element}>N/A</{element}>" in xml, element
        xml = xml.replace(f"<{element}>N/A</{element}>", f"<{element}>{value}</{element}>", 1)
    gpu = parse_smi_query(xml, "xml").gpus[0]
    assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_clique, gpu.fabric_cluster_uuid) == (
        "Completed", "Success", 2, GB200_UUID)
    assert gpu.fabric_health.faults == ["Route Unhealthy"]
    assert gpu.fabric_health.degraded_bandwidth is False


def _tray_evidence_dir(base: Path, tray: str, uuid: str = GB200_UUID) -> Path:
    """A tray's evidence: the healthy H100 evidence, its nvidia-smi -q cut to four GPUs and
    their fabric rows a registered GB200's."""
    from tests import evidence_builder as eb
    directory = eb.healthy_h100(base / tray)
    text = (directory / "nvidia-smi-q.txt").read_text()
    head, *gpus = text.split("\nGPU 0000")
    text = "\nGPU 0000".join([head.replace("Attached GPUs                         : 8",
                                           "Attached GPUs                         : 4"),
                              *gpus[:4]])
    text = text.replace("CliqueId                          : 0",
                        "CliqueId                          : 2").replace(
        "00000000-0000-0000-0000-000000000000", uuid)
    (directory / "nvidia-smi-q.txt").write_text(text + "\n")
    return directory


def test_the_rack_command_judges_the_inventory_s_rack_from_its_trays_evidence(tmp_path):
    import json
    import os

    from gpuprov.ledger import Ledger
    from tests.conftest import gpuprov
    from tests.unit.conftest import record_run
    trays = [f"tray{i:02d}" for i in range(1, 19)]
    evidence = {t: _tray_evidence_dir(tmp_path / "ev", t) for t in trays}
    evidence["tray07"] = _tray_evidence_dir(tmp_path / "ev7", "tray07", OTHER_UUID)
    ledger = record_run(Ledger(tmp_path / "ledger.sqlite3"), evidence)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[rack_a]\n" + "".join(
        f"{t} ansible_host=10.0.0.{i + 1}\n" for i, t in enumerate(trays)) +
        "[rack_a:vars]\ngpuprov_rack=rack-a\ngpuprov_rack_profile=gb200-nvl72\n"
        "gpuprov_imex=per-job\n")
    env = {"GPUPROV_LEDGER": str(ledger.path), "GPUPROV_STATE_DIR": str(tmp_path),
           "NO_COLOR": "1", "PATH": os.environ["PATH"]}
    shown = gpuprov("rack", "-i", str(inventory), "--json", env=env)
    assert shown.returncode == 1, shown.stderr
    [rack] = json.loads(shown.stdout)["racks"]
    assert (rack["rack"], rack["profile"], rack["imex"], rack["verdict"]) == (
        "rack-a", "gb200-nvl72", "per-job", "rejected")
    checks = {c["id"]: c for c in rack["checks"]}
    assert checks["rack_fabric"]["status"] == "fail"
    assert f"tray07 registered in cluster {OTHER_UUID}" in checks["rack_fabric"]["summary"]
    assert checks["rack_driver"]["status"] == "pass"        # 550.90.07 on every tray
    tray = {c["id"]: c for c in rack["trays"]["tray01"]["checks"]}
    assert {k: c["status"] for k, c in tray.items()} == {
        "tray_gpus": "pass", "fabric_registration": "pass", "host_fabric_manager": "fail",
        "imex_member": "skip"}
    # the H100 evidence's systemctl.txt: fabric manager active, which a GB200 tray must not
    assert "nvidia-fabricmanager is active on a gb200-nvl72 tray" in tray[
        "host_fabric_manager"]["summary"]
    table = gpuprov("rack", "rack-a", "-i", str(inventory), env=env)
    assert table.returncode == 1 and "rack_fabric: rack-a: tray07 registered" in table.stdout
    block = gpuprov("rack", "--topology", "-i", str(inventory), env=env)
    assert block.returncode == 0, block.stderr
    assert "BlockName=rack-a-dc6e40c4 Nodes=" + ",".join(
        t for t in trays if t != "tray07") in block.stdout
    assert "BlockName=rack-a-9c6f5af3 Nodes=tray07" in block.stdout
    for args, error in [(("rack-b",), "rack 'rack-b': not in"),
                        ((), "tray01: gpuprov_rack_profile: rack profile 'gb400': not one of")]:
        if not args:
            inventory.write_text(inventory.read_text().replace("gb200-nvl72", "gb400"))
        bad = gpuprov("rack", *args, "-i", str(inventory), env=env)
        assert bad.returncode == 2 and bad.stderr.startswith(f"gpuprov: error: {error}"), \
            bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_a_partial_rack_and_a_mixed_inventory_are_said_so():
    from gpuprov.errors import InputError
    from gpuprov.racks import inventory_racks
    partial = judge_rack("rack-a", GB200, _rack(n=4))
    assert partial.verdict == Verdict.REJECTED
    assert "4 trays in the inventory, a gb200-nvl72 has 18" in _check(
        partial.rack_checks, "rack_trays").summary
    variables = {"t1": {"gpuprov_rack": "r", "gpuprov_rack_profile": "gb200-nvl72"},
                 "t2": {"gpuprov_rack": "r", "gpuprov_rack_profile": "gb300-nvl72"},
                 "n1": {}}
    with pytest.raises(InputError, match="rack r: its trays name different rack profiles"):
        inventory_racks(list(variables), variables.get)
    variables["t2"]["gpuprov_rack_profile"] = "gb200-nvl72"
    variables["t2"]["gpuprov_imex"] = "sometimes"
    with pytest.raises(InputError, match="t2: gpuprov_imex='sometimes'"):
        inventory_racks(list(variables), variables.get)
    del variables["t2"]["gpuprov_imex"]
    [spec] = inventory_racks(list(variables), variables.get).values()
    assert (spec.trays, spec.imex) == (("t1", "t2"), "domain")


def test_fabric_rows_a_report_leaves_out_are_missing_for_setup_never_a_gpu_fault():
    # the real H200 VM's report prints N/A for every fabric row: nothing to judge by
    unreported = [replace(g, fabric_state=None, fabric_status=None, fabric_clique=None,
                          fabric_cluster_uuid=None, fabric_health=from_rows({}))
                  for g in _tray_gpus()]
    judged = judge_rack("rack-a", GB200, _rack(**{"tray04": {"gpus": unreported}}))
    found = _check(judged.trays["tray04"], "fabric_registration")
    assert (found.status, found.action) == (Status.MISSING, Action.FIX_SETUP)
    assert "state not reported" in found.summary
    # a Completed GPU whose clique and cluster went unprinted: missing too, not "clique 0"
    partial = [replace(g, fabric_clique=None, fabric_cluster_uuid=None) for g in _tray_gpus()]
    judged = judge_rack("rack-a", GB200, _rack(**{"tray04": {"gpus": partial}}))
    found = _check(judged.trays["tray04"], "fabric_registration")
    assert (found.status, found.action) == (Status.MISSING, Action.FIX_SETUP)
    assert "clique not reported, cluster UUID not reported" in found.summary
    # every tray unreported: no rack-wide fault is made of it
    everywhere = judge_rack("rack-a", GB200, _rack(**{f"tray{i:02d}": {"gpus": unreported}
                                                      for i in range(1, 19)}))
    assert _check(everywhere.rack_checks, "rack_fabric").status == Status.MISSING
    assert all(c.action not in (Action.RESET_GPU, Action.REBOOT, Action.RESEAT_OR_INSPECT,
                                Action.RMA)
               for checks in everywhere.trays.values() for c in checks)


def test_a_fabric_manager_state_that_is_neither_running_nor_stopped_is_missing():
    judged = judge_rack("rack-a", GB200, _rack(**{"tray02": {"fabric_manager": "unknown"}}))
    found = _check(judged.trays["tray02"], "host_fabric_manager")
    assert (found.status, found.action) == (Status.MISSING, Action.FIX_SETUP)
    for state in ("inactive", "failed", "not installed"):
        judged = judge_rack("rack-a", GB200, _rack(**{"tray02": {"fabric_manager": state}}))
        assert _check(judged.trays["tray02"], "host_fabric_manager").status == Status.PASS
