"""The collection's playbooks/provision.yml through ansible-runner: one run directory per
run, events to a progress view, and each host's outcome from the play recap.

Connection settings an operator would otherwise put in ansible.cfg are set here, so every
run is fast the same way: Mitogen for Ansible's strategy (unless the site's config says
`ansible.strategy: linear`), SSH pipelining, connection reuse, facts gathered once (the
playbook's first play, minimal subset), host keys checked. The collections path is gpuprov's own
collection (gpuprov/collection.py) and nothing else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ansible_mitogen
import ansible_runner

from gpuprov import collection
from gpuprov.errors import CommandFailed, EnvironmentProblem
from gpuprov.model import HostOutcome, Outcome
from gpuprov.provision.insync import Touched

PLAYBOOK = collection.PLAYBOOKS / "provision.yml"
# playbooks/report_state.yml's custom stats: {host: waits for a reboot}, and {host: waits
# for its module signing key's enrollment at the console}
STATE_STAT = "gpuprov_reboot_pending"
MOK_STAT = "gpuprov_mok_enrollment_pending"

ANSIBLE_SETTINGS = {
    "ANSIBLE_PIPELINING": "True",
    "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s",
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_GATHERING": "explicit",
    "ANSIBLE_RETRY_FILES_ENABLED": "False",
    "ANSIBLE_DEPRECATION_WARNINGS": "False",
    "ANSIBLE_NOCOLOR": "True",
    "ANSIBLE_FORCE_COLOR": "False",
}

# Mitogen runs each host's modules in one persistent Python interpreter it keeps on the
# host, instead of a new one per task: a no-op run of the lab's three nodes takes 36 s
# instead of 62 s (bench/provision.py). Same tasks, same results; `linear` is the way back.
MITOGEN_STRATEGIES = str(Path(ansible_mitogen.__file__).parent / "plugins" / "strategy")


def strategy_settings(strategy: str) -> dict[str, str]:
    """The environment that selects the strategy (settings.ansible_strategy())."""
    if strategy == "mitogen":
        return {"ANSIBLE_STRATEGY_PLUGINS": MITOGEN_STRATEGIES,
                "ANSIBLE_STRATEGY": "mitogen_linear"}
    return {"ANSIBLE_STRATEGY": "linear"}


@dataclass
class Options:
    inventory: Path
    hosts: list[str]
    check: bool = False
    diff: bool = False
    tags: str | None = None
    forks: int = 20
    serial: str | None = None
    allow_reboot: bool = False
    reboot_serial: str = "1"
    lock_overrides: dict = field(default_factory=dict)   # a rollback's lock, over the inventory's
    strategy: str = "mitogen"                            # settings.ansible_strategy()
    quick_check_dir: Path | None = None   # the quick check's files (quick_check_files.py)
    racks: dict = field(default_factory=dict)   # gpuprov_racks (racks.playbook_racks)


@dataclass
class HostProgress:
    play: str = ""
    role: str = ""
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    lost: int = 0           # of the failures, those where the connection died mid-task
    detail: str = ""
    reboot_pending: bool = False
    mok_enrollment_pending: bool = False
    seen: bool = False


@dataclass
class RunState:
    hosts: dict[str, HostProgress] = field(default_factory=dict)
    recap: dict[str, dict[str, int]] = field(default_factory=dict)


Listener = Callable[[str, str, HostProgress], None]   # (host, what happened, its state)


# Mitogen reports a host that went dark in the middle of a task as a failed task, not an
# unreachable one, when the connection dies while it forwards modules to it: its own
# traceback, not the module's (seen on the lab: a node powered off mid-run).
MITOGEN_LOST = ("EOF on stream", "mitogen.core.ChannelError",
                "'NoneType' object has no attribute 'protocol'")


def connection_lost(result: dict) -> bool:
    """Whether a failed task's result says the connection died rather than the task."""
    message = str(result.get("msg", ""))
    return bool(result.get("unreachable")) or (
        "mitogen" in message and any(mark in message for mark in MITOGEN_LOST))


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0][:300] if lines else ""


