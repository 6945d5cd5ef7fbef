"""Issue 69: `gpuprov validate --via slurm` on an emulated cluster of real slurmds (Debian's
slurm-wlm, one slurmd per node on loopback: gpuprov/lab/emulated_slurm.py), as the CLI,
against real slurmctld behaviour: the reservation, the pinned jobs, job ends (NODE_FAIL
from a killed slurmd, TIMEOUT from a time limit), drains, `Extra`.

The 200-node campaign carries every fault at once, so one cluster and one campaign answer
them all: hardware faults on 20 nodes, crafted results the harvester must refuse, slurmds
killed mid-job, a job over its time limit, and a node busy with a user's job when the
campaign starts.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time

import pytest
import yaml

from gpuprov.ledger import Ledger
from gpuprov.model import Verdict
from tests import emulated_campaign
from tests.conftest import gpuprov

NODES = emulated_campaign.node_names(200)
FAULTED = {n for i, n in enumerate(NODES, 1) if i % 10 == 0}          # 20 nodes
CRAFTED = {  # node -> (its result's fault, what the controller says of it)
    "emu0011": ("no-result", "result refused: no result.json"),
    "emu0012": ("unsigned", "result refused: result.json is not signed (no result.json.sig)"),
    "emu0013": ("foreign-key", "result refused: result.json is not signed by emu0013's host "
                               "key (Could not verify signature.)"),
    "emu0014": ("old-run", "result refused: result.json is from run v19700101-000000-000000"),
    "emu0015": ("digest", "result refused: the evidence does not match result.json's digest"),
    "emu0016": ("symlink", "result refused: evidence/dmesg.txt: not a regular file"),
}
REWRITTEN = "emu0017"        # its request changed before the collector reads it: the job
                             # refuses it, the reason quotes why
LIAR = "emu0020"             # faulted, and its node claims acceptance
KILLED = ("emu0197", "emu0198", "emu0199")   # submitted last: running when they die
TIMEOUT = "emu0041"
BUSY = "emu0051"
COLLECTS = "emu0061"         # runs the real `gpuprov collect` here, a machine with no GPU
HARDWARE = {"restart-workload", "reset-gpu", "reboot", "reseat-or-inspect", "rma"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = emulated_campaign.build(tmp_path_factory.mktemp("campaign200"), len(NODES),
                                   FAULTED, seconds=6)
    yield site
    site.cluster.down()


# a node's job runs into Slurm's smallest time limit (a minute): the test mostly waits
@pytest.mark.waits
def test_a_200_node_campaign_drains_exactly_the_faulted_and_accepts_nothing_it_cannot_trust(
        site):
    for node, (fault, _) in CRAFTED.items():
        site.plan[node]["fault"] = fault
        site.plan[node]["foreign_key"] = str(site.cluster.host_key("emu0001"))
    site.plan[REWRITTEN]["fault"] = "request-rewritten"
    site.plan[LIAR]["claims"] = "accepted"
    site.plan[TIMEOUT]["seconds"] = 150
    site.plan[COLLECTS]["collect"] = True
    for node in KILLED:
        site.plan[node]["seconds"] = 60     # still running when their node dies
    site.replan()
    user_job = site.slurm("sbatch", "--parsable", f"--nodelist={BUSY}", "--output=/dev/null",
                          "--wrap", "sleep 15").strip()
    _wait_running(site, None, [user_job])     # the node is busy before the campaign starts

    campaign = site.start_validate("--all")
    lines = []
    for line in campaign.stdout:
        lines.append(line)
        if "job(s) in reservation" in line:
            break
    run = lines[0].split()[1].rstrip(":")
    held = site.slurm("scontrol", "show", "reservation", f"gpuprov-{run}", "--oneliner")
    assert "Flags=MAINT,IGNORE_JOBS" in held and "State=ACTIVE" in held
    assert not [n for n, (_, why) in site.reasons().items() if why.startswith("gpuprov:")]
    _wait_running(site, run, KILLED)  # the nodes die under their running jobs
    for node in KILLED:
        site.cluster.kill_node(node)
    [job] = site.slurm("squeue", "--noheader", f"--name=gpuprov-{run}-{TIMEOUT}",
                       "--format=%i").split()
    site.slurm("scontrol", "update", f"JobId={job}", "TimeLimit=1")
    lines += campaign.stdout.readlines()
    assert campaign.wait(timeout=600) == 1, "".join(lines)
    said = "".join(lines)

    ledger = Ledger(site.state / "ledger.sqlite3")
    verdicts = {r.node: r for r in ledger.node_results(run)}
    assert sorted(verdicts) == NODES and all(r.verdict for r in verdicts.values())
    reasons, extras = site.reasons(), site.extras()
    accepted = [n for n, r in verdicts.items() if r.verdict == Verdict.ACCEPTED]
    refused = {*CRAFTED, *KILLED, TIMEOUT, REWRITTEN}
    expected = set(NODES) - FAULTED - refused - {COLLECTS}
    assert (set(accepted) - expected, expected - set(accepted)) == (set(), set()), said
    # the real collector's result, signed and checked like any other: this machine has no
    # GPU, which is a setup finding, never a hardware action
    collected = verdicts[COLLECTS]
    assert collected.verdict == Verdict.REJECTED
    assert "gpu_inventory: nvidia-smi failed (exit status 127)" in collected.reason
    assert collected.failing and not {c.action for c in collected.failing} & HARDWARE
    assert reasons[COLLECTS][0] == "drained"
    for node in FAULTED:
        assert verdicts[node].verdict == Verdict.REJECTED
        state, reason = reasons[node]
        assert state == "drained"
        assert reason.startswith("gpuprov: kernel_log: GPU has fallen off the bus")
        assert reason.endswith(f"(run {run})")
        assert extras[node]["gpuprov_state"] == "rejected"
    assert "the node judged itself accepted (disagrees)" in verdicts[LIAR].reason
    for node, (_, why) in CRAFTED.items():
        assert (verdicts[node].verdict, verdicts[node].reason[:len(why)]) == (
            Verdict.UNREACHABLE, why)
        assert reasons[node][0] == "drained"
        assert reasons[node][1].startswith(f"gpuprov: unreachable: {why}")
    rewritten = verdicts[REWRITTEN]
    assert rewritten.verdict == Verdict.UNREACHABLE
    assert re.fullmatch(
        r"job \d+ ended FAILED \(NonZeroExitCode\): no result taken: gpuprov: error: "
        r"\S+/gpuprov-request\.\w+: not the request the controller wrote \(sha256 "
        r"[0-9a-f]{12}…, the job pins [0-9a-f]{12}…\): changed on the way",
        rewritten.reason), rewritten.reason
    assert reasons[REWRITTEN][0] == "drained"
    for node in KILLED:       # down for Slurm's own reason: left as it is, never accepted
        assert verdicts[node].verdict == Verdict.UNREACHABLE
        assert "ended NODE_FAIL" in verdicts[node].reason
        assert reasons[node] == ("down*", "Not responding")
    assert "ended TIMEOUT (TimeLimit)" in verdicts[TIMEOUT].reason
    # a job Slurm ended with TERM removed its request; only nodes that died keep theirs
    assert len(list(site.cluster.tmp.glob("gpuprov-request.*"))) == len(KILLED)
    assert reasons[TIMEOUT][0] == "drained"
    for node in accepted:
        assert reasons[node] == ("idle", "none"), node
        assert (extras[node]["gpuprov_state"], extras[node]["gpuprov_run"]) == (
            "accepted", run)
    # the busy node: tested once its user's job ended, never drained for it
    jobs = [line.split("|") for line in site.slurm(
        "squeue", "--noheader", "--states=all", "--format=%i|%j|%T|%S").splitlines()]
    ours = [j for j in jobs if j[1].startswith(f"gpuprov-{run}-")]
    assert len(ours) == len({j[1] for j in ours}) == len(NODES)   # one job per node
    ran = {n: (site.cluster.shared / run / n / "jobs.txt").read_text().split() for n in NODES}
    assert {n: len(ids) for n, ids in ran.items()} == dict.fromkeys(NODES, 1)
    [user] = [j for j in jobs if j[0] == user_job]
    [busy] = [j for j in ours if j[1].endswith(BUSY)]
    assert user[2] == "COMPLETED" and busy[3] >= user[3]
    assert BUSY in accepted
    assert [a.action for a in ledger.slurm_actions(host=BUSY)] == ["publish"]
    assert site.slurm("scontrol", "show", "reservation").strip() == \
        "No reservations in the system"
    assert f"slurm: reservation gpuprov-{run} deleted" in said


def _wait_running(site, run: str | None, nodes) -> None:
    """Until the campaign's jobs on `nodes` run (run None: until the jobs of these ids do)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = dict(line.split("|") for line in site.slurm(
            "squeue", "--noheader", "--format=%j|%T" if run else "--format=%i|%T")
            .splitlines())
        if all(states.get(f"gpuprov-{run}-{n}" if run else n) == "RUNNING" for n in nodes):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs of {', '.join(nodes)} not running after 120 s: {states}")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    site = emulated_campaign.build(tmp_path_factory.mktemp("campaign6"), 6, seconds=4)
    yield site
    site.cluster.down()


