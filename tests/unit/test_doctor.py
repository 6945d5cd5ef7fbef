"""`gpuprov doctor`'s probe and judgement: the probe script run for real on this machine, its
parsers on real captures and real dpkg output, each rule's blocker or warning naming the
fix; and the CLI's bad input."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuprov import collection, releases
from gpuprov.console import result_line
from gpuprov.doctor import findings, probe
from gpuprov.doctor.findings import BLOCKER, WARNING
from gpuprov.errors import InputError
from gpuprov.lock import Lock
from gpuprov.model import CheckResult
from tests.certificates import site_certificate
from tests.conftest import gpuprov

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"
LOCK = Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.16.2-1", "", "2.5.1", "cu124", "3.11")
KERNEL = "6.8.0-45-generic"


def capture(name: str) -> list[str]:
    return (FIXTURES / name).read_text().split("\n\n", 1)[1].splitlines()


def healthy(**changes) -> probe.HostFacts:
    facts = probe.HostFacts(kernel=KERNEL, kernels={KERNEL: True}, secure_boot="disabled",
                            free_kib={"/var": 50 * findings.GIB, "/usr": 50 * findings.GIB,
                                      "/opt": 50 * findings.GIB},
                            os_release=releases.OsRelease("debian", "12", "bookworm"))
    for key, value in changes.items():
        setattr(facts, key, value)
    return facts


def only(found: list[CheckResult]) -> CheckResult:
    assert len(found) == 1, found
    return found[0]


def test_the_probe_runs_read_only_on_this_machine_and_parses():
    status = Path("/var/lib/dpkg/status").stat()
    result = subprocess.run(["sh", "-c", probe.script(probe.Commands())], capture_output=True,
                            text=True, timeout=60, check=True)
    facts = probe.parse(result.stdout, "this machine")
    assert facts.kernel == os.uname().release
    assert facts.packages["dpkg"][0] and not facts.packages["dpkg"][1]
    assert set(facts.free_kib) == {"/var", "/usr", "/opt"} and all(facts.free_kib.values())
    assert facts.secure_boot in ("enabled", "disabled", "unsupported", "unknown")
    assert Path("/var/lib/dpkg/status").stat().st_mtime == status.st_mtime


def test_a_held_dpkg_lock_is_seen_with_its_holder():
    holder = subprocess.Popen(
        ["python3", "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
         "fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
         "/var/lib/dpkg/lock-frontend"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        out = subprocess.run(["sh", "-c", probe.script(probe.Commands())],
                             capture_output=True, text=True, timeout=60).stdout
        facts = probe.parse(out, "this machine")
    finally:
        holder.kill()
        holder.wait()
    assert ("/var/lib/dpkg/lock-frontend", str(holder.pid)) in facts.locks
    found = only([f for f in findings.judge(facts, LOCK) if f.id == "dpkg-lock"])
    assert found.status == BLOCKER and f"pid {holder.pid}" in found.summary


def test_an_incomplete_probe_output_is_refused():
    with pytest.raises(Exception, match="node07: the doctor's probe output is incomplete"):
        probe.parse(f"{probe.MARK}kernel\n6.8.0\n", "node07")


def test_dkms_status_of_dkms_3_and_2():
    entries, other = probe.dkms_status(capture("dkms-status-3-diff-warning.txt"))
    assert other == []
    assert [(e.module, e.version, e.kernel, e.state, e.warning) for e in entries] == [
        ("i915-sriov-dkms", "2025.03.26", "6.11.11-1-pve", "installed", ""),
        ("i915-sriov-dkms", "2025.03.26", "6.11.11-2-pve", "installed",
         "WARNING! Diff between built and installed module!")]
    older, _ = probe.dkms_status(["nvidia, 535.161.08, 5.15.0-112-generic, x86_64: installed",
                                  "nvidia/550.90.07: added"])
    assert [(e.module, e.version, e.kernel, e.state) for e in older] == [
        ("nvidia", "535.161.08", "5.15.0-112-generic", "installed"),
        ("nvidia", "550.90.07", "", "added")]


@pytest.mark.parametrize("text, state", [
    ("SecureBoot enabled", "enabled"), ("SecureBoot disabled", "disabled"),
    ("EFI variables are not supported on this system", "unsupported"),
    ("gpuprov: not EFI", "unsupported"), ("gpuprov: no mokutil", "unknown")])
def test_secure_boot_states_in_mokutil_words(text, state):
    assert probe.secure_boot_state([text])[0] == state


def test_dpkg_audit_of_an_interrupted_configure_is_a_blocker(tmp_path):
    """Real dpkg, on a status file of the test's own (--admindir), never the machine's."""
    (tmp_path / "updates").mkdir()
    (tmp_path / "info").mkdir()
    (tmp_path / "status").write_text(
        "Package: nvidia-dkms-550\nStatus: install ok half-configured\nPriority: optional\n"
        "Section: kernel\nMaintainer: NVIDIA <cudatools@nvidia.com>\nArchitecture: amd64\n"
        "Version: 550.90.07-0ubuntu1\nDescription: NVIDIA DKMS package\n\n")
    audit = subprocess.run(["dpkg", f"--admindir={tmp_path}", "--audit"], capture_output=True,
                           text=True, timeout=60).stdout
    assert "half configured" in audit
    facts = healthy(audit=[line for line in audit.splitlines() if line.strip()])
    found = only(findings.judge(facts, LOCK))
    assert (found.status, found.id) == (BLOCKER, "dpkg")
    assert "(nvidia-dkms-550)" in found.summary and found.fix.startswith("dpkg --configure -a")


def test_a_healthy_host_has_no_finding():
    assert findings.judge(healthy(), LOCK) == []


@pytest.mark.parametrize("changes, check, severity, seen, fix", [
    ({"secure_boot": "enabled"}, "secure-boot", BLOCKER, "no DKMS signing key is configured",
     "mokutil --import /var/lib/dkms/mok.pub"),
    ({"secure_boot": "enabled", "mok_enrolled": False}, "secure-boot", BLOCKER,
     "its DKMS signing certificate is not enrolled", "turn Secure Boot off in the firmware"),
    ({"secure_boot": "enabled", "mok_enrolled": True}, "secure-boot", WARNING,
     "DKMS signs with an enrolled key", "stays enrolled"),
    ({"secure_boot": "enabled"}, "secure-boot", BLOCKER, "no DKMS signing key is configured",
     "set gpuprov_module_signing: site-mok"),
    ({"kernels": {}}, "kernel-headers", BLOCKER, f"no headers for the running kernel {KERNEL}"
     f", and no repository carries linux-headers-{KERNEL}", f"add linux-headers-{KERNEL} to it"),
    ({"kernels": {}, "headers_candidate": "6.8.0-45.45"}, "kernel-headers", WARNING,
     f"no headers for the running kernel {KERNEL}; the repositories carry them (6.8.0-45.45)",
     f"provisioning installs linux-headers-{KERNEL}"),
    ({"run_installer": ["/usr/bin/nvidia-uninstall"]}, "run-installer", BLOCKER,
     "/usr/bin/nvidia-uninstall", "nvidia-uninstall --silent"),
    ({"packages": {"nvidia-utils-550-server": ("550.127.05-0ubuntu1", False),
                   "linux-modules-nvidia-550-server-generic": ("6.8.0-45.45", False)}},
     "archive-driver", BLOCKER, "linux-modules-nvidia-550-server-generic, nvidia-utils-550-"
     "server", "apt-get purge --allow-change-held-packages linux-modules-nvidia-550-server-generic "
     "nvidia-utils-550-server"),
    ({"free_kib": {"/var": 50 * findings.GIB, "/usr": 3 * findings.GIB,
                   "/opt": 50 * findings.GIB}}, "disk-space", BLOCKER,
     "/usr has 3.0 GiB free, the stack needs 10 GiB there", "free space in /usr"),
    ({"modules": {"nouveau", "drm"}}, "nouveau", WARNING, "nouveau is loaded", "blacklists"),
    ({"gpu_processes": [probe.GpuProcess("4242", "python3", "00000000:18:00.0", "30512 MiB")]},
     "gpu-busy", BLOCKER, "python3 (pid 4242, 30512 MiB on 00000000:18:00.0)", "drain the node"),
    ({"packages": {"nvidia-dkms-535": ("535.161.08-0ubuntu1", True)}}, "hold", WARNING,
     "nvidia-dkms-535 is held at 535.161.08-0ubuntu1, the lock says 550.90.07", "the lock"),
    ({"packages": {"cuda-toolkit-12-2": ("12.2.2-1", True)}}, "hold", WARNING,
     "the lock says series 12.4", "the lock"),
])
def test_each_rule_names_what_it_saw_and_the_fix(changes, check, severity, seen, fix):
    found = only(findings.judge(healthy(**changes), LOCK))
    assert (found.id, found.status) == (check, severity)
    assert seen in found.summary and fix in found.fix
    assert result_line("node07", found, findings.WORDS[severity]).startswith(
        f"node07: {findings.WORDS[severity]}: {check}: ")


def test_dkms_entries_for_the_driver():
    stale = healthy(dkms=probe.dkms_status([
        "nvidia/550.90.07, 6.8.0-40-generic, x86_64: installed",
        "nvidia/550.90.07, 6.8.0-45-generic, x86_64: built"])[0],
        kernels={KERNEL: True, "6.8.0-40-generic": True, "6.8.0-31-generic": False})
    found = {(f.id, f.status, f.summary) for f in findings.judge(stale, LOCK)}
    # the running kernel has headers: provisioning builds its module (the role's DKMS step)
    assert found == {
        ("dkms", WARNING, f"nvidia/550.90.07 for {KERNEL} is `built`, not installed"),
        ("dkms", WARNING, f"no nvidia module built for the running kernel {KERNEL} (a kernel "
                          "update DKMS did not follow)"),
        ("kernel-headers", WARNING, "installed kernel 6.8.0-31-generic has no headers: DKMS "
                                    "will not build the driver for it, and booting it leaves "
                                    "the node without a driver")}
    # without headers, and none in the repositories: nothing can build it
    stale.kernels[KERNEL] = False
    found = {(f.id, f.status, f.summary) for f in findings.judge(stale, LOCK)}
    assert ("dkms", BLOCKER, f"no nvidia module built for the running kernel {KERNEL} (a "
                             "kernel update DKMS did not follow)") in found
    assert ("dkms", BLOCKER, f"nvidia/550.90.07 for {KERNEL} is `built`, not installed") in found
    clean = healthy(dkms=probe.dkms_status([f"nvidia/550.90.07, {KERNEL}, x86_64: installed",
                                            "i915-sriov-dkms/2025.03.26, 6.11.11-2-pve, "
                                            "x86_64: installed"])[0])
    assert findings.judge(clean, LOCK) == []


@pytest.mark.parametrize("variables, message", [
    ("gpuprov_doctor_min_free_gib: 4", "gpuprov_doctor_min_free_gib: expected a mapping of "
                                       "path to GiB, got 4"),
    ("gpuprov_doctor_min_free_gib: {/home: 4}", "gpuprov_doctor_min_free_gib: unknown path "
                                                "'/home' (known: /var, /usr, /opt)"),
])
def test_bad_doctor_variables_are_one_line_exit_2_before_any_connection(tmp_path, variables,
                                                                        message):
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    lock = yaml.safe_dump({f"gpuprov_{k}": v for k, v in LOCK.as_dict().items()})
    (tmp_path / "group_vars" / "all" / "versions.yml").write_text(f"{lock}{variables}\n")
    inventory = tmp_path / "rack.ini"
    inventory.write_text("[rack]\nnode07 ansible_host=192.0.2.7\n")
    result = gpuprov("doctor", "-i", str(inventory), timeout=60,
                     env={**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 2
    assert result.stderr == f"gpuprov: error: host node07: {message}\n" and result.stdout == ""


def test_secure_boot_with_the_site_key_is_a_warning_naming_the_signer():
    signing = findings.ModuleSigning("site-mok", "gpuprov lab site MOK")
    found = only(findings.judge(healthy(secure_boot="enabled"), LOCK, signing=signing))
    assert (found.id, found.status) == ("secure-boot", WARNING)
    assert "gpuprov lab site MOK" in found.summary and "mok-enrollment-pending" in found.summary


def test_the_signing_plan_comes_from_the_inventory(tmp_path):
    from gpuprov.doctor import run as doctor_run
    cert = tmp_path / "mok.der"
    cert.write_bytes(site_certificate("Example Site MOK 2026"))
    plan = doctor_run._signing("node07", {"gpuprov_module_signing": "site-mok",
                                          "gpuprov_mok_certificate_file": str(cert)})
    assert plan == findings.ModuleSigning("site-mok", "Example Site MOK 2026")
    assert doctor_run._signing("node07", {}) == findings.ModuleSigning()
    assert doctor_run._signing("node07", {"gpuprov_module_signing": "canonical-precompiled"}) \
        == findings.ModuleSigning("canonical-precompiled")
    with pytest.raises(InputError, match=r"host node07: gpuprov_module_signing: 'mok' \(expected "
                                         "none, site-mok or canonical-precompiled\\)"):
        doctor_run._signing("node07", {"gpuprov_module_signing": "mok"})
    (tmp_path / "junk.der").write_bytes(b"not a certificate")
    with pytest.raises(InputError, match=r"host node07: .*junk.der: not an X.509"):
        doctor_run._signing("node07", {"gpuprov_module_signing": "site-mok",
                                       "gpuprov_mok_certificate_file": str(tmp_path / "junk.der")})


def test_the_doctor_counts_installed_kernels_as_the_driver_role_does():
    """A leftover /lib/modules/K of a removed kernel has no modules.dep: neither the role
    nor the doctor may count it, so both read the kernels with the same loop."""
    kernel_tasks = collection.ROLES / "nvidia_driver" / "tasks" / "kernels.yml"
    tasks = yaml.safe_load(kernel_tasks.read_text())
    listing = next(t for t in tasks if t.get("register") == "nvidia_driver_kernel_listing")
    role_loop = " ".join(listing["ansible.builtin.command"]["argv"][2].split())
    assert " ".join(probe.INSTALLED_KERNELS.split()) in role_loop
    assert probe.INSTALLED_KERNELS in probe.script(probe.Commands())


def test_the_archive_s_prebuilt_modules_are_looked_up_only_under_canonical_precompiled():
    """The archive's package list is long: DKMS hosts do not pay for a lookup they ignore."""
    assert probe.PRECOMPILED_MODULES not in probe.script(probe.Commands())
    script = probe.script(probe.Commands(precompiled_modules=True))
    assert probe.PRECOMPILED_MODULES in script
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                            check=True)
    assert probe.parse(result.stdout, "this machine").precompiled_modules == set()


