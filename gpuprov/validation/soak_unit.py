"""The soak on the node under a transient systemd unit, so it outlives the controller.

A burn-in runs for hours; a controller's SSH session, laptop or CI job may not. The soak
(gpu-burn under the telemetry sampler) therefore runs as `systemd-run --unit
gpuprov-burn-in-<run>` and writes everything it produces into its own directory on the
node (BURN_IN_DIR/<run>/: its plan, gpu-burn's log and exit status, the sampler's CSV and
exit status, and `finished` last). The controller only polls it. A validation started
again after the controller died adopts the burn-in still running (or finished and not yet
collected) whose plan is the one it would start — same length, load and sampling — and
judges the node from what the node recorded. Any other burn-in there is a dead controller's
and is stopped and removed (one whose unit vanished unfinished, the node rebooted, too); a
new one starts.

systemd stops the unit, and every process in it, at its RuntimeMaxSec (the soak plus
RUNTIME_MARGIN_S): a hung gpu-burn never outlives its plan. What this relies on, as systemd
documents it: `systemd-run --unit NAME --collect --property=…` starts a transient service
and unloads it once it ended, failed or not (systemd-run(1)); RuntimeMaxSec= stops a
service running longer (systemd.service(5)), killing every process of its control group
(systemd.kill(5)); `systemctl is-active --quiet` exits 0 only while it is active
(systemctl(1)). The sampler stopped by `kill` exits 0: nvidia-smi's loop ends on SIGTERM
with status 0 (driver 580, tests/fixtures/query-gpu/h200-580.159.04-sampler-tc-fp32-fp64.txt);
143, 128 + SIGTERM's 15 as POSIX sh reports a signalled child to `wait`, is taken too.

Where systemd is not PID 1 or `systemd-run` is absent (a container, some VMs, a validation
a scheduler started inside a job), the same script runs supervised without systemd: started
with `setsid -f` in a session of its own (setsid(1)) that outlives the controller's SSH
session, under `timeout` (coreutils timeout(1): it runs the command in a process group of
its own and, the limit reached, signals that whole group, so a hung gpu-burn still never
outlives its plan), its process id kept in the burn-in's directory beside the plan. It is
"running" while that process lives and still runs this burn-in's script (its command line
names it: a reused pid is not it), and stopped by signalling timeout, which passes the signal
on to its whole group. The plan
records which supervisor ran it, so a later run adopts or stops it the same way.

A soak is adopted only from the node's current boot: after a reboot the kernel log and the
GPUs' counters no longer cover it. An adopted soak began before this run's before-soak
snapshot, so the NVLink error counters' before/after difference covers only its remainder;
the kernel log (the whole boot) and the ECC and remap counters (absolute values) cover all
of it.
"""

from __future__ import annotations

import base64
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

BURN_IN_DIR = "/var/lib/gpuprov/burn-in"
SYSTEMD, SETSID = "systemd", "setsid"     # what supervises a burn-in (Plan.supervisor)
# systemd runs the unit only where it is PID 1 (sd_booted(3): /run/systemd/system exists)
# and systemd-run is installed; elsewhere setsid and timeout (util-linux, coreutils)
SUPERVISOR_TEST = ("command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ] "
                   f"&& echo {SYSTEMD} || echo {SETSID}")
BOOT_ID = "/proc/sys/kernel/random/boot_id"   # a new random id every boot (proc(5))
UNIT_PREFIX = "gpuprov-burn-in-"
RUNTIME_MARGIN_S = 120
# how often a plain progress line reports a long soak (a live table redraws on its own)
REPORT_EVERY_S = 600


@dataclass(frozen=True)
class Plan:
    run_id: str
    seconds: int
    flags: str            # gpu-burn's load flags ("-tc ")
    sampler: str          # the telemetry sampler's command
    started: float = 0.0  # the node's clock when the unit started
    boot_id: str = ""     # the node's boot it ran in (proc(5): /proc/sys/kernel/random/boot_id)
    supervisor: str = SYSTEMD   # systemd (a transient unit) or setsid (no systemd)

    @property
    def directory(self) -> str:
        return f"{BURN_IN_DIR}/{self.run_id}"

    @property
    def unit(self) -> str:
        return f"{UNIT_PREFIX}{self.run_id}"

    @property
    def pid_file(self) -> str:
        """Where a burn-in supervised without systemd keeps its process id."""
        return f"{self.directory}/pid"

    def same_work(self, other: Plan) -> bool:
        return (self.seconds, self.flags, self.sampler) == (other.seconds, other.flags,
                                                            other.sampler)

    def as_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "seconds": self.seconds, "flags": self.flags,
                           "sampler": self.sampler, "started": self.started,
                           "boot_id": self.boot_id, "supervisor": self.supervisor})


def script(plan: Plan, gpu_burn_dir: str) -> str:
    """What the unit runs: the sampler in the background for exactly as long as gpu-burn
    runs; each exit status kept (the sampler's tells one we stopped, 0 or 143, from one that
    failed on its own), `finished` written last."""
    d = plan.directory
    return (f"#!/bin/sh\n# gpuprov burn-in {plan.run_id} (unit {plan.unit})\n"
            f"{plan.sampler} > {d}/gpu-telemetry.csv 2>&1 &\nS=$!\n"
            f"cd {shlex.quote(gpu_burn_dir)} && ./gpu_burn {plan.flags}{plan.seconds} "
            f"> {d}/gpu-burn.log 2>&1\necho $? > {d}/gpu-burn.status\n"
            f"kill $S 2>/dev/null\nwait $S\necho $? > {d}/gpu-telemetry.status\n"
            f"touch {d}/finished\n")


