"""`gpuprov provision` on the lab's three nodes of different kinds, as an operator runs it
(the CLI as a subprocess, the lab's inventory and versions lock): bad input changes no
host; --check on the bare nodes (from the wheel, installed into a fresh virtualenv) runs
every role and changes nothing; a full provision from bare nodes converges; a second run
skips the hosts in sync and runs one changed by hand in full; the collection, installed
with ansible-galaxy, converges a node from a site's own playbook;
`gpuprov drift` names what was changed by hand on one node and nothing on the others;
`gpuprov doctor` finds each of the lab's doctor faults as a blocker, and provisioning
refuses on them with no host changed; a kernel installed without headers fails the driver
naming it; Secure Boot with the site's key ends mok-enrollment-pending, converged once the
key is enrolled at the console;
a node powered off mid-run is unreachable while the others finish, and --retry-failed
converges only it; kill -9 of gpuprov mid-run leaves a ledger that opens cleanly.

The tests run in this order and build on each other (one rack, provisioned once).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuprov.lab import gdrcopy as lab_gdrcopy
from gpuprov.lab import kernel_modules, kernel_view
from gpuprov.lab import nodes as lab_nodes
from gpuprov.lab.docker import container_name
from gpuprov.lab.faults import FAULTS
from gpuprov.lab.inventory import LAB_LOCK
from gpuprov.lab.mirror import KEYRING_NAME
from gpuprov.lab.paths import NODE_MIRROR_PATH
from gpuprov.provision.runner import PLAYBOOK
from tests.certificates import site_key_pair
from tests.conftest import BIN, REPO, gpuprov
from tests.packaging import build_collection, build_wheel, fresh_virtualenv, outside_env

pytestmark = pytest.mark.lab

NODES = ("node01", "node02", "node03")
LAB_DRIVER = yaml.safe_load(LAB_LOCK)["gpuprov_driver_version"]
# what a bad-input run must not touch: packages, sources, pins, the roles' directories
SNAPSHOT = ("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort; "
            "ls -A /etc/apt/sources.list.d /etc/apt/preferences.d /opt")


@dataclass
class Rack:
    lab: object
    inventory: Path
    state: Path

    def env(self) -> dict:
        return {**os.environ, "GPUPROV_STATE_DIR": str(self.state), "NO_COLOR": "1"}

    def provision(self, *args: str, inventory: Path | None = None, timeout: float = 1500):
        return gpuprov("provision", "--inventory", str(inventory or self.inventory), *args,
                       timeout=timeout, env=self.env())

    def spawn(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(BIN / "gpuprov"), "provision", "--inventory", str(self.inventory), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env(),
            start_new_session=True)

    def snapshot(self) -> dict[str, str]:
        return {node: self.lab.ssh(node, SNAPSHOT).stdout for node in NODES}


def summary(stdout: str) -> dict[str, dict]:
    """The per-host summary table gpuprov prints at the end."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("HOST "))
    table = {}
    for line in lines[start + 1:]:
        if line.startswith("log: "):
            break
        host, outcome, ok, changed, failed, unreachable, reboot, *detail = line.split()
        table[host] = {"outcome": outcome, "ok": int(ok), "changed": int(changed),
                       "failed": int(failed), "unreachable": int(unreachable),
                       "reboot": reboot, "detail": " ".join(detail)}
    return table


@pytest.fixture(scope="module")
def rack(lab, tmp_path_factory) -> Rack:
    reset = gpuprov("lab", "reset")
    assert reset.returncode == 0, reset.stderr
    return Rack(lab, lab.inventory, tmp_path_factory.mktemp("gpuprov-state"))


def _inventory_copy(rack: Rack, tmp_path: Path) -> Path:
    copy = tmp_path / "inventory"
    shutil.copytree(rack.inventory.parent, copy)
    return copy / rack.inventory.name


def _set_lock(inventory: Path, **values) -> None:
    path = inventory.parent / "group_vars" / "all" / "versions.yml"
    data = yaml.safe_load(path.read_text())
    data.update(values)
    path.write_text(yaml.safe_dump(data))


