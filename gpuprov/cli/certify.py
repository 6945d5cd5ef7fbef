"""`gpuprov certify` and `gpuprov verify`: signed acceptance certificates that anyone can
check with plain ssh-keygen (docs/certificates.md)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from gpuprov import certificates, report
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.files import write_atomic
from gpuprov.ledger import Certificate, Ledger
from gpuprov.lifecycle import NodeState, node_statuses
from gpuprov.profiles import load_profile


@click.command()
@click.argument("node")
@click.option("--key", "key", required=True, type=click.Path(path_type=Path), metavar="KEY",
              help="The signer's SSH private key (readable by its owner alone).")
@click.option("--out", "out", type=click.Path(path_type=Path), metavar="FILE",
              help="The certificate (default: gpuprov-acceptance-NODE-RUN.json here); the "
                   "signature goes to FILE.sig, the evidence bundle beside it.")
def certify(node: str, key: Path, out: Path | None) -> None:
    """Sign NODE's latest acceptance: exit 0 written, 1 not accepted, 2 bad input."""
    certificates.check_key(key)
    ledger = Ledger()
    history = [r for r in ledger.node_results(node=node) if r.verdict is not None]
    if not history:
        raise InputError(f"{node}: no finished validation of it in the ledger ({ledger.path})")
    result = history[-1]
    status = node_statuses(ledger, time.time(), [node], {node: result})[node]
    valid_for = status.valid_for
    state = str(status.state)
    if status.state == NodeState.ACCEPTED_OBSERVED:   # accepted because these were observed
        state += f" (would reject: {', '.join(c.id for c in result.observed)})"
    if status.state != NodeState.ACCEPTED:
        click.echo(f"{node}: {state} (run {result.run_id}): only an accepted node is certified; "
                   "nothing written", err=True)
        sys.exit(1)
    out = out or Path(f"gpuprov-acceptance-{node}-{result.run_id}.json")
    if not out.parent.resolve().is_dir():
        raise InputError(f"--out {out}: directory {out.parent} does not exist")
    if not Path(result.evidence_dir).is_dir():
        raise InputError(f"{node}: evidence {result.evidence_dir} of run {result.run_id} is "
                         "gone: validate again to certify")
    changed = certificates.evidence_changes(result)
    if changed:   # only the evidence that was judged is signed (issue 67)
        click.echo(f"{node}: evidence of run {result.run_id} is not what was judged: "
                   f"{changed}; nothing written (validate again to certify)", err=True)
        sys.exit(1)
    lock = Evidence(Path(result.evidence_dir)).meta.get("lock")
    bundle, digest = report.archive(result, out.parent)
    certificate = certificates.build(result, load_profile(result.profile).data, lock,
                                     valid_for, bundle, digest)
    problems = certificates.schema_problems(certificate)
    if problems:   # gpuprov's own fault: never signed
        raise RuntimeError(f"certificate does not hold its schema: {problems[0]}")
    write_atomic(out, certificates.text(certificate))
    out.chmod(0o644)
    signature = certificates.sign(out, key)
    ledger.record_certificate(Certificate(
        node, result.run_id, time.time(), str(out.resolve()),
        hashlib.sha256(out.read_bytes()).hexdigest(), certificates.fingerprint(key),
        result.judged_at + valid_for if valid_for is not None else None))
    click.echo(f"{out}: {node} accepted in run {result.run_id}, until "
               f"{certificate['expires_at'] or 'never'}\n{signature}: signed "
               f"({certificates.NAMESPACE})\n{bundle}: evidence, sha256 {digest}")


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
    allowed = allowed or Path.home() / ".ssh" / "allowed_signers"
    signature = signature or Path(f"{certificate}.sig")
    for what, path in (("certificate", certificate), ("--allowed-signers", allowed),
                       ("signature", signature), ("--revoked", revoked)):
        if path is not None and not path.is_file():
            raise InputError(f"{what} {path}: no such file")
    if bundle is not None and not bundle.is_file():
        raise InputError(f"--evidence {bundle}: no such file")
    try:
        data = json.loads(certificate.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        data, unreadable = None, exc
    # the key's validity window is judged when it signed (git's verify-time): a retired
    # key's earlier certificates still hold; a document with no signing time, at this moment
    signed_at = _signed_at(data)
    signer, said = certificates.verify_signature(certificate, signature, allowed, signed_at,
                                                 revoked)
    if signer is None:
        _refuse(certificate, said)
    if data is None:
        _refuse(certificate, f"not a certificate ({unreadable})")
    problems = certificates.schema_problems(data)
    if problems:
        _refuse(certificate, f"does not hold the certificate schema: {problems[0]}")
    if data["expires_at"] and datetime.fromisoformat(data["expires_at"]) <= datetime.now(UTC):
        _refuse(certificate, f"expired at {data['expires_at']}")
    if bundle is not None:
        digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
        if digest != data["evidence"]["sha256"]:
            _refuse(certificate, f"evidence {bundle} has sha256 {digest}, the certificate "
                                 f"says {data['evidence']['sha256']}")
    click.echo(f"{certificate}: {data['node']} accepted in run {data['run_id']} at "
               f"{data['judged_at']}, until {data['expires_at'] or 'never'}; signed by "
               f"{signer} ({said})" + (f"; evidence {bundle} matches" if bundle else
                                       "; evidence NOT checked (--evidence BUNDLE checks it)"))


def _signed_at(data: object) -> datetime | None:
    """The certificate's own signing time, where it holds one that reads as a time."""
    value = data.get("signed_at") if isinstance(data, dict) else None
    try:
        stamp = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None     # the schema refuses it, once the signature is checked
    return stamp if stamp is not None and stamp.tzinfo is not None else None


def _refuse(certificate: Path, why: str) -> None:
    click.echo(f"{certificate}: {why}", err=True)
    sys.exit(1)