def test_a_controller_killed_mid_campaign_resumes_without_a_duplicate_job_or_a_lost_verdict(
        small):
    small.plan["emu0003"]["seconds"] = 0
    small.replan()
    campaign = small.start_validate("--all")
    lines = []
    for line in campaign.stdout:
        lines.append(line)
        if line.startswith("emu0003: accepted"):
            campaign.send_signal(signal.SIGKILL)
            break
    campaign.wait(timeout=60)
    run = lines[0].split()[1].rstrip(":")
    assert small.slurm("scontrol", "show", "reservation", f"gpuprov-{run}")  # still held

    resumed = small.validate("--resume", run)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"run {run}: resumed" in resumed.stdout
    # judged once: before the controller was killed
    assert not [line for line in resumed.stdout.splitlines() if line.startswith("emu0003: ")]
    jobs = small.slurm("squeue", "--noheader", "--states=all", "--format=%j").split()
    assert sorted(j for j in jobs if j.startswith(f"gpuprov-{run}-")) == [
        f"gpuprov-{run}-{n}" for n in emulated_campaign.node_names(6)]
    ran = {n: (small.cluster.shared / run / n / "jobs.txt").read_text().split()
           for n in emulated_campaign.node_names(6)}
    assert {n: len(ids) for n, ids in ran.items()} == dict.fromkeys(ran, 1)
    verdicts = Ledger(small.state / "ledger.sqlite3").node_results(run)
    assert [(r.node, r.verdict) for r in verdicts] == [
        (n, Verdict.ACCEPTED) for n in sorted(emulated_campaign.node_names(6))]
    extras = small.extras()
    assert {n: e["gpuprov_run"] for n, e in extras.items()} == dict.fromkeys(
        emulated_campaign.node_names(6), run)
    assert small.slurm("scontrol", "show", "reservation").strip() == \
        "No reservations in the system"
    again = small.validate("--resume", run)
    assert (again.returncode, again.stderr.strip()) == (
        2, f"gpuprov: error: run {run} has finished: nothing to resume")