def test_bad_input_is_one_line_exit_2_and_touches_no_host(rack, tmp_path):
    before = rack.snapshot()
    cases = {}

    missing = tmp_path / "rack9.ini"
    cases["missing inventory"] = (rack.provision(inventory=missing),
                                  f"inventory {missing} (from --inventory) does not exist")

    broken = _inventory_copy(rack, tmp_path / "broken")
    text = broken.read_text().splitlines()
    text[2] += " stray"
    broken.write_text("\n".join(text) + "\n")
    cases["malformed inventory"] = (rack.provision(inventory=broken),
                                    f"{broken}:3: Expected key=value host variable assignment, "
                                    "got: stray")

    cases["limit matching nothing"] = (rack.provision("--limit", "node42"),
                                       f"--limit 'node42' matches no host in {rack.inventory}")

    for name, values, rule in (
            ("CUDA newer than its driver", {"gpuprov_cuda_version": "12.6"},
             "cuda_driver: CUDA toolkit 12.6 needs driver >= 560.28.03; the lock has 550.90.07"),
            ("cuDNN for the wrong CUDA major",
             {"gpuprov_cudnn_version": "8.9.7.29", "gpuprov_cuda_version": "13.0",
              "gpuprov_driver_version": "580.65.06"},
             "cudnn_cuda: cuDNN 8.9.7.29 has no build for CUDA 13.x"),
            ("torch build the driver cannot run", {"gpuprov_torch_cuda_build": "cu130"},
             "torch_driver: driver 550.90.07 is too old for torch 2.13.0+cu130, CUDA 13.0")):
        inventory = _inventory_copy(rack, tmp_path / name.replace(" ", "-"))
        _set_lock(inventory, **values)
        cases[name] = (rack.provision(inventory=inventory), rule)

    # issue 37: Docker's build for another release, seen by the doctor's read-only probe of
    # the (Debian 12) lab nodes before anything changes, naming both releases
    docker = _inventory_copy(rack, tmp_path / "docker-release")
    _set_lock(docker, gpuprov_docker_source="docker-ce",
              gpuprov_docker_version="5:29.7.0-1~ubuntu.24.04~noble")
    # (the doctor prints its findings, blockers and warnings, before the one-line refusal)
    refused = rack.provision(inventory=docker)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert ("node01: blocker: release: gpuprov_docker_version 5:29.7.0-1~ubuntu.24.04~noble "
            "is Docker's build for ubuntu.24.04 (noble); this host runs debian 12 (bookworm)"
            ) in refused.stdout + refused.stderr
    assert "doctor: blockers on node01, node02, node03: nothing was changed" in refused.stderr

    unknown = _inventory_copy(rack, tmp_path / "profile")
    unknown.write_text(unknown.read_text().replace("gpuprov_profile=l40s-pcie-4",
                                                   "gpuprov_profile=l40s-pcie-16"))
    cases["unknown profile"] = (rack.provision(inventory=unknown),
                                "gpuprov_profile: unknown profile 'l40s-pcie-16'")

    for name, (result, expected) in cases.items():
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert result.stdout == "", name
        assert expected in result.stderr, (name, result.stderr)
        if "lock" not in name and "CUDA" not in name and "torch" not in name:
            assert len(result.stderr.splitlines()) == 1, (name, result.stderr)
    assert rack.snapshot() == before
    nodes = gpuprov("nodes", env=rack.env())
    assert nodes.returncode == 0 and nodes.stdout.startswith("no runs recorded yet")


def test_check_mode_on_bare_nodes_runs_every_role_and_changes_nothing(rack, tmp_path):
    """What an operator asks first of new servers: `provision --check` walks every role of
    the playbook on the three bare kinds (each role's tasks sound in check mode before
    anything they depend on exists), says what it would change, and changes nothing: no
    package, source, pin or directory, and no run in the ledger. Run as a user installs
    gpuprov: the wheel into a new virtualenv, run from elsewhere, so its collection is the
    installed package's, not this tree's."""
    bin_dir = fresh_virtualenv(tmp_path, build_wheel(tmp_path))
    version = subprocess.run([str(bin_dir / "gpuprov"), "--version"], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path, check=True,
                             env=outside_env()).stdout
    installed = bin_dir.parent / "lib"
    assert f"({installed}/" in version and str(REPO) not in version, version
    before = rack.snapshot()
    result = subprocess.run(
        [str(bin_dir / "gpuprov"), "provision", "--inventory", str(rack.inventory), "--check"],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path,
        env=outside_env({**rack.env(), "PATH": f"{bin_dir}:/usr/bin:/bin"}))
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "(check mode)" in result.stdout
    table = summary(result.stdout)
    assert set(table) == set(NODES)
    for host, row in table.items():
        # nothing converged: the outcome says it was a check, CHANGED what would change
        assert row["outcome"] == "checked" and row["failed"] == 0 and row["unreachable"] == 0 \
            and row["changed"] > 10, (host, row)
    assert rack.snapshot() == before
    assert gpuprov("nodes", env=rack.env()).stdout.startswith("no runs recorded yet")


