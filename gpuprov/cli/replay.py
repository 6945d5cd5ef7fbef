"""`gpuprov replay`: past validations judged again under a changed lock or profile, or the
installed gpuprov; what would change, recorded nowhere (docs/fleet-figures.md)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from gpuprov import replay as replaying
from gpuprov import settings
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.ledger import Ledger
from gpuprov.lock import Lock
from gpuprov.model import NodeResult
from gpuprov.profiles import Profile, load_profile
from gpuprov.settings import duration


def _profiles(items: tuple[str, ...]):
    """`--profile [NODE=]FILE`: a NODE's own, or every node's; else the one it was judged
    with. Each loaded once, bad input refused before anything is judged."""
    every, own = None, {}
    for item in items:
        node, sep, path = item.partition("=")
        if sep and node and "/" not in node:
            own[node] = load_profile(path)
        else:
            every = load_profile(item)
    loaded: dict[str, Profile] = {}

    def profile_for(result: NodeResult) -> Profile:
        if result.node in own:
            return own[result.node]
        if every is not None:
            return every
        if result.profile not in loaded:
            loaded[result.profile] = load_profile(result.profile)
        return loaded[result.profile]
    return profile_for


@click.command()
@click.option("--since", metavar="DURATION",
              help="Only validations judged within this long before now (30d, 12h, 2w).")
@click.option("--node", "nodes", multiple=True, metavar="NODE", help="Only this node; repeat.")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Judge with this versions lock (default: each run's recorded one).")
@click.option("--profile", "profile_items", multiple=True, metavar="[NODE=]FILE",
              help="Judge with this profile (NODE's alone with NODE=); default: each run's.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Judge under this configuration file (its observe section) instead of "
                   "the installed one.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def replay(since: str | None, nodes: tuple[str, ...], lock_path: Path | None,
           profile_items: tuple[str, ...], config_path: Path | None, as_json: bool) -> None:
    """Judge past validations again: exit 0 no verdict changes, 1 some do, 2 bad input."""
    if config_path is not None:
        if not config_path.is_file():
            raise InputError(f"--config {config_path}: no such file")
        # this process judges under it (settings read it where the judge asks)
        os.environ[settings.CONFIG_ENV] = str(config_path)
        settings.load(config_path)
    window = duration(since, "--since") if since else None
    lock = Lock.load(lock_path) if lock_path is not None else None
    profile_for = _profiles(profile_items)
    results = Ledger.reader().node_results()
    known = {r.node for r in results}
    for node in nodes:
        if node not in known:
            raise InputError(f"--node {node}: no validation of it in the ledger")
    cutoff = time.time() - window if window else None
    picked = [r for r in results if (not nodes or r.node in nodes)
              and (cutoff is None or r.judged_at >= cutoff)]
    outcome = replaying.replay(picked, profile_for, lock)
    if as_json:
        click.echo(json.dumps(outcome.as_dict(), indent=2))
    else:
        rows = [(c.node, c.run_id, datetime.fromtimestamp(c.judged_at, UTC).strftime(
                    "%Y-%m-%d %H:%M"), f"{c.was} -> {c.now}",
                 ", ".join(f"{k} {a or 'absent'}->{b}" for k, (a, b) in c.checks.items()))
                for c in outcome.changed]
        if rows:
            click.echo(text_table(("NODE", "RUN", "JUDGED", "VERDICT", "CHECKS"), rows))
        click.echo(f"{outcome.replayed} validation(s) judged again, {len(outcome.changed)} "
                   f"verdict(s) would change")
        for node, run_id, why in outcome.not_judged:
            click.echo(f"not judged again: {node} run {run_id}: {why}")
    sys.exit(1 if outcome.changed else 0)
