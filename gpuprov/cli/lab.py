"""`gpuprov lab …`: the simulated rack."""

from __future__ import annotations

import os

import click

from gpuprov.lab import faults, kinds, slurm
from gpuprov.lab.lab import Lab
from gpuprov.lab.paths import LabPaths


def _lab() -> Lab:
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


_WIDTH = max(len(name) for name in faults.FAULTS)
FAULT_KINDS_HELP = "\b\nKinds:\n" + "".join(
    f"  {f.name:<{_WIDTH}} {f.help}\n" for f in faults.FAULTS.values())


@lab.command(epilog=FAULT_KINDS_HELP)
@click.argument("node")
@click.argument("kind", required=False, metavar="[KIND]")
@click.option("--gpu", "gpu", type=int, help="Index of the GPU at fault (default 0).")
@click.option("--clear", is_flag=True, help="Undo every fault on NODE.")
def fault(node: str, kind: str | None, gpu: int | None, clear: bool) -> None:
    """Inject a fault into NODE, or --clear them all."""
    _lab().require_node(node)
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
    lab_ = _lab()
    if not lab_.recorded_nodes():
        raise click.UsageError("the lab is not up: run `gpuprov lab up`")
    click.echo(lab_.paths.inventory)


@lab.command(context_settings={"ignore_unknown_options": True})
@click.argument("node")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def ssh(node: str, command: tuple[str, ...]) -> None:
    """Open an SSH session to NODE (or run COMMAND there), with host keys checked."""
    lab_ = _lab()
    lab_.require_node(node)
    argv = ["ssh", "-F", str(lab_.paths.ssh_config), node, *command]
    os.execvp("ssh", argv)
