"""`gpuprov drift` without the lab: the probe's output read back, each kind of difference
worded `what: expected X, found Y`, the ledger's latest report per host, and bad input as
one line with exit 2 before any host is contacted. (tests/lab/test_provision.py drifts
converged lab nodes by hand.)"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from gpuprov.drift import expected, probe
from gpuprov.ledger import DriftReport, Ledger
from gpuprov.lock import Lock
from gpuprov.parsers.ibstat import parse_ibstat
from tests.conftest import gpuprov
from tests.evidence_builder import capture

LOCK = Lock(driver_version="550.90.07", driver_flavour="auto", cuda_version="12.4",
            cudnn_version="9.1.0.70", container_toolkit_version="1.16.2", docker_version="",
            torch_version="2.13.0", torch_cuda_build="cpu", python_version="3.11")
VARIABLES = {"gpuprov_dcgm_version": "4.2.3-1", "gpuprov_nccl_version": "2.20.5-1",
             "docker_source": "distro"}
# what `dpkg-query -W` shows on a converged lab node (hi: held)
PACKAGES = {
    "nvidia-headless-550": ("550.90.07-0ubuntu1", "hi"),
    "nvidia-utils-550": ("550.90.07-0ubuntu1", "hi"),
    "libnvidia-compute-550": ("550.90.07-0ubuntu1", "hi"),
    "nvidia-kernel-source-550": ("550.90.07-0ubuntu1", "ii"),     # a dependency: not held
    "cuda-toolkit-12-4": ("12.4.1-1", "hi"),
    "libcudnn9-cuda-12": ("9.1.0.70-1", "hi"),
    "libcudnn9-dev-cuda-12": ("9.1.0.70-1", "hi"),
    "libcudnn9-headers-cuda-12": ("9.1.0.70-1", "ii"),             # a dependency: not held
    "nvidia-container-toolkit": ("1.16.2-1", "hi"),
    "nvidia-container-toolkit-base": ("1.16.2-1", "hi"),
    "libnvidia-container-tools": ("1.16.2-1", "hi"),
    "libnvidia-container1": ("1.16.2-1", "hi"),
    "datacenter-gpu-manager-4-core": ("1:4.2.3-1", "hi"),
    "datacenter-gpu-manager-4-proprietary": ("1:4.2.3-1", "hi"),
    "datacenter-gpu-manager-4-cuda12": ("1:4.2.3-1", "hi"),
    "datacenter-gpu-manager-4-proprietary-cuda12": ("1:4.2.3-1", "hi"),
    "libnccl2": ("2.20.5-1+cuda12.4", "hi"),
    "libnccl-dev": ("2.20.5-1+cuda12.4", "hi"),
    "docker.io": ("20.10.24+dfsg1-1+b3", "ii"),
    "old-kernel-thing": ("1.0", "rc"),                               # removed: not installed
}
SMOKE = {"torch": "2.13.0+cpu", "cuda": None, "cudnn": None, "python": "3.11.2"}


def _output(packages=PACKAGES, module="550.90.07", cuda="/usr/local/cuda-12.4",
            daemon: dict | None = None, smoke: dict | None = SMOKE) -> str:
    daemon = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}} \
        if daemon is None else daemon
    lines = [probe.MARK + "packages"]
    lines += [f"{name}\t{version}\t{status} " for name, (version, status) in packages.items()]
    lines += [probe.MARK + "module", module, probe.MARK + "cuda", cuda,
              probe.MARK + "daemon.json", json.dumps(daemon), probe.MARK + "torch"]
    if smoke is not None:
        lines += ["## /var/lib/gpuprov/pytorch-envs/default.json", json.dumps(smoke, indent=2)]
    return "\n".join(lines) + "\n"


def _lines(text: str, lock: Lock = LOCK, variables: dict = VARIABLES) -> list[str]:
    state = probe.parse(text, "host node01")
    return [expected.record_line("node01", expected.as_record(d))
            for d in expected.differences(state, lock, variables)]


def test_a_converged_node_is_in_sync():
    state = probe.parse(_output(), "node01")
    assert state.packages["nvidia-utils-550"] == ("550.90.07-0ubuntu1", True)
    assert "old-kernel-thing" not in state.packages
    assert state.docker_runtimes == ["nvidia"]
    assert _lines(_output()) == []


def test_canonicals_packaging_is_judged_at_the_lock_with_its_holds():
    """A canonical-precompiled node: Canonical's -server packages at Ubuntu's revision are
    the lock's driver; the role holds them, so a released hold is drift."""
    canonical = {name: spec for name, spec in PACKAGES.items()
                 if not name.endswith("-550")}
    canonical |= {"nvidia-headless-no-dkms-550-server": ("550.90.07-0ubuntu0.22.04.1", "hi"),
                  "nvidia-utils-550-server": ("550.90.07-0ubuntu0.22.04.1", "hi"),
                  "libnvidia-compute-550-server": ("550.90.07-0ubuntu0.22.04.1", "hi"),
                  "linux-modules-nvidia-550-server-6.8.0-45-generic": ("6.8.0-45.45+1", "hi")}
    assert _lines(_output(canonical)) == []
    canonical["nvidia-utils-550-server"] = ("550.90.07-0ubuntu0.22.04.1", "ii")
    assert _lines(_output(canonical)) == [
        "node01: hold on nvidia-utils-550-server: expected held, found not held"]


