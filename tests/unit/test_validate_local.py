"""Issue 53: validating the machine itself. The example site (examples/one-gpu-local) is
read as an operator runs it: its host reached over Ansible's local connection (testinfra's
local backend, no SSH), its profile and lock loaded, and a command run through it."""

from __future__ import annotations

import os

from gpuprov.lock import Lock
from gpuprov.profiles import load_profile
from gpuprov.remote.connect import node_host
from tests.conftest import REPO, gpuprov

SITE = REPO / "examples/one-gpu-local"


def test_the_example_site_reaches_this_machine_over_the_local_connection(tmp_path):
    host = node_host("localhost", SITE / "hosts.ini", tmp_path / "control")
    assert type(host.backend).__name__ == "LocalBackend"
    assert host.run("echo $((6 * 7))").stdout == "42\n"


def test_the_example_site_s_profile_and_lock_load(monkeypatch):
    monkeypatch.chdir(SITE)        # its gpuprov_profile is relative to where gpuprov runs
    profile = load_profile("profiles/h200-sxm-1.yml")
    assert (profile.gpu_count, profile.nvlink) == (1, None)
    lock = Lock.load(SITE / "group_vars/all/versions.yml")
    assert (lock.driver_version, lock.container_toolkit_version) == ("580.159.04", "")


def test_lock_check_reads_the_example_site_as_an_operator_runs_it():
    result = gpuprov("lock", "check", "-i", "hosts.ini", cwd=SITE,
                     env={**os.environ, "NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ("lock ok: 1 host(s), 1 distinct lock(s), every rule of "
                             "gpuprov/data/compat.yml holds\n")
