"""gpuprov's Slurm rules without a cluster: Slurm's output as the lab's slurm-wlm 22.05.8
printed it, the drain/resume decisions with their circuit breaker, the `slurm` settings,
the ledger's record of actions, and the CLI's refusals before anything runs. The real
cluster is exercised on the lab (tests/lab/test_provision_validate.py)."""

from __future__ import annotations

import os

import pytest

from gpuprov.errors import InputError
from gpuprov.ledger import Ledger, SlurmAction
from gpuprov.model import CheckResult, NodeResult, Status, Verdict
from gpuprov.settings import slurm as slurm_settings
from gpuprov.slurm import policy
from gpuprov.slurm.cluster import Slurm, SlurmError, SlurmNode, connect
from tests.conftest import BIN, REPO, gpuprov

FIXTURES = REPO / "tests/fixtures/slurm"


def captured(name: str) -> str:
    """A capture without its first line (the command that printed it)."""
    return (FIXTURES / name).read_text().split("\n", 1)[1]


class Replayed(Slurm):
    """Slurm whose commands answer with the captures, and which records what it ran."""

    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__()
        object.__setattr__(self, "answers", answers)
        object.__setattr__(self, "ran", [])

    def run(self, argv: list[str]) -> str:
        self.ran.append(argv)
        return self.answers.get(argv[0], "")


def test_sinfo_capture_reads_state_partition_and_a_reason_holding_the_separator():
    nodes = Replayed({"sinfo": captured("sinfo-nodes.txt")}).nodes()
    assert set(nodes) == {"node01", "node02", "node03"}
    assert nodes["node01"].busy and nodes["node01"].in_service
    assert nodes["node02"].in_service and not nodes["node02"].busy
    assert nodes["node02"].reason == ""                 # sinfo prints `none`
    assert not nodes["node03"].in_service
    assert nodes["node03"].reason == "bios update | ticket 4411 (ops)"
    assert nodes["node03"].partitions == ("gpu",)


def test_a_node_in_two_partitions_is_one_node_in_both():
    text = "node01|idle|gpu|none\nnode01|idle|debug|none\nnode02|idle|gpu|none\n"
    nodes = Replayed({"sinfo": text}).nodes()
    assert nodes["node01"].partitions == ("gpu", "debug")


@pytest.mark.parametrize(("state", "in_service", "busy"), [
    ("idle", True, False), ("idle*", True, False), ("mixed", True, True),
    ("allocated", True, True), ("completing", True, True), ("draining", False, True),
    ("drained", False, False), ("down*", False, False), ("drained@", False, False),
])
def test_sinfo_states(state, in_service, busy):
    node = SlurmNode("n", state, "", ("gpu",))
    assert (node.in_service, node.busy) == (in_service, busy)


def test_squeue_capture_names_job_user_and_nodes():
    [job] = Replayed({"squeue": captured("squeue-jobs.txt")}).jobs_on(["node01"])
    assert str(job) == "2 (root, wrap, on node01)"


def test_drain_reason_is_one_argument_on_the_remote_command_line():
    remote = Slurm(ssh_host="head", ssh_config="/etc/cfg")
    argv = remote._argv(["scontrol", "update", "NodeName=n1", "State=DRAIN",
                         "Reason=gpuprov: ecc: 2 uncorrectable; rm -rf / (run v1)"])
    assert argv[:6] == ["ssh", "-o", "BatchMode=yes", "-F", "/etc/cfg", "head"]
    assert argv[-1] == ("scontrol update NodeName=n1 State=DRAIN "
                        "'Reason=gpuprov: ecc: 2 uncorrectable; rm -rf / (run v1)'")


def test_a_missing_slurm_client_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))      # a machine with no Slurm client
    with pytest.raises(InputError, match=r"^slurm: slurmctld not reachable: "
                                         r"sinfo: not installed on this machine$"):
        connect(Slurm())


def test_a_failing_command_gives_its_last_error_line(tmp_path):
    fake = tmp_path / "sinfo"
    fake.write_text("#!/bin/sh\necho 'sinfo: error: first' >&2\n"
                    "echo 'slurm_load_partitions: Unable to contact slurm controller "
                    "(connect failure)' >&2\nexit 1\n")
    fake.chmod(0o755)
    os.environ["PATH"], old = f"{tmp_path}:{os.environ['PATH']}", os.environ["PATH"]
    try:
        with pytest.raises(SlurmError, match=r"Unable to contact slurm controller"):
            Slurm().nodes()
    finally:
        os.environ["PATH"] = old


# --- decisions -------------------------------------------------------------------------

def node(name: str, state: str = "idle", reason: str = "",
         partitions: tuple[str, ...] = ("gpu",)) -> SlurmNode:
    return SlurmNode(name, state, reason, partitions)


