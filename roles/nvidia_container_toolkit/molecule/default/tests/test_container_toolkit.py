"""Verify (testinfra) on node01: all four toolkit packages at the locked 1.16.2 (1.17.3 is
in the mirror), held and pinned; the runtime registered before Docker existed survives
the docker role; CDI spec for the installed driver."""

import json

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1")


def test_four_packages_at_one_version_held(host):
    for name in PACKAGES:
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        assert status.split() == ["1.16.2-1", "hi"], name
    simulated = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert not any(f"Inst {name} " in simulated for name in PACKAGES)
    assert "cli-version: 1.16.2\nlib-version: 1.16.2" in host.check_output(
        "nvidia-container-cli --version")


def test_runtime_registered_and_docker_options_merged(host):
    assert host.package("docker.io").is_installed     # the scenario's docker_source: distro
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert config["log-driver"] == "local"
    assert "nvidia" in json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))


def test_cdi_spec_for_the_installed_driver(host):
    spec = host.file("/etc/cdi/nvidia.yaml").content_string
    assert "kind: nvidia.com/gpu" in spec
    assert "libcuda.so.535.161.08" in spec
    assert spec.count("- path: /dev/nvidia") >= 8
