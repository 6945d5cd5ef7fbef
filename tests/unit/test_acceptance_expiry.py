"""Acceptance that expires (issue 41): the configured period, per profile, shown by
`gpuprov nodes` (the CLI as a subprocess over a ledger of real judgements)."""

from __future__ import annotations

import os
import time

import pytest

from gpuprov import settings
from gpuprov.errors import InputError
from gpuprov.lifecycle import NodeState, expires_at, node_state
from tests.conftest import gpuprov


def _config(tmp_path, monkeypatch, text: str):
    path = tmp_path / "config.yml"
    path.write_text(text)
    monkeypatch.setenv(settings.CONFIG_ENV, str(path))
    return path


def test_a_week_unless_configured_the_profile_s_own_period_first(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.delenv(settings.CONFIG_ENV, raising=False)
    assert settings.acceptance_valid_for("h100-sxm-8") == 7 * 86400
    _config(tmp_path, monkeypatch, "acceptance:\n  valid_for: 12h\n"
                                   "  profiles: {h100-sxm-8: 2w, l40s-pcie-4: never}\n")
    assert settings.acceptance_valid_for("a100-sxm-8") == 12 * 3600
    assert settings.acceptance_valid_for("h100-sxm-8") == 14 * 86400
    assert settings.acceptance_valid_for("l40s-pcie-4") is None


@pytest.mark.parametrize("value", ["7 days", "0d", "-3h", "true", "1.5d"])
def test_a_period_that_is_not_one_is_an_error_naming_the_file_and_key(tmp_path, monkeypatch,
                                                                      value):
    path = _config(tmp_path, monkeypatch, f"acceptance:\n  valid_for: {value}\n")
    with pytest.raises(InputError, match=f"{path}: acceptance.valid_for: expected a duration"):
        settings.acceptance_valid_for("h100-sxm-8")


def test_only_an_acceptance_expires_and_a_provisioning_change_says_more(recorded_ledger):
    verdicts = recorded_ledger.current_verdicts(checks=False)
    accepted, rejected = verdicts["node07"], verdicts["node08"]
    later = accepted.judged_at + 3600
    assert node_state(accepted, None, later, 60) == NodeState.EXPIRED
    assert node_state(accepted, None, later, 7200) == "accepted"
    assert node_state(accepted, None, later, None) == "accepted"       # never expires
    assert node_state(rejected, None, later, 60) == "rejected"
    assert expires_at(accepted, 60) == accepted.judged_at + 60
    assert expires_at(rejected, 60) is None and expires_at(accepted, None) is None


def test_nodes_shows_an_expired_acceptance_and_when_each_ends(recorded_ledger, tmp_path):
    config = tmp_path / "config.yml"
    env = {**os.environ, "GPUPROV_LEDGER": str(recorded_ledger.path),
           "GPUPROV_INVENTORY": "", settings.CONFIG_ENV: str(config)}
    config.write_text("acceptance:\n  valid_for: 1s\n")
    time.sleep(1.1)
    listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    header, *rows = listing.stdout.splitlines()
    assert header.split()[:8] == ["NODE", "STATE", "SINCE", "RUN", "PROVISIONED", "DRIFT",
                                  "UNTIL", "WHY"]
    row = {line.split()[0]: line.split() for line in rows}
    assert row["node07"][1] == "expired" and row["node08"][1] == "rejected"
    until = time.strftime("%Y-%m-%d %H:%M:%S",
                          time.localtime(recorded_ledger.current_verdicts(checks=False)[
                              "node07"].judged_at + 1))
    assert until in listing.stdout
    # the profile's own period: the same acceptance still holds
    config.write_text("acceptance:\n  valid_for: 1s\n  profiles: {h100-sxm-8: 30d}\n")
    listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
    assert {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[1:]
            }["node07"] == "accepted"
    config.write_text("acceptance:\n  valid_for: soon\n")
    bad = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr == (
        f"gpuprov: error: {config}: acceptance.valid_for: expected a duration such as 12h, "
        "7d or 2w (or never), got 'soon'\n")


def test_stale_nodes_are_the_never_validated_then_the_oldest_expired(recorded_ledger):
    from gpuprov.lifecycle import stale_nodes

    verdicts = recorded_ledger.current_verdicts(checks=False)
    later = verdicts["node07"].judged_at + 3600
    hosts = ["node07", "node08", "node11"]
    # node07's acceptance expired, node08 was rejected (waits for a repair), node11 never ran
    assert stale_nodes(hosts, verdicts, {}, later, lambda profile: 60) == ["node11", "node07"]
    assert stale_nodes(hosts, verdicts, {}, later, lambda profile: None) == ["node11"]


def test_stale_picks_the_nodes_itself(tmp_path):
    inventory = tmp_path / "rack.ini"
    inventory.write_text("[gpu]\nnode01\n")
    result = gpuprov("validate", "--stale", "node01", "--inventory", str(inventory),
                     timeout=60, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr == (
        "gpuprov: error: --stale picks the nodes itself: not with NODE… or --all\n")


def test_stale_with_every_acceptance_holding_runs_nothing(recorded_ledger, tmp_path):
    inventory = tmp_path / "rack.ini"
    inventory.write_text("[gpu]\nnode07\nnode08\n")
    env = {**os.environ, "GPUPROV_LEDGER": str(recorded_ledger.path),
           settings.CONFIG_ENV: str(tmp_path / "config.yml")}
    (tmp_path / "config.yml").write_text("acceptance:\n  valid_for: 30d\n")
    result = gpuprov("validate", "--stale", "--inventory", str(inventory), env=env,
                     timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"no stale node in {inventory}: every acceptance holds\n"
    assert [r.id for r in recorded_ledger.runs()] == ["v1"]     # no run started


def test_nodes_shows_a_node_rejected_for_its_setup_as_needs_setup(tmp_path):
    """Issue 53: a node whose evidence says lsmod is absent (exit 127) and nothing of the
    hardware is `needs-setup` in `gpuprov nodes`; one with a hardware finding stays
    `rejected`. The listing reads the failing checks' actions from the ledger."""
    from gpuprov.ledger import Ledger
    from tests import evidence_builder as eb
    from tests.unit.conftest import record_run

    setup = eb.replace(eb.healthy_h100(tmp_path / "node07"), "lsmod.txt", None)
    eb.replace(setup, "lsmod.txt.error", "$ lsmod\nexit status 127\nsh: 1: lsmod: not found\n")
    faulty = eb.replace(eb.healthy_h100(tmp_path / "node08"), "gpu-burn.log",
                        eb.gpu_burn_log([358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))
    ledger = record_run(Ledger(tmp_path / "ledger.db"), {"node07": setup, "node08": faulty})
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path), "GPUPROV_INVENTORY": ""}
    listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    states = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[1:]}
    assert states == {"node07": "needs-setup", "node08": "rejected"}


def test_a_change_at_the_very_moment_of_the_verdict_does_not_void_it(recorded_ledger):
    """Issue 52 (mutation survivors): a repair, an interrupted run or a provisioning change
    voids a verdict only when it comes after it; at the same second the verdict stands."""
    from gpuprov.ledger.records import RunRecord
    from gpuprov.model import HostOutcome, Outcome
    accepted = recorded_ledger.current_verdicts(checks=False)["node07"]
    at = accepted.judged_at
    assert node_state(accepted, None, at, None, repaired_at=at) == "accepted"
    assert node_state(accepted, None, at, None, interrupted_at=at) == "accepted"
    assert node_state(accepted, None, at, None, repaired_at=at + 1) == "needs-validation"
    assert node_state(accepted, None, at, None, interrupted_at=at + 1) == "interrupted"
    run = RunRecord("p1", "provision", at - 10, at, "finished", "rack.ini", ["node07"], {}, None)
    changed = HostOutcome("node07", Outcome.CONVERGED, changed=3)
    assert node_state(accepted, (run, changed), at, None) == "accepted"
    later = RunRecord("p2", "provision", at, at + 1, "finished", "rack.ini", ["node07"], {},
                      None)
    assert node_state(accepted, (later, changed), at, None) == "needs-validation"
    unfinished = RunRecord("p3", "provision", at, None, "running", "rack.ini", ["node07"], {},
                           None)
    assert node_state(accepted, (unfinished, changed), at, None) == "accepted"


def test_stale_nodes_reads_each_host_s_own_change_hold_and_profile_period(recorded_ledger):
    """Issue 52 (mutation survivors): `validate --stale`'s pick, in-process."""
    import dataclasses

    from gpuprov.ledger.records import RunRecord
    from gpuprov.lifecycle import stale_nodes
    from gpuprov.model import HostOutcome, Outcome
    base = recorded_ledger.current_verdicts(checks=False)["node07"]
    t = base.judged_at
    verdicts = {h: dataclasses.replace(base, node=h, judged_at=t + i, profile=p)
                for i, (h, p) in enumerate([("old", "a100-sxm-8"), ("changed", "h100-sxm-8"),
                                            ("held", "a100-sxm-8"), ("fresh", "h100-sxm-8")])}
    run = RunRecord("p9", "provision", t + 50, t + 60, "finished", "rack.ini", ["changed"], {},
                    None)
    provisioning = {"changed": (run, HostOutcome("changed", Outcome.CONVERGED, changed=2))}
    periods = {"a100-sxm-8": 10.0, "h100-sxm-8": 1000.0}
    picked = stale_nodes(["fresh", "held", "never", "changed", "old"], verdicts, provisioning,
                         t + 100, periods.get, held=["held"])
    # never validated first; then the oldest verdict: the A100's expired (10 s), the changed
    # H100's voided by its provisioning; the held one and the fresh H100 (1000 s) are not
    assert picked == ["never", "old", "changed"]