def find_adoptable(run, wanted: Plan) -> Plan | None:
    """The newest burn-in on the node doing `wanted`'s work, running or finished and not
    collected. Every other one is a dead controller's (no live run holds the node while
    this one does): stopped if it still runs — two gpu-burns must not share the GPUs —
    and removed."""
    boot, *listing = run(f"cat {BOOT_ID}; for p in {BURN_IN_DIR}/*/plan.json; do "
                         "[ -f \"$p\" ] && cat \"$p\" && echo; done; true").stdout.splitlines()
    found = []
    for line in listing:
        try:
            data = json.loads(line)
            found.append(Plan(str(data["run_id"]), int(data["seconds"]), str(data["flags"]),
                              str(data["sampler"]), float(data["started"]),
                              str(data.get("boot_id", "")),
                              str(data.get("supervisor", SYSTEMD))))
        except (ValueError, KeyError, TypeError):
            continue
    adopted = None
    for plan in sorted(found, key=lambda p: p.started, reverse=True):
        state = status(run, plan)
        # only a soak of this boot: the kernel log and counters the run reads must cover it
        if (adopted is None and plan.same_work(wanted) and plan.run_id != wanted.run_id
                and state != "gone" and plan.boot_id == boot.strip()):
            adopted = plan
            continue
        if state == "running":
            stop(run, plan)
        run(f"rm -rf {plan.directory}")
    return adopted


def stop(run, plan: Plan) -> None:
    """A dead controller's burn-in stopped, every process of it."""
    if plan.supervisor == SETSID:
        # timeout itself: on SIGTERM it sends the signal on to its whole process group
        # (coreutils timeout.c, `cleanup`), so sh's builtin kill needs no negative pid
        run(f"kill -TERM $(cat {plan.pid_file}) 2>/dev/null; true")
    else:
        run(f"systemctl stop {plan.unit}")


def start(run, plan: Plan, gpu_burn_dir: str) -> Plan:
    """The burn-in started under systemd where it runs the node, else under setsid; the
    plan with the node's start time and its supervisor. RuntimeError with the supervisor's
    own words when it could not start."""
    d = plan.directory
    started, boot, supervisor = [*run(f"mkdir -p {d} && date +%s && cat {BOOT_ID} && "
                                      f"{{ {SUPERVISOR_TEST}; }}").stdout.split(),
                                 "0", "", SYSTEMD][:3]
    plan = Plan(plan.run_id, plan.seconds, plan.flags, plan.sampler, float(started), boot,
                supervisor)
    upload = f"{d}/soak.sh"
    for path, text in ((upload, script(plan, gpu_burn_dir)), (f"{d}/plan.json", plan.as_json())):
        payload = base64.b64encode(text.encode()).decode()
        run(f"echo {payload} | base64 -d > {path}", label=f"upload {path}")
    limit = plan.seconds + RUNTIME_MARGIN_S
    if supervisor == SETSID:
        # the shell writes its pid, then becomes timeout (exec: same pid, the group leader)
        result = run(f"setsid -f /bin/sh -c 'echo $$ > {plan.pid_file}; exec timeout -k 10 "
                     f"{limit} /bin/sh {upload}' < /dev/null > /dev/null 2>&1 && "
                     f"for i in 1 2 3 4 5 6 7 8 9 10; do [ -s {plan.pid_file} ] && break; "
                     f"sleep 0.2; done; [ -s {plan.pid_file} ]")
        what = "setsid"
    else:
        result = run(f"systemd-run --unit {plan.unit} --collect --quiet "
                     f"--description 'gpuprov burn-in {plan.run_id}' "
                     f"--property RuntimeMaxSec={limit} /bin/sh {upload}")
        what = "systemd-run"
    if result.rc != 0:
        raise RuntimeError((result.stdout + result.stderr).strip() or
                           f"{what} exited {result.rc}")
    return plan


def status(run, plan: Plan) -> str:
    """finished, running, or gone (the unit ended without finishing: killed, rebooted)."""
    # `finished` asked again after the unit is seen inactive: it may have finished between
    # the first look and systemctl's answer
    done = f"[ -e {plan.directory}/finished ]"
    if plan.supervisor == SETSID:
        # alive, and still this burn-in's script (a reused pid runs something else)
        alive = (f"grep -qs {shlex.quote(plan.directory + '/soak.sh')} "
                 f"/proc/$(cat {plan.pid_file} 2>/dev/null || echo 0)/cmdline")
    else:
        alive = f"systemctl is-active --quiet {plan.unit}"
    return run(f"if {done}; then echo finished; elif {alive}; "
               f"then echo running; elif {done}; then echo finished; else echo gone; fi",
               logged=False).stdout.strip() or "gone"


def elapsed(run, plan: Plan) -> float:
    now = run("date +%s", logged=False).stdout.strip()
    return max(0.0, float(now or plan.started) - plan.started)


def wait(run, plan: Plan, report: Callable[[float], None]) -> str:
    """Poll until the burn-in ends; `report` gets the seconds elapsed now and then. Its
    final state: finished, or gone (the unit ended without finishing)."""
    poll = min(10.0, max(1.0, plan.seconds / 20))
    last_report = time.monotonic()
    while True:
        state = status(run, plan)
        if state != "running":
            return state
        if time.monotonic() - last_report >= REPORT_EVERY_S:
            report(elapsed(run, plan))
            last_report = time.monotonic()
        time.sleep(poll)
