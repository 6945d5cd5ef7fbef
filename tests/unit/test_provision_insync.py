"""Issue 41: the in-sync skip's pieces. What a run's task results name (the shapes Ansible's
modules return, as a lab run's events carried them), the snapshot probe run for real on
this machine with `sh` (files hashed, a link, an absent file, units, the kernel release and
modules from the role variables), what makes a host's inputs differ, and which baseline
still stands in the ledger."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from gpuprov.ledger import Ledger, ProvisionBaseline
from gpuprov.model import HostOutcome
from gpuprov.provision import insync

# task results as a lab run's job events held them (res, trimmed to the keys that matter)
COPY = {"changed": False, "path": "/etc/modprobe.d/blacklist-nouveau.conf", "state": "file",
        "checksum": "29bf7d9e95c6c44dae0b661e0b5aaf6d80573db4",
        "dest": "/etc/modprobe.d/blacklist-nouveau.conf"}
DIRECTORY = {"path": "/etc/systemd/system/nvidia-persistenced.service.d", "changed": False,
             "state": "directory"}
DOWNLOAD = {"msg": "file already exists", "changed": False, "checksum_dest": None,
            "dest": "/var/cache/gpuprov/gpu-burn-2024.12.tar.gz", "state": "file"}
UNIT = {"name": "nvidia-persistenced", "changed": False, "state": "started"}
ASSERT = {"changed": False, "msg": "All assertions passed"}


def test_task_results_name_the_files_and_units_the_run_keeps():
    touched = insync.Touched()
    touched.note("ansible.builtin.copy", COPY)
    touched.note("ansible.builtin.file", DIRECTORY)          # a directory: not hashed
    touched.note("ansible.builtin.get_url", DOWNLOAD)
    touched.note("ansible.builtin.systemd_service", UNIT)
    touched.note("ansible.builtin.assert", ASSERT)
    assert touched.files == {COPY["dest"], DOWNLOAD["dest"]}
    assert touched.units == {"nvidia-persistenced"}


def _probe(variables: dict, files: list[str], units: list[str]) -> dict:
    """The snapshot script run here, as a host runs it over SSH."""
    output = subprocess.run(["sh", "-c", insync._script(variables, files, units)],
                            capture_output=True, text=True, timeout=60, check=False).stdout
    snapshot, _ = insync.snapshot_of(output, "host here")
    return snapshot


def test_the_snapshot_hashes_files_and_reads_links_units_kernel_and_modules(tmp_path):
    rendered = tmp_path / "gpuprov-nvidia-driver"
    rendered.write_text("Package: nvidia-*\nPin: version 550.90.07-1\n")
    link = tmp_path / "cuda"
    link.symlink_to("/usr/local/cuda-12.4")
    modules = tmp_path / "module"
    for name in ("nvidia", "nvidia_peermem"):
        (modules / name).mkdir(parents=True)
    variables = {"gpudirect_sys_module_dir": str(modules),
                 "nvidia_driver_kernel_release_command": "echo 6.1.0-gpuprov-lab"}
    files = [str(rendered), str(link), str(tmp_path / "gone.conf")]
    snapshot = _probe(variables, files, ["gpuprov-no-such.service"])
    digest = hashlib.sha256(rendered.read_bytes()).hexdigest()
    assert snapshot["files"] == sorted([f"{digest}  {rendered}",
                                        f"link /usr/local/cuda-12.4 {link}",
                                        f"absent - {tmp_path / 'gone.conf'}"])
    assert snapshot["host"][0] == "6.1.0-gpuprov-lab"
    assert snapshot["modules"] == ["nvidia", "nvidia_peermem"]
    assert snapshot["units"][0].endswith(" gpuprov-no-such.service")
    # systemctl printed no state for it (no such unit; no systemd here): never in sync
    assert insync.unreadable_units(snapshot) == ["gpuprov-no-such.service"]
    assert insync.unreadable_units({"units": ["enabled active docker"]}) == []
    assert len(snapshot["packages"]) == 64         # this machine's dpkg list, hashed

    # the same host read again: the same snapshot; a file edited by hand: named
    assert _probe(variables, files, ["gpuprov-no-such.service"]) == snapshot
    rendered.write_text(rendered.read_text() + "# by hand\n")
    changed = _probe(variables, files, ["gpuprov-no-such.service"])
    assert insync._differs(snapshot, changed) == f"file {rendered} changed"
    (modules / "nouveau").mkdir()
    rendered.write_text("Package: nvidia-*\nPin: version 550.90.07-1\n")
    assert insync._differs(snapshot, _probe(variables, files, ["gpuprov-no-such.service"])) \
        == "loaded kernel modules changed"


def test_the_fingerprint_changes_with_the_lock_and_any_variable_not_with_order():
    lock = {"driver_version": "550.90.07", "cuda_version": "12.4"}
    variables = {"gpuprov_profile": "h100-sxm-8", "docker_source": "docker-ce"}
    same = insync.fingerprint(dict(reversed(lock.items())), dict(reversed(variables.items())))
    assert insync.fingerprint(lock, variables) == same
    assert insync.fingerprint({**lock, "driver_version": "590.48.01"}, variables) != same
    assert insync.fingerprint(lock, {**variables, "docker_source": "debian"}) != same
    assert "550.90.07" not in same          # a hash, never the values


def _run(ledger: Ledger, run_id: str, hosts: list[str], status: str = "finished",
         check: bool = False) -> None:
    ledger.start_run(run_id, "provision", "/inv/rack3.ini", hosts, {"check": check}, {}, None)
    if status == "finished":
        ledger.finish_run(run_id, [HostOutcome(h, "converged", 1, 0, 0, 0, False, "")
                                   for h in hosts])


def _baseline(host: str, run_id: str) -> ProvisionBaseline:
    return ProvisionBaseline(host, run_id, "f" * 64, ["/etc/x"], ["docker"],
                             {"packages": "p", "files": [], "units": [], "host": [],
                              "modules": []})


def test_only_the_baseline_of_a_host_s_latest_run_stands(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    _run(ledger, "p1", ["node01", "node02", "node03"])
    ledger.record_baselines("p1", [_baseline(h, "p1") for h in ("node01", "node02", "node03")])
    _run(ledger, "p2", ["node02"], status="running")     # unfinished: running or killed
    _run(ledger, "p3", ["node03"], check=True)            # --check: changes nothing
    standing = ledger.current_baselines(["node01", "node02", "node03"], besides="")
    assert sorted(standing) == ["node01", "node03"]
    assert standing["node01"] == _baseline("node01", "p1")
    # the run deciding now is not its own predecessor
    assert sorted(ledger.current_baselines(["node01"], besides="p1")) == []


def test_the_skip_neither_reads_nor_judges_firmware(tmp_path, monkeypatch):
    """No role changes firmware, so a full run would not mend it: a lock with firmware
    minimums still skips an in-sync host whose probe read no VBIOS (drift and validate
    judge it)."""
    from pathlib import Path

    from gpuprov.drift import probe
    from gpuprov.lock import Lock
    lock = Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.16.2", "", "2.13.0", "cpu", "3.11",
                firmware_min={"vbios": {"H100": "96.00.74.00.0E"},
                              "connectx": {"MT_0000000838": "28.39.1002"}})
    script = insync._script({}, [], [])
    assert "nvidia-smi" not in script and "ibstat" not in script and "board_id" not in script
    snapshot = {"packages": "p", "files": [], "units": [], "host": [], "modules": [],
                "governors": []}
    monkeypatch.setattr(insync, "_read", lambda *a: (snapshot, probe.HostState()))
    monkeypatch.setattr(insync.expected, "differences",
                        lambda state, lock, variables: [lock.firmware_min] if
                        lock.firmware_min else [])
    baseline = ProvisionBaseline("node01", "p1", "f" * 64, [], [], snapshot)
    decision = insync.decide("node01", Path("inv"), tmp_path, lock, {}, "f" * 64, baseline)
    assert decision.skip, decision.why


def _decide(tmp_path, monkeypatch, now: dict, drift: list):
    """decide() over a baseline whose snapshot is SNAPSHOT, the host showing `now`, drift
    finding `drift`."""
    from pathlib import Path

    from gpuprov.drift import probe
    from gpuprov.lock import Lock
    lock = Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.16.2", "", "2.13.0", "cpu", "3.11")
    monkeypatch.setattr(insync, "_read", lambda *a: (now, probe.HostState()))
    monkeypatch.setattr(insync.expected, "differences", lambda state, lock, variables: drift)
    baseline = ProvisionBaseline("node01", "p1", "f" * 64, [], ["docker"], SNAPSHOT)
    return insync.decide("node01", Path("inv"), tmp_path, lock, {}, "f" * 64, baseline)


SNAPSHOT = {"packages": "p", "files": [], "units": ["enabled active docker"], "host": [],
            "modules": [], "governors": ["8 performance"], "apt_sources": []}


def test_the_in_sync_skip_runs_in_full_on_drift_an_unread_unit_or_a_governor(tmp_path,
                                                                            monkeypatch):
    """Issue 52's survivors: each of drift found, a unit whose state systemctl did not print,
    and the CPU governors changed makes the host run in full, saying which; the same
    snapshot with no drift skips."""
    from types import SimpleNamespace
    same = _decide(tmp_path, monkeypatch, dict(SNAPSHOT), [])
    assert same.skip and same.why == "in sync with run p1"
    drifted = _decide(tmp_path, monkeypatch, dict(SNAPSHOT),
                      [SimpleNamespace(summary="nvidia-driver-550 at 550.90.08")])
    assert (drifted.skip, drifted.why) == (False, "drifted: nvidia-driver-550 at 550.90.08")
    unread = _decide(tmp_path, monkeypatch, {**SNAPSHOT, "units": [" docker"]}, [])
    assert (unread.skip, unread.why) == (False, "unit docker: its state could not be read")
    governor = _decide(tmp_path, monkeypatch, {**SNAPSHOT, "governors": ["8 powersave"]}, [])
    assert (governor.skip, governor.why) == (False, "CPU governors changed")


def test_each_reason_for_a_full_run_whole(tmp_path, monkeypatch):
    """Issue 52 (mutation survivors): the Decision for each reason, host and words, and the
    first part of the snapshot that changed, named as an operator reads it."""
    from pathlib import Path

    from gpuprov.lock import Lock
    lock = Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.16.2", "", "2.13.0", "cpu", "3.11")
    read = []
    monkeypatch.setattr(insync, "_read", lambda host, *a: read.append(host) or (SNAPSHOT, None))
    monkeypatch.setattr(insync.expected, "differences", lambda *a: [])
    baseline = ProvisionBaseline("node01", "p1", "f" * 64, [], ["docker"], SNAPSHOT)
    assert insync.decide("node01", Path("inv"), tmp_path, lock, {}, "f" * 64, None) == \
        insync.Decision("node01", False, "no full converged run stands for it")
    assert insync.decide("node01", Path("inv"), tmp_path, lock, {}, "e" * 64, baseline) == \
        insync.Decision("node01", False, "its lock, variables or the collection changed")
    assert read == []     # neither reads the host
    assert insync.decide("node01", Path("inv"), tmp_path, lock, {}, "f" * 64, baseline) == \
        insync.Decision("node01", True, "in sync with run p1")
    assert read == ["node01"]
    before = {**SNAPSHOT, "files": ["link /usr/local/cuda-12.4 /usr/local/cuda", "b2  /etc/x"],
              "units": ["enabled active docker", "enabled active nvidia-dcgm"],
              "modules": ["nvidia 550.90.07"]}
    changes = [({"packages": "q"}, "installed packages or holds changed"),
               ({"files": ["b2  /etc/x"]}, "file /usr/local/cuda changed"),
               ({"units": ["enabled active docker"]}, "unit nvidia-dcgm changed"),
               ({"host": ["kernel 6.8.0-45"]}, "kernels, OS release or Secure Boot state "
                                                "changed"),
               # issue 66: a list added under sources.list.d after the run
               ({"apt_sources": ["9f  /etc/apt/sources.list.d/nvidia-container-toolkit.list"]},
                "apt's sources changed (/etc/apt/sources.list, sources.list.d)"),
               ({"governors": ["8 powersave"]}, "CPU governors changed"),
               ({"modules": []}, "loaded kernel modules changed")]
    for change, words in changes:
        assert insync._differs(before, {**before, **change}) == words, change


def test_a_file_result_by_path_a_link_or_a_hard_link_is_kept_and_a_named_non_unit_is_not():
    """Issue 52 (mutation survivors): `file` returns `path` (no `dest`) and the states
    `link` and `hard`; a task result with a `name` that is no unit task is not a unit."""
    touched = insync.Touched()
    touched.note("ansible.builtin.file", {"path": "/etc/alternatives/cuda", "state": "link"})
    touched.note("ansible.builtin.file", {"path": "/usr/bin/gpu_burn", "state": "hard"})
    touched.note("ansible.builtin.file", {"path": "/etc/gpuprov.conf", "state": "file"})
    touched.note("ansible.builtin.apt", {"name": "nvidia-utils", "changed": False})
    assert touched.files == {"/etc/alternatives/cuda", "/usr/bin/gpu_burn", "/etc/gpuprov.conf"}
    assert touched.units == set()


def test_the_snapshot_reads_the_host_s_kernels_release_secure_boot_and_governors(tmp_path):
    """The snapshot's host and governor sections as the script prints them here, from the
    variables' own folders."""
    cpus = tmp_path / "cpu"
    for n, governor in enumerate(("performance", "performance", "powersave")):
        (cpus / f"cpu{n}" / "cpufreq").mkdir(parents=True)
        (cpus / f"cpu{n}" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
    variables = {"cpu_governor_sysfs_dir": str(cpus),
                 "nvidia_driver_kernel_release_command": "echo 6.1.0-gpuprov-lab"}
    snapshot = _probe(variables, [], [])
    assert snapshot["governors"] == ["2 performance", "1 powersave"]
    host = snapshot["host"]
    assert host[0] == "6.1.0-gpuprov-lab"
    modules = Path("/lib/modules")
    kernels = sorted(p.name for p in modules.iterdir()) if modules.is_dir() else []
    assert host[1:1 + len(kernels)] == kernels
    assert any(line.startswith("ID=") for line in host)               # /etc/os-release
    if shutil.which("mokutil") is None:                               # its stand-in line
        assert host[-1] == "SecureBoot unknown"
    assert snapshot["files"] == [] and snapshot["units"] == []


def test_a_hold_alone_changes_the_packages_digest():
    from gpuprov.drift.probe import MARK

    def text(status: str) -> str:
        return (f"{MARK}packages\nnvidia-utils-550\t550.90.07-0ubuntu1\t{status}\n"
                f"{MARK}torch\n")
    held, unheld = insync.snapshot_of(text("hi"), "a")[0], insync.snapshot_of(text("ii"), "b")[0]
    assert held["packages"] != unheld["packages"]


# --- the skip against a real host: this machine over Ansible's local connection ----------

def _local_host(tmp_path):
    """An inventory naming this machine (Ansible's local connection: the probe runs in
    `sh` here as it would over SSH), the role variables pointing the probe at folders of
    this test's own, a file the run rendered and a link it made."""
    inventory = tmp_path / "rack.ini"
    inventory.write_text("node01 ansible_connection=local\n"
                         # nothing listens on port 1: its probe cannot run
                         "node02 ansible_host=127.0.0.1 ansible_port=1\n")
    modules = tmp_path / "module"
    (modules / "nvidia").mkdir(parents=True)
    variables = {"gpudirect_sys_module_dir": str(modules),
                 "nvidia_driver_kernel_release_command": "echo 6.1.0-gpuprov-lab",
                 "cpu_governor_sysfs_dir": str(tmp_path / "cpu"),
                 "nvidia_driver_module_version_file": str(tmp_path / "version"),
                 "pytorch_env_smoke_dir": str(tmp_path / "smoke")}
    rendered = tmp_path / "gpuprov-nvidia-driver"
    rendered.write_text("Package: nvidia-*\nPin: version 550.90.07-1\n")
    link = tmp_path / "cuda"
    link.symlink_to("/usr/local/cuda-12.4")
    touched = insync.Touched(files={str(rendered), str(link)})
    return inventory, variables, touched, rendered


def _lock():
    from gpuprov.lock import Lock
    return Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.16.2", "", "2.13.0", "cpu", "3.11",
                firmware_min={"vbios": {"H100": "96.00.74.00.0E"}})


