"""The node-local quick check (issue 70): its findings over evidence built from real captures,
when a finding drains (at once, or only once it persists past the settle window), its files,
and its drains and resumes against a real slurmctld (the emulated cluster), where a drain
it did not set is never touched."""

import json
import os
import re
from pathlib import Path

import pytest

from gpuprov.health import hold, node_config, quick
from gpuprov.lab import emulated_slurm
from gpuprov.lock import Lock
from gpuprov.parsers.kernel_log import example_line
from gpuprov.pci import BusId
from gpuprov.profiles import load_profile
from gpuprov.slurm.cluster import Slurm
from gpuprov.validation.collect import NodeSettings
from tests import evidence_builder as eb
from tests.conftest import gpuprov

BOOT = "9a0e6f0e-1b1f-4c53-9a3b-000000000001"


def settings(node="node07"):
    return NodeSettings(node=node, profile=load_profile("h100-sxm-8"),
                        lock=Lock.from_vars({f"gpuprov_{k}": v for k, v in eb.LOCK.items()},
                                            "test lock"),
                        run_id=node_config.RUN_ID, soak_seconds=0)


def found_in(directory, accepted=None):
    return quick.findings(directory, settings(), accepted or {})


def test_the_quick_checks_are_registered_checks_and_the_transient_ones_are_the_fabric_s():
    r = quick.rules()
    assert {"gpu_inventory", "driver_version", "kernel_log", "gpu_reset_required"} <= set(
        r.checks)
    assert r.transient == {"nvlink_status", "nvswitch", "fabric_manager"}


def test_a_healthy_node_has_no_finding(tmp_path):
    assert found_in(eb.healthy_h100(tmp_path / "n")) == []


def test_a_gpu_fallen_off_the_bus_is_a_finding_that_drains_at_once(tmp_path):
    directory = eb.replace(eb.healthy_h100(tmp_path / "n"), "dmesg.txt",
                           eb.capture("kernel-log/fallen-off-bus-multiline-570-nvsentinel155.txt"))
    found = found_in(directory)
    assert [f.check for f in found] == ["kernel_log"]
    decision, _ = hold.decide(found, hold.State(), BOOT, 30.0, 300, 3)
    assert decision.drain.startswith("gpuprov: quick check: kernel_log: ")
    assert "fallen off the bus" in decision.drain


def test_an_xid_79_drains_at_once_calling_for_a_reboot(tmp_path):
    # the catalog's example line (NVIDIA/NVSentinel#155's words) as the lab injects it, for
    # GPU 2 of the real capture, after this boot's first line
    line = example_line("xid", 79, BusId.parse("00000000:3A:00.0"), 2)[0]
    assert line == "NVRM: Xid (PCI:0000:3a:00): 79, GPU has fallen off the bus"
    directory = eb.replace(eb.healthy_h100(tmp_path / "n"), "dmesg.txt",
                           "2026-11-21T09:00:01,000000+00:00 Linux version 5.15.0-112-generic\n"
                           f"2026-11-21T09:10:01,000000+00:00 {line}\n")
    [finding] = found_in(directory)
    assert (finding.check, finding.action, finding.transient) == ("kernel_log", "reboot", False)
    assert finding.summary.startswith("Xid 79 (GPU has fallen off the bus) on GPU 2 ")


def test_application_xids_before_the_check_do_not_drain(tmp_path):
    # Xid 13 and 43 are an application's faults (the real capture), not the node's
    directory = eb.replace(eb.healthy_h100(tmp_path / "n"), "dmesg.txt",
                           eb.capture("dmesg-xid/xid13-xid43-dmesg-iso-format.txt"))
    assert found_in(directory) == []


