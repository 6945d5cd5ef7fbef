"""Issue 72: an NVL72 rack judged inside `validate`. Each tray's evidence is built from a
real GB200 tray's `nvidia-smi -q -x` (tests/fixtures/nvidia-smi-q/gb200-x4-…: four GPUs,
fabric Completed/Success, clique 2, healthy); `validate`'s rack stage gathers the rack into
each tray's `rack/` and the trays are judged again with it, on a real ledger. A tray's
fault names the tray and rejects it alone; a rack-wide cause names the rack and rejects
every tray; what was not seen is the setup's; a rack whose IMEX runs per job, and an HGX
node, raise no IMEX finding."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import jsonschema
import pytest

from gpuprov import holds, report
from gpuprov.checks.run import judge
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence, collected
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import offence_starts
from gpuprov.model import Action, Status, Verdict
from gpuprov.parsers.imex import IMEX_DOMAIN, IMEX_NODES_CONFIG
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.profiles import load_profile
from gpuprov.validation import node_request
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.fabric_rack import FabricGroup, fabric_member
from gpuprov.validation.pipeline import NodeJob, _result
from gpuprov.validation.rack import gather, imex_asked, rack_stage, run_racks
from tests import evidence_builder as eb
from tests.conftest import gpuprov
from tests.unit.test_nvl_rack import _imex_text

FIXTURES = Path(__file__).parents[1] / "fixtures"
CAPTURE = FIXTURES / "nvidia-smi-q" / "gb200-x4-580.173.02-qx.txt"
TRAYS = [f"tray{i:02d}" for i in range(1, 19)]
ADDRESSES = {t: f"10.0.0.{i + 1}" for i, t in enumerate(TRAYS)}
CLUSTER = "00000001-0000-0000-0000-000000000001"       # the capture's own
FOREIGN = "9c6f5af3-53bf-49b5-a436-b66766c413c3"       # a GB200 of another rack (gpud#1106)
TRAY = load_profile("gb200-nvl72-tray")
RACK_CHECKS = ("rack_tray", "rack")     # what these tests judge (the rest: not built here)
FM_INACTIVE = ("Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=inactive\n"
               "SubState=dead\nUnitFileState=disabled\n")
CONFIG_SHA = "a" * 64
SCHEMA = Path(__file__).parents[2] / "gpuprov/data/schemas/validation-report.schema.json"


def _capture_xml() -> str:
    return CAPTURE.read_text().split("\n\n", 1)[1]


def _tray_dir(root: Path, tray: str, *, xml: str | None = None, imex: str | None = "",
              config: str = CONFIG_SHA, units: str = FM_INACTIVE,
              imex_version: str = "580.173.02-1") -> Path:
    """One tray's evidence as the collector writes it: the GPU report, its IMEX view
    (`imex=None`: not collected), the peer list's digest, its units and packages."""
    directory = root / tray
    directory.mkdir(parents=True)
    (directory / "nvidia-smi-q.xml").write_text(xml or _capture_xml())
    if imex is not None:
        (directory / IMEX_DOMAIN.file).write_text(imex or _imex_text(list(ADDRESSES.values())))
        (directory / IMEX_NODES_CONFIG.file).write_text(
            f"{config}  /etc/nvidia-imex/nodes_config.cfg\n")
    (directory / "systemctl.txt").write_text(units)
    (directory / "packages.txt").write_text(f"nvidia-imex\t{imex_version}\n"
                                            "nvidia-driver-580-open\t580.173.02-1\n")
    (directory / "meta.json").write_text(json.dumps({"node": tray, "run_id": "v1",
                                                     "profile": TRAY.name}))
    return directory


def _inventory(tmp_path: Path, imex: str = "domain", trays=TRAYS,
               addresses: dict[str, str] = ADDRESSES) -> Inventory:
    path = tmp_path / "rack.ini"
    path.write_text("[rack_a]\n" + "".join(f"{t} ansible_host={addresses[t]}\n" for t in trays)
                    + "[rack_a:vars]\ngpuprov_rack=rack-a\ngpuprov_rack_profile=gb200-nvl72\n"
                    f"gpuprov_profile=gb200-nvl72-tray\ngpuprov_imex={imex}\n"
                    "[hgx]\nnode01 gpuprov_profile=h100-sxm-8\n")
    return Inventory(path)