def result(host: str, verdict: Verdict, run_id: str = "v1") -> NodeResult:
    checks = [CheckResult("ecc", Status.FAIL, "GPU 5 (serial 1654922004567): 2 volatile "
                          "uncorrectable ECC errors")] if verdict == Verdict.REJECTED else []
    reason = "ssh: connection refused" if verdict == Verdict.UNREACHABLE else "ecc: …"
    return NodeResult(run_id, host, verdict, verdict, "h100-sxm-8", reason, "/e", 0, 0,
                      checks, [])


def cluster(**states: tuple[str, str]) -> dict[str, SlurmNode]:
    return {name: node(name, *value) for name, value in states.items()}


NAMES = {f"node0{i}": f"node0{i}" for i in range(1, 6)}


def test_hold_drains_only_nodes_in_service():
    before = cluster(node01=("idle", ""), node02=("mixed", ""), node03=("drained", "ops"),
                     node04=("down*", "Not responding"), node05=("draining", "ops"))
    steps = policy.to_hold(NAMES, before, "validating", "v1")
    assert [(s.node, s.action, s.reason) for s in steps] == [
        ("node01", "drain", "gpuprov: validating (run v1)"),
        ("node02", "drain", "gpuprov: validating (run v1)")]


def test_unknown_nodes_are_named_before_anything_runs():
    with pytest.raises(InputError, match=r"not a node of the cluster: gpu7 \(Slurm node gpu7-ib\)"):
        policy.check_known({"node01": "node01", "gpu7": "gpu7-ib"}, cluster(node01=("idle", "")))


def test_after_verdicts_drains_rejected_resumes_own_and_never_clears_another_reason():
    names = {f"node0{i}": f"node0{i}" for i in range(1, 11)}
    before = {n: node(n) for n in names}
    before["node03"] = node("node03", "drained", "bios update (ops)")
    before["node04"] = node("node04", "drained", "RMA 7781")
    before["node05"] = node("node05", "drained", "gpuprov: ecc: … (run v0)")
    now = dict(before)
    now["node01"] = node("node01", "drained", "gpuprov: validating (run v1)")
    now["node02"] = node("node02", "drained", "gpuprov: validating (run v1)")
    results = {"node01": result("node01", Verdict.ACCEPTED),
               "node02": result("node02", Verdict.REJECTED),
               "node03": result("node03", Verdict.ACCEPTED),
               "node04": result("node04", Verdict.REJECTED),
               "node05": result("node05", Verdict.ACCEPTED)}
    steps, tripped = policy.after_verdicts(names, before, now, results, {"node01", "node02"},
                                           max_share=0.2)
    assert tripped is None                         # 1 of 10 newly out of service
    by_node = {s.node: s for s in steps}
    assert by_node["node01"].action == "resume"
    assert by_node["node02"].action == "drain"
    assert by_node["node02"].reason == ("gpuprov: ecc: GPU 5 (serial 1654922004567): 2 volatile "
                                        "uncorrectable ECC errors (run v1)")
    assert by_node["node03"].action == "keep" and "bios update (ops)" in by_node["node03"].reason
    assert by_node["node04"].action == "keep" and "RMA 7781" in by_node["node04"].reason
    assert by_node["node05"].action == "resume"   # an earlier gpuprov drain, now accepted


def test_a_quarantined_node_stays_drained_though_accepted_unless_drained_by_someone_else():
    """Issue 41: a repeat offender is not put back in service by one pass."""
    names = {n: n for n in ("node01", "node02")}
    before = cluster(node01=("idle", ""), node02=("drained", "RMA 7781"))
    now = {"node01": node("node01", "drained", "gpuprov: validating (run v1)"),
           "node02": before["node02"]}
    why = "quarantined: node01 rejected 3 times (runs v0, v0b, v0c)"
    steps, tripped = policy.after_verdicts(
        names, before, now, {n: result(n, Verdict.ACCEPTED) for n in names}, {"node01"}, 1.0,
        {"node01": why, "node02": why})
    assert tripped is None
    by_node = {s.node: s for s in steps}
    assert (by_node["node01"].action, by_node["node01"].reason) == (
        "drain", f"gpuprov: {why} (run v1)")
    assert by_node["node02"].action == "keep"      # someone else's reason stays
    # not quarantined: the same verdict resumes it
    steps, _ = policy.after_verdicts(names, before, now,
                                     {"node01": result("node01", Verdict.ACCEPTED)}, set(), 1.0)
    assert steps[0].action == "resume"


