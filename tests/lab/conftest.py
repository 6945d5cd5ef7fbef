"""The lab tests run on two labs side by side, one per pytest-xdist worker
(`scripts/test.sh`: `-n 2 --dist loadgroup`). About half of a lab test's time is spent
waiting (a soak, a node's boot, apt on a node), so two labs on a 2-core machine take
less time than one (issue 54, measured in docs/install.md).

Each worker's lab is its own (GPUPROV_LAB_INSTANCE: containers, fabric and state apart);
each test file runs whole on one lab, as a group: the validation tests, which provision
a rack of their own and validate it, on one; the rest (the lab itself, provisioning, the
roles' molecule scenarios, the simulated GPUs) on the other. Without xdist, every file
runs in order on lab 1.
"""

from __future__ import annotations

import os
import sys

import pytest

# gw0 -> lab 1, gw1 -> lab 2: set before anything imports gpuprov.lab (its names are read
# once, at import), and handed to every `gpuprov lab` and molecule run the tests start
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    os.environ["GPUPROV_LAB_INSTANCE"] = str(int(_worker.removeprefix("gw")) + 1)
    os.environ.pop("GPUPROV_LAB_DIR", None)    # each lab in its own default directory
    if "gpuprov.lab.paths" in sys.modules:
        raise RuntimeError("gpuprov.lab was imported before the worker chose its lab")

# files that run on a lab of their own; every other lab test file shares the other lab
OWN_LAB = {"test_provision_validate.py": "rack-validate"}


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(OWN_LAB.get(item.path.name, "lab")))