def _validated(tmp_path: Path, dirs: dict[str, Path], imex: str = "domain",
               run_id: str = "v1", addresses: dict[str, str] = ADDRESSES
               ) -> tuple[Ledger, list]:
    """The trays' run as `validate` records it, then its rack stage; the ledger and what
    the stage said of each rack (`addresses`: the trays and their IMEX addresses)."""
    inventory = _inventory(tmp_path, imex, list(addresses), addresses)
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.start_run(run_id, "validate", str(inventory.path), list(dirs), {}, {}, "/ev")
    jobs = {}
    for tray, directory in dirs.items():
        settings = NodeSettings(node=tray, profile=TRAY, lock=None, run_id=run_id,
                                soak_seconds=30)
        jobs[tray] = NodeJob(settings, directory, directory, directory)
        judgement = judge(Evidence(directory), TRAY, None, only=RACK_CHECKS)
        ledger.record_node(run_id, _result(jobs[tray], 1.0, judgement.verdict,
                                           judgement.reason(), judgement))
    racks = run_racks(inventory, list(dirs), {t: TRAY for t in dirs})

    def rejudge(tray: str) -> None:
        judgement = judge(Evidence(dirs[tray]), TRAY, None, only=RACK_CHECKS)
        ledger.rejudge_node(run_id, _result(jobs[tray], 1.0, judgement.verdict,
                                            judgement.reason(), judgement))
    said = []
    outcomes = rack_stage(inventory, racks, ledger, run_id, rejudge, said.append)
    ledger.finish_validation(run_id)
    return ledger, outcomes + said


def _rack_checks(ledger: Ledger, run_id: str = "v1") -> dict[str, dict]:
    """Each tray's rack_tray and rack results as recorded."""
    return {r.node: {c.id: c for c in r.checks if c.id in ("rack_tray", "rack")}
            for r in ledger.node_results(run_id)}


def test_the_real_tray_capture_meets_its_profile():
    """The GB200 capture's four GPUs are what gb200-nvl72-tray describes, its fabric rows
    a healthy registration (read from the XML report's fabric block)."""
    gpus = parse_smi_query(_capture_xml(), "gb200").gpus
    assert [g.name for g in gpus] == ["NVIDIA GB200"] * 4 == [
        g.name for g in gpus if TRAY.name_matches(g.name)]
    assert all(g.fabric_state == "Completed" and g.fabric_status == "Success"
               and g.fabric_clique == 2 and g.fabric_cluster_uuid == CLUSTER
               and not g.fabric_health.faults for g in gpus)
    assert TRAY.rack_profile == "gb200-nvl72" and TRAY.gpu_count == 4


def test_a_healthy_rack_passes_both_rack_checks_on_every_tray(tmp_path):
    dirs = {t: _tray_dir(tmp_path / "ev", t) for t in TRAYS}
    ledger, (outcome, said) = _validated(tmp_path, dirs)
    checks = _rack_checks(ledger)
    assert {t: (c["rack_tray"].status, c["rack"].status) for t, c in checks.items()} == \
        dict.fromkeys(TRAYS, (Status.PASS, Status.PASS))
    assert "tray01 in rack rack-a: 4 GPUs" in checks["tray01"]["rack_tray"].summary
    assert "IMEX node #0 READY" in checks["tray01"]["rack_tray"].summary
    assert checks["tray09"]["rack"].summary.startswith("rack rack-a (gb200-nvl72, IMEX "
                                                       "domain): one cluster " + CLUSTER)
    # judged on the rack's checks alone here (the rest of a tray's evidence is not built):
    # every tray accepted, so the rack is
    assert outcome.verdict == Verdict.ACCEPTED and said == (
        "rack rack-a: ACCEPTED (gb200-nvl72, IMEX domain, 18 trays): every tray accepted")
    # the JSON report carries the rack's verdict and its trays', as its schema says
    document = report.as_json(ledger.run("v1"), ledger.node_results("v1"), {}, [outcome])
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    assert document["racks"][0]["verdict"] == "accepted"
    assert document["racks"][0]["trays"] == dict.fromkeys(TRAYS, "accepted")
    # the rack is in each tray's evidence, and judged the same again from it alone
    copy = tmp_path / "copy"
    shutil.copytree(dirs["tray04"], copy)
    shutil.rmtree(tmp_path / "ev" / "tray05")
    lock = Path(__file__).parents[2] / "inventory" / "group_vars" / "all" / "versions.yml"
    again = gpuprov("evaluate", str(copy), "--profile", TRAY.name, "--lock", str(lock), "--json",
                    env={**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "state")})
    assert again.returncode == 1, again.stderr
    judged = {c["id"]: c["status"] for c in json.loads(again.stdout)["checks"]}
    assert (judged["rack_tray"], judged["rack"]) == ("pass", "pass")


