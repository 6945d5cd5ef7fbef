"""The Docker engine, through its CLI: the one module that talks to it."""

from __future__ import annotations

import json
import shutil
import subprocess

from gpuprov.errors import EnvironmentProblem
from gpuprov.lab.paths import CONTAINER_PREFIX, LAB_FILTER
from gpuprov.proc import run

HOW_TO_GET_DOCKER = (
    "install the docker.io package and start dockerd "
    "(`sudo scripts/bootstrap.sh` does both; or `systemctl start docker`)"
)


def ensure_engine() -> None:
    if shutil.which("docker") is None:
        raise EnvironmentProblem(f"docker CLI not found: {HOW_TO_GET_DOCKER}")
    result = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise EnvironmentProblem(f"the Docker engine is not running: {HOW_TO_GET_DOCKER}")


def image_exists(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], check=False).returncode == 0


def container_name(node: str) -> str:
    return f"{CONTAINER_PREFIX}{node}"


def inspect(name: str) -> dict | None:
    result = run(["docker", "container", "inspect", name], check=False)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout)[0]


def lab_containers() -> list[str]:
    """Names of every container this lab made, running or not (not another lab's)."""
    result = run(["docker", "ps", "-a", "--filter", LAB_FILTER, "--format", "{{.Names}}"])
    return sorted(line for line in result.stdout.split() if line)


# The longest exec the lab makes is a package install on its Slurm head; past this a call
# is hung, not slow, and fails naming itself instead of stalling a run for good.
EXEC_TIMEOUT_S = 600


def exec_in(name: str, *argv: str, check: bool = True, input: str | None = None,
            timeout: float = EXEC_TIMEOUT_S):
    """Run argv in a container; stdin is attached only when there is input to send.

    `docker exec -i` with an empty or idle stdin can hang after the command has exited
    (moby/moby#37870, #13052): an empty input is sent as no stdin at all, which the
    command reads as end of file just the same.
    """
    attach = ["-i"] if input else []
    return run(["docker", "exec", *attach, name, *argv], check=check, input=input or None,
               timeout=timeout)


def remove(name: str) -> None:
    run(["docker", "rm", "-f", "-v", name], check=False)
