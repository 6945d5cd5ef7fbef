"""The lab nodes' dkms, modinfo and module loading (gpuprov/lab/sim/kmod.py), run in a
temporary root: what the driver role's DKMS and Secure Boot assertions meet on a node."""

import hashlib
import subprocess

import pytest

from gpuprov.lab.sim import kmod
from tests.certificates import site_key_pair

RUNNING, NEXT = "6.1.0-gpuprov-lab", "6.1.5-gpuprov-lab"
VERSION = "550.90.07"


@pytest.fixture()
def node(tmp_path):
    for kernel in (RUNNING, NEXT):
        (tmp_path / f"lib/modules/{kernel}").mkdir(parents=True)
        (tmp_path / f"lib/modules/{kernel}/modules.dep").write_text("")
    (tmp_path / f"lib/modules/{RUNNING}/build").mkdir()           # only the running one's headers
    (tmp_path / f"usr/src/nvidia-{VERSION}").mkdir(parents=True)
    (tmp_path / f"usr/src/nvidia-{VERSION}/dkms.conf").write_text('PACKAGE_NAME="nvidia"\n')
    (tmp_path / "lab").mkdir()
    return {"root": str(tmp_path), "kernel_release_command": f"echo {RUNNING}",
            "secure_boot_file": "/lab/secure-boot", "enrolled_file": "/lab/mok-enrolled",
            "loaded_file": "/run/nvidia-module-version", "taint_file": "/run/kernel-tainted"}


def dkms(node, *argv):
    return kmod.dkms_main(list(argv), **node)


def sign_with_site_key(node, tmp_path, cn="Example Site MOK"):
    key, cert = site_key_pair(cn)
    (tmp_path / "var/lib/dkms").mkdir(parents=True, exist_ok=True)
    (tmp_path / "var/lib/dkms/site.key").write_bytes(key)
    (tmp_path / "var/lib/dkms/site.der").write_bytes(cert)
    (tmp_path / "etc/dkms/framework.conf.d").mkdir(parents=True)
    (tmp_path / "etc/dkms/framework.conf.d/site.conf").write_text(
        'mok_signing_key="/var/lib/dkms/site.key"\nmok_certificate="/var/lib/dkms/site.der"\n')
    return hashlib.sha256(cert).hexdigest()


def test_status_in_dkms_3_words_and_a_kernel_without_headers_is_refused(node, capsys):
    dkms(node, "add", "-m", "nvidia", "-v", VERSION)
    dkms(node, "status")
    assert capsys.readouterr().out.endswith(f"nvidia/{VERSION}: added\n")
    dkms(node, "install", "-m", "nvidia", "-v", VERSION, "-k", RUNNING)
    with pytest.raises(SystemExit, match=f"kernel headers for kernel {NEXT} cannot be found"):
        dkms(node, "install", "-m", "nvidia", "-v", VERSION, "-k", NEXT)
    capsys.readouterr()
    dkms(node, "status", "-m", "nvidia", "-v", VERSION)
    assert capsys.readouterr().out == f"nvidia/{VERSION}, {RUNNING}, x86_64: installed\n"


def test_a_module_is_signed_only_once_signing_is_configured(node, tmp_path, capsys):
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    assert kmod.modinfo_main(["-F", "signer", "nvidia"], **node) == 0
    assert capsys.readouterr().out.strip().endswith("done.\nInstalling "
                                                    f"/lib/modules/{RUNNING}/updates/dkms/nvidia.ko")
    sign_with_site_key(node, tmp_path)
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)            # already built: unchanged
    capsys.readouterr()
    kmod.modinfo_main(["-k", RUNNING, "-F", "signer", "nvidia"], **node)
    assert capsys.readouterr().out == ""
    dkms(node, "build", "--force", "-m", "nvidia", "-v", VERSION)
    dkms(node, "install", "--force", "-m", "nvidia", "-v", VERSION)
    capsys.readouterr()
    kmod.modinfo_main(["-k", RUNNING, "-F", "signer", "nvidia"], **node)
    assert capsys.readouterr().out == "Example Site MOK\n"


def test_secure_boot_loads_only_a_module_signed_by_an_enrolled_key(node, tmp_path, capsys):
    loaded = tmp_path / "run/nvidia-module-version"
    (tmp_path / "lab/secure-boot").write_text("enabled\n")
    assert kmod.modprobe_nvidia_main([], **node) == 1
    assert "Module nvidia not found" in capsys.readouterr().err
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    assert kmod.modprobe_nvidia_main([], **node) == 1                # unsigned
    assert "Key was rejected by service" in capsys.readouterr().err
    digest = sign_with_site_key(node, tmp_path)
    dkms(node, "install", "--force", "-m", "nvidia", "-v", VERSION)
    assert kmod.modprobe_nvidia_main([], **node) == 1                # signed, not enrolled
    assert not loaded.exists()
    (tmp_path / "lab/mok-enrolled").write_text(digest + "\n")
    assert kmod.modprobe_nvidia_main([], **node) == 0
    assert loaded.read_text() == f"{VERSION}\n"


def test_remove_all_leaves_no_module_behind(node, tmp_path, capsys):
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    dkms(node, "remove", "-m", "nvidia", "-v", VERSION, "--all")
    assert not (tmp_path / f"lib/modules/{RUNNING}/updates/dkms/nvidia.ko").exists()
    capsys.readouterr()
    dkms(node, "status")
    assert capsys.readouterr().out == ""