@pytest.mark.parametrize("tray, fault, check, words, action", [
    ("tray07", {"xml": _capture_xml().replace(CLUSTER, FOREIGN)}, "rack_tray",
     f"tray07: its GPUs registered in cluster {FOREIGN}, the rack rack-a's is {CLUSTER}",
     Action.RESEAT_OR_INSPECT),
    ("tray05", {"units": FM_INACTIVE.replace("inactive", "active").replace("dead",
                                                                          "running")},
     "rack_tray", "nvidia-fabricmanager is active on a gb200-nvl72 tray", Action.NONE),
    ("tray11", {"xml": _capture_xml().replace("<status>Success</status>",
                                              "<status>Insufficient Resources</status>", 1)
                .replace("<cliqueId>2</cliqueId>", "<cliqueId>0</cliqueId>", 1)},
     "rack_tray", "status Insufficient Resources, clique 0", Action.REBOOT),
    ("tray02", {"xml": _capture_xml().replace("<route_unhealthy>False</route_unhealthy>",
                                              "<route_unhealthy>True</route_unhealthy>", 1)},
     "rack_tray", "tray02: GPU 0", Action.REBOOT),
])
def test_a_tray_s_fault_rejects_that_tray_alone_naming_it(tmp_path, tray, fault, check,
                                                          words, action):
    dirs = {t: _tray_dir(tmp_path / "ev", t, **(fault if t == tray else {})) for t in TRAYS}
    ledger, _ = _validated(tmp_path, dirs)
    checks = _rack_checks(ledger)
    found = checks[tray][check]
    assert found.status == Status.FAIL and words in found.summary, found.summary
    assert found.action == action, found
    others = {t: c["rack_tray"].status for t, c in checks.items() if t != tray}
    assert set(others.values()) == {Status.PASS}
    assert {c["rack"].status for c in checks.values()} == {Status.PASS}


@pytest.mark.parametrize("tray, fault, words", [
    ("tray03", {"config": "b" * 64}, "nodes_config.cfg differs: tray03 " + "b" * 64),
    ("tray12", {"imex_version": "580.95.05-1"}, "the IMEX version differs: tray12 "
                                                "580.95.05-1"),
])
def test_a_rack_wide_cause_rejects_every_tray_naming_the_rack(tmp_path, tray, fault, words):
    dirs = {t: _tray_dir(tmp_path / "ev", t, **(fault if t == tray else {})) for t in TRAYS}
    ledger, (outcome, _) = _validated(tmp_path, dirs)
    checks = _rack_checks(ledger)
    for found in (c["rack"] for c in checks.values()):
        assert found.status == Status.FAIL and found.summary.startswith("rack rack-a: ")
        assert words in found.summary and found.action == Action.NONE, found
    assert {c["rack_tray"].status for c in checks.values()} == {Status.PASS}
    assert outcome.verdict == Verdict.REJECTED


