"""`gpuprov evaluate` and `gpuprov profiles`: offline judgement of saved evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gpuprov.checks.run import Judgement, judge
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.profiles import load_profile, shipped_names


def render_table(j: Judgement) -> str:
    rows = [(c.id, c.status.upper(), c.action if c.status in ("fail", "warn", "observed") else "",
             c.summary) for c in j.checks]
    return "\n".join([f"node {j.node}  profile {j.profile}", "",
                      text_table(("CHECK", "STATUS", "ACTION", "SUMMARY"), rows), "",
                      f"verdict: {j.verdict.upper()}"])


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--profile", "profile_name", required=True, metavar="NAME|PATH",
              help="Hardware profile (see `gpuprov profiles`) or a path to one.")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None,
              help="Versions lock (a group_vars YAML of gpuprov_* variables). "
                   "Default: the lock recorded in the evidence's meta.json; evidence "
                   "without one needs it (exit 2).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def evaluate(directory: Path, profile_name: str, lock_path: Path | None, as_json: bool) -> None:
    """Judge a saved evidence DIRECTORY offline: exit 0 accepted, 1 rejected, 2 bad input."""
    profile = load_profile(profile_name)
    evidence = Evidence(directory)
    if lock_path is not None:
        lock = Lock.load(lock_path)
    elif evidence.meta.get("lock"):
        lock = Lock.from_vars({f"gpuprov_{k}": v for k, v in evidence.meta["lock"].items()},
                              f"{directory}/meta.json lock")
    else:
        # the version checks compare against the lock: without one they have nothing to
        # judge by, and would read as passes (issue 52)
        raise InputError(f"{directory / 'meta.json'}: records no versions lock; pass --lock "
                         "FILE (the inventory's group_vars/all/versions.yml)")
    judgement = judge(evidence, profile, lock, strict=True)
    if as_json:
        click.echo(json.dumps(judgement.as_dict(), indent=2, default=str))
    else:
        click.echo(render_table(judgement))
    sys.exit(0 if judgement.verdict == "accepted" else 1)


@click.command()
def profiles() -> None:
    """List the shipped hardware profiles."""
    for name in shipped_names():
        p = load_profile(name)
        nv = p.nvlink["all_pairs"] if p.nvlink and "all_pairs" in p.nvlink else (
            "matrix" if p.nvlink else "no NVLink")
        click.echo(f"{name:<14} {p.gpu_count} GPU  {nv:<10} {p.data.get('description', '')}")
