"""Runs last: `lab down` leaves no container, namespace, mount or process behind."""

import subprocess
import time
from pathlib import Path

import pytest

from gpuprov.lab.paths import CONTAINER_PREFIX, LAB_FILTER
from tests.conftest import gpuprov

pytestmark = [pytest.mark.lab, pytest.mark.lab_teardown]


def _lab_processes() -> list[str]:
    """This lab's processes, and the shared cache's gpg agent (another lab may run beside
    this one, tests/lab/conftest.py: its `lab up` stops the agent it starts)."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines()
            if (CONTAINER_PREFIX in line or "gpuprov/gnupg" in line) and "ps -eo" not in line]


def test_down_leaves_nothing_behind(lab):
    result = gpuprov("lab", "down")
    assert result.returncode == 0, result.stderr
    containers = subprocess.run(
        ["docker", "ps", "-aq", "--filter", LAB_FILTER],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert containers == []
    mounts = Path("/proc/mounts").read_text()
    assert "gpuprov" not in mounts
    deadline = time.monotonic() + 20  # ssh masters notice their proxy died
    while _lab_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _lab_processes() == []
    assert gpuprov("lab", "status").stdout.strip() == "the lab is down"
    assert not lab.inventory.exists()
