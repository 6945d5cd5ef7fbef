"""testinfra entry point to gpuprov's validation: the same collectors and evaluators as
`gpuprov validate`, driven by pytest and testinfra's `host` fixture.

    pytest validation/ --hosts=ansible://node07 --ansible-inventory=rack3.ini \\
        --profile h100-sxm-8 --soak 60 --evidence-dir ./evidence

Each host gets an evidence directory (EVIDENCE_DIR/<run id>/<host>/) that
`gpuprov evaluate` judges to the same result. No ledger entry is written: record verdicts
with `gpuprov validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuprov.checks.catalog import stage_checks
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.profiles import load_profile
from gpuprov.runs import new_run_id
from gpuprov.validation.collect import Collector, NodeSettings


def pytest_addoption(parser):
    group = parser.getgroup("gpuprov")
    group.addoption("--profile", required=True, help="hardware profile name or path")
    group.addoption("--lock", default=None, help="versions lock (group_vars YAML)")
    group.addoption("--soak", type=int, default=30, help="gpu-burn seconds (default 30)")
    group.addoption("--evidence-dir", default="evidence", help="where evidence goes")
    group.addoption("--soak-after-identity-failure", action="store_true")


@dataclass
class Node:
    collector: Collector
    failing_identity: list[str] = field(default_factory=list)

    def skip_unless_soaked(self, what: str) -> None:
        if self.failing_identity and not self.collector.settings.soak_after_identity_failure:
            pytest.skip(f"identity checks failed: {what}")

    def assert_checks(self, stage: str) -> None:
        """The checks `stage`'s evidence decides, judged with the stages after it not yet
        collected."""
        s = self.collector.settings
        judgement = judge(Evidence(self.collector.directory), s.profile, s.lock, strict=False,
                          only=stage_checks(stage), upto=stage)
        bad = [f"{c.id}: {c.status}: {c.summary}" for c in judgement.checks if c.blocking]
        assert not bad, "\n".join(bad)


RUN_ID = new_run_id("testinfra")


@pytest.fixture(scope="module")
def node(host, request) -> Node:
    options = request.config.option
    name = host.backend.get_hostname()
    # an ansible:// host brings its inventory variables: the lock, the validate_* settings
    variables = host.ansible.get_variables() if host.backend.NAME == "ansible" else {}
    lock = (Lock.load(Path(options.lock)) if options.lock
            else Lock.of_host(variables, f"host {name}"))
    settings = NodeSettings.from_vars(
        name, variables, profile=load_profile(options.profile), lock=lock, run_id=RUN_ID,
        soak_seconds=options.soak, soak_after_identity_failure=options.soak_after_identity_failure)
    collector = Collector(host, Path(options.evidence_dir) / RUN_ID / name, settings)
    yield Node(collector)
    collector.finish()