def test_an_unreachable_node_is_drained_with_why():
    names = {"node01": "node01"}
    before = cluster(node01=("idle", ""))
    steps, _ = policy.after_verdicts(names, before, before,
                                     {"node01": result("node01", Verdict.UNREACHABLE)}, set(), 1)
    assert steps[0].reason == "gpuprov: unreachable: ssh: connection refused (run v1)"


def test_breaker_trips_above_the_share_and_puts_back_what_the_run_drained():
    names = {n: n for n in ("node01", "node02", "node03")}
    before = cluster(node01=("idle", ""), node02=("idle", ""), node03=("idle", ""))
    now = {n: node(n, "drained", "gpuprov: validating (run v1)") for n in names}
    results = {"node01": result("node01", Verdict.REJECTED),
               "node02": result("node02", Verdict.REJECTED),
               "node03": result("node03", Verdict.ACCEPTED)}
    steps, tripped = policy.after_verdicts(names, before, now, results, set(names),
                                           max_share=0.5)
    assert tripped == ("circuit breaker: this run would drain 2 of 3 nodes of partition gpu "
                       "(67% > max_drain_share 50%): drained none")
    assert {(s.node, s.action) for s in steps} == {
        ("node01", "restore"), ("node02", "restore"), ("node03", "resume")}
    assert not any(s.action == "drain" for s in steps)


def test_breaker_counts_only_nodes_in_service_before_and_allows_the_share_itself():
    names = {n: n for n in ("node01", "node02", "node03", "node04")}
    before = cluster(node01=("idle", ""), node02=("idle", ""),
                     node03=("drained", "gpuprov: ecc (run v0)"), node04=("idle", ""))
    results = {n: result(n, Verdict.REJECTED) for n in ("node01", "node02", "node03")}
    steps, tripped = policy.after_verdicts(names, before, before, results, set(), 0.5)
    assert tripped is None                         # 2 of 4 newly out: exactly 50 %
    assert [s.action for s in steps] == ["drain"] * 3


def test_breaker_is_per_partition():
    names = {"a1": "a1", "b1": "b1"}
    before = {"a1": node("a1", partitions=("small",)),
              **{f"b{i}": node(f"b{i}", partitions=("big",)) for i in range(1, 11)}}
    results = {"a1": result("a1", Verdict.REJECTED), "b1": result("b1", Verdict.REJECTED)}
    _, tripped = policy.after_verdicts(names, before, before, results, set(), 0.2)
    assert tripped and "1 of 1 nodes of partition small" in tripped


def test_long_summaries_are_cut_to_one_short_line():
    long = result("node01", Verdict.REJECTED)
    long.checks[0] = CheckResult("gpu_burn", Status.FAIL, "x " * 400)
    reason = policy.verdict_reason(long)
    assert len(reason) < 200 and reason.endswith("… (run v1)")


# --- settings ----------------------------------------------------------------------------

def test_slurm_settings_defaults_and_bad_values(tmp_path, monkeypatch):
    config = tmp_path / "config.yml"
    monkeypatch.setenv("GPUPROV_CONFIG", str(config))
    config.write_text("slurm:\n  ssh_host: head\n")
    got = slurm_settings()
    assert (got.ssh_host, got.drain_timeout_s, got.max_drain_share) == ("head", 600, 0.2)
    config.write_text("slurm:\n  max_drain_share: 1.5\n")
    with pytest.raises(InputError, match=rf"^{config}: slurm.max_drain_share: expected a "
                                         r"number in \(0, 1\], got 1.5$"):
        slurm_settings()
    config.write_text("slurm:\n  drain_timeout: 60\n")
    with pytest.raises(InputError, match=r"slurm.drain_timeout: unknown setting"):
        slurm_settings()


