"""The nvidia_driver role refuses bad locks on a real lab node, changing nothing there:
a version the repository does not carry (named, with what it does carry), and a fabric
manager at another version than the driver (refused before even the repository is set up)."""

import os
import subprocess

import pytest

from tests.conftest import BIN, REPO

pytestmark = pytest.mark.lab

NODE = "node01"   # NVSwitch: fabric manager would be installed
STATE = ("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort; "
         "ls -l --time-style=+%s /etc/apt/sources.list.d /etc/apt/preferences.d "
         "/etc/apt/apt.conf.d; ls /run/reboot-required* 2>/dev/null; "
         "cat /run/gpuprov-lab/nvidia-module-version 2>/dev/null || true")


def _converge(lab, tmp_path, **role_vars):
    playbook = tmp_path / "driver.yml"
    settings = "".join(f"        {k}: {v}\n" for k, v in role_vars.items())
    playbook.write_text(f"- hosts: {NODE}\n  gather_facts: true\n  roles:\n"
                        f"    - role: nvidia_driver\n      vars:\n{settings}")
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "NO_COLOR": "1",
           "ANSIBLE_DEPRECATION_WARNINGS": "False"}
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(lab.inventory), str(playbook)],
                          capture_output=True, text=True, timeout=600, env=env, check=False)


@pytest.fixture
def bare_node(lab):
    """node01 with no driver and no CUDA repository; left that way afterwards."""
    purge = (REPO / "roles/nvidia_driver/molecule/resources/tasks/purge-driver.yml")
    result = lab.ansible(NODE, "ansible.builtin.include_tasks", str(purge))
    assert result.returncode == 0, result.stdout + result.stderr
    return lab


def test_version_absent_from_the_repository_is_named_and_nothing_installed(bare_node, tmp_path):
    before = bare_node.ssh(NODE, STATE).stdout
    result = _converge(bare_node, tmp_path, nvidia_driver_version="535.161.09")
    assert result.returncode == 2, result.stdout[-3000:]
    assert ("nvidia-headless-535 535.161.09 absent (the repositories have: 535.183.06-0ubuntu1, "
            "535.161.08-0ubuntu1)") in result.stdout
    assert "nvidia-fabricmanager-535 535.161.09 absent" in result.stdout
    after = bare_node.ssh(NODE, STATE).stdout
    # only the repository definition (and apt's lists) may have appeared; no package, pin or marker
    assert [line for line in after.splitlines() if line not in before.splitlines()
            and "cuda.sources" not in line] == []


def test_mismatched_fabric_manager_refused_before_anything_changes(bare_node, tmp_path):
    before = bare_node.ssh(NODE, STATE).stdout
    result = _converge(bare_node, tmp_path, nvidia_driver_version="535.161.08",
                       nvidia_driver_fabricmanager_version="535.183.06")
    assert result.returncode == 2
    assert ("fabric manager 535.183.06 requested with driver 535.161.08: fabric manager must be "
            "exactly the driver's version") in result.stdout
    assert bare_node.ssh(NODE, STATE).stdout == before