def test_take_then_decide_on_a_real_host(tmp_path, monkeypatch):
    """Issue 52 (no test reached take or _read): the baseline a full run takes is the host's
    own snapshot, the files and units it names sorted; decide on the same host judges drift
    with the role variables, skips it in sync once drift finds nothing, and names the file
    edited by hand."""
    inventory, variables, touched, rendered = _local_host(tmp_path)
    control = tmp_path / "ctl"
    baseline = insync.take("node01", "p1", inventory, control, variables, "f" * 64, touched)
    files = sorted(touched.files)
    assert baseline == ProvisionBaseline("node01", "p1", "f" * 64, files, [],
                                         _probe(variables, files, []))
    assert baseline.snapshot["files"][0] == f"{hashlib.sha256(rendered.read_bytes()).hexdigest()}" \
        f"  {rendered}"
    # this machine holds no NVIDIA driver: drift, judged with the role variables, runs it
    drifted = insync.decide("node01", inventory, control, _lock(), variables, "f" * 64, baseline)
    assert (drifted.host, drifted.skip) == ("node01", False)
    assert drifted.why.startswith("drifted: ") and "550" in drifted.why, drifted.why

    seen = []
    monkeypatch.setattr(insync.expected, "differences",
                        lambda state, lock, variables: seen.append(
                            (sorted(state.packages) == sorted(_packages_here()),
                             lock.firmware_min, variables)) or [])
    assert insync.decide("node01", inventory, control, _lock(), variables, "f" * 64,
                         baseline) == insync.Decision("node01", True, "in sync with run p1")
    assert seen == [(True, {}, variables)]     # this host's packages, firmware left out
    rendered.write_text(rendered.read_text() + "# by hand\n")
    assert insync.decide("node01", inventory, control, _lock(), variables, "f" * 64,
                         baseline) == insync.Decision("node01", False, f"file {rendered} changed")


