"""Holds per check (issue 71): a repair of a kind voids the checks data/repair_matrix.yml
names; a node is accepted only when each check it requires has passed since the last
repair that voids it. Ledgers built from real judgements (the evaluators over evidence
from the fixtures), with repairs recorded after, before and between validations."""

import time

import pytest

from gpuprov import holds
from gpuprov.checks.quick_rules import settle_for
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import NodeState, node_statuses
from tests import evidence_builder as eb
from tests.conftest import gpuprov
from tests.unit.conftest import record_run


def _later() -> None:
    time.sleep(0.01)    # the ledger stamps with the clock: one event after the other


@pytest.fixture
def accepted(tmp_path):
    """node07 accepted in v1 (a real judgement of the healthy H100 evidence)."""
    directory = eb.healthy_h100(tmp_path / "node07")
    ledger = record_run(Ledger(tmp_path / "ledger.sqlite3"), {"node07": directory})
    _later()
    return ledger, directory


def test_every_kind_voids_known_checks_with_grounds():
    found = holds.kinds()
    assert {"gpu-swap", "gpu-reseat", "nic-swap", "cable", "firmware", "driver", "reboot",
            "unknown"} <= set(found)
    assert found["unknown"].voids is None
    assert all(k.grounds for k in found.values())
    assert holds.kind_of("cable") == "cable"
    assert holds.kind_of("ticket 4411: reseated GPU 3") == "unknown"


# ten ledgers in which a required check's latest pass predates a repair that voids it:
# (repair kind, a check it must hold, a required check it must leave alone or None)
CASES = [
    ("gpu-swap", "gpu_inventory", "nics"),
    ("gpu-reseat", "pcie_link", "driver_version"),
    ("nic-swap", "nics", "gpu_inventory"),
    ("cable", "ib_counters", "gpu_burn"),
    ("firmware", "nvswitch", "torch_env"),
    ("driver", "driver_version", "nics"),
    ("reboot", "kernel_log", "gpu_burn"),
    ("unknown", "ddp_smoke", None),
]


@pytest.mark.parametrize("kind,held,untouched", CASES, ids=[c[0] for c in CASES])
def test_a_repair_after_the_pass_holds_the_checks_it_voids(accepted, kind, held, untouched):
    ledger, _ = accepted
    ledger.record_repair("node07", "ticket", "tests", kind, "GPU 3")
    opened = {h.check: h for h in holds.open_holds(ledger.node_results(node="node07"),
                                                   ledger.repairs("node07"))}
    assert held in opened and opened[held].repair.kind == kind
    assert untouched is None or untouched not in opened
    assert node_statuses(ledger, time.time())["node07"].state == NodeState.NEEDS_VALIDATION


def test_a_pass_before_a_rejection_still_predates_the_repair(accepted, tmp_path):
    # v2 rejects it (a NIC port down); the cable repaired after: `nics` last passed in v1
    ledger, directory = accepted
    down = eb.replace(eb.copy(directory, tmp_path / "down"), "ibstat.txt",
                      eb.ibstat().replace("State: Active", "State: Down", 1))
    record_run(ledger, {"node07": down}, run_id="v2")
    _later()
    ledger.record_repair("node07", "", "tests", "cable", "mlx5_0/1")
    history = ledger.node_results(node="node07")
    assert [str(r.verdict) for r in history] == ["accepted", "rejected"]
    opened = {h.check: h for h in holds.open_holds(history, ledger.repairs("node07"))}
    assert opened["nics"].last_pass == history[0].judged_at
    assert set(opened) == {"nics", "ib_counters"}


def test_a_later_repair_holds_and_an_earlier_one_validated_since_does_not(accepted):
    ledger, directory = accepted
    ledger.record_repair("node07", "", "tests", "reboot")
    _later()
    record_run(ledger, {"node07": directory}, run_id="v2")    # passes every check again
    _later()
    ledger.record_repair("node07", "", "tests", "gpu-swap", "1654922020245")
    opened = {h.check for h in holds.open_holds(ledger.node_results(node="node07"),
                                                ledger.repairs("node07"))}
    assert "gpu_inventory" in opened and "cpu_governor" not in opened   # the reboot's only


