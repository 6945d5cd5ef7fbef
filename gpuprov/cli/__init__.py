"""The `gpuprov` command line.

Every command exits 0 when all went well, 1 when it ran but some node failed, and 2 on
bad input or configuration (with a one-line error, and nothing changed on any host).
"""

from __future__ import annotations

import sys

import click

from gpuprov import __version__
from gpuprov.cli.evaluate import evaluate, profiles
from gpuprov.cli.lab import lab
from gpuprov.cli.lock import lock
from gpuprov.cli.nodes import nodes
from gpuprov.cli.provision import provision
from gpuprov.cli.report import report_command
from gpuprov.cli.validate import validate
from gpuprov.errors import GpuprovError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuprov")
def cli() -> None:
    """Provision and validate GPU servers: Ansible roles, evidence, verdicts."""


cli.add_command(lab)
cli.add_command(evaluate)
cli.add_command(profiles)
cli.add_command(lock)
cli.add_command(provision)
cli.add_command(nodes)
cli.add_command(validate)
cli.add_command(report_command)


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="gpuprov", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("gpuprov: aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        # one line, naming the bad value, not click's usage block
        where = exc.ctx.command_path if exc.ctx else "gpuprov"
        click.echo(f"{where}: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"gpuprov: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except GpuprovError as exc:
        click.echo(f"gpuprov: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
