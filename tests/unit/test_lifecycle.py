"""After acceptance: a node changed by provisioning since its verdict needs validation, and
`provision --rollback` finds the lock of the node's state before its last change."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from gpuprov.errors import InputError
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import node_state, rollback_target, stale_nodes
from gpuprov.model import Action, CheckResult, HostOutcome, NodeResult, Status, Verdict

R550 = {"driver_version": "550.90.07", "cuda_version": "12.4"}
R590 = {"driver_version": "590.48.01", "cuda_version": "12.4"}


def provisioned(ledger: Ledger, run_id: str, lock: dict, outcome: str = "converged",
                changed: int = 3, check: bool = False) -> None:
    ledger.start_run(run_id, "provision", "inv", ["node02"], {"check": check},
                     {"node02": lock}, None)
    ledger.finish_run(run_id, [HostOutcome("node02", outcome, ok=10, changed=changed,
                                           failed=int(outcome == "failed"))])
    time.sleep(0.01)     # runs are ordered by their start time


def verdict(judged_at: float) -> NodeResult:
    return NodeResult("v1", "node02", Verdict.ACCEPTED, Verdict.ACCEPTED, "a100-sxm-8", "",
                      "/e", judged_at - 1, judged_at, [], [])


def test_a_change_after_the_verdict_needs_validation(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite3")
    accepted = verdict(time.time())
    time.sleep(0.01)
    provisioned(ledger, "p1", R590)
    last = ledger.last_provisioning()["node02"]
    assert node_state(accepted, last) == "needs-validation"
    assert node_state(verdict(time.time() + 1), last) == "accepted"     # validated since
    assert node_state(None, last) == "never-validated"


def test_a_no_op_run_after_the_verdict_leaves_it_standing(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite3")
    accepted = verdict(time.time())
    provisioned(ledger, "p1", R550, changed=0)
    assert node_state(accepted, ledger.last_provisioning()["node02"]) == "accepted"


def test_rollback_after_a_converged_upgrade_goes_to_the_lock_before_it(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite3")
    provisioned(ledger, "p1", R550)
    provisioned(ledger, "p2", R550, changed=0)
    provisioned(ledger, "p3", R590)
    provisioned(ledger, "p4", R590, changed=0)
    provisioned(ledger, "p5", R550, check=True)           # a --check run changes nothing
    run, lock = rollback_target(ledger, "node02")
    assert (run.id, lock) == ("p2", R550)


def test_rollback_after_a_failed_upgrade_goes_to_the_last_converged_lock(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite3")
    provisioned(ledger, "p1", R550)
    provisioned(ledger, "p2", R590, outcome="failed")
    run, lock = rollback_target(ledger, "node02")
    assert (run.id, lock) == ("p1", R550)


def test_no_earlier_lock_is_one_line(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite3")
    provisioned(ledger, "p1", R550)
    with pytest.raises(InputError, match=r"^--rollback node02: the ledger has no earlier "
                                         r"converged provisioning of it with another versions "
                                         r"lock$"):
        rollback_target(ledger, "node02")


def test_a_run_records_dcgm_and_nccl_with_the_lock_so_a_rollback_restores_them(tmp_path):
    from gpuprov.lab.inventory import LAB_LOCK
    from gpuprov.preflight import plan_for

    variables = yaml.safe_load(LAB_LOCK)
    recorded = plan_for("node02", variables).recorded_lock()
    assert recorded["dcgm_version"] == "4.2.3-1" and recorded["nccl_version"] == "2.20.5-1"
    assert recorded["driver_version"] == "550.90.07"
    del variables["gpuprov_dcgm_version"]               # DCGM off: nothing to restore
    assert "dcgm_version" not in plan_for("node02", variables).recorded_lock()
    ledger = Ledger(tmp_path / "l.sqlite3")
    provisioned(ledger, "p1", recorded)
    provisioned(ledger, "p2", {**recorded, "dcgm_version": "4.4.1-1"})  # a DCGM-only upgrade
    run, lock = rollback_target(ledger, "node02")
    assert run.id == "p1" and lock["dcgm_version"] == "4.2.3-1"


def _rejected(*actions: Action) -> NodeResult:
    checks = [CheckResult(f"check{i}", Status.FAIL, "…", None, {}, a)
              for i, a in enumerate(actions)]
    return NodeResult("v1", "node02", Verdict.REJECTED, Verdict.REJECTED, "a100-sxm-8", "",
                      "/e", 1.0, 2.0, checks, [])


def test_a_node_rejected_for_its_setup_needs_setup_not_service():
    """Issue 53: lsmod absent (fix-setup) beside a configuration finding (none): needs-setup;
    any hardware finding, or configuration findings alone, leave it rejected."""
    assert node_state(_rejected(Action.FIX_SETUP, Action.NONE), None) == "needs-setup"
    assert node_state(_rejected(Action.FIX_SETUP, Action.REBOOT), None) == "rejected"
    assert node_state(_rejected(Action.NONE), None) == "rejected"
    assert node_state(verdict(2.0), None) == "accepted"


def test_an_unfinished_provisioning_run_leaves_its_hosts_interrupted_and_stale(tmp_path):
    """Issue 52: a provisioning run killed halfway (its process gone, no outcome recorded)
    after node02's acceptance: node02 reads `interrupted`, never `accepted`, and `validate
    --stale` picks it; a later finished run supersedes it."""
    ledger = Ledger(tmp_path / "ledger.db")
    accepted = verdict(time.time())
    time.sleep(0.01)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    ledger.start_run("p1", "provision", "inv", ["node02"], {}, {"node02": R590}, None)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE runs SET pid = ? WHERE id = 'p1'", (int(dead.stdout),))
    cut = ledger.interrupted_provisioning()
    assert list(cut) == ["node02"] and cut["node02"].id == "p1"
    assert node_state(accepted, None, interrupted_at=cut["node02"].started_at) == "interrupted"
    stale = stale_nodes(["node02"], {"node02": accepted}, {}, time.time(), lambda _: None,
                        interrupted=cut)
    assert stale == ["node02"]
    assert stale_nodes(["node02"], {"node02": accepted}, {}, time.time(), lambda _: None) == []
    provisioned(ledger, "p2", R590, changed=0)
    assert ledger.interrupted_provisioning() == {}
