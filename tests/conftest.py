"""Shared fixtures: the CLI as a subprocess, and one lab for the whole session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# hypothesis keeps its cache outside the tree (the packaging tests build the tree as it is)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), "gpuprov-hypothesis"))


MUTMUT_CHILD = Path(__file__).resolve().parent / "mutmut_child"


def gpuprov(*args: str, check: bool = False, timeout: float = 1800, **kwargs):
    """Run the installed `gpuprov` console script, as an operator would."""
    exe = shutil.which("gpuprov", path=str(BIN)) or "gpuprov"
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        return _mapped_for_mutmut(exe, args, check, timeout, kwargs)
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, check=check, timeout=timeout, **kwargs
    )


def _mapped_for_mutmut(exe: str, args, check: bool, timeout: float, kwargs: dict):
    """scripts/mutation.sh's stats pass: mutmut maps a test to the functions it reaches in
    its own process; the CLI child reports its own (tests/mutmut_child/sitecustomize.py)
    and they are added to this test's record, so the CLI tests judge those mutants too."""
    from mutmut.state import state
    env = dict(kwargs.pop("env", None) or os.environ)
    with tempfile.NamedTemporaryFile("r", suffix=".hits") as hits:
        env["GPUPROV_MUTMUT_CHILD_HITS"] = hits.name
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(MUTMUT_CHILD),
                                                          env.get("PYTHONPATH")]))
        result = subprocess.run([exe, *args], capture_output=True, text=True, check=check,
                                timeout=timeout, env=env, **kwargs)
        state()._stats.update(line.strip() for line in hits if line.strip())
    return result


@dataclass(frozen=True)
class RunningLab:
    inventory: Path
    ssh_config: Path
    nodes: dict[str, str]  # node -> kind

    def ssh(self, node: str, command: str, timeout: float = 120):
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), node, command],
            capture_output=True, text=True, timeout=timeout, check=False,
        )

    def ansible(self, pattern: str, module: str, args: str = "", timeout: float = 600):
        env = {**os.environ, "ANSIBLE_DEPRECATION_WARNINGS": "False"}
        argv = [str(BIN / "ansible"), "-i", str(self.inventory), pattern, "-m", module]
        if args:
            argv += ["-a", args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, env=env)


def bare_lab_up(*args: str, env: dict | None = None, timeout: float = 1800):
    """`gpuprov lab up ARGS` on bare nodes. `lab up` keeps the containers its lab already
    has (an operator's second `up` changes nothing), so a lab an earlier run left behind (a
    killed test session, a machine's stopped containers) would come back with that run's
    packages and loaded modules: brought down first, which costs nothing where none is."""
    down = gpuprov("lab", "down", env=env, timeout=600)
    assert down.returncode == 0, down.stderr
    return gpuprov("lab", "up", *args, env=env, timeout=timeout)


@pytest.fixture(scope="session")
def lab():
    """`gpuprov lab up` on bare nodes once per session; the last test (lab_teardown) takes
    it down, or, where the session has no such test (lab 2's, in scripts/test.sh) or it did
    not run, the session's end does."""
    up = bare_lab_up()
    assert up.returncode == 0, up.stderr
    inventory = Path(gpuprov("lab", "inventory", check=True).stdout.strip())
    nodes = dict(line.split("\t")[:2] for line in up.stdout.splitlines() if "\t" in line)
    ssh_config = inventory.parent.parent / "ssh" / "config"
    yield RunningLab(inventory=inventory, ssh_config=ssh_config, nodes=nodes)
    if gpuprov("lab", "status").stdout.strip() != "the lab is down":
        gpuprov("lab", "down")


def pytest_collection_modifyitems(config, items):
    """Tests that mostly wait run first: under pytest-xdist a worker that draws one last
    idles the whole stage's end on it (the unit stage lost 40 s so). Tests that tear the
    shared lab down run after every other test."""
    items.sort(key=lambda item: (item.get_closest_marker("waits") is None,
                                 item.get_closest_marker("lab_teardown") is not None))


@pytest.fixture(scope="session")
def postgres():
    """One real PostgreSQL server for the session (tests/postgres.py); each test that needs a
    ledger there takes a fresh database with `postgres.new_database()`."""
    from tests.postgres import Server
    server = Server()
    yield server
    server.stop()
