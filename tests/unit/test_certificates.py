"""Issue 58: acceptance certificates, signed and checked with the real ssh-keygen. The
ledger is the known history of tests/fleet_history.py: node03 accepted, node02 rejected at
its latest validation. The CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpuprov import certificates
from gpuprov.ledger import Ledger
from tests import fleet_history
from tests.conftest import gpuprov


def _key(directory: Path, name: str) -> Path:
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True, stdin=subprocess.DEVNULL)
    return key


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("certify")
    ledger = fleet_history.build(tmp)
    key = _key(tmp, "site-key")
    allowed = tmp / "allowed_signers"
    allowed.write_text(f'acceptance@site.example namespaces="gpuprov-acceptance" '
                       f"{certificates.public_key_line(key)}\n")
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger), "GPUPROV_STATE_DIR": str(tmp / "state"),
           "XDG_CONFIG_HOME": str(tmp / "config")}
    env.pop("GPUPROV_CONFIG", None)
    out = tmp / "out"
    out.mkdir()
    done = gpuprov("certify", "node03", "--key", str(key), "--out", str(out / "node03.json"),
                   env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return {"env": env, "key": key, "allowed": allowed, "cert": out / "node03.json",
            "tmp": tmp, "stdout": done.stdout}


def _verify(site, *args, cert=None):
    return gpuprov("verify", str(cert or site["cert"]), "--allowed-signers",
                   str(site["allowed"]), *args, env=site["env"], timeout=60)


def test_certify_writes_the_document_its_signature_and_the_evidence_bundle(site):
    data = json.loads(site["cert"].read_text())
    assert (data["node"], data["run_id"], data["verdict"]) == ("node03", "v1", "accepted")
    assert len(data["gpus"]) == 8 and data["gpus"][0]["serial"] == "1654423001593"
    assert data["gpus"][0]["vbios"] == "96.00.74.00.01"
    assert [n["port"] for n in data["nics"]][:2] == ["mlx5_0 port 1", "mlx5_1 port 1"]
    assert {c["id"] for c in data["checks"]} >= {"gpu_burn", "numeric_fingerprint"}
    assert certificates.schema_problems(data) == []
    bundle = site["cert"].parent / data["evidence"]["bundle"]
    assert bundle.is_file() and Path(f"{site['cert']}.sig").is_file()
    # the private key is nowhere in what was written
    secret = site["key"].read_text().splitlines()[1]
    assert secret not in site["cert"].read_text() and secret not in site["stdout"]


def test_plain_ssh_keygen_and_gpuprov_verify_accept_it(site):
    with site["cert"].open("rb") as document:
        plain = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(site["allowed"]), "-I",
                                "acceptance@site.example", "-n", "gpuprov-acceptance", "-s",
                                f"{site['cert']}.sig"], stdin=document, capture_output=True,
                               text=True, check=False)
    assert plain.returncode == 0, plain.stderr
    bundle = site["cert"].parent / json.loads(site["cert"].read_text())["evidence"]["bundle"]
    result = _verify(site, "--evidence", str(bundle))
    assert result.returncode == 0, result.stderr
    assert "node03 accepted in run v1" in result.stdout
    assert "signed by acceptance@site.example" in result.stdout
    assert f"evidence {bundle} matches" in result.stdout
    unchecked = _verify(site)   # issue 67: without the bundle, it says so
    assert unchecked.returncode == 0, unchecked.stderr
    assert unchecked.stdout.rstrip().endswith(
        "; evidence NOT checked (--evidence BUNDLE checks it)"), unchecked.stdout


def test_a_one_byte_change_is_refused(site, tmp_path):
    tampered = tmp_path / "node03.json"
    text = site["cert"].read_text()
    tampered.write_text(text.replace('"node03"', '"node04"', 1))
    (tmp_path / "node03.json.sig").write_bytes(Path(f"{site['cert']}.sig").read_bytes())
    result = _verify(site, cert=tampered)
    assert result.returncode == 1 and "bad signature" in result.stderr, result.stderr


def test_a_signer_not_allowed_is_refused(site, tmp_path):
    other = tmp_path / "allowed_signers"
    stranger = _key(tmp_path, "stranger")
    other.write_text(f'someone@else.example namespaces="gpuprov-acceptance" '
                     f"{certificates.public_key_line(stranger)}\n")
    result = gpuprov("verify", str(site["cert"]), "--allowed-signers", str(other),
                     env=site["env"], timeout=60)
    assert result.returncode == 1 and "signed by a key that is not allowed" in result.stderr


def test_another_evidence_bundle_is_refused(site, tmp_path):
    wrong = tmp_path / "bundle.tar.gz"
    wrong.write_bytes(b"not the evidence")
    result = _verify(site, "--evidence", str(wrong))
    assert result.returncode == 1 and "the certificate says" in result.stderr


def test_an_expired_certificate_is_refused(site, tmp_path):
    [result] = [r for r in Ledger(site["env"]["GPUPROV_LEDGER"]).node_results(node="node03")]
    bundle = tmp_path / "bundle.tar.gz"
    bundle.write_bytes(b"x")
    data = certificates.build(result, {"name": "h100-sxm-8"}, None, 3600.0, bundle, "0" * 64)
    cert = tmp_path / "old.json"
    cert.write_text(certificates.text(data))
    certificates.sign(cert, site["key"])
    refused = _verify(site, cert=cert)
    assert refused.returncode == 1 and "expired at" in refused.stderr, refused.stderr


@pytest.mark.parametrize("node, state", [("node02", "rejected (run v3)"),
                                         ("node01", "rejected (run v4)")])
def test_a_node_not_accepted_is_refused_and_nothing_written(site, tmp_path, node, state):
    out = tmp_path / "c.json"
    result = gpuprov("certify", node, "--key", str(site["key"]), "--out", str(out),
                     env=site["env"], timeout=60)
    assert result.returncode == 1 and f"{node}: {state}" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_expired_acceptance_is_not_certified(site, tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("acceptance:\n  valid_for: 1d\n")    # node03's is 31 hours old
    result = gpuprov("certify", "node03", "--key", str(site["key"]), "--out",
                     str(tmp_path / "c.json"), env={**site["env"], "GPUPROV_CONFIG": str(config)},
                     timeout=60)
    assert result.returncode == 1 and "node03: expired (run v1)" in result.stderr


def test_a_key_others_can_read_is_refused_as_ssh_refuses_it(site, tmp_path):
    loose = _key(tmp_path, "loose")
    loose.chmod(0o644)
    result = gpuprov("certify", "node03", "--key", str(loose), "--out",
                     str(tmp_path / "c.json"), env=site["env"], timeout=60)
    assert result.returncode == 2
    assert "permissions 0644 are too open" in result.stderr
    assert not (tmp_path / "c.json").exists()


def test_the_ledger_lists_the_certificate_and_the_report_bundles_it(site, tmp_path):
    [issued] = Ledger(site["env"]["GPUPROV_LEDGER"]).certificates("node03")
    assert (issued.run_id, issued.path) == ("v1", str(site["cert"].resolve()))
    assert issued.signer.startswith("SHA256:")
    assert issued.signer in subprocess.run(["ssh-keygen", "-l", "-f", str(site["key"])],
                                           capture_output=True, text=True).stdout
    history = gpuprov("nodes", "node03", env=site["env"], timeout=60)
    assert "certified" in history.stdout and str(site["cert"].resolve()) in history.stdout
    out = tmp_path / "rma"
    out.mkdir()
    bundled = gpuprov("report", "node03", "--format", "markdown", "-o", str(out),
                      env=site["env"], timeout=60)
    assert bundled.returncode == 0, bundled.stderr
    assert (out / "node03.json").read_bytes() == site["cert"].read_bytes()
    assert (out / "node03.json.sig").is_file()
    assert f"certificate: {out / 'node03.json'}" in bundled.stdout


XID_79 = ("[ 9000.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen "
          "off the bus.\n")


def test_evidence_changed_after_its_acceptance_is_not_certified(site, tmp_path):
    """Issue 67: an Xid 79 added to node03's kernel log after its acceptance. The verdict
    recorded each evidence file's SHA-256 when it was judged: certify refuses, naming the
    file, and writes nothing; the file as it was is certified again."""
    [accepted] = [r for r in Ledger(site["env"]["GPUPROV_LEDGER"]).node_results(node="node03")]
    dmesg = Path(accepted.evidence_dir) / "dmesg.txt"
    assert accepted.evidence_manifest["dmesg.txt"]
    was = dmesg.read_bytes()
    out = tmp_path / "again.json"
    try:
        dmesg.write_bytes(was + XID_79.encode())
        refused = gpuprov("certify", "node03", "--key", str(site["key"]), "--out", str(out),
                          env=site["env"], timeout=120)
    finally:
        dmesg.write_bytes(was)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.strip() == (
        "node03: evidence of run v1 is not what was judged: dmesg.txt changed; nothing "
        "written (validate again to certify)")
    assert not out.exists() and not list(tmp_path.iterdir())
    again = gpuprov("certify", "node03", "--key", str(site["key"]), "--out", str(out),
                    env=site["env"], timeout=120)
    assert again.returncode == 0, again.stderr


def test_a_verdict_recorded_without_its_evidence_s_digests_is_not_certified(site, tmp_path):
    import shutil
    import sqlite3
    ledger = tmp_path / "ledger.sqlite3"
    shutil.copy(site["env"]["GPUPROV_LEDGER"], ledger)
    with sqlite3.connect(ledger) as db:
        db.execute("UPDATE node_results SET evidence_manifest = NULL")
    refused = gpuprov("certify", "node03", "--key", str(site["key"]), "--out",
                      str(tmp_path / "c.json"), env={**site["env"], "GPUPROV_LEDGER": str(ledger)},
                      timeout=120)
    assert refused.returncode == 1
    assert "its evidence was not fingerprinted when it was judged" in refused.stderr


def _plain_verify(cert: Path, allowed: Path, principal: str = "acceptance@site.example"):
    with cert.open("rb") as document:
        return subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I",
                               principal, "-n", certificates.NAMESPACE, "-s", f"{cert}.sig"],
                              stdin=document, capture_output=True, text=True, check=False)


def test_certifying_twice_to_one_file_replaces_the_signature(site, tmp_path):
    """Issue 67: ssh-keygen would keep the first .sig (it asks before overwriting, and with
    no terminal writes nothing, exit 0): the second document's signature is in place."""
    out = tmp_path / "twice.json"
    documents = []
    for _ in range(2):
        done = gpuprov("certify", "node03", "--key", str(site["key"]), "--out", str(out),
                       env=site["env"], timeout=120)
        assert done.returncode == 0, done.stderr
        documents.append(out.read_bytes())
        time.sleep(1.1)       # the second document differs: its signing time
    assert documents[0] != documents[1]
    plain = _plain_verify(out, site["allowed"])
    assert plain.returncode == 0, plain.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_retired_key_s_earlier_certificate_verifies_and_a_revoked_one_does_not(site,
                                                                                tmp_path):
    """Issue 67: the key retired (valid-before) after it signed: verified at the signing
    time, as git does, the certificate holds, where plain ssh-keygen at this moment refuses
    it; a key in --revoked is refused whatever the time; a key listed twice, its git line
    first, is found on its second line."""
    out = tmp_path / "c.json"
    done = gpuprov("certify", "node03", "--key", str(site["key"]), "--out", str(out),
                   env=site["env"], timeout=120)
    assert done.returncode == 0, done.stderr
    signed = json.loads(out.read_text())["signed_at"]
    time.sleep(2.1)
    retired = (datetime.fromisoformat(signed) + timedelta(seconds=1)).strftime("%Y%m%d%H%M%S")
    public = certificates.public_key_line(site["key"])
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f'git@site.example namespaces="git" {public}\n'
                       f'acceptance@site.example namespaces="gpuprov-acceptance",'
                       f'valid-before="{retired}" {public}\n')
    assert _plain_verify(out, allowed).returncode != 0        # at this moment: expired
    held = gpuprov("verify", str(out), "--allowed-signers", str(allowed), env=site["env"],
                   timeout=60)
    assert held.returncode == 0, held.stderr
    assert "signed by acceptance@site.example" in held.stdout
    revoked = tmp_path / "revoked"
    revoked.write_text(public + "\n")
    refused = gpuprov("verify", str(out), "--allowed-signers", str(allowed), "--revoked",
                      str(revoked), env=site["env"], timeout=60)
    assert refused.returncode == 1 and "bad signature" in refused.stderr, refused.stderr


