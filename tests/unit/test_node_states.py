"""Issue 68: one vocabulary of node states. A ledger holding a node in every state
(lifecycle.NodeState), from real judgements over evidence built from the fixtures; `gpuprov
nodes` and `gpuprov metrics` (both as subprocesses) name the same state for every node."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import NodeState
from gpuprov.model import Verdict
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb
from tests.conftest import gpuprov
from tests.unit.test_metrics import samples

H100 = load_profile("h100-sxm-8")
SHORT = "h200-sxm-8"    # recorded under a profile whose acceptance holds one second


def _record(ledger: Ledger, run_id: str, node: str, directory, observe=(), **change) -> None:
    ledger.start_run(run_id, "validate", "/inv/rack.ini", [node], {}, {}, "/ev")
    job = NodeJob(NodeSettings(node=node, profile=H100, lock=None, run_id=run_id,
                               soak_seconds=30), directory, directory, directory)
    if directory is None:
        result = _result(dataclasses.replace(job, evidence_dir=Path(ledger.path).parent / "n"),
                         1.0, Verdict.UNREACHABLE, "ssh: connect to host timed out", None)
    else:
        judged = judge(Evidence(directory), H100, None, observe=observe)
        result = _result(job, 1.0, judged.verdict, judged.reason(), judged)
    ledger.record_node(run_id, dataclasses.replace(result, **change))
    ledger.finish_validation(run_id)


def test_nodes_and_the_metrics_name_every_state_alike(tmp_path):
    healthy = eb.healthy_h100(tmp_path / "healthy")
    burnt = eb.replace(eb.copy(healthy, tmp_path / "burnt"), "gpu-burn.log", eb.gpu_burn_log(
        [358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))
    unseen = eb.replace(eb.copy(healthy, tmp_path / "unseen"), "gpu-burn.log", None)
    hot = eb.replace(eb.copy(healthy, tmp_path / "hot"), "gpu-telemetry.csv",
                     eb.telemetry(hotter={3: 12}))
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    _record(ledger, "v1", "accepted", healthy)
    _record(ledger, "v2", "observed", hot, observe=["load_thermal"])
    _record(ledger, "v3", "rejected", burnt)
    _record(ledger, "v4", "unreachable", None)
    _record(ledger, "v5", "setup", unseen)
    _record(ledger, "v6", "repaired", healthy)
    _record(ledger, "v7", "expired", healthy, profile=SHORT)
    for run in ("v8", "v9", "v10"):      # three hardware rejections: a repeat offender
        _record(ledger, run, "offender", burnt)
    _record(ledger, "v11", "cut", healthy)
    ledger.record_repair("repaired", "GPU 2 reseated (ticket 7)", "ops@site")
    # a provisioning run of `cut` whose process ended without finishing it (killed)
    subprocess.run([sys.executable, "-c", "import sys; from gpuprov.ledger import Ledger; "
                    "Ledger(sys.argv[1]).start_run('p1', 'provision', '/inv/rack.ini', "
                    "['cut'], {'check': False}, {}, None)", str(ledger.path)], check=True)
    inventory = tmp_path / "rack.ini"
    inventory.write_text("[gpu]\nnew\n")
    config = tmp_path / "config.yml"
    config.write_text(f"acceptance:\n  profiles:\n    {SHORT}: 1s\n")
    time.sleep(1.1)
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path), "GPUPROV_CONFIG": str(config),
           "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    env.pop("GPUPROV_METRICS_DIR", None)
    listed = gpuprov("nodes", "-i", str(inventory), env=env, cwd=tmp_path, timeout=60)
    assert listed.returncode == 0, listed.stderr
    in_nodes = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:]
                if line.strip() and not line.startswith("provision run p1")}
    printed = gpuprov("metrics", "-i", str(inventory), env=env, cwd=tmp_path, timeout=60)
    assert printed.returncode == 0, printed.stderr
    in_metrics = {dict(labels)["node"]: dict(labels)["state"]
                  for (name, labels), v in samples(printed.stdout).items()
                  if name == "gpuprov_node_state" and v == 1}
    assert in_nodes == in_metrics == {
        "new": "never-validated", "accepted": "accepted", "observed": "accepted-observed",
        "rejected": "rejected", "unreachable": "unreachable", "setup": "needs-setup",
        "repaired": "needs-validation", "expired": "expired", "offender": "quarantined",
        "cut": "interrupted"}, listed.stdout
    assert set(in_nodes.values()) == {str(s) for s in NodeState}     # every state, once
    # every node carries every state's series, 0 or 1
    series = [k for k in samples(printed.stdout) if k[0] == "gpuprov_node_state"]
    assert len(series) == len(in_nodes) * len(NodeState)