def test_a_repair_validated_since_leaves_no_hold_and_the_node_accepted(accepted):
    ledger, directory = accepted
    ledger.record_repair("node07", "", "tests", "gpu-swap")
    _later()
    record_run(ledger, {"node07": directory}, run_id="v2")
    assert holds.open_holds(ledger.node_results(node="node07"), ledger.repairs("node07")) == []
    assert node_statuses(ledger, time.time())["node07"].state == NodeState.ACCEPTED


def test_nodes_records_a_repair_by_kind_and_names_the_checks_it_holds(accepted, tmp_path):
    ledger, _ = accepted
    env = {"GPUPROV_LEDGER": str(ledger.path), "GPUPROV_STATE_DIR": str(tmp_path),
           "NO_COLOR": "1", "PATH": __import__("os").environ["PATH"]}
    recorded = gpuprov("nodes", "node07", "--repaired", "cable", "--part", "mlx5_0/1",
                       "--note", "INC-4411 transceiver reseated", env=env)
    assert recorded.returncode == 0, recorded.stderr
    assert ": cable (mlx5_0/1): INC-4411 transceiver reseated; " in recorded.stdout
    assert recorded.stdout.splitlines()[-1] == "node07: open holds: nics, ib_counters"
    table = gpuprov("nodes", env=env).stdout
    row = next(line for line in table.splitlines() if line.startswith("node07 "))
    assert "needs-validation" in row and "repaired (cable): open holds: nics, ib_counters" in row
    history = gpuprov("nodes", "node07", env=env).stdout
    assert "  nics: voided by cable (mlx5_0/1), recorded after its last pass" in history
    metrics = gpuprov("metrics", env=env).stdout
    assert 'gpuprov_node_hold{check="nics",node="node07",repair="cable"} 1.0' in metrics
    bad = gpuprov("nodes", "node07", "--repaired", "the cable", "--part", "x", env=env)
    assert bad.returncode == 2
    assert bad.stderr.startswith("gpuprov: error: --repaired 'the cable': not a repair kind")


def _recheck(ledger: Ledger, directory, tmp_path, run_id: str, stages=("identity", "snapshot",
                                                                        "soak")) -> None:
    """A recheck run recorded as `validate --recheck` records it: the evidence of the
    stages it ran (the others skipped, as its meta.json says), judged whole."""
    import json

    from gpuprov.checks.run import judge
    from gpuprov.evidence import Evidence
    from gpuprov.profiles import load_profile
    from gpuprov.validation.collect import NodeSettings
    from gpuprov.validation.pipeline import NodeJob, _result
    evidence = eb.copy(directory, tmp_path / run_id)
    meta = json.loads((evidence / "meta.json").read_text())
    meta["skipped"] = {s: "recheck: no open hold needs it" for s in ("ddp", "dcgm")
                       if s not in stages}
    meta["recheck"] = {"holds": [], "stages": list(stages)}   # as the collector writes it
    (evidence / "meta.json").write_text(json.dumps(meta))
    for name in ("ddp-smoke.json", "fingerprint.json"):
        (evidence / name).unlink()
    profile = load_profile("h100-sxm-8")
    judgement = judge(Evidence(evidence), profile, None)
    settings = NodeSettings(node="node07", profile=profile, lock=None, run_id=run_id,
                            soak_seconds=30, stages=stages)
    ledger.start_run(run_id, "validate", "/inv/rack3.ini", ["node07"], {}, {}, "/ev")
    ledger.record_node(run_id, _result(NodeJob(settings, evidence, evidence, evidence), 1.0,
                                       judgement.verdict, judgement.reason(), judgement))
    ledger.finish_validation(run_id)