PRECOMPILED = findings.ModuleSigning("canonical-precompiled")
MODULE = f"linux-modules-nvidia-550-server-open-{KERNEL}"


def test_canonical_precompiled_needs_no_key_nor_headers_only_a_module_per_kernel():
    """Secure Boot on, no DKMS key, no headers: fine when the archive has the prebuilt
    module of the locked branch for the kernel; a kernel without one is a blocker."""
    ready = healthy(secure_boot="enabled", kernels={KERNEL: False}, precompiled_modules={MODULE})
    assert findings.judge(ready, LOCK, signing=PRECOMPILED) == []
    installed = healthy(kernels={KERNEL: False},
                        packages={MODULE: ("6.8.0-45.45+1", True)})
    assert findings.judge(installed, LOCK, signing=PRECOMPILED) == []
    older = healthy(kernels={KERNEL: False, "6.8.0-31-generic": False},
                    precompiled_modules={MODULE,
                                         "linux-modules-nvidia-535-server-6.8.0-31-generic"})
    found = only(findings.judge(older, LOCK, signing=PRECOMPILED))
    assert (found.status, found.id) == (BLOCKER, "precompiled-module")
    assert found.summary == ("the archive has no prebuilt module of branch 550 for installed "
                          "kernel 6.8.0-31-generic (linux-modules-nvidia-550-server[-open]-"
                          "6.8.0-31-generic)")
    assert "gpuprov_module_signing: none or site-mok" in found.fix


