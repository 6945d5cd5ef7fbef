"""Verify (testinfra) on node03: Docker from Docker's repository (the lab's stand-in of
download.docker.com) at the locked version, held, the guide's old entry retired, running
under Docker's own units, and the user's daemon options merged with the nvidia runtime the
container toolkit registered afterwards."""

import json

LOCKED = "5:29.7.0-1~debian.12~bookworm"   # the lab's lock; 29.7.1 is in the mirror too


def test_docker_ce_at_the_locked_version_and_held(host):
    for name in ("docker-ce", "docker-ce-cli"):
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        assert status.split() == [LOCKED, "hi"], name
    for name in ("containerd.io", "docker-buildx-plugin", "docker-compose-plugin"):
        assert host.package(name).is_installed, name
    assert not host.package("docker.io").is_installed
    simulated = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert "Inst docker-ce " not in simulated and "Inst docker-ce-cli " not in simulated


def test_the_guide_s_entry_retired_and_apt_agrees(host):
    assert host.file("/etc/apt/sources.list.d/docker.list.gpuprov.bak").exists
    assert not host.file("/etc/apt/sources.list.d/docker.list").exists
    update = host.run("apt-get update")
    assert update.rc == 0 and "Conflicting values" not in update.stdout + update.stderr


def test_docker_runs_under_docker_s_units(host):
    unit = host.check_output("systemctl cat docker.service")
    assert ("ExecStart=/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock"
            in unit)
    for name in ("docker", "containerd"):
        service = host.service(name)
        assert service.is_enabled and service.is_running, name
    assert host.socket("unix:///run/docker.sock").is_listening


def test_daemon_json_holds_both_roles_settings(host):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["log-opts"] == {"max-size": "50m", "max-file": "5"}
    assert config["default-ulimits"]["memlock"]["Hard"] == -1
    assert config["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def test_running_docker_knows_the_nvidia_runtime(host):
    runtimes = host.check_output("docker info --format '{{json .Runtimes}}'")
    assert "nvidia" in json.loads(runtimes)
    assert host.check_output("docker info --format '{{.LoggingDriver}}'") == "json-file"


def test_user_in_docker_group(host):
    assert "docker" in host.user("gpuops").groups