def test_a_package_changed_by_hand_and_a_hold_removed():
    changed = {**PACKAGES, "datacenter-gpu-manager-4-core": ("1:4.4.1-1", "hi"),
               "nvidia-container-toolkit": ("1.16.2-1", "ii"),
               "nvidia-utils-550": ("550.127.08-0ubuntu1", "hi")}
    assert _lines(_output(changed)) == [
        "node01: package nvidia-utils-550: expected 550.90.07, found 550.127.08-0ubuntu1",
        "node01: hold on nvidia-container-toolkit: expected held, found not held",
        "node01: package datacenter-gpu-manager-4-core: expected 4.2.3, found 1:4.4.1-1"]


def test_the_module_the_cuda_alternative_the_runtime_and_torch():
    text = _output(module="550.127.08", cuda="/usr/local/cuda-12.2", daemon={},
                   smoke={**SMOKE, "torch": "2.12.0+cu126", "cuda": "12.6"})
    assert _lines(text) == [
        "node01: loaded driver module: expected 550.90.07, found 550.127.08",
        "node01: /usr/local/cuda: expected /usr/local/cuda-12.4, found /usr/local/cuda-12.2",
        "node01: container runtime: expected nvidia registered with Docker, found runtimes "
        "none",
        "node01: PyTorch environment default: expected torch 2.13.0, found torch 2.12.0+cu126",
        "node01: PyTorch environment default: expected CUDA build none (cpu), found CUDA build "
        "12.6"]
    cu126 = Lock(**{**LOCK.as_dict(), "torch_cuda_build": "cu126"})
    assert _lines(_output(smoke={**SMOKE, "cuda": "12.6"}), cu126) == []


