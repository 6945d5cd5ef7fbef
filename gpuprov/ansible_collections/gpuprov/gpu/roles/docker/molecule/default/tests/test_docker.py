"""Verify (testinfra) on node03: the distribution's Docker running, the user's daemon
options merged with the nvidia runtime the container toolkit registered afterwards."""

import json


def test_docker_installed_and_active(host):
    assert host.package("docker.io").is_installed
    service = host.service("docker")
    assert service.is_enabled and service.is_running


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
