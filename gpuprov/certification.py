"""The certification use case: sign a node's latest acceptance, and check a certificate
(docs/certificates.md). The document, its schema and ssh-keygen are certificates.py's;
the node's state is lifecycle's; this decides what may be signed and what a certificate
proves, and the CLI only prints what it returns."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpuprov import certificates, report
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.files import write_atomic
from gpuprov.ledger import Certificate, Ledger
from gpuprov.lifecycle import NodeState, node_statuses
from gpuprov.profiles import load_profile


class Refused(Exception):
    """Nothing signed, or a certificate that does not hold: the one line says why."""


@dataclass(frozen=True)
class Issued:
    document: Path
    signature: Path
    bundle: Path
    bundle_sha256: str
    run_id: str
    expires_at: str | None


@dataclass(frozen=True)
class Verified:
    node: str
    run_id: str
    judged_at: str
    expires_at: str | None
    signer: str
    said: str                   # ssh-keygen's own line
    evidence_checked: bool


def certify(node: str, key: Path, out: Path | None, ledger: Ledger | None = None) -> Issued:
    """Sign `node`'s latest acceptance: only an accepted node (no observed finding, not
    expired, not quarantined), only the evidence that was judged. InputError: bad input;
    Refused: not certifiable, nothing written. The key is checked before the ledger is
    opened (the default one: a bad key creates nothing)."""
    certificates.check_key(key)
    ledger = ledger or Ledger()
    history = [r for r in ledger.node_results(node=node) if r.verdict is not None]
    if not history:
        raise InputError(f"{node}: no finished validation of it in the ledger ({ledger.path})")
    result = history[-1]
    status = node_statuses(ledger, time.time(), [node], {node: result})[node]
    if status.state != NodeState.ACCEPTED:
        state = str(status.state)
        if status.state == NodeState.ACCEPTED_OBSERVED:   # accepted because these were observed
            state += f" (would reject: {', '.join(c.id for c in result.observed)})"
        raise Refused(f"{node}: {state} (run {result.run_id}): only an accepted node is "
                      "certified; nothing written")
    if result.scope != "full":   # its evidence holds the recheck's few checks, not the node's
        raise Refused(f"{node}: accepted by a recheck (run {result.run_id}), whose evidence "
                      "holds only the checks it ran: certify after a full validation; "
                      "nothing written")
    out = out or Path(f"gpuprov-acceptance-{node}-{result.run_id}.json")
    if not out.parent.resolve().is_dir():
        raise InputError(f"--out {out}: directory {out.parent} does not exist")
    if not Path(result.evidence_dir).is_dir():
        raise InputError(f"{node}: evidence {result.evidence_dir} of run {result.run_id} is "
                         "gone: validate again to certify")
    changed = certificates.evidence_changes(result)
    if changed:   # only the evidence that was judged is signed (issue 67)
        raise Refused(f"{node}: evidence of run {result.run_id} is not what was judged: "
                      f"{changed}; nothing written (validate again to certify)")
    lock = Evidence(Path(result.evidence_dir)).meta.get("lock")
    bundle, digest = report.archive(result, out.parent)
    certificate = certificates.build(result, load_profile(result.profile).data, lock,
                                     status.valid_for, bundle, digest)
    problems = certificates.schema_problems(certificate)
    if problems:   # gpuprov's own fault: never signed
        raise RuntimeError(f"certificate does not hold its schema: {problems[0]}")
    write_atomic(out, certificates.text(certificate))
    out.chmod(0o644)
    signature = certificates.sign(out, key)
    # the ledger records only what was signed and verifies (the signature replaced whole)
    ledger.record_certificate(Certificate(
        node, result.run_id, time.time(), str(out.resolve()),
        hashlib.sha256(out.read_bytes()).hexdigest(), certificates.fingerprint(key),
        result.judged_at + status.valid_for if status.valid_for is not None else None))
    return Issued(out, signature, bundle, digest, result.run_id, certificate["expires_at"])


def verify(document: Path, allowed: Path, signature: Path, bundle: Path | None,
           revoked: Path | None) -> Verified:
    """Check a certificate: its signature by an allowed signer at its signing time, its
    schema, its expiry, and (with `bundle`) the evidence bundle it names. InputError: a
    file missing; Refused: bad, tampered or expired."""
    for what, path in (("certificate", document), ("--allowed-signers", allowed),
                       ("signature", signature), ("--revoked", revoked),
                       ("--evidence", bundle)):
        if path is not None and not path.is_file():
            raise InputError(f"{what} {path}: no such file")
    try:
        data = json.loads(document.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        data, unreadable = None, exc
    # the key's validity window is judged when it signed (git's verify-time): a retired
    # key's earlier certificates still hold; a document with no signing time, at this moment
    signer, said = certificates.verify_signature(document, signature, allowed,
                                                 _signed_at(data), revoked)
    if signer is None:
        raise Refused(f"{document}: {said}")
    if data is None:
        raise Refused(f"{document}: not a certificate ({unreadable})")
    problems = certificates.schema_problems(data)
    if problems:
        raise Refused(f"{document}: does not hold the certificate schema: {problems[0]}")
    if data["expires_at"] and datetime.fromisoformat(data["expires_at"]) <= datetime.now(UTC):
        raise Refused(f"{document}: expired at {data['expires_at']}")
    if bundle is not None:
        digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
        if digest != data["evidence"]["sha256"]:
            raise Refused(f"{document}: evidence {bundle} has sha256 {digest}, the "
                          f"certificate says {data['evidence']['sha256']}")
    return Verified(data["node"], data["run_id"], data["judged_at"], data["expires_at"],
                    signer, said, bundle is not None)


def _signed_at(data: object) -> datetime | None:
    """The certificate's own signing time, where it holds one that reads as a time."""
    value = data.get("signed_at") if isinstance(data, dict) else None
    try:
        stamp = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None     # the schema refuses it, once the signature is checked
    return stamp if stamp is not None and stamp.tzinfo is not None else None
