"""The README's two commands work as written for root and for a sudoer: no `sudo` to type
(a fresh server often has none); a user who is not root is re-run through sudo, or, with
no sudo, stopped with one line and exit 2 before anything changes."""

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO

SCRIPTS = ("scripts/bootstrap.sh", "scripts/demo.sh", "scripts/test.sh")


def _readme_commands() -> list[str]:
    block = re.search(r"## The two commands.*?```sh\n(.*?)```", (REPO / "README.md").read_text(),
                      re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_two_commands_are_scripts_run_as_they_are():
    assert _readme_commands() == ["scripts/demo.sh", "scripts/test.sh"]
    assert (REPO / ".ci/run").read_text().count("scripts/test.sh") == 1


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_that_changes_the_machine_asks_for_root_first(script):
    text = (REPO / script).read_text()
    assert os.access(REPO / script, os.X_OK)
    # sourced before anything else runs (and before any cd, so $0 still resolves)
    first = next(line for line in text.splitlines()
                 if line and not line.startswith("#") and not line.startswith("set "))
    assert first == '. "$(dirname "$0")/lib/as-root.sh"'


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to drop to another user")
def test_a_user_who_is_not_root_and_has_no_sudo_gets_one_line_and_exit_2(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}   # no sudo on this PATH here
    if shutil.which("sudo", path=env["PATH"]):
        pytest.skip("sudo is installed on this machine")
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash",
         str(REPO / "scripts/bootstrap.sh")],
        capture_output=True, text=True, env=env, timeout=30, check=False)
    assert result.returncode == 2
    assert result.stderr == "bootstrap.sh: needs root: run it as root (there is no sudo here)\n"
