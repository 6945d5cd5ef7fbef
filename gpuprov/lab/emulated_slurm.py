"""A large Slurm cluster emulated on this machine, for campaigns at fleet scale.

Debian's own slurmctld and one real slurmd per emulated node (`slurmd -N NAME`), all on
loopback: each node has its own `Port=` (slurm.conf.5: "Use of this option is not
generally recommended except for development or testing purposes"), so they share one
address without namespaces (Debian 12's slurm-wlm 22.05.8, measured: docs/slurm-campaign.md).
munge runs with a key and socket of the emulation's own. Every daemon is started with the
emulation's slurm.conf on its command line and stopped by it: nothing system-wide is
touched, and nothing listens beyond 127.0.0.1's ports it picked free.

Each node has an SSH host key of its own (ed25519, in the emulation's directory) and an
entry in the emulation's known_hosts, as a real node has: its results are signed and
checked as a real node's. An emulated node's job replays stored evidence instead of
collecting (`gpuprov.lab.emulated_node`): what it replays, and any fault in its result,
is the caller's plan.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuprov.errors import CommandFailed

PARTITION = "gpu"
# SlurmdTimeout: a node whose slurmd is gone is DOWN (its job NODE_FAIL) after this many
# seconds, not slurm.conf's default 300
NODE_TIMEOUT_S = 10
PORTS_LOCK = "/tmp/gpuprov-emulated-slurm.lock"   # held while an emulation binds its ports


def free_ports(count: int, start: int = 20000) -> list[int]:
    """`count` consecutive ports free on 127.0.0.1 from `start` on."""
    port = start
    while port + count < 65000:
        taken = next((p for p in range(port, port + count) if not _free(p)), None)
        if taken is None:
            return list(range(port, port + count))
        port = taken + 1
    raise CommandFailed(f"no {count} consecutive free ports on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class EmulatedCluster:
    root: Path
    nodes: list[str]

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a Slurm client (sinfo, sbatch…, and gpuprov) needs to reach it."""
        # jobs inherit TMPDIR (sbatch exports the caller's environment): what a job
        # leaves behind stays in the cluster's directory, never the machine's /tmp
        return {**os.environ, "SLURM_CONF": str(self.conf), "TMPDIR": str(self.tmp)}

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    def host_key(self, node: str) -> Path:
        return self.root / "keys" / node

    def slurm_conf(self, ctld_port: int, node_ports: list[int]) -> str:
        lines = [
            "# gpuprov.lab.emulated_slurm: an emulated cluster on loopback",
            "ClusterName=gpuprov-emulated",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.root}/munge/socket",
            f"StateSaveLocation={self.root}/ctld",
            f"SlurmdSpoolDir={self.root}/spool/%n",
            f"SlurmctldPidFile={self.root}/run/slurmctld.pid",
            f"SlurmdPidFile={self.root}/run/%n.pid",
            f"SlurmctldLogFile={self.root}/log/slurmctld.log",
            f"SlurmdLogFile={self.root}/log/%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            f"SlurmdTimeout={NODE_TIMEOUT_S}",
            "SlurmdParameters=config_overrides",
            "NodeName=DEFAULT CPUs=1 RealMemory=100 State=UNKNOWN",
            *(f"NodeName={node} NodeHostname=emulated NodeAddr=127.0.0.1 Port={port}"
              for node, port in zip(self.nodes, node_ports, strict=True)),
            f"PartitionName={PARTITION} Nodes={','.join(self.nodes)} Default=YES "
            "MaxTime=INFINITE State=UP",
        ]
        return "\n".join(lines) + "\n"

    def up(self, timeout: float = 600) -> None:
        """munged, slurmctld and every slurmd started; back once every node is idle."""
        for sub in ("munge", "ctld", "spool", "run", "log", "keys", "shared", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self._host_keys()
        # one emulation at a time picks its ports and binds them: two started side by side
        # (test workers) would otherwise pick the same free ones; a failed start leaves
        # nothing running
        with open(PORTS_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._start_daemons(key, timeout)
            except BaseException:
                self._stop()          # its logs kept: the error names them
                raise

    def _start_daemons(self, key: Path, timeout: float) -> None:
        ports = free_ports(len(self.nodes) + 1)
        self.conf.write_text(self.slurm_conf(ports[0], ports[1:]))
        munge = self.root / "munge"
        _start(["munged", "--force", f"--key-file={key}", f"--socket={munge}/socket",
                f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                f"--seed-file={munge}/seed"])
        _start(["slurmctld", "-i", "-f", str(self.conf)])
        for node in self.nodes:
            (self.root / "spool" / node).mkdir(exist_ok=True)
            _start(["slurmd", "-f", str(self.conf), "-N", node])
        self.wait_idle(self.nodes, timeout)

    def _host_keys(self) -> None:
        def one(node: str) -> str:
            key = self.host_key(node)
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node,
                                "-f", str(key)], check=True)
            kind, blob = key.with_suffix(".pub").read_text().split()[:2]
            return f"{node} {kind} {blob}\n"
        with ThreadPoolExecutor(max_workers=8) as pool:
            self.known_hosts.write_text("".join(pool.map(one, self.nodes)))

    def states(self) -> dict[str, str]:
        out = self.run(["sinfo", "--noheader", "--Node", "--format=%N %T"])
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def wait_idle(self, nodes: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            waiting = [n for n in nodes if states.get(n) != "idle"]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise CommandFailed(f"emulated Slurm: {len(waiting)} node(s) not idle after "
                                    f"{timeout:.0f}s, e.g. {waiting[0]} "
                                    f"{states.get(waiting[0], 'unknown')} (see "
                                    f"{self.root}/log/)")
            time.sleep(1)

    def run(self, argv: list[str], stdin: str | None = None) -> str:
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                                input=stdin, timeout=120)
        if result.returncode != 0:
            raise CommandFailed(f"{' '.join(argv[:2])}: {result.stderr.strip()}")
        return result.stdout

    def kill_node(self, node: str) -> None:
        """The node dies: its slurmd and everything its jobs run (SIGKILL)."""
        jobs = self.run(["squeue", "--noheader", f"--nodelist={node}", "--format=%i"]).split()
        _kill(int((self.root / "run" / f"{node}.pid").read_text()))
        # a job step may fork while the first pass runs: passes until none is left
        for _ in range(5):
            found = [pid for pid in _pids() if _environ(pid).get("SLURMD_NODENAME") == node
                     or any(f"[{job}." in _cmdline(pid) for job in jobs)]
            if not found:
                return
            for pid in found:
                _kill(pid)
            time.sleep(0.2)

    def down(self) -> None:
        """Every daemon of the emulation stopped, and every job it ran; the directory
        removed."""
        self._stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _stop(self) -> None:
        """Every process with its slurm.conf or munge socket on its command line, or its
        slurm.conf in its environment (the jobs)."""
        marks = (str(self.conf), str(self.root / "munge"))
        for pid in _pids():
            line = _cmdline(pid)
            if any(mark in line for mark in marks) or \
                    _environ(pid).get("SLURM_CONF") == str(self.conf):
                _kill(pid)


def _start(argv: list[str]) -> None:
    """A daemon that forks into the background; its own error when it does not start."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        said = result.stderr.strip() or f"exit status {result.returncode}"
        raise CommandFailed(f"{argv[0]}: {said}")


def _pids() -> list[int]:
    own = os.getpid()
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and int(p.name) != own]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def plan_file(root: Path, plan: dict[str, dict]) -> Path:
    """What each emulated node's job replays (gpuprov.lab.emulated_node)."""
    path = root / "nodes.json"
    path.write_text(json.dumps(plan, indent=1, sort_keys=True))
    return path


def collector(root: Path) -> str:
    """The collector command the campaign's jobs run on emulated nodes."""
    return f"{sys.executable} -m gpuprov.lab.emulated_node {root / 'nodes.json'}"