def test_driver_packages_upgraded_under_the_running_driver_drain(tmp_path):
    # an unattended upgrade: the packages at 570, the loaded driver still 565
    directory = eb.replace(eb.healthy_h100(tmp_path / "n"), "packages.txt",
                           eb.packages(driver="570.86.15"))
    found = {f.check: f for f in found_in(directory)}
    assert (found["driver_version"].action, found["driver_version"].transient) == ("reboot",
                                                                                  False)
    assert "driver/library mismatch" in found["driver_version"].summary
    decision, _ = hold.decide(list(found.values()), hold.State(), BOOT, 30.0, 300, 3)
    assert decision.drain.startswith("gpuprov: quick check: driver_version: package ")
    assert "packages.txt" in {k.file for k in quick._kinds(quick.rules().checks,
                                                            quick.rules().also_collect)}


def test_nvlink_down_waits_for_the_settle_window_and_consecutive_runs(tmp_path):
    status = eb.nvlink_status(8, 18, "26.562 GB/s").replace(
        "Link 3: 26.562 GB/s", "Link 3: <inactive>", 1)
    directory = eb.replace(eb.healthy_h100(tmp_path / "n"), "nvidia-smi-nvlink-status.txt",
                           status)
    found = found_in(directory)
    assert [(f.check, f.transient) for f in found] == [("nvlink_status", True)]
    state = hold.State()
    # right after a boot: three runs within the settle window drain nothing
    for run in range(3):
        decision, state = hold.decide(found, state, BOOT, 20.0 + run * 60, 300, 3)
        assert decision.drain is None and decision.waiting
    # a new boot starts the count again, even past the settle window
    decision, state = hold.decide(found, state, "another-boot", 400.0, 300, 3)
    assert decision.drain is None and state.streaks == {"nvlink_status": 1}
    decision, state = hold.decide(found, state, "another-boot", 460.0, 300, 3)
    assert decision.drain is None
    decision, state = hold.decide(found, state, "another-boot", 520.0, 300, 3)
    assert decision.drain.startswith("gpuprov: quick check: nvlink_status: ")
    # the link trained: the count is gone
    decision, state = hold.decide([], state, "another-boot", 580.0, 300, 3)
    assert decision.drain is None and state.streaks == {}


def test_an_unreadable_uptime_does_not_hold_a_fault_back():
    # fail closed: with no uptime to read, the consecutive runs decide alone
    found = [quick.Finding("nvlink_status", "link down", "reseat-or-inspect", True)]
    decision, state = hold.decide(found, hold.State(BOOT, {"nvlink_status": 1}), BOOT, None,
                                  300, 3)
    assert decision.drain is None
    decision, _ = hold.decide(found, state, BOOT, None, 300, 3)
    assert decision.drain.startswith("gpuprov: quick check: nvlink_status: ")


def test_a_gpu_whose_serial_changed_since_the_acceptance_is_a_finding(tmp_path):
    directory = eb.healthy_h100(tmp_path / "n")
    gpus = {g.bus_id: g.serial for g in _parts(directory)}
    assert found_in(directory, gpus) == []
    first = sorted(gpus)[0]
    found = found_in(directory, {**gpus, first: "1650000000000"})
    assert [f.check for f in found] == [quick.PARTS_CHECK]
    assert "accepted 1650000000000" in found[0].summary and first in found[0].summary


def _parts(directory):
    from gpuprov.checks import parts
    from gpuprov.checks.context import Context
    from gpuprov.evidence import Evidence
    return parts.gpus(Context(Evidence(directory), settings().profile, settings().lock))