# the play after the reboot play, as the playbook names it (the live lines name plays)
THIRD_PLAY = yaml.safe_load(PLAYBOOK.read_text())[2]["name"]


def test_full_provision_from_bare_nodes(rack):
    result = rack.provision()
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    table = summary(result.stdout)
    assert set(table) == set(NODES)
    for host, row in table.items():
        assert row["outcome"] == "converged" and row["failed"] == 0, (host, row)
        assert row["changed"] > 10, (host, row)
    # not on a terminal: a plain line when a host starts a play, none per role or task
    assert "node01: Driver stack" in result.stdout
    assert f"node03: {THIRD_PLAY}" in result.stdout
    assert "node01: nvidia_driver" not in result.stdout
    assert len(result.stdout.splitlines()) < 30, result.stdout
    log = Path(result.stdout.split("log: ", 1)[1].splitlines()[0])
    assert log.is_file() and "PLAY RECAP" in log.read_text()
    # the stack each kind needs: fabric manager only on the NVSwitch nodes
    assert rack.lab.ssh("node01", "systemctl is-active nvidia-fabricmanager").stdout.strip() == \
        "active"
    assert rack.lab.ssh("node03", "dpkg -l 'nvidia-fabricmanager*'").returncode != 0
    # the running kernel's headers from the archive, the driver built by DKMS for it
    assert rack.lab.ssh("node02", "dpkg-query -W -f='${Status}' linux-headers-6.1.0-gpuprov-lab"
                        ).stdout == "install ok installed"
    # ... and GDRCopy's gdrdrv (the lab lock sets gpuprov_gdrcopy_version), its service
    # having loaded it
    assert rack.lab.ssh("node02", "dkms status").stdout == (
        f"gdrdrv/{lab_gdrcopy.VERSION}, 6.1.0-gpuprov-lab, x86_64: installed\n"
        f"nvidia/{LAB_DRIVER}, 6.1.0-gpuprov-lab, x86_64: installed\n")
    assert rack.lab.ssh("node02", "gdrcopy_sanity").returncode == 0
    smoke = rack.lab.ssh("node02", "cat /var/lib/gpuprov/pytorch-envs/default.json").stdout
    assert '"torch": "2.13.0+cpu"' in smoke
    nodes = gpuprov("nodes", env=rack.env())
    # NODE STATE SINCE RUN PROVISIONED WHY ("-" where none): never validated, converged
    assert [line.split()[:2] + line.split()[4:5] for line in nodes.stdout.splitlines()[1:]
            ] == [[host, "never-validated", "converged"] for host in NODES]