def test_what_is_missing_is_named():
    bare = {k: v for k, v in PACKAGES.items() if not k.startswith(("nvidia-", "libnvidia-c",
                                                                   "libcudnn", "libnccl"))}
    text = _output(bare, module="", cuda="", daemon={"log-driver": "json-file"}, smoke=None)
    text = text.replace(probe.MARK + "daemon.json\n{\"log-driver\": \"json-file\"}",
                        probe.MARK + "daemon.json")
    assert _lines(text) == [
        "node01: driver packages: expected 550.90.07, found none installed",
        "node01: cuDNN packages: expected 9.1.0.70, found none installed",
        "node01: package nvidia-container-toolkit: expected 1.16.2, found not installed",
        "node01: package nvidia-container-toolkit-base: expected 1.16.2, found not installed",
        "node01: package libnvidia-container-tools: expected 1.16.2, found not installed",
        "node01: package libnvidia-container1: expected 1.16.2, found not installed",
        "node01: package libnccl2: expected 2.20.5-1, found not installed",
        "node01: package libnccl-dev: expected 2.20.5-1, found not installed",
        "node01: loaded driver module: expected 550.90.07, found none loaded",
        "node01: /usr/local/cuda: expected /usr/local/cuda-12.4, found absent",
        "node01: container runtime: expected nvidia registered with Docker, found no "
        "readable daemon.json",
        "node01: PyTorch environments: expected torch 2.13.0 (cpu), found no smoke record"]


def test_docker_ce_is_judged_only_where_the_lock_pins_it():
    pinned = Lock(**{**LOCK.as_dict(), "docker_version": "5:27.3.1-1~ubuntu.24.04~noble"})
    ce = {**VARIABLES, "docker_source": "docker-ce"}
    assert _lines(_output(), pinned, ce) == [
        "node01: package docker-ce: expected 5:27.3.1-1~ubuntu.24.04~noble, found not "
        "installed"]
    assert _lines(_output(), pinned, VARIABLES) == []      # docker.io from the distribution


def test_an_incomplete_probe_output_is_refused():
    with pytest.raises(Exception, match="host node09: the drift probe's output is incomplete"):
        probe.parse("Permission denied\n", "host node09")


