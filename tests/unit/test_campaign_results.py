"""Issue 69: a campaign result is authenticated by the node's SSH host key as the controller's
known_hosts holds it (hashed entries included), with OpenSSH's own ssh-keygen -Y."""

from __future__ import annotations

import subprocess

import pytest

from gpuprov import files
from gpuprov.slurm import results


def _key(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def _signed(tmp_path, key, run="v1", node="node07"):
    out = tmp_path / "out"
    (out / "evidence").mkdir(parents=True)
    (out / "evidence" / "dmesg.txt").write_text("[    0.000000] Linux version 6.8.0\n")
    manifest = files.manifest(out / "evidence")
    claim = results.Claim(run, node, "42", "0.2.0", "accepted",
                          results.evidence_digest(manifest))
    results.sign(out, claim, str(key))
    return out, manifest


def test_a_hashed_known_hosts_entry_authenticates_the_node(tmp_path):
    key = _key(tmp_path / "host_key")
    known = tmp_path / "known_hosts"
    known.write_text(f"node07.example {key.with_suffix('.pub').read_text()}")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True,
                   capture_output=True)
    assert "node07.example" not in known.read_text()           # hashed, as ssh writes it
    keys = results.known_keys(results.known_hosts(known), "node07.example")
    out, manifest = _signed(tmp_path, key)
    assert results.verify(out, "v1", "node07", "0.2.0", keys, manifest).verdict == "accepted"
    assert results.known_keys(results.known_hosts(known), "node08.example") == []


def test_another_key_another_version_or_another_node_is_refused(tmp_path):
    key, other = _key(tmp_path / "host_key"), _key(tmp_path / "other_key")
    known = tmp_path / "known_hosts"
    known.write_text(f"node07 {other.with_suffix('.pub').read_text()}")
    out, manifest = _signed(tmp_path, key)
    with pytest.raises(results.Refused, match=r"^result.json is not signed by node07's host "
                                              r"key \(Could not verify signature.\)$"):
        results.verify(out, "v1", "node07", "0.2.0",
                       results.known_keys(results.known_hosts(known), "node07"), manifest)
    known.write_text(f"node07 {key.with_suffix('.pub').read_text()}")
    keys = results.known_keys(results.known_hosts(known), "node07")
    with pytest.raises(results.Refused, match=r"^collected by gpuprov 0.2.0, the controller "
                                              r"is 0.3.0: install"):
        results.verify(out, "v1", "node07", "0.3.0", keys, manifest)
    with pytest.raises(results.Refused, match=r"^result.json names node node07, not node08$"):
        results.verify(out, "v1", "node08", "0.2.0", keys, manifest)
    with pytest.raises(results.Refused, match=r"^no host key for node07 in the controller's"):
        results.verify(out, "v1", "node07", "0.2.0", [], manifest)


def test_evidence_that_calls_itself_a_recheck_is_refused(tmp_path):
    # a recheck's left-out stages are skipped, not judged: a node must not choose that
    key = _key(tmp_path / "host_key")
    out = tmp_path / "out"
    (out / "evidence").mkdir(parents=True)
    (out / "evidence" / "meta.json").write_text(
        '{"node": "node07", "recheck": {"holds": ["nics"], "stages": ["identity"]}}')
    manifest = files.manifest(out / "evidence")
    results.sign(out, results.Claim("v1", "node07", "42", "0.2.0", "accepted",
                                    results.evidence_digest(manifest)), str(key))
    known = tmp_path / "known_hosts"
    known.write_text(f"node07 {key.with_suffix('.pub').read_text()}")
    with pytest.raises(results.Refused, match=r"^the evidence says it is a recheck's"):
        results.verify(out, "v1", "node07", "0.2.0",
                       results.known_keys(results.known_hosts(known), "node07"), manifest)


def test_a_result_that_is_not_json_is_named(tmp_path):
    (tmp_path / results.RESULT).write_text("{not json")
    with pytest.raises(results.Refused, match=r"^result.json: unreadable \(JSONDecodeError"):
        results.read_claim(tmp_path)
    (tmp_path / results.RESULT).write_text('{"format": 2}')
    with pytest.raises(results.Refused, match=r"^result.json: format 2, expected 1$"):
        results.read_claim(tmp_path)


def test_the_evidence_copy_keeps_links_as_links_and_refuses_them_and_pipes(tmp_path):
    import os

    from gpuprov.validation.campaign import copy_evidence
    source = tmp_path / "node" / "evidence"
    source.mkdir(parents=True)
    (source / "dmesg.txt").write_text("[    0.000000] Linux version 6.8.0\n")
    copy_evidence(source, tmp_path / "copy")
    assert (tmp_path / "copy" / "dmesg.txt").read_text().startswith("[    0.000000]")
    secret = tmp_path / "controller-only"
    secret.write_text("not the node's\n")
    (source / "nvidia-smi-q.xml").symlink_to(secret)
    with pytest.raises(results.Refused, match=r"^evidence/nvidia-smi-q.xml: not a regular "
                                              r"file$"):
        copy_evidence(source, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()        # nothing of it kept to be read later
    (source / "nvidia-smi-q.xml").unlink()
    os.mkfifo(source / "gpu-burn.log")
    with pytest.raises(results.Refused, match=r"^evidence/ not copied: gpu-burn.log: "
                                              r".*named pipe"):
        copy_evidence(source, tmp_path / "copy")


def test_collect_refuses_a_request_other_than_the_one_its_job_pins(tmp_path):
    """A request changed after the controller wrote it (its tool paths are commands the
    collector runs) is refused before a byte of it is used."""
    import hashlib

    from tests.conftest import gpuprov
    request = tmp_path / "node07.json"
    request.write_text('{"format": 1}\n')
    pinned = hashlib.sha256(request.read_bytes()).hexdigest()
    request.write_text('{"format": 1, "settings": {"validate_nvidia_smi": "/tmp/fake"}}\n')
    out = tmp_path / "out"
    out.mkdir()
    done = gpuprov("collect", "--request", str(request), "--request-sha256", pinned,
                   "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"gpuprov: error: {request}: not the request the controller wrote (sha256 "
        f"{hashlib.sha256(request.read_bytes()).hexdigest()[:12]}…, the job pins "
        f"{pinned[:12]}…): "
        "changed on the way"]
    assert list(out.iterdir()) == []