def test_ledger_keeps_each_action_in_order(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.start_run("v1", "validate", "inv", ["node01"], {}, {}, None)
    ledger.record_slurm("v1", SlurmAction("node01", "node01", "drain", "gpuprov: validating "
                                          "(run v1)", "done"))
    ledger.record_slurm("v1", SlurmAction("node01", "node01", "resume", "accepted", "failed",
                                          "scontrol: error: Invalid node state"))
    actions = ledger.slurm_actions(host="node01")
    assert [(a.action, a.result, a.run_id) for a in actions] == [
        ("drain", "done", "v1"), ("resume", "failed", "v1")]
    assert actions[1].detail == "scontrol: error: Invalid node state"


# --- the CLI refuses before anything runs --------------------------------------------------

def test_validate_slurm_without_a_slurm_client_is_exit_2_and_records_no_run(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node01 gpuprov_profile=h100-sxm-8\n")
    env = {**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "state"),
           "GPUPROV_CONFIG": str(tmp_path / "none.yml"), "PATH": str(BIN)}   # no Slurm client on it
    (tmp_path / "none.yml").write_text("slurm: {}\n")
    result = gpuprov("validate", "-i", str(inventory), "node01", "--slurm", env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "gpuprov: error: slurm: slurmctld not reachable: sinfo: not installed on this machine"]
    assert not (tmp_path / "state" / "ledger.sqlite3").exists() or not Ledger(
        tmp_path / "state" / "ledger.sqlite3").runs()
    shadow = gpuprov("validate", "-i", str(inventory), "node01", "--shadow", env=env)
    assert shadow.returncode == 2 and "--shadow: only with --slurm" in shadow.stderr


def test_slurmctld_gone_after_the_run_needs_steps_only_where_verdicts_change_slurm():
    before = cluster(node01=("idle", ""), node02=("idle", ""), node03=("drained", "RMA 7781"),
                     node04=("drained", "gpuprov: ecc: … (run v0)"), node05=("idle", ""))
    results = {"node01": result("node01", Verdict.ACCEPTED),     # held: needs its resume
               "node02": result("node02", Verdict.REJECTED),     # held: needs its drain
               "node03": result("node03", Verdict.REJECTED),     # another reason: kept
               "node04": result("node04", Verdict.ACCEPTED),     # gpuprov's drain: resume
               "node05": result("node05", Verdict.ACCEPTED)}     # in service, not held: none
    steps = policy.unanswered(NAMES, before, results, held={"node01", "node02"})
    assert [(s.node, s.action) for s in steps] == [
        ("node01", "resume"), ("node02", "drain"), ("node04", "resume")]
    assert steps[1].reason.startswith("gpuprov: ecc: GPU 5")


# --- each judged node's state on its Slurm node (`Extra`) ----------------------------------

def test_sinfo_extra_capture_reads_json_another_tool_s_text_and_unset():
    extras = Replayed({"sinfo": captured("sinfo-extra.txt")}).extras()
    assert extras["node01"].startswith('{"gpuprov_state":"accepted"')
    assert extras["node02"] == "site tag with spaces | and a bar"   # a `|` of its own kept
    assert extras["node03"] == ""                                   # sinfo prints (null)


def test_extra_sets_gpuprov_s_keys_keeps_others_and_never_overwrites_another_tool_s_text():
    ours = policy.extra_for("", "accepted-observed", "v2", None)
    assert ours == '{"gpuprov_run":"v2","gpuprov_state":"accepted-observed","gpuprov_until":null}'
    kept = policy.extra_for('{"gpuprov_state":"rejected","gpuprov_run":"v1","rack":"r07"}',
                            "accepted", "v2", 1798526520.0)
    assert kept == ('{"gpuprov_run":"v2","gpuprov_state":"accepted",'
                    '"gpuprov_until":"2026-12-29T06:42:00+00:00","rack":"r07"}')
    assert policy.extra_for("site tag with spaces | and a bar", "accepted", "v2", None) is None
    assert policy.extra_for("[1, 2]", "accepted", "v2", None) is None


def test_publish_sets_extra_per_node_records_it_and_leaves_another_tool_s_extra(tmp_path):
    from gpuprov.lifecycle import NodeState, NodeStatus
    from gpuprov.settings import SlurmSettings
    from gpuprov.slurm.gate import SlurmGate

    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.start_run("v2", "validate", "inv", ["node01", "node02", "node03"], {}, {}, None)
    said: list[str] = []
    gate = SlurmGate(SlurmSettings(), ledger, "v2", NAMES, False, said.append)
    gate.slurm = Replayed({"sinfo": captured("sinfo-extra.txt")})
    statuses = {host: NodeStatus(host, state, result(host, verdict), None, None, None)
                for host, state, verdict in (
                    ("node01", NodeState.ACCEPTED_OBSERVED, Verdict.ACCEPTED),
                    ("node02", NodeState.ACCEPTED, Verdict.ACCEPTED),
                    ("node03", NodeState.REJECTED, Verdict.REJECTED))}
    gate.publish(statuses)
    updates = [argv for argv in gate.slurm.ran if argv[0] == "scontrol"]
    assert updates == [
        ["scontrol", "update", "NodeName=node01",
         'Extra={"gpuprov_run":"v1","gpuprov_state":"accepted-observed","gpuprov_until":null,'
         '"rack":"r07"}'],
        ["scontrol", "update", "NodeName=node03",
         'Extra={"gpuprov_run":"v1","gpuprov_state":"rejected","gpuprov_until":null}']]
    actions = [(a.node, a.action, a.result) for a in ledger.slurm_actions("v2")]
    assert actions == [("node01", "publish", "done"), ("node02", "keep", "none"),
                       ("node03", "publish", "done")]
    assert any(line.startswith("slurm: node02: left as it is: Extra is another tool's")
               for line in said), said