class EventSink:
    """Turns ansible-runner events into per-host progress."""

    def __init__(self, hosts: list[str], listener: Listener) -> None:
        self.state = RunState({h: HostProgress() for h in hosts})
        self._listener = listener
        # each host's files and units its task results named (the in-sync skip's baseline)
        self.touched = {h: Touched() for h in hosts}

    def __call__(self, event: dict) -> bool:
        """Returns whether ansible-runner keeps the event in the run's artifacts."""
        kind, data = event.get("event", ""), event.get("event_data", {})
        host = data.get("host")
        if kind == "playbook_on_stats":
            for key, counts in (("ok", data.get("ok")), ("changed", data.get("changed")),
                                ("failed", data.get("failures")),
                                ("unreachable", data.get("dark"))):
                for name, count in (counts or {}).items():
                    self.state.recap.setdefault(name, {})[key] = count
            stats = data.get("artifact_data") or {}
            for name, waits in (stats.get(STATE_STAT) or {}).items():
                if name in self.state.hosts:
                    self.state.hosts[name].reboot_pending = bool(waits)
            for name, waits in (stats.get(MOK_STAT) or {}).items():
                if name in self.state.hosts:
                    self.state.hosts[name].mok_enrollment_pending = bool(waits)
            return True
        if not host or host not in self.state.hosts:
            return True
        progress = self.state.hosts[host]
        progress.seen = True
        task = data.get("task", "")
        if kind == "runner_on_start":
            progress.play = data.get("play", "")
            progress.role, progress.task = data.get("role", ""), task
            self._listener(host, "start", progress)
            # Not kept in the run's job_events: a file per host and task that says only that
            # it started (two in five events; the result events carry task, host and time).
            return False
        elif kind == "runner_item_on_ok":
            self.touched[host].note(data.get("task_action", ""), data.get("res", {}))
        elif kind == "runner_on_ok":
            res = data.get("res", {})
            self.touched[host].note(data.get("task_action", ""), res)
            progress.ok += 1
            if res.get("changed"):
                progress.changed += 1
            self._listener(host, "changed" if res.get("changed") else "ok", progress)
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            message = _first_line(data.get("res", {}).get("msg"))
            if connection_lost(data.get("res", {})):
                progress.lost += 1
                progress.unreachable += 1
                progress.detail = f"unreachable: connection lost during {task}: {message}"
                self._listener(host, "unreachable", progress)
            else:
                progress.failed += 1
                progress.detail = f"{task}: {message}"
                self._listener(host, "failed", progress)
        elif kind == "runner_on_unreachable":
            progress.unreachable += 1
            progress.detail = f"unreachable: {_first_line(data.get('res', {}).get('msg'))}"
            self._listener(host, "unreachable", progress)
        return True

    def outcomes(self) -> list[HostOutcome]:
        result = []
        for host, progress in self.state.hosts.items():
            recap = self.state.recap.get(host, {})
            counts = {k: recap.get(k, getattr(progress, k))
                      for k in ("ok", "changed", "failed", "unreachable")}
            if progress.lost and "failed" in recap:    # Ansible's recap counts them failed
                counts["failed"] = max(0, counts["failed"] - progress.lost)
                counts["unreachable"] = recap.get("unreachable", 0) + progress.lost
            if counts["unreachable"]:
                outcome = "unreachable"
            elif counts["failed"] or not progress.seen:
                outcome = "failed"
            elif progress.mok_enrollment_pending:
                outcome = Outcome.MOK_ENROLLMENT_PENDING
            elif progress.reboot_pending:
                outcome = Outcome.REBOOT_PENDING
            else:
                outcome = "converged"
            detail = progress.detail or ("never ran: the play stopped before it"
                                         if not progress.seen else "")
            if outcome == Outcome.REBOOT_PENDING:
                detail = "the new driver loads after a reboot: rerun with --allow-reboot"
            elif outcome == Outcome.MOK_ENROLLMENT_PENDING:
                detail = ("the signing certificate waits for MokManager: reboot at the console, "
                          "enrol it with the one-time password, then provision again")
            result.append(HostOutcome(host, outcome, counts["ok"], counts["changed"],
                                      counts["failed"], counts["unreachable"],
                                      progress.reboot_pending, detail))
        return result


def run_playbook(run_dir: Path, run_id: str, options: Options, listener: Listener
                 ) -> tuple[list[HostOutcome], Path, dict[str, Touched]]:
    """Run the playbook (`run_id`: its ident in the run's directory); returns each host's
    outcome, the path of the full log, and the files and units each host's task results
    named."""
    if not PLAYBOOK.is_file():
        raise EnvironmentProblem(f"{PLAYBOOK} not found: this gpuprov install lacks its "
                                 f"collection {collection.FQCN}; reinstall it")
    extravars: dict[str, object] = {"gpuprov_allow_reboot": options.allow_reboot,
                                    "gpuprov_reboot_serial": options.reboot_serial}
    if options.serial:
        extravars["gpuprov_serial"] = options.serial
    extravars.update(options.lock_overrides)
    if options.quick_check_dir:
        extravars["gpuprov_slurm_healthcheck_files"] = str(options.quick_check_dir)
    if options.racks:
        extravars["gpuprov_racks"] = options.racks
    cmdline = " ".join(flag for flag, wanted in (("--check", options.check),
                                                  ("--diff", options.diff)) if wanted)
    sink = EventSink(options.hosts, listener)
    run_dir.mkdir(parents=True, exist_ok=True)
    # ansible-playbook from the environment gpuprov runs in, whatever PATH says
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = ansible_runner.run(
        private_data_dir=str(run_dir),
        ident=run_id,
        project_dir=str(PLAYBOOK.parent),
        playbook=PLAYBOOK.name,
        inventory=str(options.inventory.resolve()),
        limit=",".join(options.hosts),
        tags=options.tags,
        forks=options.forks,
        extravars=extravars,
        cmdline=cmdline or None,
        envvars={**ANSIBLE_SETTINGS, **strategy_settings(options.strategy), "PATH": path,
                 "ANSIBLE_COLLECTIONS_PATH": str(collection.collections_path())},
        event_handler=sink,
        quiet=True,
    )
    log = run_dir / "artifacts" / run_id / "stdout"
    if result.rc != 0 and not any(p.seen for p in sink.state.hosts.values()):
        # nothing reached a host: a playbook or environment problem, not a host's
        text = log.read_text(errors="replace").strip() if log.exists() else ""
        reason = text.splitlines()[-1] if text else f"ansible-runner {result.status}"
        raise CommandFailed(f"ansible-playbook ran no task (rc {result.rc}): {reason} "
                            f"(log: {log})")
    return sink.outcomes(), log, sink.touched
