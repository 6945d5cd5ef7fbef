"""Slurm as gpuprov sees it: node states, running jobs, drain and resume.

Through Slurm's own commands (`sinfo`, `squeue`, `scontrol`), run on this machine or, when
`slurm.ssh_host` is set, on that host over SSH (a login or head node that is a Slurm
client: the controller need not be one). Host keys are checked as everywhere in gpuprov;
the remote command line is quoted, so a drain reason is passed as one argument.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass

from gpuprov.errors import InputError

# sinfo's state suffixes: * not responding, ~ powered off, # powering up, ! powering down,
# % powering down, $ maintenance reservation, @ reboot pending, ^ rebooting, - planned
_STATE_SUFFIXES = "*~#!%$@^-"
_BUSY = ("allocated", "mixed", "completing", "draining")
_OUT = ("drained", "draining", "down", "fail", "failing")
COMMAND_TIMEOUT_S = 60


class SlurmError(Exception):
    """A Slurm command failed; the message is its last line of error output."""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str                  # sinfo's long state: idle, allocated, draining, down*, ...
    reason: str                 # the drain or down reason, "" when none
    partitions: tuple[str, ...]

    @property
    def base(self) -> str:
        return self.state.rstrip(_STATE_SUFFIXES)

    @property
    def in_service(self) -> bool:
        """Schedulable: neither drained nor down (jobs may land on it)."""
        return self.base not in _OUT

    @property
    def busy(self) -> bool:
        """It may still run jobs."""
        return self.base in _BUSY


@dataclass(frozen=True)
class Job:
    id: str
    user: str
    name: str
    nodes: str                  # Slurm's host list, e.g. node[01-02]

    def __str__(self) -> str:
        return f"{self.id} ({self.user}, {self.name}, on {self.nodes})"


@dataclass(frozen=True)
class Slurm:
    ssh_host: str | None = None
    ssh_config: str | None = None

    @property
    def where(self) -> str:
        return f"on {self.ssh_host}" if self.ssh_host else "on this machine"

    def _argv(self, argv: list[str]) -> list[str]:
        if not self.ssh_host:
            return argv
        ssh = ["ssh", "-o", "BatchMode=yes"]
        if self.ssh_config:
            ssh += ["-F", self.ssh_config]
        return [*ssh, self.ssh_host, "--", shlex.join(argv)]

    def run(self, argv: list[str]) -> str:
        try:
            result = subprocess.run(self._argv(argv), capture_output=True, text=True,
                                    timeout=COMMAND_TIMEOUT_S)
        except FileNotFoundError as exc:
            raise SlurmError(f"{exc.filename}: not installed {self.where}") from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(f"`{argv[0]}` {self.where} gave no answer in "
                             f"{COMMAND_TIMEOUT_S}s") from exc
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines() or [f"exit status {result.returncode}"]
            raise SlurmError(f"`{shlex.join(argv[:2])}` {self.where}: {lines[-1]}")
        return result.stdout

    def nodes(self) -> dict[str, SlurmNode]:
        """Every node of the cluster with the partitions it belongs to (one `sinfo`)."""
        out = self.run(["sinfo", "--noheader", "--Node", "--format", "%N|%T|%R|%E"])
        found: dict[str, SlurmNode] = {}
        for line in out.splitlines():
            if not line.strip():
                continue
            name, state, partition, reason = line.split("|", 3)
            reason = "" if reason == "none" else reason
            known = found.get(name)
            partitions = (*known.partitions, partition) if known else (partition,)
            found[name] = SlurmNode(name, state, reason, partitions)
        return found

    def jobs_on(self, names: list[str]) -> list[Job]:
        """Jobs running (or still ending) on any of these nodes."""
        if not names:
            return []
        out = self.run(["squeue", "--noheader", "--states", "RUNNING,COMPLETING,CONFIGURING",
                        "--nodelist", ",".join(names), "--format", "%i|%u|%j|%N"])
        return [Job(*line.split("|", 3)) for line in out.splitlines() if line.strip()]

    def extras(self) -> dict[str, str]:
        """Each node's `Extra` (Slurm 22.05 and later): free text, "" where unset (sinfo
        prints `(null)`); last in the format, so a `|` in it is kept."""
        out = self.run(["sinfo", "--noheader", "--Node", "--Format", "NodeList:|,Extra:"])
        found = {}
        for line in out.splitlines():
            if line.strip():
                name, _, extra = line.partition("|")
                found[name] = "" if extra == "(null)" else extra
        return found

    def set_extra(self, name: str, extra: str) -> None:
        self.run(["scontrol", "update", f"NodeName={name}", f"Extra={extra}"])

    def drain(self, name: str, reason: str) -> None:
        self.run(["scontrol", "update", f"NodeName={name}", "State=DRAIN",
                  f"Reason={reason}"])

    def resume(self, name: str) -> None:
        self.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"])


def connect(slurm: Slurm) -> dict[str, SlurmNode]:
    """The cluster's nodes, or one line naming where slurmctld could not be asked (exit 2)."""
    try:
        return slurm.nodes()
    except SlurmError as exc:
        raise InputError(f"slurm: slurmctld not reachable: {exc}") from exc