def _packages_here() -> list[str]:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\n"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("\t")[0] for line in out.splitlines() if line.split("\t")[1][1:2] == "i"]


def test_a_unit_s_state_is_read_from_systemctl_on_the_host(tmp_path):
    """The unit line is systemctl's own is-enabled and is-active words and the unit's name;
    a unit whose state systemctl did not print (this machine runs no systemd) is never in
    sync."""
    if shutil.which("systemctl") is None:
        import pytest
        pytest.skip("no systemctl on this machine")
    inventory, variables, touched, _ = _local_host(tmp_path)
    touched.units = {"docker"}
    words = [subprocess.run(["systemctl", verb, "docker"], capture_output=True, text=True,
                            check=False).stdout.strip() for verb in ("is-enabled", "is-active")]
    baseline = insync.take("node01", "p1", inventory, tmp_path / "ctl", variables, "f" * 64,
                           touched)
    assert (baseline.files, baseline.units) == (sorted(touched.files), ["docker"])
    assert baseline.snapshot["units"] == [f"{words[0]} {words[1]} docker"]
    if insync.unreadable_units(baseline.snapshot):
        assert insync.decide("node01", inventory, tmp_path / "ctl", _lock(), variables,
                             "f" * 64, baseline) == \
            insync.Decision("node01", False, "unit docker: its state could not be read")


