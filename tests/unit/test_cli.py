"""The CLI as a subprocess: help everywhere, one-line errors with exit 2."""

import pytest

from tests.conftest import gpuprov

COMMANDS = [[], ["evaluate"], ["profiles"], ["lab"], ["lab", "up"], ["lab", "down"],
            ["lab", "status"], ["lab", "inventory"], ["lab", "ssh"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "gpuprov")
def test_every_command_has_help(command):
    result = gpuprov(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["lab", "up", "--frobnicate"], "--frobnicate"),
        (["lab", "up", "--kind", "tpu-v5"], "tpu-v5"),
        (["lab", "up", "--nodes", "0"], "--nodes 0"),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle):
    result = gpuprov(*argv)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
