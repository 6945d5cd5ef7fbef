"""Slurm as gpuprov sees it: node states, running jobs, drain and resume.

Through Slurm's own commands (`sinfo`, `squeue`, `scontrol`), run on this machine or, when
`slurm.ssh_host` is set, on that host over SSH (a login or head node that is a Slurm
client: the controller need not be one). Host keys are checked as everywhere in gpuprov;
the remote command line is quoted, so a drain reason is passed as one argument.
"""

from __future__ import annotations

import re
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


# a job that ended without running its script to the end: never a result to harvest
FAILED_ENDS = ("TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "CANCELLED", "OUT_OF_MEMORY", "FAILED",
               "PREEMPTED", "DEADLINE", "REVOKED", "SPECIAL_EXIT")
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


@dataclass(frozen=True)
class JobState:
    id: str
    name: str
    state: str                  # squeue's long state: PENDING, RUNNING, COMPLETED, TIMEOUT…
    nodes: str
    reason: str

    @property
    def ended(self) -> bool:
        return self.state == "COMPLETED" or self.failed

    @property
    def failed(self) -> bool:
        return self.state in FAILED_ENDS


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

    def run(self, argv: list[str], stdin: str | None = None) -> str:
        try:
            result = subprocess.run(self._argv(argv), capture_output=True, text=True,
                                    timeout=COMMAND_TIMEOUT_S, input=stdin)
        except FileNotFoundError as exc:
            raise SlurmError(f"{exc.filename}: not installed {self.where}") from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(f"`{argv[0]}` {self.where} gave no answer in "
                             f"{COMMAND_TIMEOUT_S}s") from exc
        if result.returncode != 0:
            # scontrol prints some refusals on stdout ("Reservation R not found")
            lines = (result.stderr.strip() or result.stdout.strip()).splitlines() or [
                f"exit status {result.returncode}"]
            raise SlurmError(f"`{shlex.join(argv[:2])}` {self.where}: {lines[-1]}")
        return result.stdout

    def nodes(self, only: str | None = None) -> dict[str, SlurmNode]:
        """Every node of the cluster (or the one named) with the partitions it belongs to
        (one `sinfo`)."""
        out = self.run(["sinfo", "--noheader", "--Node", *(["--nodes", only] if only else []),
                        "--format", "%N|%T|%R|%E"])
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

    def node(self, name: str) -> SlurmNode | None:
        return self.nodes(only=name).get(name)

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

    # -- a validation campaign's objects: its maintenance reservation and its jobs --

    def version(self) -> tuple[int, int]:
        """(major, minor) from `scontrol --version`: `slurm-wlm 22.05.8` (Debian's),
        `slurm 23.11.4`."""
        out = self.run(["scontrol", "--version"]).strip()
        match = _VERSION.search(out)
        if match is None:
            raise SlurmError(f"`scontrol --version` {self.where}: not a version: {out!r}")
        return int(match.group(1)), int(match.group(2))

    def user(self) -> str:
        """The account Slurm's commands run as (the reservation's user, the jobs' owner)."""
        return self.run(["id", "-un"]).strip()

    def create_reservation(self, name: str, nodes: list[str], user: str,
                           minutes: int) -> None:
        """`Flags=MAINT,IGNORE_JOBS`: created while jobs still run on the nodes (they end as
        they would; no new job but the reservation's lands), shown `maint` by sinfo; ends on
        its own after `minutes` if the campaign never deletes it."""
        self.run(["scontrol", "create", "reservation", f"ReservationName={name}",
                  f"Nodes={','.join(nodes)}", "StartTime=now", f"Duration={minutes}",
                  f"Users={user}", "Flags=MAINT,IGNORE_JOBS"])

    def reservation_exists(self, name: str) -> bool:
        try:
            self.run(["scontrol", "show", "reservation", name])
        except SlurmError as exc:
            if "not found" in str(exc).lower():
                return False
            raise
        return True

    def set_reservation_nodes(self, name: str, nodes: list[str]) -> None:
        """The reservation's whole node list rewritten: 22.05 refuses `Nodes=-NODE`
        ("Invalid node name specified"), and a rewrite works on every version."""
        self.run(["scontrol", "update", f"ReservationName={name}", f"Nodes={','.join(nodes)}"])

    def delete_reservation(self, name: str) -> None:
        self.run(["scontrol", "delete", f"ReservationName={name}"])

    def submit(self, script: str, job_name: str, node: str, reservation: str,
               minutes: int, output: str) -> str:
        """One pinned, exclusive job in the reservation, never requeued (a node that fails
        under it must not be tested again unseen); its job id."""
        out = self.run(["sbatch", "--parsable", f"--job-name={job_name}", f"--nodelist={node}",
                        "--nodes=1", "--exclusive", f"--reservation={reservation}",
                        "--no-requeue", f"--time={minutes}", f"--output={output}"],
                       stdin=script)
        return out.strip().split(";")[0]

    def jobs_named(self, prefix: str) -> dict[str, JobState]:
        """Every job slurmctld still holds whose name starts with `prefix`, ended ones too
        (until MinJobAge purges them), by job name (one `squeue`)."""
        out = self.run(["squeue", "--noheader", "--states=all",
                        "--format=%i|%j|%T|%N|%r"])
        found: dict[str, JobState] = {}
        for line in out.splitlines():
            if line.startswith(tuple("0123456789")):
                job_id, name, state, nodes, reason = line.split("|", 4)
                if name.startswith(prefix):
                    found[name] = JobState(job_id, name, state, nodes, reason)
        return found

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.run(["scancel", *job_ids])


def connect(slurm: Slurm) -> dict[str, SlurmNode]:
    """The cluster's nodes, or one line naming where slurmctld could not be asked (exit 2)."""
    try:
        return slurm.nodes()
    except SlurmError as exc:
        raise InputError(f"slurm: slurmctld not reachable: {exc}") from exc
