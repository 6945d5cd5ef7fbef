"""`gpuprov certify` and `gpuprov verify`: signed acceptance certificates that anyone can
check with plain ssh-keygen (docs/certificates.md); the use case is gpuprov/certification.py."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gpuprov import certification
from gpuprov.certificates import NAMESPACE


@click.command()
@click.argument("node")
@click.option("--key", "key", required=True, type=click.Path(path_type=Path), metavar="KEY",
              help="The signer's SSH private key (readable by its owner alone).")
@click.option("--out", "out", type=click.Path(path_type=Path), metavar="FILE",
              help="The certificate (default: gpuprov-acceptance-NODE-RUN.json here); the "
                   "signature goes to FILE.sig, the evidence bundle beside it.")
def certify(node: str, key: Path, out: Path | None) -> None:
    """Sign NODE's latest acceptance: exit 0 written, 1 not accepted, 2 bad input."""
    try:
        issued = certification.certify(node, key, out)
    except certification.Refused as refused:
        click.echo(str(refused), err=True)
        sys.exit(1)
    click.echo(f"{issued.document}: {node} accepted in run {issued.run_id}, until "
               f"{issued.expires_at or 'never'}\n{issued.signature}: signed ({NAMESPACE})\n"
               f"{issued.bundle}: evidence, sha256 {issued.bundle_sha256}")


@click.command()
@click.argument("certificate", type=click.Path(path_type=Path))
@click.option("--allowed-signers", "allowed", type=click.Path(path_type=Path),
              metavar="FILE", help="ssh's allowed_signers: who may sign (default: "
                                   "~/.ssh/allowed_signers).")
@click.option("--evidence", "bundle", type=click.Path(path_type=Path), metavar="BUNDLE",
              help="Also check that this evidence bundle is the certified one.")
@click.option("--signature", "signature", type=click.Path(path_type=Path), metavar="FILE",
              help="The detached signature (default: CERTIFICATE.sig).")
@click.option("--revoked", "revoked", type=click.Path(path_type=Path), metavar="FILE",
              help="Keys no longer trusted (ssh-keygen -Y verify -r: public keys, or a KRL).")
def verify(certificate: Path, allowed: Path | None, bundle: Path | None,
           signature: Path | None, revoked: Path | None) -> None:
    """Check a certificate: exit 0 it holds, 1 bad, tampered or expired, 2 bad input."""
    try:
        found = certification.verify(certificate,
                                     allowed or Path.home() / ".ssh" / "allowed_signers",
                                     signature or Path(f"{certificate}.sig"), bundle, revoked)
    except certification.Refused as refused:
        click.echo(str(refused), err=True)
        sys.exit(1)
    click.echo(f"{certificate}: {found.node} accepted in run {found.run_id} at "
               f"{found.judged_at}, until {found.expires_at or 'never'}; signed by "
               f"{found.signer} ({found.said})" + (
                   f"; evidence {bundle} matches" if found.evidence_checked else
                   "; evidence NOT checked (--evidence BUNDLE checks it)"))