def test_second_run_skips_in_sync_hosts_and_runs_a_changed_one_in_full(rack):
    """Issue 41: a second run skips every host still as the first left it (nothing run,
    saying why); a hold dropped by hand on node01 and a rendered file edited on node02 make
    those two run in full (and put back). Issue 66: NVIDIA's toolkit guide followed on node03
    after the run (its `$(ARCH)` list under another keyring) stops apt: drift says so, and
    the same run takes node03 out of sync, retires the list before any role needs apt, and
    apt is clean again. `--full` then walks every task of a host in sync and changes
    nothing, and so does `--check` of every role on another."""
    def skipped(table: dict, host: str) -> bool:
        row = table[host]
        return row["detail"].startswith("skipped: in sync with run p") and row["ok"] == 0

    result = rack.provision()
    assert result.returncode == 0, result.stdout[-5000:]
    table = summary(result.stdout)
    assert all(skipped(table, host) for host in NODES), table
    assert "log: none (no host ran the playbook)" in result.stdout
    guide = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
    line = (f"deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
            f"file://{NODE_MIRROR_PATH}/libnvidia-container/stable/deb/$(ARCH) /")
    by_hand = [rack.lab.ssh("node01", "apt-mark unhold nvidia-container-toolkit"),
               rack.lab.ssh("node02", "echo '# by hand' >> /etc/modprobe.d/blacklist-nouveau.conf"),
               rack.lab.ssh("node03", f"cp {NODE_MIRROR_PATH}/keys/{KEYRING_NAME} "
                                      "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
                                      f" && echo '{line}' > {guide}")]
    assert all(r.returncode == 0 for r in by_hand), [r.stderr for r in by_hand]
    broken = rack.lab.ssh("node03", "apt-get update 2>&1")
    assert "E: Conflicting values set for option Signed-By" in broken.stdout, broken.stdout
    drift = gpuprov("drift", "-i", str(rack.inventory), "--limit", "node03", env=rack.env(),
                    timeout=120)
    assert drift.returncode == 1 and drift.stdout.startswith(
        "node03: apt's sources: expected readable by apt, found E: Conflicting values set "
        "for option Signed-By"), drift.stdout + drift.stderr
    result = rack.provision()
    assert result.returncode == 0, result.stdout[-5000:]
    table = summary(result.stdout)
    assert "node01: full run: drifted: hold on nvidia-container-toolkit: expected held, found " \
           "not held" in result.stdout, result.stdout
    assert "node02: full run: file /etc/modprobe.d/blacklist-nouveau.conf changed" \
        in result.stdout, result.stdout
    assert "node03: full run: drifted: apt's sources: expected readable by apt" \
        in result.stdout, result.stdout[-5000:]
    log = Path(result.stdout.split("log: ", 1)[1].splitlines()[0]).read_text()
    assert "Retire the entries that conflict with gpuprov's" in log     # the playbook's log
    assert all(table[host]["changed"] >= 1 for host in NODES), table
    assert rack.lab.ssh("node01", "dpkg-query -W -f='${db:Status-Abbrev}' "
                        "nvidia-container-toolkit").stdout.startswith("hi")     # held again
    assert "by hand" not in rack.lab.ssh("node02", "cat /etc/modprobe.d/blacklist-nouveau.conf"
                                         ).stdout
    state = rack.lab.ssh("node03", f"ls {guide}.gpuprov.bak && apt-get update 2>&1")
    assert state.returncode == 0 and "E:" not in state.stdout and "W:" not in state.stdout, \
        state.stdout + state.stderr
    full = rack.provision("--limit", "node03", "--full")
    assert full.returncode == 0, full.stdout[-5000:]
    row = summary(full.stdout)["node03"]
    assert row["ok"] > 100 and row["changed"] == 0 and row["outcome"] == "converged", row
    # --check of every role on a converged node (the NVSwitch kind: the most roles) would
    # change nothing: check mode reports no change a real run would not make
    checked = rack.provision("--limit", "node01", "--check")
    assert checked.returncode == 0, checked.stdout[-5000:]
    row = summary(checked.stdout)["node01"]
    assert row["ok"] > 100 and row["changed"] == 0 and row["outcome"] == "checked", row


def test_the_collection_converges_a_node_from_a_site_playbook(rack, tmp_path):
    """A site's own three-line playbook with the collection installed by ansible-galaxy
    (and nothing of gpuprov's on the collections path): plain ansible-playbook."""
    path = tmp_path / "collections"
    # this path alone: a copy elsewhere (~/.ansible/collections) neither satisfies the
    # install nor serves the run
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(path), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_DEPRECATION_WARNINGS": "False"}
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(path),
                    str(build_collection(tmp_path))], check=True, capture_output=True,
                   timeout=120, env=env)
    assert (path / "ansible_collections/gpuprov/gpu/MANIFEST.json").is_file()
    site = tmp_path / "site.yml"
    site.write_text("- hosts: node02\n  roles:\n    - gpuprov.gpu.nvidia_driver\n")
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(rack.inventory),
                             str(site)], capture_output=True, text=True, timeout=900,
                            env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert re.search(r"node02\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0",
                     result.stdout), result.stdout[-2000:]


DCGM = ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-proprietary",
        "datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-proprietary-cuda12")
# as an operator would: apt lets the held packages change and drops their holds
DCGM_BY_HAND = ("apt-get install -y -q --allow-change-held-packages --allow-downgrades "
                + " ".join(f"{p}=1:{{v}}-1" for p in DCGM))


