"""What the controller reads of the site's module signing certificate (Secure Boot)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from cryptography import x509
from cryptography.x509.oid import NameOID


def module_signer_name(path: str) -> str:
    """The signer name `modinfo -F signer` prints for a module signed with the key of an
    X.509 certificate file (DER or PEM): the first commonName of the certificate's issuer,
    which the module's PKCS#7 signer info carries (kmod libkmod/libkmod-signature.c at
    01d9c6a, fill_pkcs7 and x509_name_to_str). A self-signed key's is its own subject's; a
    key issued by a site CA is named after the CA."""
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
    names = cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise AnsibleFilterError(f"module signing certificate {path}: its issuer has no CN")
    return str(names[0].value)


class FilterModule:
    def filters(self) -> dict:
        return {"module_signer_name": module_signer_name}
