"""Options several commands share, declared once so their names and help stay alike."""

from __future__ import annotations

import click

inventory = click.option(
    "--inventory", "-i", "inventory_option", metavar="FILE",
    help="Ansible inventory (default: $GPUPROV_INVENTORY or ./ansible.cfg's).")
limit = click.option("--limit", "-l", metavar="PATTERN", help="Only hosts matching this pattern.")
json_document = click.option("--json", "as_json", is_flag=True,
                             help="One JSON document on stdout.")
