"""`gpuprov provision`: preflight, then the collection's playbook gpuprov.gpu.provision across
the rack, a live view, a per-host summary, and a record in the ledger."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from gpuprov import settings as site_settings
from gpuprov.cli import options
from gpuprov.cli.doctor import refuse_on_blockers
from gpuprov.cli.lock import preflight_or_exit
from gpuprov.config import resolve_inventory
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory, pick_nodes
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import rollback_target
from gpuprov.lock import PREFIX as LOCK_PREFIX
from gpuprov.metrics import configured_textfile_dir
from gpuprov.model import HostOutcome, Outcome
from gpuprov.provision.runner import Options
from gpuprov.provision.service import ProvisionRequest
from gpuprov.provision.service import provision as run_provisioning
from gpuprov.racks import inventory_racks, playbook_racks

BATCH = re.compile(r"^[1-9]\d*%?$")


def _batch(value: str | None, option: str) -> str | None:
    match = BATCH.match(value) if value is not None else None
    if value is not None and (not match or (value.endswith("%") and int(value[:-1]) > 100)):
        raise InputError(f"{option} {value!r}: expected a host count (N) or a percentage "
                         "(N%, at most 100%)")
    return value


def _retry_hosts(ledger: Ledger, inventory: Path, known: list[str]) -> list[str]:
    last = ledger.last_run("provision", str(inventory.resolve()))
    if last is None:
        raise InputError(f"--retry-failed: no earlier provisioning run of {inventory}")
    outcomes = ledger.outcomes(last.id)
    retry = [h for h in last.hosts if outcomes.get(h) is None
             or outcomes[h].outcome != "converged"]
    unknown = [h for h in retry if h not in known]
    if unknown:
        raise InputError(f"--retry-failed: host {unknown[0]} of run {last.id} is no longer "
                         f"in {inventory}")
    if not retry:
        click.echo(f"nothing to retry: every host of run {last.id} converged")
        sys.exit(0)
    click.echo(f"retrying {len(retry)} host(s) of run {last.id} ({last.status}): "
               f"{', '.join(retry)}")
    return retry


# a --check run's host that ran to its end: nothing converged, CHANGED is what would change
CHECKED = "checked"


def _summary(outcomes: list[HostOutcome], check: bool) -> str:
    def said(outcome: str) -> str:
        return CHECKED if check and outcome == Outcome.CONVERGED else outcome
    return text_table(
        ("HOST", "OUTCOME", "OK", "CHANGED", "FAILED", "UNREACH", "REBOOT", "DETAIL"),
        [(o.host, said(o.outcome), o.ok, o.changed, o.failed, o.unreachable,
          "pending" if o.reboot_pending else "-", o.detail) for o in outcomes],
        right=("OK", "CHANGED", "FAILED", "UNREACH"))


def _rollback_lock(ledger: Ledger, hosts: list[str]) -> tuple:
    """The one lock the named nodes go back to (and the run that had it)."""
    targets = {h: rollback_target(ledger, h) for h in hosts}
    distinct = {json.dumps(lock, sort_keys=True) for _, lock in targets.values()}
    if len(distinct) > 1:
        raise InputError("--rollback: the nodes go back to different locks ("
                         + "; ".join(f"{h}: run {run.id}" for h, (run, _) in targets.items())
                         + "): roll back each group on its own")
    return next(iter(targets.values()))


def _racks(inventory: Inventory, hosts: list[str]) -> tuple[dict, dict[str, str]]:
    """The NVL72 racks of the hosts asked for, whole (every tray's IMEX address, asked or
    not: one peer list for the rack), as the playbook's IMEX tasks take them; and each
    asked tray's rack (provisioned one rack at a time)."""
    def found(host: str) -> dict:
        return inventory.variables(host, also=("ansible_host",))

    if not any(found(host).get("gpuprov_rack") for host in hosts):
        return {}, {}   # no tray asked for: the rest of a large inventory is not read
    racks = {n: r for n, r in inventory_racks(inventory.hosts(), found).items()
             if set(r.trays) & set(hosts)}
    return playbook_racks(racks, found), {t: r.name for r in racks.values() for t in r.trays
                                           if t in hosts}


@click.command()
@click.argument("rollback_nodes", nargs=-1, metavar="[--rollback NODE…]")
@options.inventory
@options.limit
@click.option("--tags", "-t", metavar="TAGS", help="Only these roles' tags (comma-separated): "
              "nouveau, driver, cuda, cudnn, imex, docker, container_toolkit, gpu_burn, "
              "pytorch.")
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show file differences (with --check: would-be).")
@click.option("--forks", type=click.IntRange(1, 500), default=20, show_default=True,
              help="Hosts worked on in parallel.")