def test_a_recheck_that_passes_what_the_repair_voided_accepts_the_node(accepted, tmp_path):
    ledger, directory = accepted
    ledger.record_repair("node07", "", "tests", "cable", "mlx5_0/1")
    _later()
    _recheck(ledger, directory, tmp_path, "r1")
    [_, recheck] = ledger.node_results(node="node07")
    assert recheck.scope == "recheck" and str(recheck.verdict) == "accepted"
    assert {c.id for c in recheck.checks if str(c.status) == "skip"} >= {"ddp_smoke"}
    status = node_statuses(ledger, time.time())["node07"]
    assert status.state == NodeState.ACCEPTED
    # the acceptance rests on v1's passes too: it expires from the oldest of them
    v1 = ledger.node_results(node="node07")[0]
    assert status.accepted_since == v1.judged_at
    # its evidence holds a few checks: never certified as the node's acceptance
    from gpuprov.certification import Refused, certify
    key = tmp_path / "key"
    __import__("subprocess").run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                                  str(key)], check=True)
    with pytest.raises(Refused, match="accepted by a recheck"):
        certify("node07", key, tmp_path / "cert.json", ledger)


def test_a_recheck_that_did_not_cover_a_hold_leaves_the_node_held(accepted, tmp_path):
    # a GPU swap voids DDP's and the fingerprint's passes: a recheck without the DDP stage
    # passes what it ran, and the node is still not accepted
    ledger, directory = accepted
    ledger.record_repair("node07", "", "tests", "gpu-swap", "GPU 3")
    _later()
    _recheck(ledger, directory, tmp_path, "r1")
    left = {h.check for h in holds.open_holds(ledger.node_results(node="node07"),
                                              ledger.repairs("node07"))}
    assert left == {"ddp_smoke", "numeric_fingerprint"}
    assert node_statuses(ledger, time.time())["node07"].state == NodeState.NEEDS_VALIDATION


def test_the_stages_a_recheck_runs_follow_its_holds():
    assert holds.stages_for(["nics", "ib_counters"]) == ["identity", "snapshot", "soak"]
    assert holds.stages_for(["kernel_log"]) == ["identity", "snapshot", "soak"]
    assert holds.stages_for(["gpu_inventory", "ddp_smoke", "dcgm_diag"]) == [
        "identity", "snapshot", "ddp", "dcgm"]
    assert settle_for(["nvlink_status"]) == 300.0 and settle_for(["nics"]) == 0.0


