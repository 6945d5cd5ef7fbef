"""Acceptance certificates (`gpuprov certify`, `gpuprov verify`; docs/certificates.md): one
node's latest acceptance as a JSON document with keys sorted, beside a detached SSH
signature that anyone can check with plain `ssh-keygen -Y verify` and an allowed_signers
file, without gpuprov, as git checks SSH-signed commits.

The document holds what a buyer or an auditor checks against the hardware: the node, run,
verdict and when it expires; the profile and the lock (each with its SHA-256); every GPU's
index, serial, UUID and VBIOS; NIC ports' GUIDs, PSIDs and firmware; NVSwitches' Device
Serial Numbers and firmware; every check's status; and the SHA-256 of the evidence bundle
`gpuprov report` writes. The private key goes to ssh-keygen only: never into the document,
a log or the ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import jsonschema

from gpuprov import __version__
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.model import NodeResult
from gpuprov.resources import data_file

NAMESPACE = "gpuprov-acceptance"       # ssh-keygen -Y's namespace: a signature for this use only
SCHEMA = "schemas/acceptance-certificate.schema.json"
FORMAT = 1


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")




def _parts(result: NodeResult) -> tuple[list, list, list]:
    """The GPUs, NIC ports and NVSwitches the validation identified (its parts record)."""
    gpus = [{"index": g.index, "serial": g.serial, "uuid": g.uuid, "vbios": g.vbios}
            for g in result.gpus]
    nics = [{"port": p.port, "guid": p.guid, "psid": p.psid, "firmware": p.firmware}
            for p in result.nics]
    switches = [{"bus_id": s.bus_id, "serial": s.serial, "firmware": s.firmware}
                for s in result.nvswitches]
    return gpus, nics, switches


def build(result: NodeResult, profile: dict, lock: dict | None, valid_for: float | None,
          bundle: Path, bundle_sha256: str) -> dict:
    """The certificate of an accepted result (its checks, GPUs and evidence bundle)."""
    gpus, nics, switches = _parts(result)
    return {"format": FORMAT, "namespace": NAMESPACE, "node": result.node,
            "run_id": result.run_id, "verdict": str(result.verdict),
            "judged_at": _iso(result.judged_at),
            "expires_at": None if valid_for is None else _iso(result.judged_at + valid_for),
            "profile": {"name": result.profile, "sha256": _digest(profile), "content": profile},
            "lock": {"sha256": _digest(lock), "content": lock},
            "gpuprov_version": __version__, "gpus": gpus, "nics": nics, "nvswitches": switches,
            "checks": [{"id": c.id, "status": str(c.status)} for c in result.checks],
            "evidence": {"bundle": bundle.name, "sha256": bundle_sha256},
            "signed_at": _iso(time.time())}


def evidence_changes(result: NodeResult) -> str:
    """What in the node's evidence directory differs from what was judged (the verdict's
    manifest): each file changed, added or gone, named; "" where nothing differs. A verdict
    recorded without a manifest cannot be shown to match: that is said too."""
    if result.evidence_manifest is None:
        return ("its evidence was not fingerprinted when it was judged (a validation "
                "recorded before gpuprov recorded it)")
    now = Evidence(Path(result.evidence_dir)).manifest()
    was = result.evidence_manifest
    changes = ([f"{f} changed" for f in sorted(was) if f in now and now[f] != was[f]]
               + [f"{f} added" for f in sorted(set(now) - set(was))]
               + [f"{f} gone" for f in sorted(set(was) - set(now))])
    more = f" (+{len(changes) - 3} more)" if len(changes) > 3 else ""
    return ", ".join(changes[:3]) + more


def text(certificate: dict) -> str:
    return json.dumps(certificate, indent=2, sort_keys=True) + "\n"


_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """An ISO 8601 time with its offset (as certify writes them): jsonschema checks the
    date-time format only with a package gpuprov does not need, so the schema's formats
    were not enforced (a junk judged_at, an expires_at of "" signed and verified)."""
    if not isinstance(value, str):
        return True     # the schema's type says what else is allowed
    return datetime.fromisoformat(value).tzinfo is not None


def schema_problems(certificate: object) -> list[str]:
    schema = json.loads(data_file(SCHEMA).read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=_FORMATS)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
            for e in validator.iter_errors(certificate)]


def check_key(key: Path) -> None:
    """A private key ssh itself would use: present, and readable by its owner alone."""
    if not key.is_file():
        raise InputError(f"--key {key}: no such key file")
    mode = stat.S_IMODE(key.stat().st_mode)
    if mode & 0o077:
        raise InputError(f"--key {key}: permissions {mode:04o} are too open (group or others "
                         "may read it; ssh refuses such a key too): chmod 600")


def sign(document: Path, key: Path) -> Path:
    """`ssh-keygen -Y sign -n gpuprov-acceptance`: DOCUMENT.sig beside the document,
    replacing any earlier one. ssh-keygen signs a copy in a directory of its own: beside an
    existing .sig it asks before overwriting and, with no terminal to answer, writes nothing
    and exits 0 (OpenSSH 9.2p1), which left the old signature in place. The new signature
    is checked against the key's own public half before it replaces the old one."""
    check_key(key)
    with tempfile.TemporaryDirectory(dir=document.parent, prefix=".sign-") as scratch:
        copy = Path(scratch) / document.name
        copy.write_bytes(document.read_bytes())
        done = subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-n", NAMESPACE, "-f",
                               str(key), str(copy)], capture_output=True, text=True,
                              check=False, stdin=subprocess.DEVNULL)
        made = Path(f"{copy}.sig")
        if done.returncode != 0 or not made.is_file():
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise InputError(f"--key {key}: ssh-keygen could not sign ({said})")
        own = Path(scratch) / "allowed_signers"
        own.write_text(f'signer namespaces="{NAMESPACE}" {public_key_line(key)}\n')
        signer, said = verify_signature(copy, made, own)
        if signer is None:   # never recorded nor put in place: what is signed must verify
            raise InputError(f"--key {key}: the new signature does not verify ({said})")
        signature = Path(f"{document}.sig")
        os.replace(made, signature)
    return signature