def test_the_files_round_trip_and_a_file_others_can_write_is_refused(tmp_path):
    request, config = node_config.encode(settings(), "gpu-node07", {"00000000:18:00.0": "1"},
                                         "v1", frozenset(), 120.0, 2)
    directory = tmp_path / "quick-check"
    directory.mkdir(mode=0o700)
    (directory / "request.json").write_bytes(request)
    (directory / "config.json").write_bytes(config)
    for name in ("request.json", "config.json"):
        os.chmod(directory / name, 0o600)
    read = node_config.read(directory)
    assert (read.slurm_node, read.settle_s, read.persist_runs) == ("gpu-node07", 120.0, 2)
    assert read.settings.lock.driver_version == "565.57.01"
    os.chmod(directory / "request.json", 0o666)
    result = _cli("check", "--quick", "--config-dir", str(directory), "--state-dir",
                  str(tmp_path / "state"))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"gpuprov: error: {directory}/request.json: owned by uid "
                                     f"{os.geteuid()}, mode 0666: only root may write it (its "
                                     "tool paths run as root)")
    assert not (tmp_path / "state").exists()
    os.chmod(directory / "request.json", 0o600)
    (directory / "request.json").write_bytes(request.replace(b"565.57.01", b"570.86.15"))
    result = _cli("check", "--quick", "--config-dir", str(directory))
    assert result.returncode == 2 and "not the request the controller wrote" in result.stderr


