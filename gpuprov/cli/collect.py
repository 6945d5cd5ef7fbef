"""`gpuprov collect`: a campaign job's work on its node (`validate --via slurm`).

Runs gpuprov's own collector on this machine over the local connection, as `validate`
would over SSH, into OUT/evidence; judges it here (advisory: the controller judges again);
writes OUT/result.json and signs it with this machine's SSH host key. Run as root: the
host key and most of the evidence need it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from gpuprov import __version__
from gpuprov.errors import InputError
from gpuprov.files import manifest
from gpuprov.slurm import results
from gpuprov.validation import node_request
from gpuprov.validation.pipeline import NodeJob, validate_node


@click.command()
@click.option("--request", "request_path", type=click.Path(path_type=Path), required=True,
              help="The campaign's request for this node (its job script writes it).")
@click.option("--request-sha256", "request_sha256", required=True, metavar="HEX",
              help="The request's SHA-256 as the controller wrote it (the job script pins "
                   "it): any other request is refused.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Where the evidence and the signed result go (a shared directory, or one "
                   "the controller fetches over SSH).")
@click.option("--host-key", default=results.HOST_KEY, show_default=True,
              help="The SSH host key that signs the result.")
def collect(request_path: Path, request_sha256: str, out_dir: Path, host_key: str) -> None:
    """Collect this node's evidence for a campaign and sign the result: exit 0 written, 1
    not written, 2 bad input."""
    settings, slurm_node = node_request.read(request_path, request_sha256)
    here = os.environ.get("SLURMD_NODENAME", slurm_node)
    if here != slurm_node:
        raise InputError(f"{request_path}: asks for node {slurm_node}, this is {here}")
    if not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: no such directory")
    evidence_dir = out_dir / results.EVIDENCE
    with tempfile.TemporaryDirectory(prefix="gpuprov-collect-") as tmp:
        inventory = Path(tmp) / "hosts.ini"
        inventory.write_text(f"{settings.node} ansible_connection=local "
                             f"ansible_python_interpreter={sys.executable}\n")
        result = validate_node(NodeJob(settings, inventory, evidence_dir, Path(tmp) / "ssh"),
                               lambda node, stage, detail: click.echo(f"{node}: {stage}"))
    claim = results.Claim(settings.run_id, here, os.environ.get("SLURM_JOB_ID", ""),
                          __version__, str(result.judged),
                          results.evidence_digest(manifest(evidence_dir)))
    try:
        results.sign(out_dir, claim, host_key)
    except results.Refused as exc:
        click.echo(f"gpuprov collect: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{here}: {result.judged} (advisory: the controller judges): {result.reason}")
