"""What the controller reads of the site's module signing certificate (Secure Boot)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from cryptography import x509
from cryptography.x509.oid import NameOID


def certificate_subject_cn(path: str) -> str:
    """The subject commonName of an X.509 certificate file (DER or PEM): the signer name
    `modinfo -F signer` prints for a module signed with its key."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise AnsibleFilterError(f"module signing certificate {path}: {exc.strerror}") from exc
    try:
        cert = (x509.load_pem_x509_certificate(data) if data.lstrip().startswith(b"-----BEGIN")
                else x509.load_der_x509_certificate(data))
    except ValueError as exc:
        raise AnsibleFilterError(f"module signing certificate {path}: not an X.509 "
                                 "certificate (DER or PEM)") from exc
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise AnsibleFilterError(f"module signing certificate {path}: its subject has no CN")
    return str(names[0].value)


class FilterModule:
    def filters(self) -> dict:
        return {"certificate_subject_cn": certificate_subject_cn}
