-- `gpuprov certify`: each acceptance certificate issued, where it was written, its own
-- SHA-256 and the signing key's fingerprint (never the key): `gpuprov nodes NODE` lists them
CREATE TABLE certificates (
    node        TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    issued_at   REAL NOT NULL,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,          -- the certificate document's
    signer      TEXT NOT NULL,          -- the key's fingerprint, as ssh-keygen -l prints it
    expires_at  REAL,
    PRIMARY KEY (node, issued_at)
)
