"""`gpuprov lab …`: the simulated rack.

The lab's machinery (the Lab, its faults: Ansible's inventory, the stand-ins) is imported
by the commands that use it: `lab ssh`, `lab inventory` and a fault's help read only the
lab's recorded state, and the tests call them hundreds of times."""

from __future__ import annotations

import os

import click

from gpuprov.lab import kinds, recorded
from gpuprov.lab.paths import LabPaths


def _lab():
    from gpuprov.lab.lab import Lab
    return Lab(LabPaths.default(), log=lambda msg: click.echo(msg, err=True))


@click.group()
def lab() -> None:
    """The lab: a simulated rack of bare servers on this machine."""


@lab.command()
@click.option("--nodes", "count", type=int, default=None,
              help="How many nodes (node01, node02, …).  [default: 3]")
@click.option("--kind", "kind_choices", multiple=True, metavar="[NODE=]KIND",
              help="Hardware kind of one node (NODE=KIND) or of all (KIND); repeatable. "
                   f"Kinds: {', '.join(kinds.node_kinds())}. Default: a mix, in that order: "
                   f"{', '.join(kinds.DEFAULT_CYCLE)}.")
@click.option("--slurm", "with_slurm", is_flag=True,
              help="Also a Slurm cluster: slurmctld on a head node (slurmctl), slurmd on every "
                   "node, over the lab fabric; kept by later `up`s until `lab down`.")
@click.option("--rack", metavar="PROFILE",
              help="The lab is one rack: the rack profile's compute trays (gb200-nvl72: 18) as "
                   "nodes, one NVLink domain in the inventory (docs/rack.md). Not with --nodes "
                   "or --kind; kept by later `up`s until `lab down`.")
def up(count: int | None, kind_choices: tuple[str, ...], with_slurm: bool,
       rack: str | None) -> None:
    """Start the lab (build the node image and mirror the first time). Idempotent."""
    lab_ = _lab()
    plan = lab_.up(count, list(kind_choices), with_slurm, rack)
    for node, kind in plan.items():
        click.echo(f"{node}\t{kind}\tup")
    click.echo(f"inventory: {lab_.paths.inventory}")
    if lab_.has_slurm():
        from gpuprov.lab import slurm
        click.echo(f"slurm: GPUPROV_CONFIG={slurm.config_file(lab_.paths)}")


@lab.command()
def down() -> None:
    """Remove every lab node (containers, namespaces, mounts). Caches stay."""
    removed = _lab().down()
    click.echo(f"removed {len(removed)} node(s)")


@lab.command()
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
def reset(nodes: tuple[str, ...]) -> None:
    """Reinstall NODEs (default: every node) as bare servers, as the vendor shipped them."""
    for node in _lab().reset(list(nodes)):
        click.echo(f"{node}\tbare")


@lab.command("power-off")
@click.argument("nodes", nargs=-1, required=True)
def power_off(nodes: tuple[str, ...]) -> None:
    """Cut NODEs' power (the container stops at once); `gpuprov lab up` boots them again."""
    for node in _lab().power_off(list(nodes)):
        click.echo(f"{node}\toff")


@lab.command("mok-enroll")
@click.argument("node")
def mok_enroll(node: str) -> None:
    """At NODE's console, enrol the keys waiting for MokManager (`mokutil --import`), as an
    operator does at the next boot; the node reboots."""
    count = _lab().enroll_mok(node)
    click.echo(f"{node}\t{count} key(s) enrolled, booted")


@lab.command()
def status() -> None:
    """Show each node: kind, container state, systemd state."""
    rows = _lab().status()
    if not rows:
        click.echo("the lab is down")
        return
    click.echo(f"{'NODE':<8} {'KIND':<16} {'CONTAINER':<10} SYSTEMD")
    for row in rows:
        click.echo(f"{row['node']:<8} {row['kind']:<16} {row['container']:<10} {row['systemd']}")


class _FaultCommand(click.Command):
    """Its help lists every fault kind, read from the faults when the help is shown."""

    def format_epilog(self, ctx, formatter) -> None:
        from gpuprov.lab import faults
        width = max(len(name) for name in faults.FAULTS)
        self.epilog = "\b\nKinds:\n" + "".join(
            f"  {f.name:<{width}} {f.help}\n" for f in faults.FAULTS.values())
        super().format_epilog(ctx, formatter)


@lab.command(cls=_FaultCommand)
@click.argument("node")
@click.argument("kind", required=False, metavar="[KIND]")
@click.option("--gpu", "gpu", type=int, help="Index of the GPU at fault (default 0).")
@click.option("--clear", is_flag=True, help="Undo every fault on NODE.")
def fault(node: str, kind: str | None, gpu: int | None, clear: bool) -> None:
    """Inject a fault into NODE, or --clear them all."""
    from gpuprov.lab import faults
    recorded.require_node(LabPaths.default(), node)
    if clear:
        if kind:
            raise click.UsageError("--clear takes no KIND: it undoes every fault on the node")
        undone = faults.clear(node)
        click.echo(f"{node}: cleared {', '.join(undone) if undone else 'nothing (no faults)'}")
        return
    if not kind:
        raise click.UsageError(f"missing KIND (one of: {', '.join(faults.FAULTS)}) or --clear")
    click.echo(f"{node}: {kind}: {faults.inject(node, kind, gpu)}")


@lab.command()
def inventory() -> None:
    """Print the path of the lab's generated Ansible inventory."""
    paths = LabPaths.default()
    if not recorded.nodes(paths):
        raise click.UsageError("the lab is not up: run `gpuprov lab up`")
    click.echo(paths.inventory)


@lab.command(context_settings={"ignore_unknown_options": True})
@click.argument("node")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def ssh(node: str, command: tuple[str, ...]) -> None:
    """Open an SSH session to NODE (or run COMMAND there), with host keys checked."""
    paths = LabPaths.default()
    recorded.require_node(paths, node)
    argv = ["ssh", "-F", str(paths.ssh_config), node, *command]
    os.execvp("ssh", argv)
