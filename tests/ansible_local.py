"""Run one of a role's task files under ansible-playbook on a local connection, for the
unit tests of a role's decisions (no lab, no SSH)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import yaml

from gpuprov import collection
from tests.conftest import BIN


def run_task_file(tmp_path: Path, task_file: Path, variables: dict):
    """ansible-playbook on this tree's collection (its filters), whatever else is installed."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "vars": variables,
        "tasks": [{"ansible.builtin.include_tasks": str(task_file)}]}]))
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collection.collections_path())})


def render_role_vars(role: str, values: dict, names: list[str]) -> dict:
    """A role's derived variables (vars/main.yml), rendered in the given order as Ansible
    would (its regex_escape is re.escape), each seeing the ones before it."""
    role_vars = yaml.safe_load((collection.ROLES / role / "vars" / "main.yml").read_text())
    env = jinja2.Environment()
    env.filters["regex_escape"] = re.escape
    rendered = dict(values)
    for name in names:
        rendered[name] = env.from_string(role_vars[name]).render(rendered)
    return rendered
