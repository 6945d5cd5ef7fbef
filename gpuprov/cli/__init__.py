"""The `gpuprov` command line.

Every command exits 0 when all went well, 1 when it ran but some node failed, and 2 on
bad input or configuration (with a one-line error, and nothing changed on any host).
"""

from __future__ import annotations

import importlib
import sys

import click

from gpuprov import __version__, collection
from gpuprov.errors import GpuprovError

# Each command's module is imported only when that command runs: Ansible, testinfra and
# the evaluators take most of a second to import, `gpuprov --help` none of it.
# name -> (module, attribute, the one line `gpuprov --help` shows; a test holds it equal
# to the command's own help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "baseline": ("gpuprov.cli.baseline", "baseline",
                 "Learn floors from known-good nodes into a profile: exit 0 written, 2 bad "
                 "input."),
    "certify": ("gpuprov.cli.certify", "certify",
                "Sign NODE's latest acceptance: exit 0 written, 1 not accepted, 2 bad input."),
    "check": ("gpuprov.cli.check", "check",
              "This node against its acceptance, in seconds: exit 0 healthy or handled, 1 a..."),
    "collect": ("gpuprov.cli.collect", "collect",
                "Collect this node's evidence for a campaign and sign the result: exit 0..."),
    "doctor": ("gpuprov.cli.doctor", "doctor",
               "What would make provisioning fail, read from every host in one SSH round..."),
    "drift": ("gpuprov.cli.drift", "drift",
              "Installed versions and holds of every locked package, the loaded driver..."),
    "evaluate": ("gpuprov.cli.evaluate", "evaluate",
                 "Judge a saved evidence DIRECTORY offline: exit 0 accepted, 1 rejected, 2 "
                 "bad..."),
    "fabric": ("gpuprov.cli.fabric", "fabric",
               "Test the compute fabric across NODEs: exit 0 none at fault, 1 any, 2 bad "
               "input."),
    "fleet": ("gpuprov.cli.fleet", "fleet_command",
              "Intake yield and reliability from the ledger: exit 0, 2 bad input."),
    "lab": ("gpuprov.cli.lab", "lab",
            "The lab: a simulated rack of bare servers on this machine."),
    "lock": ("gpuprov.cli.lock", "lock",
             "The versions lock (gpuprov_* variables in the inventory's group_vars)."),
    "metrics": ("gpuprov.cli.metrics", "metrics_command",
                "The ledger's verdicts, check failures, figures and locks as Prometheus..."),
    "nodes": ("gpuprov.cli.nodes", "nodes",
              "Each node's state: never validated, accepted, rejected, unreachable, expired..."),
    "profiles": ("gpuprov.cli.evaluate", "profiles", "List the shipped hardware profiles."),
    "provision": ("gpuprov.cli.provision", "provision",
                  "Provision the inventory's hosts: exit 0 all converged, 1 any not, 2 bad "
                  "input."),
    "rack": ("gpuprov.cli.rack", "rack",
             "Judge NVL72 RACKs from their trays' latest evidence: exit 0 all accepted, 1..."),
    "replay": ("gpuprov.cli.replay", "replay",
               "Judge past validations again: exit 0 no verdict changes, 1 some do, 2 bad "
               "input."),
    "report": ("gpuprov.cli.report", "report_command",
               "Report a validation RUN, or a NODE's latest validation (default: the latest..."),
    "verify": ("gpuprov.cli.certify", "verify",
               "Check a certificate: exit 0 it holds, 1 bad, tampered or expired, 2 bad input."),
    "validate": ("gpuprov.cli.validate", "validate",
                 "Validate NODEs: exit 0 all accepted, 1 any rejected or unreachable, 2 bad "
                 "input."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, prog_name="gpuprov",
    message=f"%(prog)s %(version)s\nAnsible collection {collection.FQCN} {collection.VERSION} "
            f"({collection.ROOT})")
def cli() -> None:
    """Provision and validate GPU servers: Ansible roles, evidence, verdicts."""


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
