"""Verify (testinfra): DCGM at the locked version, held, its host engine running and a
level-1 diagnostic passing on the node's GPUs."""

PACKAGES = ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-proprietary",
            "datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-proprietary-cuda12"]
VERSION = "1:4.2.3-1"


def test_locked_version_installed_and_held(host):
    for name in PACKAGES:
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        assert status.split() == [VERSION, "hi"], name


def test_upgrade_would_not_move_it(host):
    simulated = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert not any(f"Inst {name} " in simulated for name in PACKAGES)


def test_host_engine_runs_and_starts_at_boot(host):
    service = host.service("nvidia-dcgm")
    assert service.is_running and service.is_enabled
    # DCGM's own unit: in the foreground under its service account, enabled with its alias
    assert host.check_output("systemctl show -p ExecStart --value nvidia-dcgm").startswith(
        "{ path=/usr/bin/nv-hostengine ; argv[]=/usr/bin/nv-hostengine -n --service-account "
        "nvidia-dcgm ;")
    assert host.file("/etc/systemd/system/dcgm.service").is_symlink
    assert host.user("nvidia-dcgm").exists


def test_a_level_1_diagnostic_passes(host):
    diag = host.run("dcgmi diag -r 1")
    assert diag.rc == 0, diag.stdout + diag.stderr
    assert "| software                  | Pass" in diag.stdout
    assert diag.stdout.count("GPU") >= 4   # a result row per L40S