def test_a_peer_down_degrades_the_domain_for_the_rack_and_names_the_tray(tmp_path):
    down = _imex_text(list(ADDRESSES.values()), down=(ADDRESSES["tray08"],), state="DEGRADED")
    dirs = {t: _tray_dir(tmp_path / "ev", t, imex=down) for t in TRAYS}
    ledger, _ = _validated(tmp_path, dirs)
    checks = _rack_checks(ledger)
    assert checks["tray08"]["rack_tray"].status == Status.FAIL
    assert "IMEX node #7 UNAVAILABLE" in checks["tray08"]["rack_tray"].summary
    rack = checks["tray01"]["rack"]
    assert rack.status == Status.FAIL and "tray08 UNAVAILABLE" in rack.summary
    assert "domain DEGRADED" in rack.summary


def test_unseen_evidence_is_the_setup_s_never_a_hardware_action(tmp_path):
    """A tray of the rack never validated, and a domain tray whose IMEX view was not
    collected: missing with fix-setup, for the rack and for that tray."""
    dirs = {t: _tray_dir(tmp_path / "ev", t, **({"imex": None} if t == "tray02" else {}))
            for t in TRAYS[:17]}
    ledger, (outcome, said) = _validated(tmp_path, dirs)
    assert outcome.trays["tray18"] is None
    checks = _rack_checks(ledger)
    tray = checks["tray02"]["rack_tray"]
    assert (tray.status, tray.action) == (Status.MISSING, Action.FIX_SETUP), tray
    assert "nvidia-imex-ctl -N not collected" in tray.summary
    rack = checks["tray01"]["rack"]
    assert (rack.status, rack.action) == (Status.MISSING, Action.FIX_SETUP), rack
    assert "of tray18 not collected" in rack.summary
    assert "tray18: never validated" in said


def test_per_job_imex_on_an_idle_rack_and_an_hgx_node_raise_no_imex_finding(tmp_path):
    """Per-job IMEX: nothing collected, nothing judged. An HGX node: not a tray."""
    dirs = {t: _tray_dir(tmp_path / "ev", t, imex=None) for t in TRAYS}
    ledger, _ = _validated(tmp_path, dirs, imex="per-job")
    checks = _rack_checks(ledger)
    assert {(c["rack_tray"].status, c["rack"].status) for c in checks.values()} == {
        (Status.PASS, Status.PASS)}
    spec = run_racks(_inventory(tmp_path, "per-job"), ["tray01"], {"tray01": TRAY})["rack-a"]
    assert IMEX_DOMAIN not in collected("snapshot", TRAY, asked=imex_asked(spec))
    domain = run_racks(_inventory(tmp_path), ["tray01"], {"tray01": TRAY})["rack-a"]
    assert IMEX_DOMAIN in collected("snapshot", TRAY, asked=imex_asked(domain))
    hgx = load_profile("h100-sxm-8")
    assert IMEX_DOMAIN not in collected("snapshot", hgx)
    node = judge(Evidence(eb.healthy_h100(tmp_path / "node01")), hgx, None)
    skipped = {c.id: c for c in node.checks if c.id in ("rack_tray", "rack")}
    assert {c.status for c in skipped.values()} == {Status.SKIP}
    assert "not an NVL72 compute tray" in skipped["rack"].summary


def test_a_tray_profile_outside_a_rack_and_a_rack_of_other_trays_are_bad_input(tmp_path):
    inventory = _inventory(tmp_path)
    with pytest.raises(InputError, match="host node01: profile gb200-nvl72-tray is an NVL72 "
                                         r"tray's \(gb200-nvl72\): set gpuprov_rack"):
        run_racks(inventory, ["node01"], {"node01": TRAY})
    with pytest.raises(InputError, match="host tray01: in rack rack-a \\(gb200-nvl72\\), its "
                                         "profile h100-sxm-8 is not a gb200-nvl72 tray's"):
        run_racks(inventory, ["tray01"], {"tray01": load_profile("h100-sxm-8")})


def test_a_campaign_request_carries_what_the_inventory_asks_the_tray_to_collect():
    settings = NodeSettings(node="tray01", profile=TRAY, lock=None, run_id="v1",
                            soak_seconds=30, collects=frozenset({"imex"}))
    data = node_request.encode(settings, "tray01")
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        read, _ = node_request.read(Path(fh.name), hashlib.sha256(data).hexdigest())
    assert read.collects == frozenset({"imex"})