def test_canonical_precompiled_refuses_nvidias_packages_and_dkms_modules():
    leftover = healthy(precompiled_modules={MODULE},
                       packages={"nvidia-dkms-550": ("550.90.07-0ubuntu1", True),
                                 "libnvidia-compute-550": ("550.90.07-0ubuntu1", True),
                                 "nvidia-fabricmanager-550": ("550.90.07-1", True),
                                 "nvidia-utils-550-server": ("550.90.07-0ubuntu0.22.04.1", True)},
                       dkms=probe.dkms_status(
                           [f"nvidia/550.90.07, {KERNEL}, x86_64: installed"])[0])
    found = {f.id: f for f in findings.judge(leftover, LOCK, signing=PRECOMPILED)}
    assert set(found) == {"repository-driver", "dkms"}
    # NVIDIA's fabric manager too (its revision says whose), not Canonical's -server tools
    assert found["repository-driver"].fix == ("apt-get purge --allow-change-held-packages "
                                               "libnvidia-compute-550 nvidia-dkms-550 "
                                               "nvidia-fabricmanager-550 (then reboot)")
    assert found["dkms"].summary.startswith("DKMS holds nvidia/550.90.07: ")
    assert found["dkms"].fix.startswith("dkms remove nvidia/550.90.07 --all;")
    # and the other way round: Canonical's packages under DKMS signing stay a blocker, its
    # fabric manager with them
    canonical = healthy(packages={
        "nvidia-fabricmanager-550": ("550.90.07-0ubuntu0.22.04.1", True),
        "nvidia-utils-550-server": ("550.90.07-0ubuntu0.22.04.1", True)})
    found = only(findings.judge(canonical, LOCK))
    assert (found.id, found.fix) == ("archive-driver", "apt-get purge --allow-change-held-"
                                        "packages nvidia-fabricmanager-550 nvidia-utils-550-"
                                        "server (then reboot)")