def test_drift_names_what_changed_by_hand_and_nothing_else(rack):
    """node01: DCGM changed by hand (which drops its holds), the toolkit's hold removed and
    a NIC's and an NVSwitch's firmware below the lock's minimums (the firmware-old fault);
    node03: its driver module at another version (the driver-mismatch fault), so its VBIOS
    cannot be read either; node02 untouched. Then put back."""
    clean = gpuprov("drift", "-i", str(rack.inventory), env=rack.env(), timeout=120)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "3 host(s)" in clean.stderr and "3 in sync, 0 drifted" in clean.stderr
    by_hand = [rack.lab.ssh("node01", DCGM_BY_HAND.format(v="4.4.1"), timeout=300),
               rack.lab.ssh("node01", "apt-mark unhold nvidia-container-toolkit")]
    assert all(r.returncode == 0 for r in by_hand), [r.stderr for r in by_hand]
    assert gpuprov("lab", "fault", "node03", "driver-mismatch").returncode == 0
    assert gpuprov("lab", "fault", "node01", "firmware-old").returncode == 0
    try:
        found = gpuprov("drift", "-i", str(rack.inventory), "--json", env=rack.env(),
                        timeout=120)
        text = gpuprov("drift", "-i", str(rack.inventory), env=rack.env(), timeout=120)
    finally:
        assert gpuprov("lab", "fault", "node03", "--clear").returncode == 0
        assert gpuprov("lab", "fault", "node01", "--clear").returncode == 0
        rack.lab.ssh("node01", DCGM_BY_HAND.format(v="4.2.3"), timeout=300)
        rack.lab.ssh("node01", "apt-mark hold nvidia-container-toolkit " + " ".join(DCGM))
    assert found.returncode == text.returncode == 1, text.stdout + text.stderr
    report = {h["host"]: h for h in json.loads(found.stdout)["hosts"]}
    assert report["node02"] == {"host": "node02", "state": "in-sync", "differences": []}
    assert text.stdout.splitlines() == [
        "node01: hold on nvidia-container-toolkit: expected held, found not held",
        *(line for p in DCGM for line in (
            f"node01: package {p}: expected 4.2.3, found 1:4.4.1-1",
            f"node01: hold on {p}: expected held, found not held")),
        "node01: firmware of NIC mlx5_0 port 1 (MT_0000000838): expected 28.39.1002 or newer, "
        "found 28.35.1002",
        # the fault's NVSwitch, read from lspci and the driver's procfs
        "node01: firmware of NVSwitch 0000:05:00.0 (10de:22a3): expected 96.10.3f.00.01 or "
        "newer, found 96.10.3b.00.01",
        f"node03: loaded driver module: expected {LAB_DRIVER}, found "
        f"{report['node03']['differences'][0]['found']}",
        "node03: GPUs' VBIOS: expected readable (nvidia-smi --query-gpu), found no answer"]
    assert report["node03"]["differences"][0]["found"] != LAB_DRIVER
    nodes = {line.split()[0]: line for line in
             gpuprov("nodes", env=rack.env()).stdout.splitlines()[1:]}
    # node01: the toolkit's hold, each DCGM package's version and hold, two firmware lines
    assert f"drifted ({1 + 2 * len(DCGM) + 2}," in nodes["node01"]
    assert "drifted (2," in nodes["node03"]
    assert " in-sync " in nodes["node02"]
    again = gpuprov("drift", "-i", str(rack.inventory), env=rack.env(), timeout=120)
    assert again.returncode == 0, again.stdout      # put back: in sync again


# two rounds of the lab's doctor faults, one per node: (node, fault); the blocker's check is
# the fault's own declaration (gpuprov/lab/faults: FaultKind.expect)
DOCTOR_ROUNDS = [
    [("node01", "secure-boot"), ("node02", "no-headers"), ("node03", "run-installer")],
    [("node01", "dpkg-interrupted"), ("node02", "disk-full"), ("node03", "gpu-busy")],
]