def test_an_unreachable_tray_keeps_its_verdict_and_the_rack_is_not_accepted(tmp_path):
    """A tray that went unreachable mid-run left a directory behind: it is not judged as
    the tray's own (its verdict stays unreachable), nor read for the rack, whose other
    trays then cannot be judged as one domain: missing, fix-setup, not accepted."""
    from gpuprov.validation.pipeline import unreachable
    dirs = {t: _tray_dir(tmp_path / "ev", t) for t in TRAYS}
    inventory = _inventory(tmp_path)
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.start_run("v1", "validate", str(inventory.path), TRAYS, {}, {}, "/ev")
    jobs = {t: NodeJob(NodeSettings(node=t, profile=TRAY, lock=None, run_id="v1",
                                    soak_seconds=30), d, d, d) for t, d in dirs.items()}
    for tray, job in jobs.items():
        if tray == "tray06":
            ledger.record_node("v1", unreachable(job, 1.0, "unreachable: ssh: timed out"))
            continue
        judgement = judge(Evidence(dirs[tray]), TRAY, None, only=RACK_CHECKS)
        ledger.record_node("v1", _result(job, 1.0, judgement.verdict, judgement.reason(),
                                         judgement))
    rejudged = []

    def rejudge(tray: str) -> None:
        rejudged.append(tray)
        judgement = judge(Evidence(dirs[tray]), TRAY, None, only=RACK_CHECKS)
        ledger.rejudge_node("v1", _result(jobs[tray], 1.0, judgement.verdict,
                                          judgement.reason(), judgement))
    [outcome] = rack_stage(inventory, run_racks(inventory, TRAYS, dict.fromkeys(TRAYS, TRAY)),
                           ledger, "v1", rejudge, lambda line: None)
    assert "tray06" not in rejudged and len(rejudged) == 17
    assert not (dirs["tray06"] / "rack").exists()
    assert outcome.verdict == Verdict.REJECTED and outcome.trays["tray06"] == \
        Verdict.UNREACHABLE
    assert "tray06: unreachable: ssh: timed out" in outcome.summary
    rack = _rack_checks(ledger)["tray01"]["rack"]
    assert (rack.status, rack.action) == (Status.MISSING, Action.FIX_SETUP), rack
    assert "tray06 not collected" in rack.summary


def test_a_rack_wide_fabric_fault_charges_no_tray_with_a_hardware_action(tmp_path):
    """No GPU of the rack registered (its switch trays, its partition): every tray's `rack`
    check names the rack, with no hardware action (no tray's offence, no tray's RMA)."""
    waiting = _capture_xml().replace("<state>Completed</state>", "<state>In Progress</state>")
    dirs = {t: _tray_dir(tmp_path / "ev", t, xml=waiting) for t in TRAYS}
    ledger, _ = _validated(tmp_path, dirs)
    for checks in _rack_checks(ledger).values():
        rack = checks["rack"]
        assert rack.status == Status.FAIL and rack.action == Action.NONE, rack
        assert "no GPU of the 18 trays registered with the fabric" in rack.summary


def test_the_imex_address_may_be_another_network_s(tmp_path):
    inventory = _inventory(tmp_path)
    inventory.path.write_text(inventory.path.read_text().replace(
        "gpuprov_imex=domain", "gpuprov_imex=domain\ngpuprov_imex_address=192.0.2.7"))
    [tray] = [t for t in gather(Inventory(inventory.path), run_racks(
        Inventory(inventory.path), ["tray01"], {"tray01": TRAY})["rack-a"], {}, {}).trays
        if t.tray == "tray01"]
    assert tray.address == "192.0.2.7"


