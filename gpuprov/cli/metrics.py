"""`gpuprov metrics`: the fleet's verdicts for Prometheus (node_exporter's textfile
collector), and the same written after every validate and provision when configured."""

from __future__ import annotations

from pathlib import Path

import click

from gpuprov import metrics
from gpuprov.config import configured_inventory
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger


@click.command("metrics")
@click.option("--textfile", "textfile_dir", type=click.Path(path_type=Path), metavar="DIR",
              help="Write DIR/gpuprov.prom atomically (default: the configured "
                   "metrics.textfile_dir or $GPUPROV_METRICS_DIR; neither: print to stdout).")
@click.option("--inventory", "-i", "inventory_option", metavar="FILE",
              help="Also list this inventory's hosts never validated (default: "
                   "$GPUPROV_INVENTORY or ./ansible.cfg's, if any).")
def metrics_command(textfile_dir: Path | None, inventory_option: str | None) -> None:
    """The ledger's verdicts, check failures, figures and locks as Prometheus metrics:
    exit 0 written, 2 bad input (a directory that does not exist or is not writable)."""
    directory = (metrics.check_textfile_dir(textfile_dir, "--textfile") if textfile_dir
                 else metrics.configured_textfile_dir())
    inventory = configured_inventory(inventory_option)
    hosts = Inventory(inventory).hosts() if inventory else []
    ledger = Ledger()
    if directory is None:
        click.echo(metrics.exposition(metrics.fleet_registry(ledger, hosts)), nl=False)
        return
    path = metrics.publish(ledger, directory, hosts)
    click.echo(f"metrics: wrote {path}")