def test_doctor_blocks_on_each_fault_and_provision_refuses_without_changing_a_host(rack):
    def doctor(*args):
        return gpuprov("doctor", "-i", str(rack.inventory), *args, env=rack.env(), timeout=120)

    def blockers(result) -> dict[str, list[dict]]:
        return {h["host"]: [f for f in h["findings"] if f["severity"] == "blocker"]
                for h in json.loads(result.stdout)["hosts"]}

    clean = doctor("--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert blockers(clean) == {node: [] for node in NODES}
    for round_ in DOCTOR_ROUNDS:
        for node, kind in round_:
            assert gpuprov("lab", "fault", node, kind).returncode == 0, (node, kind)
        try:
            found = doctor("--json")
            text = doctor()
            before = rack.snapshot()
            refused = rack.provision()
            after = rack.snapshot()
        finally:
            for node in NODES:
                assert gpuprov("lab", "fault", node, "--clear").returncode == 0
        assert found.returncode == text.returncode == 2, text.stdout
        assert json.loads(found.stdout)["seconds"] <= 5
        for node, kind in round_:
            expect = FAULTS[kind].expect
            assert expect.by == "doctor", kind
            check = expect.check
            [blocker] = blockers(found)[node]
            assert blocker["check"] == check and blocker["fix"], (kind, blocker)
            assert any(line.startswith(f"{node}: blocker: {check}: ") and "; fix: " in line
                       for line in text.stdout.splitlines()), (kind, text.stdout)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.splitlines()[-1] == (
            "gpuprov: error: doctor: blockers on node01, node02, node03: nothing was changed; "
            "fix them (`gpuprov doctor` lists them) and provision again")
        assert not any(line.startswith("run ") for line in refused.stdout.splitlines())
        assert after == before
    again = doctor("--json")
    assert again.returncode == 0 and blockers(again) == {node: [] for node in NODES}


def _outcome_in_nodes(rack: Rack, node: str) -> str:
    """`gpuprov nodes`: NODE STATE SINCE RUN PROVISIONED WHY; the PROVISIONED column."""
    rows = {line.split()[0]: line.split() for line in
            gpuprov("nodes", env=rack.env()).stdout.splitlines()[1:]}
    return rows[node][4]


def test_a_kernel_installed_without_headers_fails_the_driver_naming_it(rack):
    """DKMS's scriptlet skips a kernel without headers and exits 0: the role's per-kernel
    check is what catches it (the doctor only warns: the running kernel is fine)."""
    assert gpuprov("lab", "fault", "node03", "kernel-update").returncode == 0
    try:
        doctor = gpuprov("doctor", "-i", str(rack.inventory), "-l", "node03", env=rack.env(),
                         timeout=120)
        result = rack.provision("--limit", "node03")
    finally:
        assert gpuprov("lab", "fault", "node03", "--clear").returncode == 0
    assert doctor.returncode == 0 and "node03: warning: kernel-headers: installed kernel " \
        "6.1.5-gpuprov-lab has no headers" in doctor.stdout, doctor.stdout
    assert result.returncode == 1, result.stdout[-3000:]
    row = summary(result.stdout)["node03"]
    assert row["outcome"] == "failed", row
    assert (f"driver {LAB_DRIVER} is not built for kernel 6.1.5-gpuprov-lab (no headers: "
            "apt-get install linux-headers-6.1.5-gpuprov-lab") in row["detail"], row


def test_secure_boot_signs_with_the_site_key_waits_for_enrollment_then_converges(rack, tmp_path):
    """Secure Boot turned on for a converged node: at the next boot its unsigned module is
    refused. With the site's key the module is re-signed and the certificate queued for
    MokManager: the host ends mok-enrollment-pending, not in a reboot loop. Enrolled at the
    console, the signed module loads and a new run converges. The key is one a site CA
    issued, so modinfo names the CA (kmod prints the signer info's issuer, issue 66): the
    role's signer check expects what modinfo prints."""
    key, cert = site_key_pair("gpuprov lab node02 module signing",
                              issued_by="gpuprov lab site CA")
    (tmp_path / "mok.key").write_bytes(key)
    (tmp_path / "mok.der").write_bytes(cert)
    inventory = _inventory_copy(rack, tmp_path)
    host_vars = inventory.parent / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node02.yml").write_text(yaml.safe_dump({
        "gpuprov_module_signing": "site-mok",
        "gpuprov_mok_signing_key_file": str(tmp_path / "mok.key"),
        "gpuprov_mok_certificate_file": str(tmp_path / "mok.der"),
        # `mokutil --generate-hash` of the one-time password (a crypt hash, no secret)
        "gpuprov_mok_enrollment_password_hash": "$6$gpuprovlab$T3Rx1DmGq8cWnqI1lQ3bG0",
    }))
    assert gpuprov("lab", "fault", "node02", "secure-boot").returncode == 0
    try:
        restarted = subprocess.run(["docker", "restart", "--time", "0", container_name("node02")],
                                   capture_output=True, timeout=120)
        assert restarted.returncode == 0
        lab_nodes.wait_ready("node02")
        assert rack.lab.ssh("node02", "cat /run/gpuprov-lab/nvidia-module-version").stdout == ""

        pending = rack.provision("--limit", "node02", "--allow-reboot", inventory=inventory)
        assert pending.returncode == 1, pending.stdout[-3000:]
        row = summary(pending.stdout)["node02"]
        assert row["outcome"] == "mok-enrollment-pending" and row["failed"] == 0, row
        assert _outcome_in_nodes(rack, "node02") == "mok-enrollment-pending"
        signer = rack.lab.ssh("node02", f"{kernel_modules.MODINFO} -F signer nvidia").stdout
        assert signer == "gpuprov lab site CA\n"
        assert "is already in the enrollment request" in rack.lab.ssh(
            "node02", "mokutil --test-key /var/lib/dkms/gpuprov-mok.der").stdout
        # the private key: on the node for DKMS only, never in a log or the ledger
        secret = key.decode().splitlines()[1]
        log = Path(pending.stdout.split("log: ", 1)[1].splitlines()[0])
        assert secret not in log.read_text()
        assert secret.encode() not in b"".join(p.read_bytes() for p in rack.state.rglob("*")
                                               if p.is_file())
        assert rack.lab.ssh("node02", "stat -c %a /var/lib/dkms/gpuprov-mok.key").stdout == \
            "600\n"

        enrolled = gpuprov("lab", "mok-enroll", "node02", timeout=180)
        assert enrolled.returncode == 0, enrolled.stderr
        assert rack.lab.ssh("node02", "cat /run/gpuprov-lab/nvidia-module-version").stdout == \
            f"{LAB_DRIVER}\n"
        converged = rack.provision("--limit", "node02", inventory=inventory)
        assert converged.returncode == 0, converged.stdout[-3000:]
        assert summary(converged.stdout)["node02"]["outcome"] == "converged"
        assert _outcome_in_nodes(rack, "node02") == "converged"
    finally:
        assert gpuprov("lab", "fault", "node02", "--clear").returncode == 0