def test_a_rack_s_fabric_repair_holds_every_tray_and_a_recheck_runs_the_rack_stages(tmp_path):
    """A switch tray replaced (issue 72, fleet-scale.md 2.3's NVL72 row) is recorded on the
    rack, `gpuprov rack RACK --repaired nvlink-fabric`: every tray is held on its rack checks
    until validated again, the recheck runs the stages that judge them, and the repair
    starts no tray's offence count anew. Recorded on one tray, or a tray's kind on the rack,
    it is one line, exit 2, nothing recorded."""
    dirs = {t: _tray_dir(tmp_path / "ev", t) for t in TRAYS}
    ledger, _ = _validated(tmp_path, dirs)
    ledger.record_repair("tray03", "INC-1 GPU 2 reseated", "tests", "gpu-reseat", "2")
    inventory = _inventory(tmp_path).path
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path), "NO_COLOR": "1",
           "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    done = gpuprov("rack", "rack-a", "-i", str(inventory), "--repaired", "nvlink-fabric",
                   "--note", "INC-2 switch tray 4 replaced", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("rack rack-a: repair recorded on its 18 trays by ")
    assert ": nvlink-fabric: INC-2 switch tray 4 replaced; " in lines[0]
    # these trays were judged on their rack checks alone: those are what is held
    assert lines[1:] == [f"{t}: open holds: rack_tray, rack" for t in TRAYS]
    assert {r.node for r in ledger.repairs() if r.kind == "nvlink-fabric"} == set(TRAYS)
    assert holds.stages_for(["rack_tray", "rack"]) == ["identity", "snapshot", "rack"]
    # tray03's offences still count from its own repair, not from the rack's
    [own] = [r for r in ledger.repairs("tray03") if r.kind == "gpu-reseat"]
    assert offence_starts(ledger, "tray03") == {"tray03": own.at}
    assert offence_starts(ledger, "tray04") == {}
    recorded = len(ledger.repairs())
    for argv, words in [
            (["nodes", "tray03", "--repaired", "nvlink-fabric"],
             "--repaired nvlink-fabric: a repair of what every tray of an NVL72 rack shares: "
             "record it on the rack, `gpuprov rack RACK --repaired nvlink-fabric`"),
            (["rack", "rack-a", "-i", str(inventory), "--repaired", "gpu-swap"],
             "--repaired gpu-swap: a repair of one node: record it on the tray, "
             "`gpuprov nodes TRAY --repaired gpu-swap`"),
            (["rack", "-i", str(inventory), "--repaired", "nvlink-fabric"],
             "--repaired: name the one RACK that was repaired"),
            (["rack", "rack-b", "-i", str(inventory), "--repaired", "nvlink-fabric"],
             f"rack 'rack-b': not in {inventory} (did you mean rack-a?)"),
            (["rack", "rack-a", "-i", str(inventory), "--repaired", "switch"],
             "repair kind 'switch': not one of ")]:
        refused = gpuprov(*argv, env=env)
        assert refused.returncode == 2, (argv, refused.stdout)
        [line] = refused.stderr.strip().splitlines()
        assert words in line, (argv, line)
    assert len(ledger.repairs()) == recorded


def test_a_tray_waiting_only_for_its_rack_checks_joins_the_rack_s_all_reduce(tmp_path):
    """validate --fabric runs before the rack's stage: a tray whose only failures are its
    rack checks (missing until then) is a member of its rack's all-reduce; one failing
    anything else, or a node of no rack in that state, is not."""
    directory = _tray_dir(tmp_path / "ev", "tray01")
    job = NodeJob(NodeSettings(node="tray01", profile=TRAY, lock=None, run_id="v1",
                               soak_seconds=30), directory, directory, directory)

    def result(*checks: str):
        judged = judge(Evidence(directory), TRAY, None, only=checks)
        return _result(job, 1.0, judged.verdict, judged.reason(), judged)
    rack = run_racks(_inventory(tmp_path), ["tray01"], {"tray01": TRAY})["rack-a"]
    waiting = result(*RACK_CHECKS)        # no rack/ yet: both missing
    assert waiting.judged == Verdict.REJECTED
    assert fabric_member(waiting, FabricGroup(rack, ("tray01",), (None, "")))
    assert not fabric_member(waiting, FabricGroup(None, ("tray01",), (None, "")))
    unseen = result(*RACK_CHECKS, "c2c_links")     # its C2C output not collected either
    assert not fabric_member(unseen, FabricGroup(rack, ("tray01",), (None, "")))