def _cli(*args):
    return gpuprov(*args, timeout=120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = emulated_slurm.EmulatedCluster(tmp_path_factory.mktemp("quick") / "cluster",
                                       ["qnode1", "qnode2"])
    c.up(timeout=120)
    yield c
    c.down()


def test_drains_and_resumes_only_its_own_and_never_a_reason_it_did_not_set(cluster,
                                                                            monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    slurm = Slurm()
    fault = [quick.Finding("gpu_inventory", "7 GPUs, the profile expects 8", "reseat-or-inspect",
                           False)]
    state = hold.State()
    decision, state = hold.decide(fault, state, BOOT, 900.0, 300, 3)
    said = hold.apply(decision, state, slurm, "qnode1")
    node = slurm.node("qnode1")
    assert said.startswith("drained: ") and "drain" in node.state
    assert node.reason == "gpuprov: quick check: gpu_inventory: 7 GPUs, the profile expects 8"
    assert state.drained == node.reason
    # found again: nothing new is asked of Slurm, the drain stays
    decision, state = hold.decide(fault, state, BOOT, 960.0, 300, 3)
    hold.apply(decision, state, slurm, "qnode1")
    assert slurm.node("qnode1").reason == node.reason
    # fixed: its own drain resumed
    decision, state = hold.decide([], state, BOOT, 1020.0, 300, 3)
    assert decision.resume
    assert hold.apply(decision, state, slurm, "qnode1").startswith("resumed")
    assert slurm.node("qnode1").reason == "" and state.drained is None
    # a person's drain on qnode2 outlives ten runs, faulty or healthy, untouched
    cluster.run(["scontrol", "update", "NodeName=qnode2", "State=DRAIN",
                 "Reason=ticket 4411: reseat GPU 3"])
    state = hold.State()
    for run in range(10):
        decision, state = hold.decide(fault if run % 2 else [], state, BOOT, 900.0 + run, 300, 3)
        hold.apply(decision, state, slurm, "qnode2")
        node = slurm.node("qnode2")
        assert node.reason == "ticket 4411: reseat GPU 3" and "drain" in node.state
        assert state.drained is None
    # a healthy run with no drain of its own asks Slurm nothing (no slurmctld to ask)
    broken = Slurm(ssh_host="nowhere.invalid")
    decision, state = hold.decide([], hold.State(), BOOT, 900.0, 300, 3)
    assert hold.apply(decision, state, broken, "qnode1") == "healthy"


def test_a_state_file_written_by_a_run_is_read_back(tmp_path):
    state = hold.State(BOOT, {"nvlink_status": 2}, "gpuprov: quick check: x: y")
    state.save(tmp_path / "s" / "state.json")
    assert hold.State.load(tmp_path / "s" / "state.json") == state
    assert oct(os.stat(tmp_path / "s" / "state.json").st_mode & 0o777) == "0o600"
    (tmp_path / "s" / "state.json").write_text(json.dumps({"format": 99}))
    assert hold.State.load(tmp_path / "s" / "state.json") == hold.State()


def test_the_controller_sees_and_records_the_quick_check_s_drains(cluster, tmp_path):
    """`gpuprov nodes --slurm` reads Slurm once, shows each node's state and reason, and
    records a quick-check drain as it appears and goes; the metrics carry it."""
    cluster.run(["scontrol", "update", "NodeName=qnode1", "State=DRAIN",
                 "Reason=gpuprov: quick check: gpu_inventory: 7 GPUs, the profile expects 8"])
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("qnode1\nqnode2\n")
    config = tmp_path / "config.yml"
    config.write_text("slurm: {}\n")
    env = {**cluster.env, "GPUPROV_CONFIG": str(config), "GPUPROV_STATE_DIR": str(tmp_path),
           "NO_COLOR": "1"}
    try:
        shown = gpuprov("nodes", "--slurm", "-i", str(inventory), env=env)
        assert shown.returncode == 0, shown.stderr
        rows = {line.split()[0]: line for line in shown.stdout.splitlines()[1:]}
        # (sinfo's `*`: an emulated slurmd slow to answer its ping on a loaded machine)
        assert re.search(r"  drained\*?: gpuprov: quick check: gpu_inventory: 7 GPUs, the "
                         r"profile expects 8$", rows["qnode1"]), rows["qnode1"]
        metrics = gpuprov("metrics", "-i", str(inventory), env=env).stdout
        assert 'gpuprov_node_quick_check_drained{check="gpu_inventory",node="qnode1"} 1.0' \
            in metrics
    finally:
        cluster.run(["scontrol", "update", "NodeName=qnode1", "State=RESUME"])
    again = gpuprov("nodes", "--slurm", "-i", str(inventory), env=env)
    assert again.returncode == 0, again.stderr
    assert "gpuprov_node_quick_check_drained{" not in gpuprov(
        "metrics", "-i", str(inventory), env=env).stdout
    from gpuprov.ledger import Ledger
    seen = Ledger(tmp_path / "ledger.sqlite3").quick_check_drains()
    assert seen["qnode1"][3] == "" and "qnode2" not in seen


def test_as_a_prolog_on_a_machine_without_its_gpus_it_exits_1_and_asks_slurm_nothing(
        tmp_path):
    """The whole command on this machine (no GPU, no nvidia-smi): validation's collector
    runs the quick checks' commands here; what it cannot see fails as the node's setup, and
    as a Prolog that is exit 1 (Slurm drains and requeues), with no scontrol anywhere on
    PATH to call; as a report it saves no state."""
    request, config = node_config.encode(settings("ci-host"), "ci-host", {}, None,
                                         frozenset(), 300.0, 3)
    directory = tmp_path / "quick-check"
    directory.mkdir(mode=0o700)
    for name, data in (("request.json", request), ("config.json", config)):
        (directory / name).write_bytes(data)
        os.chmod(directory / name, 0o600)
    env = {**os.environ, "PATH": os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "scontrol").exists())}
    env.pop("SLURMD_NODENAME", None)
    report = gpuprov("check", "--quick", "--config-dir", str(directory), "--state-dir",
                     str(tmp_path / "state"), "--as", "report", env=env)
    assert report.returncode == 1, report.stderr
    assert report.stdout.startswith("ci-host: gpuprov: quick check: gpu_inventory: ")
    assert not (tmp_path / "state" / "state.json").exists()
    assert (tmp_path / "state" / "last" / "meta.json").is_file()
    prolog = gpuprov("check", "--quick", "--config-dir", str(directory), "--state-dir",
                     str(tmp_path / "state"), "--as", "prolog", env=env)
    assert prolog.returncode == 1, prolog.stderr
    assert prolog.stderr.startswith("ci-host: gpuprov: quick check: gpu_inventory: ")
    saved = hold.State.load(tmp_path / "state" / "state.json")
    assert saved.streaks.get("gpu_inventory") == 1 and saved.drained is None