def test_a_host_that_cannot_be_probed_takes_no_baseline_and_runs_in_full(tmp_path,
                                                                        monkeypatch):
    """No SSH to node02: no baseline (its next run is full) and a full run now, saying so;
    a probe that printed nothing names the host."""
    inventory, variables, touched, _ = _local_host(tmp_path)
    control = tmp_path / "ctl"
    assert insync.take("node02", "p1", inventory, control, variables, "f" * 64, touched) is None
    baseline = insync.take("node01", "p1", inventory, control, variables, "f" * 64, touched)
    unreached = insync.decide("node02", inventory, control, _lock(), variables, "f" * 64,
                              baseline)
    assert (unreached.host, unreached.skip) == ("node02", False)
    assert unreached.why.startswith("not probed: ") and len(unreached.why) > 12
    monkeypatch.setattr(insync.probing, "run_script", lambda *a, **k: "")
    assert insync.decide("node01", inventory, control, _lock(), variables, "f" * 64,
                         baseline) == insync.Decision(
        "node01", False, "not probed: host node01: the drift probe's output is incomplete")
    assert insync.take("node01", "p1", inventory, control, variables, "f" * 64, touched) is None


def test_the_snapshot_s_stored_form(monkeypatch):
    """The ledger keeps each host's fingerprint and snapshot: their form changing makes
    every standing baseline differ (every host runs in full once), so it is held here,
    written out by hand. A variable YAML reads as a date is hashed by its text."""
    import datetime

    from gpuprov.drift.probe import MARK
    monkeypatch.setattr(insync, "collection_digest", lambda: "c0ffee")
    text = ('{"collection": "c0ffee", "lock": {"driver_version": "550.90.07"}, '
            '"variables": {"gpuprov_intake": "2026-11-28"}}')
    assert insync.fingerprint({"driver_version": "550.90.07"},
                              {"gpuprov_intake": datetime.date(2026, 11, 28)}) == \
        hashlib.sha256(text.encode()).hexdigest()
    sources = ["f0  /etc/apt/sources.list.d/cuda.sources", "e3  /etc/apt/sources.list"]
    output = (f"{MARK}packages\nnvidia-utils-550\t550.90.07-0ubuntu1\thi\n"
              "docker.io\t24.0.7-0ubuntu4\tii\n"
              f"{MARK}torch\n{MARK}apt_sources\n" + "\n".join(sources) + "\n")
    listed = "docker.io 24.0.7-0ubuntu4\nnvidia-utils-550 550.90.07-0ubuntu1 held"
    assert insync.snapshot_of(output, "host node01")[0] == {
        "packages": hashlib.sha256(listed.encode()).hexdigest(), "files": [], "units": [],
        "host": [], "modules": [], "governors": [], "apt_sources": sorted(sources)}