def test_loading_taints_the_kernel_as_an_out_of_tree_module_does(node, tmp_path):
    """O (4096) for a DKMS-built module, E (8192) too while nothing signed it; what the
    kernel had before is kept (the validator's kernel_taint judges the sum)."""
    taint = tmp_path / "run/kernel-tainted"
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    taint.parent.mkdir(parents=True, exist_ok=True)
    taint.write_text("512\n")                                         # a WARN since boot
    assert kmod.modprobe_nvidia_main([], **node) == 0
    assert taint.read_text() == f"{512 | 4096 | 8192}\n"
    (tmp_path / "run/nvidia-module-version").unlink()
    taint.unlink()
    sign_with_site_key(node, tmp_path)
    dkms(node, "install", "--force", "-m", "nvidia", "-v", VERSION)
    assert kmod.modprobe_nvidia_main([], **node) == 0
    assert taint.read_text() == "4096\n"


def test_a_prebuilt_module_signed_by_canonicals_key_loads_under_secure_boot(
        node, tmp_path, capsys):
    """Canonical's precompiled module (kernel/nvidia-550srv/) is trusted through the
    kernel's builtin keyring, no MOK enrolled; a DKMS module in updates/ would win."""
    node = {**node, "builtin_keys_file": "/lab/builtin_trusted_keys"}
    (tmp_path / "lab/builtin_trusted_keys").write_text("b" * 64 + "\n")
    (tmp_path / "lab/secure-boot").write_text("enabled\n")
    prebuilt = tmp_path / f"lib/modules/{RUNNING}/kernel/nvidia-550srv/nvidia.ko"
    prebuilt.parent.mkdir(parents=True)
    prebuilt.write_text(f"version={VERSION}\nsigner=Canonical Ltd. Kernel Module Signing\n"
                        f"sig_sha256={'a' * 64}\n")
    assert kmod.modprobe_nvidia_main([], **node) == 1                 # a key it does not hold
    assert "Key was rejected by service" in capsys.readouterr().err
    prebuilt.write_text(prebuilt.read_text().replace("a" * 64, "b" * 64))
    assert kmod.modinfo_main(["-k", RUNNING, "nvidia"], **node) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        f"filename:       /lib/modules/{RUNNING}/kernel/nvidia-550srv/nvidia.ko",
        f"version:        {VERSION}", "signer:         Canonical Ltd. Kernel Module Signing"]
    assert kmod.modprobe_nvidia_main([], **node) == 0
    assert (tmp_path / "run/nvidia-module-version").read_text() == f"{VERSION}\n"
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    capsys.readouterr()
    kmod.modinfo_main(["nvidia"], **node)
    assert f"/lib/modules/{RUNNING}/updates/dkms/nvidia.ko" in capsys.readouterr().out


def test_a_failed_build_is_dkms_s_error_and_status_and_fails_the_postinst(node, tmp_path,
                                                                         capsys):
    """Issue 37: real dkms exits 10 on a failed build and dh_dkms's postinst passes it on,
    so dpkg fails the package (pop-os/pop#3811); the lab's stand-ins do the same."""
    from gpuprov.lab import standins
    marker = tmp_path / kmod.BUILD_FAILS.lstrip("/")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("make: *** Error 2\n")
    with pytest.raises(SystemExit) as failed:
        dkms(node, "install", "-m", "nvidia", "-v", VERSION, "-k", RUNNING)
    assert failed.value.code == kmod.BUILD_FAILED == 10
    assert (f"Error! Bad return status for module build on kernel: {RUNNING} (x86_64)"
            in capsys.readouterr().err)
    # the scriptlet, run by sh against a module tree of its own and a dkms that fails
    modules = tmp_path / "modules"
    for kernel, headers in ((RUNNING, True), ("6.8.0-50-generic", False)):
        (modules / kernel).mkdir(parents=True)
        (modules / kernel / "modules.dep").write_text("")
        if headers:
            (modules / kernel / "build").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dkms").write_text('#!/bin/sh\ncase "$1" in install) exit 10;; esac; exit 0\n')
    (bin_dir / "dkms").chmod(0o755)
    script = standins.dkms_postinst(VERSION, str(modules))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=30)
    assert run.returncode == 10, run.stdout + run.stderr
    (modules / RUNNING / "build").rmdir()           # no headers anywhere: skipped, exit 0
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=30)
    assert run.returncode == 0 and "was skipped since the kernel headers" in run.stdout


@pytest.mark.parametrize("declared", ["Dual MIT/GPL", "NVIDIA"])
def test_the_built_module_carries_the_license_its_sources_declare(node, tmp_path, capsys,
                                                                   declared):
    """Issue 55: `modinfo -F license nvidia` tells the open flavour from the proprietary one
    (DMA-BUF needs the open modules); the stand-in builds in what nv.c declares, and a
    module built from sources that declare none has no license line, as modinfo prints
    nothing for a field the module lacks."""
    (tmp_path / f"usr/src/nvidia-{VERSION}/nvidia").mkdir()
    (tmp_path / f"usr/src/nvidia-{VERSION}/nvidia/nv.c").write_text(
        f'MODULE_LICENSE("{declared}");\n')
    dkms(node, "install", "-m", "nvidia", "-v", VERSION)
    capsys.readouterr()
    assert kmod.modinfo_main(["-F", "license", "nvidia"], **node) == 0
    assert capsys.readouterr().out == f"{declared}\n"
    (tmp_path / f"usr/src/nvidia-{VERSION}/nvidia/nv.c").write_text("/* none */\n")
    dkms(node, "install", "-m", "nvidia", "-v", VERSION, "--force")
    capsys.readouterr()
    assert kmod.modinfo_main(["-F", "license", "nvidia"], **node) == 0
    assert capsys.readouterr().out == ""