def test_bad_input_holds_and_submits_nothing(small, tmp_path):
    before = small.slurm("squeue", "--noheader", "--states=all", "--format=%i").split()
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(small.inventory.read_text() + "ghost01\n")
    for link in ("group_vars",):
        (tmp_path / link).symlink_to(small.inventory.parent / link)
    unknown = gpuprov("validate", "--via", "slurm", "-i", str(inventory), "--all",
                      env=small.env)
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == ("gpuprov: error: slurm: not a node of the cluster: "
                                      "ghost01 (set gpuprov_slurm_node where the names "
                                      "differ)")
    no_run = small.validate("--resume", "v20260101-000000-abcdef")
    assert no_run.returncode == 2
    assert "no campaign v20260101-000000-abcdef was started on this controller" in \
        no_run.stderr
    def refused_with(name: str, **slurm_settings) -> str:
        """The campaign with these `slurm` settings (None: unset): exit 2, its one line."""
        config = yaml.safe_load(small.config.read_text())
        config["slurm"] = {k: v for k, v in (config["slurm"] | slurm_settings).items()
                           if v is not None}
        path = tmp_path / f"{name}.yml"
        path.write_text(json.dumps(config))
        done = small.validate("--all", env={**small.env, "GPUPROV_CONFIG": str(path)})
        assert done.returncode == 2, done.stdout + done.stderr
        return done.stderr.strip()

    assert refused_with("absent", shared_dir=str(tmp_path / "absent")) == (
        f"gpuprov: error: slurm.shared_dir {tmp_path / 'absent'}: no such directory on this "
        "machine")
    assert refused_with("relative", shared_dir=None, node_dir="var/lib/gpuprov") == (
        f"gpuprov: error: {tmp_path / 'relative.yml'}: slurm.node_dir: expected an absolute "
        "path on the nodes, got 'var/lib/gpuprov'")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    assert refused_with("keys", known_hosts=str(empty)) == (
        f"gpuprov: error: slurm.known_hosts {empty}: no host key for emu0001 (emu0001), "
        "emu0002 (emu0002), emu0003 (emu0003), emu0004 (emu0004), emu0005 (emu0005), "
        "emu0006 (emu0006)")
    # the fabric stage needs each node's place on the fabric: named before anything is held
    no_place = small.validate("--all", "--fabric")
    assert (no_place.returncode, no_place.stderr.strip()) == (2, (
        "gpuprov: error: host emu0001: no gpuprov_fabric_address in the inventory (its place "
        "on the compute fabric)"))
    assert small.slurm("squeue", "--noheader", "--states=all", "--format=%i").split() == before
    assert small.slurm("scontrol", "show", "reservation").strip() == \
        "No reservations in the system"


