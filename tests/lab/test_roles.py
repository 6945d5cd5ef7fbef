"""Every molecule scenario of every role on the shared lab: prepare (bare), converge,
idempotence (changed=0), verify (testinfra); --check before the upgrade scenario's change.
Under Mitogen's strategy, as `gpuprov provision` runs the roles by default. (--check of every
role at once: on the bare nodes and, with changed=0, on a converged one, as operators run
it: test_provision.py.)"""

import os
import subprocess

import pytest

from gpuprov import collection
from gpuprov.provision.runner import strategy_settings
from tests.conftest import BIN

pytestmark = pytest.mark.lab

SCENARIOS = sorted((p.parent.parent.parent.name, p.parent.name)
                   for p in collection.ROLES.glob("*/molecule/*/molecule.yml"))


@pytest.mark.parametrize("role,scenario", SCENARIOS, ids=[f"{r}-{s}" for r, s in SCENARIOS])
def test_molecule_scenario(lab, role, scenario, tmp_path):
    # A fresh ephemeral directory: molecule otherwise remembers "already prepared" across
    # runs (and checkouts) and skips the prepare that makes the node bare.
    env = {**os.environ, "GPUPROV_LAB_INVENTORY": str(lab.inventory),
           "GPUPROV_COLLECTIONS_PATH": str(collection.collections_path()),
           "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "molecule"),
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1",
           **strategy_settings("mitogen")}
    result = subprocess.run([str(BIN / "molecule"), "test", "-s", scenario],
                            cwd=collection.ROLES / role, env=env, capture_output=True,
                            text=True, timeout=1200, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
