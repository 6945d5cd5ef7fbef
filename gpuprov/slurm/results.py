"""A campaign job's result: what a node hands back, and how the controller knows it is that
node's, for this run, and the evidence it judged.

On the node, after collecting, `result.json` names the run, the node (`SLURMD_NODENAME`),
the job, the collector's version, the node's own (advisory) verdict and the digest of its
evidence; `result.json.sig` signs it with the node's SSH host key (`ssh-keygen -Y sign`,
OpenSSH's SSHSIG, namespace `gpuprov-result`). The job must run as root to read that key.

On the controller, the signature is checked against the key the controller already trusts
for that node: its entry in the controller's known_hosts (hashed entries included, read
with paramiko), the same key its SSH transport checks. Then the run, the node, the
collector's version and the digest of the evidence as copied to the controller. Any gap is
a `Refused` naming it: never an acceptance, always a setup finding.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko

RESULT = "result.json"
SIGNATURE = "result.json.sig"
EVIDENCE = "evidence"
NAMESPACE = "gpuprov-result"      # ssh-keygen -Y's namespace: a signature for nothing else
FORMAT = 1
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"


class Refused(Exception):
    """The result cannot be trusted; the message says why, in one line."""


@dataclass(frozen=True)
class Claim:
    run: str
    node: str                  # the Slurm node name the job ran on
    job: str
    collector: str             # gpuprov's version on the node
    verdict: str               # the node's own judgement: advisory
    digest: str                # evidence_digest() of the evidence directory

    def as_json(self) -> str:
        return json.dumps({"format": FORMAT, "run": self.run, "node": self.node,
                           "job": self.job, "collector": self.collector,
                           "verdict": self.verdict, "digest": self.digest},
                          indent=2, sort_keys=True) + "\n"


def evidence_digest(manifest: dict[str, str]) -> str:
    """One SHA-256 over every file's path and SHA-256 (Evidence.manifest)."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(manifest.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def sign(out_dir: Path, claim: Claim, host_key: str = HOST_KEY) -> None:
    """Write the claim and its signature by the node's host key (on the node)."""
    (out_dir / RESULT).write_text(claim.as_json())
    _ssh_keygen(["-Y", "sign", "-f", host_key, "-n", NAMESPACE, str(out_dir / RESULT)],
                f"signing {out_dir / RESULT} with {host_key}")


def read_claim(out_dir: Path) -> Claim:
    path = out_dir / RESULT
    if not path.is_file():
        raise Refused(f"no {RESULT}")
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            raise Refused(f"{RESULT}: format {doc.get('format')!r}, expected {FORMAT}")
        return Claim(*(str(doc[key]) for key in ("run", "node", "job", "collector", "verdict",
                                                  "digest")))
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        raise Refused(f"{RESULT}: unreadable ({type(exc).__name__}: {exc})") from exc


def known_hosts(path: Path) -> paramiko.HostKeys:
    """The controller's known_hosts, read once (hashed entries included)."""
    import paramiko  # the controller's side only: a node's job signs without it
    try:
        return paramiko.HostKeys(str(path))
    except OSError as exc:
        raise Refused(f"known_hosts {path}: {exc.strerror}") from exc


def known_keys(hosts: paramiko.HostKeys, address: str) -> list[paramiko.PKey]:
    """The host keys known_hosts holds for `address` (a name or `[name]:port`)."""
    entries = hosts.lookup(address)
    return list(entries.values()) if entries else []


def verify(out_dir: Path, run: str, node: str, version: str, keys: list[paramiko.PKey],
           evidence_manifest: dict[str, str]) -> Claim:
    """The node's claim once its signature, run, node, collector and digest all hold
    (`evidence_manifest`: the evidence as the controller holds it); else Refused."""
    claim = read_claim(out_dir)
    if not (out_dir / SIGNATURE).is_file():
        raise Refused(f"{RESULT} is not signed (no {SIGNATURE})")
    if not keys:
        raise Refused(f"no host key for {node} in the controller's known_hosts: "
                      "the signature cannot be checked")
    with tempfile.TemporaryDirectory() as tmp:
        signers = Path(tmp) / "allowed_signers"
        signers.write_text("".join(f"{node} {k.get_name()} {k.get_base64()}\n" for k in keys))
        result = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", node,
                                 "-n", NAMESPACE, "-s", str(out_dir / SIGNATURE)],
                                input=(out_dir / RESULT).read_bytes(), capture_output=True)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).decode(errors="replace").strip().splitlines()
        raise Refused(f"{RESULT} is not signed by {node}'s host key "
                      f"({said[-1] if said else f'exit status {result.returncode}'})")
    if claim.run != run:
        raise Refused(f"{RESULT} is from run {claim.run}, not {run}")
    if claim.node != node:
        raise Refused(f"{RESULT} names node {claim.node}, not {node}")
    if claim.collector != version:
        raise Refused(f"collected by gpuprov {claim.collector}, the controller is {version}: "
                      "install the controller's version on the node")
    if claim.digest != evidence_digest(evidence_manifest):
        raise Refused(f"the evidence does not match {RESULT}'s digest "
                      "(changed or cut short after it was signed)")
    if _says_recheck(out_dir / EVIDENCE / "meta.json"):
        # a recheck's left-out stages are not judged: only the controller may ask for one
        raise Refused("the evidence says it is a recheck's (meta.json `recheck`): a campaign "
                      "asks for none")
    return claim


def _says_recheck(meta: Path) -> bool:
    try:
        doc = json.loads(meta.read_text())
    except (OSError, ValueError):
        return False     # unreadable evidence fails its own checks when it is judged
    return isinstance(doc, dict) and bool(doc.get("recheck"))


def _ssh_keygen(argv: list[str], what: str) -> None:
    result = subprocess.run(["ssh-keygen", *argv], capture_output=True, text=True)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise Refused(f"{what}: {said[-1] if said else f'exit status {result.returncode}'}")
