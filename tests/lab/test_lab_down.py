"""Runs last: `lab down` leaves no container, namespace, mount or process behind."""

import subprocess
import time
from pathlib import Path

import pytest

from gpuprov.lab.lab import Lab
from gpuprov.lab.paths import CONTAINER_PREFIX, LAB_FILTER, LabPaths
from tests.conftest import gpuprov

pytestmark = [pytest.mark.lab, pytest.mark.lab_teardown]


def _processes(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if marker in line and "ps -eo" not in line]


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
    while _processes(CONTAINER_PREFIX) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes(CONTAINER_PREFIX) == []
    # the gpg agent is the shared cache's: another lab beside this one (scripts/test.sh)
    # starts and stops it under the cache lock, so it is looked for under that lock
    with Lab(LabPaths.default()).cache_locked():
        assert _processes("gpuprov/gnupg") == []
    assert gpuprov("lab", "status").stdout.strip() == "the lab is down"
    assert not lab.inventory.exists()