def test_without_a_shared_directory_each_result_is_fetched_over_the_node_s_connection(
        small, tmp_path):
    """No `slurm.shared_dir`: each job writes a root-only directory on its node and the
    controller fetches it over the inventory's connection once the job has ended (here
    `local`: every emulated node is this machine), then checks it as any other result."""
    names = emulated_campaign.node_names(6)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\n" + "".join(
        f"{n} ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        for n in names))
    (tmp_path / "group_vars").symlink_to(small.inventory.parent / "group_vars")
    config = yaml.safe_load(small.config.read_text())
    del config["slurm"]["shared_dir"]
    config["slurm"]["node_dir"] = str(tmp_path / "on-the-nodes")
    (tmp_path / "config.yml").write_text(json.dumps(config))
    small.plan["emu0002"]["fault"] = "digest"
    small.plan["emu0004"]["fault"] = "request-rewritten"
    small.plan["emu0005"]["evidence"] = str(small.root / "evidence" / "fault")
    small.replan()
    try:
        done = gpuprov("validate", "--via", "slurm", "-i", str(inventory), "--all",
                       env={**small.env, "GPUPROV_CONFIG": str(tmp_path / "config.yml")},
                       timeout=300)
    finally:
        for node in ("emu0002", "emu0004"):
            small.plan[node].pop("fault")
        small.plan["emu0005"]["evidence"] = small.plan["emu0001"]["evidence"]
        small.replan()
    assert done.returncode == 1, done.stdout + done.stderr
    run = done.stdout.split()[1].rstrip(":")
    verdicts = {r.node: r for r in Ledger(small.state / "ledger.sqlite3").node_results(run)}
    assert {n: str(r.verdict) for n, r in verdicts.items()} == {
        "emu0001": "accepted", "emu0002": "unreachable", "emu0003": "accepted",
        "emu0004": "unreachable", "emu0005": "rejected", "emu0006": "accepted"}
    assert verdicts["emu0002"].reason.startswith(
        "result refused: the evidence does not match result.json's digest")
    # the failed job's own output came back over the connection too
    assert "not the request the controller wrote" in verdicts["emu0004"].reason
    assert verdicts["emu0005"].reason.startswith("kernel_log: GPU has fallen off the bus")
    on_node = tmp_path / "on-the-nodes" / run
    assert (on_node / "emu0001" / "result.json").is_file()
    assert oct((on_node / "emu0001").stat().st_mode & 0o777) == "0o700"
    assert not (small.cluster.shared / run).exists()   # nothing went through a shared path
    reasons = small.reasons()
    assert [n for n in names if reasons[n][0] == "drained"] == ["emu0002", "emu0004",
                                                                "emu0005"]
    assert small.slurm("scontrol", "show", "reservation").strip() == \
        "No reservations in the system"
    small.slurm("scontrol", "update", "NodeName=emu0002,emu0004,emu0005", "State=RESUME")