@click.option("--serial", metavar="N|N%", help="Provision in batches of this many hosts; a "
              "batch in which every host fails stops the run (a canary for the rest).")
@click.option("--allow-reboot", is_flag=True,
              help="Reboot hosts whose new driver needs it, in batches of --reboot-serial.")
@click.option("--reboot-serial", metavar="N|N%", default="1", show_default=True,
              help="Hosts rebooted at once (with --allow-reboot).")
@click.option("--retry-failed", is_flag=True,
              help="Only the hosts that failed, were unreachable or were interrupted in the "
                   "last run of this inventory.")
@click.option("--slurm", "with_slurm", is_flag=True,
              help="Drain the hosts in service in Slurm (the config file's `slurm` section) "
                   "and wait for their jobs first; they stay drained until `validate "
                   "--slurm` accepts them.")
@click.option("--rollback", is_flag=True,
              help="Bring NODEs back to their versions lock before the last change: that of "
                   "their last converged run after a failed one, else of the converged run "
                   "before the last, from the ledger. The inventory's lock is not changed.")
@click.option("--full", is_flag=True,
              help="Run every task on every host, even those in sync with their last full "
                   "run (by default such a host is skipped, saying so).")
def provision(rollback_nodes: tuple[str, ...], inventory_option: str | None, limit: str | None,
              tags: str | None, check: bool, diff: bool, forks: int, serial: str | None,
              allow_reboot: bool, reboot_serial: str, retry_failed: bool, with_slurm: bool,
              rollback: bool, full: bool) -> None:
    """Provision the inventory's hosts: exit 0 all converged, 1 any not, 2 bad input."""
    if retry_failed and limit:
        raise InputError("--retry-failed and --limit: give one (the retry picks its hosts)")
    if bool(rollback_nodes) != rollback:
        raise InputError("--rollback NODE…: name the nodes to roll back (and NODEs only "
                         "with --rollback)")
    if rollback and (limit or retry_failed):
        raise InputError("--rollback picks its hosts: no --limit or --retry-failed with it")
    _batch(serial, "--serial")
    _batch(reboot_serial, "--reboot-serial")
    strategy = site_settings.ansible_strategy()
    path = resolve_inventory(inventory_option)
    inventory = Inventory(path)
    ledger = Ledger()
    if rollback:
        hosts = pick_nodes(inventory, rollback_nodes, False)
    else:
        hosts = (_retry_hosts(ledger, path, inventory.hosts()) if retry_failed
                 else inventory.hosts(limit))
    target = _rollback_lock(ledger, hosts) if rollback else None
    plans = preflight_or_exit(inventory, hosts)
    refuse_on_blockers(inventory, hosts)
    metrics_dir = None if check else configured_textfile_dir()
    if with_slurm and check:
        raise InputError("--slurm and --check: a check run changes nothing, no drain needed")
    racks, rack_of = _racks(inventory, hosts)
    playbook = Options(inventory=path, hosts=hosts, check=check, diff=diff, tags=tags,
                       forks=forks, serial=serial, allow_reboot=allow_reboot,
                       reboot_serial=reboot_serial, strategy=strategy,
                       lock_overrides={f"{LOCK_PREFIX}{k}": v for k, v in target[1].items()}
                       if target else {}, racks=racks)
    done = run_provisioning(ProvisionRequest(
        inventory, playbook,
        {h: target[1] if target else plans[h].recorded_lock() for h in hosts},
        limit=limit, retry_failed=retry_failed, rollback_to=target,
        slurm=site_settings.slurm() if with_slurm else None,
        variables={h: inventory.variables(h) for h in hosts} if with_slurm else None,
        metrics_dir=metrics_dir, keep_baselines=not check and not tags,
        skip_in_sync=not (check or tags or full or rollback), rack_of=rack_of),
        click.echo, lambda line: click.echo(line, err=True))
    click.echo(_summary(done.outcomes, check))
    click.echo(f"log: {done.log_path}" if done.log_path.exists()
               else "log: none (no host ran the playbook)")
    if len(done.outcomes) < len(hosts):
        click.echo(f"{len(hosts) - len(done.outcomes)} host(s) not provisioned: their jobs did "
                   "not end in time", err=True)
    elif done.not_converged:
        click.echo(f"{len(done.not_converged)} of {len(done.outcomes)} host(s) did not "
                   "converge; `gpuprov provision --retry-failed` runs only those", err=True)
    sys.exit(done.exit_code)
