"""Verify (testinfra) on node02 (DGX A100): 535.161.08 -> 550.90.07 replaced every package,
fabric manager followed in lockstep, the node rebooted into the new module."""

import re

NEW, OLD_BRANCH = "550.90.07", "535"
FAMILY = re.compile(r"^((lib)?nvidia-.+-[0-9]{3}(-server)?(-open)?|cuda-drivers(-[0-9]{3})?)$")


def test_only_the_new_driver_is_installed_and_held(host):
    out = host.check_output("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'")
    packages = {n: (v, s) for n, v, s in (line.split() for line in out.splitlines())
                if FAMILY.match(n)}
    assert not [n for n in packages if n.endswith("-" + OLD_BRANCH)]
    assert {"nvidia-fabricmanager-550", "libnvidia-nscq-550",
            "nvidia-headless-550"} <= set(packages)
    for name, (version, status) in packages.items():
        assert version.startswith(NEW + "-") and status == "hi", (name, version, status)


def test_node_runs_the_new_driver(host):
    assert host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader") \
        .splitlines()[0] == NEW
    assert not host.file("/run/reboot-required").exists


def test_fabric_manager_in_lockstep(host):
    assert host.package("nvidia-fabricmanager-550").version == NEW + "-1"
    assert host.service("nvidia-fabricmanager").is_running
    assert "Completed" in host.check_output("nvidia-smi -q")
    assert f"Pin: version {NEW}-*" in host.file(
        "/etc/apt/preferences.d/gpuprov-nvidia-driver").content_string
