"""Carry out policy.py's steps around a run: hold the nodes before, act on the verdicts
after; print each step, record it and its result in the ledger. `--shadow` prints and
records what would be done and changes nothing in Slurm.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuprov.hardware_history import Offender, quarantine_reason
from gpuprov.ledger import Ledger, SlurmAction
from gpuprov.lifecycle import NodeStatus
from gpuprov.model import HostOutcome, NodeResult
from gpuprov.settings import SlurmSettings
from gpuprov.slurm import policy
from gpuprov.slurm.cluster import Slurm, SlurmError, SlurmNode, connect
from gpuprov.slurm.policy import Step

POLL_S = 2.0


@dataclass
class SlurmGate:
    settings: SlurmSettings
    ledger: Ledger
    run_id: str
    names: dict[str, str]            # inventory host -> Slurm node name
    shadow: bool
    say: Callable[[str], None]       # one line to the operator
    slurm: Slurm = field(init=False)
    before: dict[str, SlurmNode] = field(init=False)
    held: set[str] = field(default_factory=set)   # Slurm nodes this run drained to run

    def __post_init__(self) -> None:
        self.slurm = Slurm(self.settings.ssh_host, self.settings.ssh_config)

    @classmethod
    def opened(cls, settings: SlurmSettings, ledger: Ledger, run_id: str,
               variables: dict[str, dict], shadow: bool, say: Callable[[str], None]
               ) -> SlurmGate:
        """The gate for the hosts of `variables` (host -> its inventory variables, which
        may name its Slurm node), once slurmctld answered and knows every one of them."""
        gate = cls(settings, ledger, run_id, policy.slurm_names(list(variables), variables),
                   shadow, say)
        gate.check()
        return gate

    def check(self) -> None:
        """Before the run starts: slurmctld answers and knows every node (else exit 2)."""
        self.before = connect(self.slurm)
        policy.check_known(self.names, self.before)

    def hold(self, purpose: str) -> list[str]:
        """Drain the nodes in service, wait (bounded) until none runs a job; the hosts
        cleared to run. A node whose jobs outlast the wait is refused and put back."""
        refused: set[str] = set()
        for step in policy.to_hold(self.names, self.before, purpose, self.run_id):
            if self.shadow:
                self.record(step, "shadow")
            elif self._carry_out(step):
                self.held.add(step.node)
            else:
                refused.add(step.host)
        watched = {h: n for h, n in self.names.items() if h not in refused}
        busy = self._wait_idle(watched)
        for host in busy:
            name = self.names[host]
            jobs = "; ".join(str(j) for j in busy[host]) or "jobs"
            waited = "not waited for (shadow)" if self.shadow else \
                f"still running after {self.settings.drain_timeout_s:g}s"
            self.record(Step(host, name, "refuse", f"{jobs}: {waited}"),
                         "shadow" if self.shadow else "done")
            if name in self.held:
                self._carry_out(Step(host, name, "restore", "its jobs did not end in time"))
                self.held.discard(name)
            refused.add(host)
        return [h for h in self.names if h not in refused]

    def _wait_idle(self, watched: dict[str, str]) -> dict[str, list]:
        """Host -> what still runs on it once the wait is over ({} when all are idle)."""
        deadline = time.monotonic() + (0 if self.shadow else self.settings.drain_timeout_s)
        try:
            while True:
                states = self.slurm.nodes()
                busy = {h: n for h, n in watched.items() if states[n].busy}
                if not busy or time.monotonic() >= deadline:
                    # the jobs, node by node: only for the few that outlast the wait
                    return {h: self.slurm.jobs_on([n]) or [f"state {states[n].state}"]
                            for h, n in busy.items()}
                time.sleep(POLL_S)
        except SlurmError as exc:
            return {h: [f"Slurm did not answer: {exc}"] for h in watched}

    def act_on(self, results: dict[str, NodeResult],
               quarantined: dict[str, list[Offender]] | None = None) -> str | None:
        """The verdicts' steps (a quarantined node stays drained whatever its verdict);
        the circuit breaker's message when it tripped."""
        try:
            now = self.slurm.nodes()
        except SlurmError as exc:
            for step in policy.unanswered(self.names, self.before, results, self.held):
                self.record(step, "shadow" if self.shadow else "failed",
                             f"slurmctld not reachable after the run: {exc}")
            return f"slurmctld not reachable after the run: {exc}"
        steps, tripped = policy.after_verdicts(
            self.names, self.before, now, results, self.held, self.settings.max_drain_share,
            {host: quarantine_reason(found) for host, found in (quarantined or {}).items()})
        if tripped:
            self.say(f"slurm: {tripped}")
        for step in steps:
            if self.shadow and step.changes:
                self.record(step, "shadow")
            elif step.changes:
                self._carry_out(step)
            else:
                self.record(step, "none")
        return tripped

    def after_provisioning(self, outcomes: dict[str, HostOutcome]) -> None:
        """Nodes drained to be provisioned stay drained until a validation accepts them
        (`validate --slurm` resumes them): the reason says what they wait for."""
        for host, name in self.names.items():
            if name not in self.held:
                continue
            outcome = outcomes.get(host)
            what = ("provisioned, awaiting validation" if outcome and outcome.outcome ==
                    "converged" else f"provisioning {outcome.outcome if outcome else 'not run'}"
                    f"{': ' + outcome.detail if outcome and outcome.detail else ''}")
            self._carry_out(Step(host, name, "drain",
                                 policy.holding_reason(policy.shorten(what), self.run_id)))

    def publish(self, statuses: dict[str, NodeStatus]) -> None:
        """Each judged node's state on its Slurm node, for schedulers and people: `Extra`
        JSON with gpuprov_state (an acceptance with observed findings says so), gpuprov_run
        and gpuprov_until (one `sinfo`, then one `scontrol update` per node)."""
        names = {host: self.names[host] for host in statuses if host in self.names}
        try:
            current = self.slurm.extras() if names else {}
        except SlurmError as exc:
            for host, name in names.items():
                self.record(Step(host, name, "publish", "Extra not read"), "failed", str(exc))
            return
        for host, name in names.items():
            status = statuses[host]
            run_id = status.verdict.run_id if status.verdict else self.run_id
            extra = policy.extra_for(current.get(name, ""), str(status.state), run_id,
                                     status.expires_at)
            if extra is None:
                self.record(Step(host, name, "keep", "Extra is another tool's, not JSON: "
                                                      f"{policy.shorten(current[name])}"), "none")
                continue
            step = Step(host, name, "publish", extra)
            if self.shadow:
                self.record(step, "shadow")
                continue
            try:
                self.slurm.set_extra(name, extra)
            except SlurmError as exc:
                self.record(step, "failed", str(exc))
                continue
            self.record(step, "done")

    def release_unjudged(self, judged: set[str]) -> None:
        """Nodes drained to run that got no verdict (the run stopped early): put back."""
        for host, name in self.names.items():
            if name in self.held and host not in judged:
                self._carry_out(Step(host, name, "restore", "no verdict in this run"))

    def _carry_out(self, step: Step) -> bool:
        try:
            if step.action == "drain":
                self.slurm.drain(step.node, step.reason)
            else:
                self.slurm.resume(step.node)
        except SlurmError as exc:
            self.record(step, "failed", str(exc))
            return False
        self.record(step, "done")
        return True

    def record(self, step: Step, result: str, detail: str = "") -> None:
        words = {"done": "", "shadow": " (shadow: not done)", "none": "",
                 "failed": f" FAILED: {detail}"}[result]
        verb = {"drain": "drained", "resume": "resumed", "restore": "put back in service",
                "keep": "left as it is", "hold-back": "not drained (circuit breaker)",
                "refuse": "not run", "publish": "Extra set"}[step.action]
        self.say(f"slurm: {step.host}: {verb}{words}: {step.reason}")
        self.ledger.record_slurm(self.run_id, SlurmAction(
            step.host, step.node, step.action, step.reason, result, detail))