def test_canonical_precompiled_modules_load_under_secure_boot_with_nothing_enrolled(
        rack, tmp_path):
    """The second Secure Boot way: Canonical's driver packages and each kernel's prebuilt
    module, signed with Canonical's module signing key. On a node carrying NVIDIA's DKMS driver the
    doctor refuses and names what to purge; purged, with Secure Boot on and no key enrolled,
    the node converges with the prebuilt module loaded, and a second run changes nothing."""
    inventory = _inventory_copy(rack, tmp_path)
    host_vars = inventory.parent / "host_vars"
    host_vars.mkdir(exist_ok=True)
    # Canonical's modules ship no driver sources, which GDRCopy's gdrdrv builds against:
    # the operator leaves GDRCopy off this node
    (host_vars / "node03.yml").write_text(
        yaml.safe_dump({"gpuprov_module_signing": "canonical-precompiled",
                        "gpuprov_gdrcopy_version": ""}))
    branch = LAB_DRIVER.split(".")[0]
    # the flavour the role picks for node03's GPUs, either way for the lab's kernel
    module_package = re.compile(rf"^linux-modules-nvidia-{branch}-server(-open)?-"
                                rf"{re.escape(kernel_view.KERNEL_RELEASE)} hi ?$", re.M)

    def doctor():
        return gpuprov("doctor", "-i", str(inventory), "-l", "node03", "--json", env=rack.env(),
                       timeout=120)

    refused = doctor()
    assert refused.returncode == 2, refused.stdout
    found = {f["check"]: f for f in json.loads(refused.stdout)["hosts"][0]["findings"]}
    assert set(found) == {"repository-driver", "dkms"}, found
    assert f"nvidia-dkms-{branch}" in found["repository-driver"]["seen"]
    purge = found["repository-driver"]["fix"].removesuffix(" (then reboot)")
    try:
        purged = rack.lab.ssh("node03", f"DEBIAN_FRONTEND=noninteractive {purge} -y")
        assert purged.returncode == 0, purged.stderr
        assert gpuprov("lab", "fault", "node03", "secure-boot").returncode == 0
        restarted = subprocess.run(["docker", "restart", "--time", "0", container_name("node03")],
                                   capture_output=True, timeout=120)
        assert restarted.returncode == 0
        lab_nodes.wait_ready("node03")
        assert doctor().returncode == 0

        first = rack.provision("--limit", "node03", inventory=inventory)
        assert first.returncode == 0, first.stdout[-3000:]
        assert summary(first.stdout)["node03"]["outcome"] == "converged"
        assert rack.lab.ssh("node03", "cat /run/gpuprov-lab/nvidia-module-version").stdout == \
            f"{LAB_DRIVER}\n"
        info = rack.lab.ssh("node03", f"{kernel_modules.MODINFO} nvidia").stdout
        assert f"/kernel/nvidia-{branch}srv/nvidia.ko" in info, info
        assert "signer:         Canonical Ltd. Kernel Module Signing" in info, info
        installed = rack.lab.ssh("node03", "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' "
                                 "'linux-modules-nvidia-*' 'nvidia-utils-*' 'nvidia-dkms-*'"
                                 ).stdout
        assert module_package.search(installed) and f"nvidia-utils-{branch}-server hi" \
            in installed and not re.search(r"^nvidia-dkms.* [hi]i ?$", installed, re.M), installed
        again = rack.provision("--limit", "node03", inventory=inventory)
        assert again.returncode == 0, again.stdout[-3000:]
        assert summary(again.stdout)["node03"]["changed"] == 0, again.stdout[-3000:]
    finally:
        # back to a node without a driver, as the tests after this one expect of node03
        # (Canonical's driver packages only: openssh-server ends in -server too)
        canonicals = "'^((lib)?nvidia-.*-server(-open)?|linux-modules-nvidia-.*)$'"
        assert rack.lab.ssh("node03", f"dpkg-query -W -f='${{Package}}\\n' | grep -E "
                            f"{canonicals} | DEBIAN_FRONTEND=noninteractive xargs -r "
                            "apt-get purge -y --allow-change-held-packages").returncode == 0
        assert gpuprov("lab", "fault", "node03", "--clear").returncode == 0


