"""How a campaign job's request reaches its node and its result comes back.

The request always travels inside the job script, which only slurmctld carries: no node can
change another's (its tool paths are commands the collector runs). The script writes it to
a private temporary file and runs `gpuprov collect` with its SHA-256 pinned.

The result comes back one of two ways (docs/slurm-campaign.md):
- **shared**: `slurm.shared_dir`, a directory at the same path on this machine and every
  node. The job writes `<shared_dir>/<run>/<node>/`; the controller reads it there.
- **ssh**: no shared directory. The job writes a root-only directory on the node itself
  (`slurm.node_dir`/<run>/<node>), and the controller fetches it once the job has ended,
  over the inventory's own SSH (host keys checked, as every validation command).

Either way the fetched directory is then checked the same way (campaign.py, results.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import shlex
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from gpuprov.slurm import results

JOB_OUTPUT = "job.out"
_END = "GPUPROV_REQUEST_END"


def job_script(collector: str, request: bytes, out_dir: str, log_here: bool) -> str:
    """The job: its request written to a private temporary file, the collector run with
    the request's SHA-256 pinned. `log_here`: the job's own output goes to `out_dir`
    (where sbatch's --output cannot: a directory the job makes)."""
    text = request.decode()
    if f"\n{_END}\n" in f"\n{text}":
        raise ValueError("the request holds the here-document's end marker")
    out = shlex.quote(out_dir)
    lines = [
        "#!/bin/sh",
        "# gpuprov validate --via slurm: collect this node's evidence, sign the result",
        "set -eu",
        "umask 077",
    ]
    if log_here:
        lines += [f"mkdir -p {out}", f'exec >{shlex.quote(out_dir + "/" + JOB_OUTPUT)} 2>&1']
    lines += [
        'request=$(mktemp "${TMPDIR:-/tmp}/gpuprov-request.XXXXXX")',
        "trap 'rm -f \"$request\"' EXIT",
        # sh runs no EXIT trap when a signal ends it: Slurm's TERM at a time limit or
        # scancel would leave the request behind on the node
        "trap 'exit 143' HUP INT TERM",
        f"cat >\"$request\" <<'{_END}'",
        text.rstrip("\n"),
        _END,
        f'{collector} collect --request "$request" --request-sha256 '
        f"{hashlib.sha256(request).hexdigest()} --out {out}",
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SharedReturn:
    """Results in a directory this machine and the nodes share at the same path."""
    base: Path                      # <shared_dir>/<run>

    def node_dir(self, name: str) -> str:
        return str(self.base / name)

    def sbatch_output(self, name: str) -> str:
        return str(self.base / name / JOB_OUTPUT)

    def prepare(self, name: str) -> None:
        (self.base / name).mkdir(parents=True, exist_ok=True)

    def started(self, name: str) -> bool:
        """A job ran for the node (its output is here): a resumed campaign submits none."""
        return (self.base / name / JOB_OUTPUT).exists()

    def fetch(self, host: str, name: str) -> Path:
        return self.base / name


@dataclass(frozen=True)
class SshReturn:
    """Results on each node, fetched over the inventory's SSH when the job has ended."""
    node_base: str                  # <node_dir>/<run> on the nodes
    local_base: Path                # where fetched results go here
    connect: object                 # host -> a testinfra host (remote/connect.py)

    def node_dir(self, name: str) -> str:
        return f"{self.node_base}/{name}"

    def sbatch_output(self, name: str) -> str:
        return "/dev/null"          # the job logs into its own directory (job_script)

    def prepare(self, name: str) -> None:
        pass

    def started(self, name: str) -> bool:
        return False                # a resumed campaign finds its jobs by name in squeue

    def fetch(self, host: str, name: str) -> Path:
        """The node's directory copied here (tar over the SSH session, as text): a node that
        cannot be reached or holds none is a refused result, never a pass."""
        target = self.local_base / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        remote = shlex.quote(self.node_dir(name))
        try:
            done = self.connect(host).run(f"tar -C {remote} -cf - . | base64 -w0")
        except Exception as exc:   # testinfra raises its backends' own errors
            raise results.Refused(f"not fetched over SSH: {exc}") from exc
        if done.rc != 0 or not done.stdout:
            why = (done.stderr.strip().splitlines() or [f"exit status {done.rc}"])[-1]
            raise results.Refused(f"not fetched over SSH from {self.node_dir(name)}: {why}")
        try:
            with tarfile.open(fileobj=io.BytesIO(base64.b64decode(done.stdout)),
                              mode="r:") as tar:
                # the data filter refuses absolute paths, paths out of the target and
                # devices; links inside are kept as links and refused by the evidence check
                tar.extractall(target, filter="data")
        except (binascii.Error, tarfile.TarError, OSError) as exc:
            raise results.Refused(f"not fetched over SSH: {exc}") from exc
        return target