@pytest.mark.parametrize("field, value, said", [
    ("expires_at", "", "expires_at: '' is not a 'date-time'"),
    ("expires_at", "2030-01-01T00:00:00", "expires_at: '2030-01-01T00:00:00' is not a"),
    ("judged_at", "yesterday", "judged_at: 'yesterday' is not a 'date-time'"),
    # certify refuses an acceptance with observed findings: no certificate holds one
    ("checks", [{"id": "load_thermal", "status": "observed"}],
     "checks.0.status: 'observed' is not one of"),
])
def test_a_signed_document_with_a_bad_date_is_refused_in_one_line(site, tmp_path, field,
                                                                  value, said):
    """Issue 67: the schema's dates and statuses are enforced (an expires_at of "" read
    "until never"; a naive one ended in a traceback), even under a good signature."""
    data = json.loads(site["cert"].read_text())
    data[field] = value
    cert = tmp_path / "bad.json"
    cert.write_text(certificates.text(data))
    certificates.sign(cert, site["key"])
    refused = _verify(site, cert=cert)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert said in refused.stderr and len(refused.stderr.splitlines()) == 1, refused.stderr


def test_audit_survivors_a_key_0640_a_bundle_changed_under_its_name_expires_at(site, tmp_path):
    """Issue 67's surviving mutants: a group-readable key (0640) is refused as ssh refuses
    it; the certified bundle changed under its own name is refused by verify --evidence;
    a certificate's expires_at is its judged_at plus the acceptance's period."""
    loose = _key(tmp_path, "group")
    loose.chmod(0o640)
    refused = gpuprov("certify", "node03", "--key", str(loose), "--out",
                      str(tmp_path / "c.json"), env=site["env"], timeout=60)
    assert refused.returncode == 2 and "permissions 0640 are too open" in refused.stderr
    data = json.loads(site["cert"].read_text())
    bundle = site["cert"].parent / data["evidence"]["bundle"]
    was = bundle.read_bytes()
    try:
        bundle.write_bytes(was[:-1] + bytes([was[-1] ^ 1]))
        changed = _verify(site, "--evidence", str(bundle))
    finally:
        bundle.write_bytes(was)
    assert changed.returncode == 1 and "the certificate says" in changed.stderr
    judged = datetime.fromisoformat(data["judged_at"])
    assert datetime.fromisoformat(data["expires_at"]) - judged == timedelta(days=7)