def test_the_ledger_keeps_the_latest_report_per_host(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.record_drift("/inv", [DriftReport("node01", "in-sync", []),
                                 DriftReport("node02", "unreachable", ["ssh: timeout"])])
    diff = {"what": "hold on libnccl2", "expected": "held", "found": "not held"}
    ledger.record_drift("/inv", [DriftReport("node01", "drifted", [diff])])
    latest = ledger.last_drift()
    assert {h: (r.state, r.details) for h, r in latest.items()} == {
        "node01": ("drifted", [diff]), "node02": ("unreachable", ["ssh: timeout"])}


def test_bad_input_is_one_line_exit_2_and_no_host_contacted(tmp_path):
    inventory = tmp_path / "hosts.ini"
    # an address nothing answers on: a contacted host would show as unreachable, not exit 2
    inventory.write_text("node01 ansible_host=192.0.2.1\n")
    env = {**os.environ, "GPUPROV_LEDGER": str(tmp_path / "ledger.sqlite3")}
    unlocked = gpuprov("drift", "-i", str(inventory), env=env, timeout=60)
    assert unlocked.returncode == 2
    assert unlocked.stderr.strip() == (f"gpuprov: error: host node01: no versions lock "
                                       f"(gpuprov_* variables) in {inventory}")
    unknown = gpuprov("drift", "-i", str(inventory), "-l", "node77", env=env, timeout=60)
    assert unknown.returncode == 2 and "node77" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ledger.sqlite3").exists()


def test_nodes_shows_each_host_s_latest_drift(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    diff = {"what": "hold on libnccl2", "expected": "held", "found": "not held"}
    Ledger(path).record_drift("/inv", [DriftReport("node01", "drifted", [diff, diff]),
                                       DriftReport("node02", "in-sync", [])])
    env = {**os.environ, "GPUPROV_LEDGER": str(path), "GPUPROV_INVENTORY": ""}
    listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    header, *rows = listing.stdout.splitlines()
    assert header.split() == ["NODE", "STATE", "SINCE", "RUN", "PROVISIONED", "DRIFT", "UNTIL",
                              "WHY"]
    assert rows[0].split()[:2] == ["node01", "never-validated"] and "drifted (2, " in rows[0]
    assert rows[1].split() == ["node02", "never-validated", "-", "-", "-", "in-sync", "-", "-"]


FIRMWARE_LOCK = Lock(**{**LOCK.__dict__, "firmware_min": {
    "vbios": {"H100": "96.00.74.00.0E"},
    "connectx": {"MT4129": "28.39.1002", "MT4125": "22.39.1028"}}})
# a real node's ConnectX-7s (MT4129) at 28.39.1002, its ConnectX-6 Dx (MT4125) at 22.31.1014
IBSTAT = capture("ibstat/roce-cx7-200-mixed-mooncake1999.txt")


def _with_firmware(vbios: str = "96.00.74.00.0E", ibstat: str = IBSTAT) -> str:
    return (_output() + probe.MARK + "vbios\n"
            + "".join(f"{i}, NVIDIA H100 80GB HBM3, {vbios}\n" for i in range(2))
            + probe.MARK + "ibstat\n" + ibstat)


def test_firmware_below_the_lock_s_minimum_is_drift_and_at_it_is_not():
    state = probe.parse(_with_firmware(), "host node01")
    assert state.vbios[1] == ("NVIDIA H100 80GB HBM3", "96.00.74.00.0E")
    assert {p.ca_type for p in state.nic_ports} == {"MT4129", "MT4125"}
    lines = _lines(_with_firmware(vbios="96.00.30.00.01"), FIRMWARE_LOCK)
    assert lines[:2] == [f"node01: VBIOS of GPU {i} (NVIDIA H100 80GB HBM3): expected "
                         "96.00.74.00.0E or newer, found 96.00.30.00.01" for i in range(2)]
    assert [line for line in lines[2:]] == [
        f"node01: firmware of NIC {p.name} (MT4125): expected 22.39.1028 or newer, found "
        "22.31.1014" for p in state.nic_ports if p.ca_type == "MT4125"]
    assert _lines(_with_firmware(), LOCK) == []        # no minimum locked: not judged


def test_firmware_unreadable_where_a_minimum_applies_is_drift():
    lines = _lines(_output() + probe.MARK + "vbios\n" + probe.MARK + "ibstat\n"
                   + "ibpanic: [1323906] main: stat of IB device 'mlx5_8' failed: No such "
                   "file or directory\n", FIRMWARE_LOCK)
    assert lines[0] == "node01: GPUs' VBIOS: expected readable (nvidia-smi --query-gpu), " \
        "found no answer"
    assert lines[1].startswith("node01: RDMA NICs' firmware: expected readable (ibstat), found")


def test_the_probe_reads_firmware_only_where_the_lock_sets_a_minimum(tmp_path):
    # run for real here (no nvidia-smi on this machine: the VBIOS section stays empty);
    # ibstat's place taken by a real capture, as the lab's inventory points it elsewhere
    (tmp_path / "ibstat.txt").write_text(IBSTAT)
    where = probe.Where(ibstat_command=f"cat {tmp_path / 'ibstat.txt'}")
    unlocked = probe.script(where, {})
    assert "nvidia-smi" not in unlocked and "ibstat.txt" not in unlocked
    output = subprocess.run(["sh", "-c", probe.script(where, FIRMWARE_LOCK.firmware_min)],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    state = probe.parse(output, "host here")
    assert state.vbios == {} and len(state.nic_ports) == len(parse_ibstat(IBSTAT, "capture"))
    found = [d.summary for d in expected.differences(state, FIRMWARE_LOCK, VARIABLES)
             if d.id == "firmware"]
    assert found[0] == "GPUs' VBIOS: expected readable (nvidia-smi --query-gpu), found no answer"
    assert [line.split(":")[0] for line in found[1:]] == [
        f"firmware of NIC {p.name} (MT4125)" for p in state.nic_ports if p.ca_type == "MT4125"]


def test_a_minimum_locked_by_psid_reads_board_id_and_a_port_without_one_is_drift():
    lock = Lock(**{**LOCK.__dict__, "firmware_min": {"connectx": {"MT_0000000838": "28.39.1002"}}})
    assert "board_id" in probe.script(probe.Where(), lock.firmware_min)
    assert "board_id" not in probe.script(probe.Where(), FIRMWARE_LOCK.firmware_min)
    ports = parse_ibstat(IBSTAT, "capture")
    psids = "".join(f"/sys/class/infiniband/{p.ca}/board_id:MT_0000000838\n"
                    for p in ports if p.ca_type == "MT4129")
    text = (_output() + probe.MARK + "ibstat\n" + IBSTAT + probe.MARK + "board_id\n" + psids)
    # the ConnectX-7s are judged by their PSID (28.39.1002: at it); the ConnectX-6 Dx has no
    # PSID listed and no CA type minimum: which minimum applies is unknown
    assert _lines(text, lock) == [
        f"node01: PSID of NIC {p.name}: expected readable (board_id), found none"
        for p in ports if p.ca_type == "MT4125"]


def test_a_real_h100_s_vbios_is_read_and_compared_field_by_field_in_hex():
    # a real H100's answer to the probe's query: 96.00.DA.00.0C (0xDA > 0x74)
    real = capture("query-gpu/h100-580.159.04-index-name-vbios-own.txt")
    text = _output() + probe.MARK + "vbios\n" + real
    assert probe.parse(text, "host node01").vbios == {0: ("NVIDIA H100 80GB HBM3",
                                                          "96.00.DA.00.0C")}
    assert _lines(text, FIRMWARE_LOCK) == []          # above 96.00.74.00.0E
    newer = Lock(**{**LOCK.__dict__, "firmware_min": {"vbios": {"H100": "96.00.DB.00.01"}}})
    assert _lines(text, newer) == ["node01: VBIOS of GPU 0 (NVIDIA H100 80GB HBM3): expected "
                                   "96.00.DB.00.01 or newer, found 96.00.DA.00.0C"]


def test_no_rdma_port_listed_where_the_profile_has_nics_is_drift_not_silence():
    """ibstat not installed (its error goes nowhere) or the NICs gone from it: where a
    ConnectX minimum is locked and the host's profile gives it NICs, their firmware is
    unjudged, a difference; a profile without NICs (an L40S server's) is not."""
    empty = _output() + probe.MARK + "vbios\n" + "".join(
        f"{i}, NVIDIA H100 80GB HBM3, 96.00.74.00.0E\n" for i in range(2)) + probe.MARK + "ibstat\n"
    assert _lines(empty, FIRMWARE_LOCK, {**VARIABLES, "gpuprov_profile": "h100-sxm-8"}) == [
        "node01: RDMA NICs' firmware: expected readable (ibstat), found no port listed "
        "(profile h100-sxm-8: 8 NICs)"]
    assert _lines(empty, FIRMWARE_LOCK, {**VARIABLES, "gpuprov_profile": "l40s-pcie-4"}) == []
    listed = _lines(_with_firmware(), FIRMWARE_LOCK, {**VARIABLES, "gpuprov_profile": "h100-sxm-8"})
    assert listed and not any("RDMA NICs'" in line for line in listed), listed


def test_nvswitch_firmware_read_from_lspci_and_procfs_where_locked_below_or_unlisted():
    """The NVSwitches' firmware, where the lock sets an NVSwitch minimum: each switch lspci
    lists judged by its procfs version; a switch the driver lists no version for, or none
    listed where the profile has them, is a difference, never silence."""
    lock = Lock(**{**LOCK.__dict__, "firmware_min": {"nvswitch": {"10de:22a3": "96.10.3f.00.01"}}})
    assert "nvidia-nvswitch" in probe.script(probe.Where(), lock.firmware_min)
    assert "nvidia-nvswitch" not in probe.script(probe.Where(), FIRMWARE_LOCK.firmware_min)
    lspci = "".join(f"{b}:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)\n"
                    for b in ("05", "06"))
    info = ("/proc/driver/nvidia-nvswitch/devices/0000:05:00.0/information:"
            "BIOS Version: 96.10.3b.00.01\n"
            "/proc/driver/nvidia-nvswitch/devices/0000:06:00.0/information:BIOS Version: N/A\n")
    h100 = {**VARIABLES, "gpuprov_profile": "h100-sxm-8"}
    text = _output() + probe.MARK + "lspci\n" + lspci + probe.MARK + "nvswitch\n" + info
    assert _lines(text, lock, h100) == [
        "node01: firmware of NVSwitch 0000:05:00.0 (10de:22a3): expected 96.10.3f.00.01 or "
        "newer, found 96.10.3b.00.01",
        "node01: firmware of NVSwitch 0000:06:00.0 (10de:22a3): expected 96.10.3f.00.01 or "
        "newer, found unreadable"]
    at_minimum = text.replace("3b.00", "3f.00").replace("N/A", "96.10.40.00.01")
    assert _lines(at_minimum, lock, h100) == []
    unlisted = _output() + probe.MARK + "lspci\n" + probe.MARK + "nvswitch\n"
    assert _lines(unlisted, lock, h100) == [
        "node01: NVSwitches' firmware: expected readable (lspci, procfs), found no NVSwitch "
        "listed (profile h100-sxm-8: 4 NVSwitches)"]
    assert _lines(unlisted, lock, {**VARIABLES, "gpuprov_profile": "l40s-pcie-4"}) == []


def test_gdrcopy_judged_where_locked_at_its_release_and_held():
    gdrcopy = {**VARIABLES, "gpuprov_gdrcopy_version": "2.6"}
    packages = {**PACKAGES, "libgdrapi": ("2.6-1", "hi"), "gdrdrv-dkms": ("2.6-1", "hi"),
                "gdrcopy-tests": ("2.5-1", "ii")}
    lines = _lines(_output(packages=packages), LOCK, gdrcopy)
    assert lines == ["node01: package gdrcopy-tests: expected 2.6, found 2.5-1",
                     "node01: hold on gdrcopy-tests: expected held, found not held"]
    assert _lines(_output(packages=packages), LOCK, VARIABLES) == []     # not locked
    assert _lines(_output(), LOCK, gdrcopy) == [
        f"node01: package {p}: expected 2.6, found not installed"
        for p in ("libgdrapi", "gdrdrv-dkms", "gdrcopy-tests")]


def test_apt_unable_to_read_its_sources_is_drift_in_apt_s_words(tmp_path):
    """Issue 66: NVIDIA's guide list added beside gpuprov's entry stops every apt command
    (apt 2.6.2's own output, a capture): drift names apt's first error. The probe's command
    is run here for real against a healthy and a broken sources directory."""
    said = capture("apt/signed-by-conflict-arch-list-apt-2.6.2.txt")
    assert _lines(_output() + probe.MARK + "apt\n" + said) == [
        "node01: apt's sources: expected readable by apt, found " + said.splitlines()[0]]
    assert _lines(_output() + probe.MARK + "apt\n") == []
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (tmp_path / "sources.list").write_text("")
    where = (f"-o Dir::Etc::sourcelist={tmp_path}/sources.list "
             f"-o Dir::Etc::sourceparts={parts} ")
    command = probe.APT_READS.replace("apt-cache ", "apt-cache " + where)
    assert subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout == ""
    (parts / "a.list").write_text("deb [signed-by=/usr/share/keyrings/a.gpg] file:///srv/r/ /\n")
    (parts / "b.list").write_text("deb [signed-by=/etc/apt/keyrings/b.gpg] file:///srv/r/ /\n")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
    assert out.startswith("E: Conflicting values set for option Signed-By regarding source "
                          "file:/srv/r/ /: "), out
    assert not list(tmp_path.glob("*.bin"))          # no cache written
