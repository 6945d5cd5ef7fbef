"""Every command and subcommand answers --help; the lazily loaded command list agrees
with the commands themselves; `gpuprov --help` imports none of them."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from gpuprov.cli import COMMANDS, cli


def _paths(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from _paths(command, click.Context(command, parent=ctx), (*prefix, name))


ALL = [(), *_paths(cli, click.Context(cli))]


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "gpuprov")
def test_every_command_has_help(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: {' '.join(('cli', *path))}")


def test_every_command_and_subcommand_is_covered():
    assert len(ALL) >= 18 and ("lab", "fault") in ALL and ("lock", "check") in ALL


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_lazy_list_shows_each_commands_own_help(name):
    command = cli.get_command(click.Context(cli), name)
    assert command.get_short_help_str(limit=80) == COMMANDS[name][2]


def test_help_imports_no_command_module():
    probe = ("import sys; from gpuprov.cli import main\n"
             "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith(('gpuprov.cli.', 'ansible',"
             " 'testinfra', 'gpuprov.checks'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