def _principals(found: str, allowed: Path) -> list[str]:
    """Who may have signed: what find-principals named, then every literal principal of
    `allowed` (find-principals names one line's, and skips a line whose validity window is
    over at this moment; a key may be listed under several principals and namespaces)."""
    names = [n for line in found.splitlines() for n in line.split(",") if n.strip()]
    for line in allowed.read_text(errors="replace").splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        names += [n for n in words[0].split(",") if n and not set(n) & set("*?!")]
    return list(dict.fromkeys(n.strip() for n in names))


def verify_signature(document: Path, signature: Path, allowed: Path,
                     at: datetime | None = None, revoked: Path | None = None
                     ) -> tuple[str | None, str]:
    """(the signer's principal, or None; what ssh-keygen said). `at`: the moment the
    signature is judged at (a key's valid-before/valid-after; the certificate's signing
    time, so a retired key's earlier certificates still verify, as git does); `revoked`:
    ssh-keygen's revocation list (-r: keys, or a KRL)."""
    found = subprocess.run(["ssh-keygen", "-Y", "find-principals", "-s", str(signature),
                            "-f", str(allowed)], capture_output=True, text=True, check=False,
                           stdin=subprocess.DEVNULL)
    options = ["-Overify-time=" + at.astimezone(UTC).strftime("%Y%m%d%H%M%SZ")] if at else []
    options += ["-r", str(revoked)] if revoked else []
    said: list[str] = []
    for principal in _principals(found.stdout, allowed):
        with document.open("rb") as data:
            checked = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I",
                                      principal, "-n", NAMESPACE, "-s", str(signature),
                                      *options], stdin=data, capture_output=True, text=True,
                                     check=False)
        said = (checked.stdout + checked.stderr).strip().splitlines() or said
        if checked.returncode == 0:
            return principal, said[0] if said else "good signature"
    if found.returncode != 0:   # no line of `allowed` holds the key (valid now, at least)
        named = found.stderr.strip().splitlines() or ["no principal matches"]
        return None, f"signed by a key that is not allowed in {allowed} ({named[-1]})"
    return None, f"bad signature ({said[-1] if said else 'no principal of it verifies'})"


def fingerprint(key: Path) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it (SHA256:…): what the ledger keeps
    of the signer, never the key."""
    done = subprocess.run(["ssh-keygen", "-l", "-f", str(key)], capture_output=True,
                          text=True, check=False, stdin=subprocess.DEVNULL)
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 2:
        raise InputError(f"--key {key}: not a key ssh-keygen can read")
    return words[1]


def public_key_line(key: Path) -> str:
    """The key's public half, as allowed_signers wants it (`ssh-keygen -y`)."""
    done = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True,
                          text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise InputError(f"--key {key}: not a private key ssh-keygen can read")
    return done.stdout.strip()