def test_node_powered_off_mid_run_then_retry_failed(rack):
    # node02 and node03 run, whatever is in sync (node01 would only walk the same tasks)
    proc = rack.spawn("--limit", "node02,node03", "--full")
    output = []
    try:
        for line in proc.stdout:
            output.append(line)
            # progress prints a line per host and play: node03 goes dark as play 3 starts
            if line.startswith(f"node03: {THIRD_PLAY}"):
                off = gpuprov("lab", "power-off", "node03")
                assert off.returncode == 0, off.stderr
        proc.wait(timeout=900)
    finally:
        proc.kill()
    stdout = "".join(output)
    try:
        assert proc.returncode == 1, stdout[-5000:]
        table = summary(stdout)
        # unreachable however the connection died: at a task's start, or (Mitogen) while
        # it forwarded the module, which Ansible counts as a failed task
        assert table["node03"]["outcome"] == "unreachable", table
        assert list(table) == ["node02", "node03"], table
        assert table["node02"]["outcome"] == "converged", table
    finally:
        # node03 boots again whatever was asserted: the tests after this one need it
        assert gpuprov("lab", "up").returncode == 0
    retry = rack.provision("--retry-failed")
    assert retry.returncode == 0, retry.stdout[-5000:]
    assert "retrying 1 host(s) of run" in retry.stdout
    assert list(summary(retry.stdout)) == ["node03"]
    assert summary(retry.stdout)["node03"]["outcome"] == "converged"


def test_kill_9_mid_run_leaves_a_clean_ledger(rack):
    proc = rack.spawn("--limit", "node02", "--full")
    try:
        for line in proc.stdout:
            if line.startswith("node02: Driver stack"):
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    _wait_for_ansible_to_end(rack.state)
    ledger = rack.state / "ledger.sqlite3"
    with sqlite3.connect(ledger) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        status, = db.execute("SELECT status FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
    assert status == "running"          # never finished: read back as interrupted
    nodes = gpuprov("nodes", env=rack.env())
    assert nodes.returncode == 0
    assert "interrupted, no outcome recorded" in nodes.stdout
    # node02's recorded outcome is still the last finished run's
    assert any(line.split()[0] == "node02" and line.split()[4] == "converged"
               for line in nodes.stdout.splitlines())
    # and a new run completes
    again = rack.provision("--limit", "node02", "--tags", "nouveau")
    assert again.returncode == 0, again.stdout[-3000:]


def _wait_for_ansible_to_end(state: Path, timeout: float = 60) -> None:
    """The killed run's ansible-playbook loses its terminal and ends; never leave it to
    touch the nodes during later tests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run(["pgrep", "-f", str(state)], capture_output=True).returncode != 0:
            return
        time.sleep(1)
    subprocess.run(["pkill", "-9", "-f", str(state)], check=False)
    pytest.fail("ansible-playbook outlived the killed gpuprov by a minute")
