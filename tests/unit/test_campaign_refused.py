"""Issue 69: an account without the right to create a reservation is one line, exit 2,
nothing held, submitted or recorded. The Slurm commands are stand-ins that answer as
slurm-wlm 22.05.8 did (tests/fixtures/slurm/): scontrol refuses the reservation with its
real line; sbatch, were it called, would leave a mark."""

from __future__ import annotations

import os
import subprocess

import yaml

from gpuprov.ledger import Ledger
from tests import evidence_builder
from tests.conftest import gpuprov
from tests.evidence_builder import FIXTURES


def _tool(bin_dir, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_no_right_to_reserve_is_exit_2_and_nothing_held_submitted_or_recorded(tmp_path):
    refusal = (FIXTURES / "slurm/scontrol-create-reservation-not-admin.txt").read_text()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "sinfo", "echo 'node01|idle|gpu|none'\n")
    _tool(bin_dir, "scontrol", f"""case "$1" in
  --version) echo 'slurm-wlm 22.05.8' ;;
  create) echo '{refusal.splitlines()[1]}' >&2; exit 1 ;;
  *) echo "scontrol $*" >> {tmp_path}/changed; exit 1 ;;
esac
""")
    for tool in ("sbatch", "scancel"):
        _tool(bin_dir, tool, f"echo '{tool}' \"$@\" >> {tmp_path}/changed\n")
    _tool(bin_dir, "squeue", "exit 0\n")
    key = tmp_path / "node01_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (tmp_path / "known_hosts").write_text(f"node01 {key.with_suffix('.pub').read_text()}")
    (tmp_path / "shared").mkdir()
    (tmp_path / "config.yml").write_text(yaml.safe_dump({"slurm": {
        "shared_dir": str(tmp_path / "shared"), "known_hosts": str(tmp_path / "known_hosts")}}))
    (tmp_path / "site" / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "site" / "hosts.ini").write_text("node01 gpuprov_profile=h100-sxm-8\n")
    (tmp_path / "site" / "group_vars" / "all" / "versions.yml").write_text(yaml.safe_dump(
        {f"gpuprov_{k}": v for k, v in evidence_builder.LOCK.items()}))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "GPUPROV_CONFIG": str(tmp_path / "config.yml"),
           "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    result = gpuprov("validate", "--via", "slurm", "-i", str(tmp_path / "site/hosts.ini"),
                     "node01", env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("gpuprov: error: slurm: reservation gpuprov-v")
    assert line.endswith(" not created: `scontrol create` on this machine: Error creating the "
                         "reservation: Invalid user id")
    assert not (tmp_path / "changed").exists()
    assert not list((tmp_path / "shared").iterdir())
    ledger = tmp_path / "state" / "ledger.sqlite3"
    assert not ledger.exists() or Ledger(ledger).runs() == []