MOKUTIL = """#!/bin/sh
# mokutil --test-key CERT, as mokutil words it (enrolled: the certificates in ENROLLED)
case " $ENROLLED " in *" $2 "*) echo "$2 is already enrolled";; *) echo "$2 is not enrolled";; esac
"""


@pytest.mark.parametrize("have, conf, enrolled, cert", [
    # Ubuntu: the shim MOK update-secureboot-policy made, framework.conf silent (dkms 2.8.7)
    (("shim.key", "shim.der", "dkms.pub"), "", "shim.der", "shim.der"),
    # DKMS 3's own pair only (Debian, upstream)
    (("dkms.pub",), "", "dkms.pub", "dkms.pub"),
    # framework.conf names its certificate (Ubuntu 24.04's dkms 3.0.x, or a site's)
    (("shim.key", "shim.der", "site.der"), 'mok_certificate="{d}/site.der"\n', "", "site.der"),
])
def test_the_certificate_dkms_signs_with_is_the_one_tested(tmp_path, have, conf, enrolled,
                                                           cert):
    """Issue 37: a Secure Boot host whose Ubuntu MOK is enrolled is no blocker."""
    for name in have:
        (tmp_path / name).write_text("x")
    (tmp_path / "framework.conf").write_text(conf.format(d=tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mokutil").write_text(MOKUTIL)
    (bin_dir / "mokutil").chmod(0o755)
    script = probe.mok_script(str(tmp_path / "framework.conf"),
                              (str(tmp_path / "shim.key"), str(tmp_path / "shim.der")),
                              str(tmp_path / "dkms.pub"))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin",
           "ENROLLED": str(tmp_path / enrolled) if enrolled else ""}
    out = subprocess.run(["sh", "-c", f"echo '{probe.MARK}mok'; {script}; "
                          f"echo '{probe.MARK}end'"], capture_output=True, text=True,
                         timeout=30, env=env, check=True).stdout
    facts = probe.parse(out, "node07")
    assert facts.dkms_certificate == str(tmp_path / cert)
    assert facts.mok_enrolled is bool(enrolled)
    facts.secure_boot = "enabled"
    found = only([f for f in findings.judge(facts, LOCK) if f.id == "secure-boot"])
    assert found.status == (WARNING if enrolled else BLOCKER), found.summary
    if not enrolled:
        assert f"mokutil --import {tmp_path / cert}" in found.fix



# --- the lock against the host's release (issue 37) -------------------------------------
NOBLE = releases.OsRelease("ubuntu", "24.04", "noble")
JAMMY = releases.OsRelease("ubuntu", "22.04", "jammy")
DEFAULT_LOCK = Lock("590.48.01", "auto", "13.1", "9.17.1.4", "1.19.1",
                    "5:29.7.0-1~ubuntu.24.04~noble", "2.13.0", "cu130", "3.12")


def test_the_default_lock_suits_ubuntu_24_04():
    assert findings.judge(healthy(os_release=NOBLE), DEFAULT_LOCK) == []


def test_a_lock_for_24_04_on_a_22_04_host_is_refused_naming_both_releases():
    found = [f for f in findings.judge(healthy(os_release=JAMMY), DEFAULT_LOCK)
             if f.id == "release"]
    assert [f.status for f in found] == [BLOCKER, BLOCKER]
    docker, python = found
    assert docker.summary.startswith("gpuprov_docker_version 5:29.7.0-1~ubuntu.24.04~noble is "
                                  "Docker's build for ubuntu.24.04 (noble); this host runs "
                                  "ubuntu 22.04 (jammy)")
    assert docker.fix == "lock Docker's build for jammy: 5:<version>-1~ubuntu.22.04~jammy"
    assert python.summary.startswith("gpuprov_python_version 3.12: ubuntu 22.04 (jammy)'s "
                                  "python3 is 3.10")
    assert "packages.ubuntu.com/jammy/python3" in python.summary


def test_conda_environments_bring_their_own_python_and_distro_docker_is_not_judged():
    stack = findings.Stack(docker_source="distro", venv_python=False)
    assert findings.judge(healthy(os_release=JAMMY), DEFAULT_LOCK, stack=stack) == []


def test_cuda_before_the_release_s_first_is_refused():
    lock = Lock("550.90.07", "auto", "12.4", "9.1.0.70", "1.19.1",
                "5:29.7.0-1~ubuntu.24.04~noble", "2.5.1", "cu124", "3.12")
    found = only([f for f in findings.judge(healthy(os_release=NOBLE), lock)
                  if f.id == "release"])
    assert found.summary.startswith("gpuprov_cuda_version 12.4: NVIDIA's repository for ubuntu "
                                 "24.04 (noble) starts at CUDA 12.5")


def test_an_unknown_release_warns_and_the_probe_reads_this_machine_s():
    found = only(findings.judge(healthy(os_release=releases.OsRelease("ubuntu", "26.04",
                                                                       "resolute")), LOCK))
    assert (found.id, found.status) == ("release", WARNING)
    result = subprocess.run(["sh", "-c", probe.script(probe.Commands())], capture_output=True,
                            text=True, timeout=60, check=True)
    mine = probe.parse(result.stdout, "this machine").os_release
    import platform
    os_release = platform.freedesktop_os_release()
    assert mine == releases.OsRelease(os_release["ID"], os_release["VERSION_ID"],
                                      os_release.get("VERSION_CODENAME", ""))


def test_site_mok_on_22_04_is_refused_its_dkms_ignores_the_drop_in():
    """Issue 37: dkms 2.8.7 reads only framework.conf and signs with the shim MOK."""
    signing = findings.ModuleSigning("site-mok", "Example Site MOK")
    jammy_lock = Lock("590.48.01", "auto", "13.1", "9.17.1.4", "1.19.1",
                      "5:29.7.0-1~ubuntu.22.04~jammy", "2.13.0", "cu130", "3.10")
    found = only([f for f in findings.judge(healthy(os_release=JAMMY), jammy_lock,
                                            signing=signing) if f.id == "release"])
    assert found.status == BLOCKER
    assert found.summary.startswith("gpuprov_module_signing: site-mok: ubuntu 22.04 (jammy)'s "
                                 "dkms reads only /etc/dkms/framework.conf")
    assert [f for f in findings.judge(healthy(os_release=NOBLE), DEFAULT_LOCK, signing=signing)
            if f.id == "release"] == []


def test_an_unreadable_os_release_is_a_blocker_never_a_pass():
    found = only(findings.judge(healthy(os_release=None), LOCK))
    assert (found.id, found.status) == ("release", BLOCKER)
    assert found.summary.startswith("no /etc/os-release could be read")


def test_gdrcopy_with_canonical_s_prebuilt_modules_is_a_blocker_before_anything_changes():
    """gdrdrv builds against the driver's sources, which only DKMS's driver installs."""
    ready = healthy(kernels={KERNEL: False}, precompiled_modules={MODULE})
    gdrcopy = findings.Stack(gdrcopy=True)
    found = only(findings.judge(ready, LOCK, signing=PRECOMPILED, stack=gdrcopy))
    assert (found.status, found.id) == (BLOCKER, "gdrcopy-sources")
    assert "nv-p2p.c under /usr/src/nvidia-*" in found.summary
    assert found.fix.startswith('leave GDRCopy off this host (gpuprov_gdrcopy_version: "")')
    assert findings.judge(ready, LOCK, signing=PRECOMPILED) == []       # GDRCopy off
    assert findings.judge(healthy(), LOCK, stack=gdrcopy) == []         # DKMS: its sources