def test_recheck_with_nothing_to_recheck_is_exit_2_before_any_connection(accepted, tmp_path):
    ledger, _ = accepted
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node07 gpuprov_profile=h100-sxm-8 ansible_host=192.0.2.7\n")
    env = {"GPUPROV_LEDGER": str(ledger.path), "GPUPROV_STATE_DIR": str(tmp_path),
           "NO_COLOR": "1", "PATH": __import__("os").environ["PATH"]}
    result = gpuprov("validate", "node07", "--recheck", "-i", str(inventory), env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == ("gpuprov: error: --recheck node07: nothing to recheck: no "
                                     "repair has voided a check since its last pass "
                                     "(`gpuprov nodes node07`)")
    assert [r.id for r in ledger.runs("validate")] == ["v1"]
    refused = gpuprov("validate", "node07", "--recheck", "--slurm", "-i", str(inventory),
                      env=env)
    assert refused.returncode == 2 and "--recheck: not with --slurm" in refused.stderr


def test_a_recheck_that_finds_another_gpu_holds_what_it_did_not_run(accepted, tmp_path):
    # a cable repair, and its recheck reads another serial in GPU 0's slot: a swap no one
    # recorded, so the gpu-swap's checks that the recheck did not run are held
    ledger, directory = accepted
    ledger.record_repair("node07", "", "tests", "cable", "mlx5_0/1")
    _later()
    swapped = eb.copy(directory, tmp_path / "swapped")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        text = (swapped / name).read_text()
        (swapped / name).write_text(text.replace("1654423001593", "1654423009999", 1))
    _recheck(ledger, swapped, tmp_path, "r1")
    opened = {h.check: h for h in holds.node_holds(ledger, "node07")}
    assert opened["ddp_smoke"].repair.kind == "gpu-swap"
    assert opened["ddp_smoke"].repair.part == "1654423009999"
    assert "nics" not in opened and "gpu_inventory" not in opened   # the recheck judged them
    assert node_statuses(ledger, time.time())["node07"].state == NodeState.NEEDS_VALIDATION


def test_a_detected_nic_swap_is_a_nic_swap_and_an_nvswitch_one_voids_everything():
    from gpuprov.hardware_history import PartSwap
    from gpuprov.model import NodeResult
    swaps = {"NIC": "nic-swap", "GPU": "gpu-swap", "NVSwitch": "unknown"}
    for part, kind in swaps.items():
        swap = PartSwap("node07", part, "slot", "old", "new", "v2", 5.0)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(holds, "part_swaps", lambda history, swap=swap: [swap])
            (found,) = holds.detected_repairs([NodeResult.__new__(NodeResult)])
        assert (found.kind, found.part, found.at) == (kind, "new", 5.0)


def _faulty(directory, tmp_path, name):
    """The healthy evidence with gpu-burn's errors on GPU 2: a hardware rejection."""
    return eb.replace(eb.copy(directory, tmp_path / name), "gpu-burn.log",
                      eb.gpu_burn_log([358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))


def test_the_same_repair_failing_again_and_again_is_a_repeat_offender(accepted, tmp_path):
    # reseat GPU 2, rejected; three times: the third rejection makes node07 a repeat
    # offender, and a fourth reseat of the same GPU does not end its quarantine
    from gpuprov.lifecycle import quarantine
    ledger, directory = accepted
    faulty = _faulty(directory, tmp_path, "faulty")
    for attempt in range(3):
        assert "node07" not in quarantine(ledger, time.time())
        ledger.record_repair("node07", "", "tests", "gpu-reseat", "GPU 2")
        _later()
        record_run(ledger, {"node07": faulty}, run_id=f"r{attempt}")
        _later()
    assert "node07" in quarantine(ledger, time.time())
    ledger.record_repair("node07", "", "tests", "gpu-reseat", "GPU 2")
    assert "node07" in quarantine(ledger, time.time())
    assert node_statuses(ledger, time.time())["node07"].state == NodeState.QUARANTINED
    _later()
    ledger.record_repair("node07", "", "tests", "gpu-swap", "GPU 2")   # the next remedy
    assert "node07" not in quarantine(ledger, time.time())


def test_repairs_that_differ_or_an_acceptance_between_start_the_count_again(accepted,
                                                                             tmp_path):
    from gpuprov.lifecycle import quarantine
    ledger, directory = accepted
    faulty = _faulty(directory, tmp_path, "faulty")
    # free text each time (what the lab's fault clearing records): never a chain
    for attempt in range(3):
        ledger.record_repair("node07", f"ticket {attempt}", "tests")
        _later()
        record_run(ledger, {"node07": faulty}, run_id=f"f{attempt}")
        _later()
    assert "node07" not in quarantine(ledger, time.time())
    # the same reseat, but the node was accepted between two of them
    for attempt, evidence in enumerate([faulty, directory, faulty, faulty]):
        ledger.record_repair("node07", "", "tests", "gpu-reseat", "GPU 2")
        _later()
        record_run(ledger, {"node07": evidence}, run_id=f"g{attempt}")
        _later()
    assert "node07" not in quarantine(ledger, time.time())


def test_the_json_report_carries_each_node_s_scope_and_open_holds(accepted, tmp_path):
    import json
    ledger, _ = accepted
    env = {"GPUPROV_LEDGER": str(ledger.path), "GPUPROV_STATE_DIR": str(tmp_path),
           "NO_COLOR": "1", "PATH": __import__("os").environ["PATH"]}
    assert gpuprov("nodes", "node07", "--repaired", "reboot", env=env).returncode == 0
    shown = gpuprov("report", "v1", "--format", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    [node] = json.loads(shown.stdout)["nodes"]
    assert node["scope"] == "full"
    assert {h["check"] for h in node["open_holds"]} == {
        h.check for h in holds.node_holds(ledger, "node07")} >= {"kernel_log", "nvlink_status"}
    assert {h["repair"] for h in node["open_holds"]} == {"reboot"}
