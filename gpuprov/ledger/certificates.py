"""Acceptance certificates issued (`gpuprov certify`): where each went and who signed it,
for `gpuprov nodes NODE` and `gpuprov report`. The certificate itself stays a file."""

from __future__ import annotations

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import Certificate


class CertificatesRepository(LedgerBase):
    def record_certificate(self, issued: Certificate) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO certificates (node, run_id, issued_at, path, sha256, "
                       "signer, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (issued.node, issued.run_id, issued.issued_at, issued.path,
                        issued.sha256, issued.signer, issued.expires_at))

    def certificates(self, node: str) -> list[Certificate]:
        """One node's certificates, oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM certificates WHERE node = ? ORDER BY issued_at",
                              (node,)).fetchall()
        return [Certificate(r["node"], r["run_id"], r["issued_at"], r["path"], r["sha256"],
                            r["signer"], r["expires_at"]) for r in rows]
