"""A site's module signing key pair, as `openssl req -x509 -newkey rsa:2048 … -outform DER`
makes one for a MOK: tests generate it (never a key checked in)."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


def site_key_pair(common_name: str, issued_by: str | None = None) -> tuple[bytes, bytes]:
    """(private key PEM, certificate DER) with that subject CN: self-signed, or, with
    `issued_by`, issued by a site CA of that CN (its key made here and thrown away)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer, signing_key = name, key
    if issued_by:
        issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issued_by)])
        signing_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(signing_key, hashes.SHA256()))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return pem, cert.public_bytes(serialization.Encoding.DER)


def site_certificate(common_name: str) -> bytes:
    return site_key_pair(common_name)[1]
