"""Issue 57: observe mode. A check the configuration observes (site-wide or for a profile)
is judged and reported, and does not reject: a node that fails only observed checks is
accepted, its verdict, JSON and metrics saying what the check would have done. Real
judgements over evidence built from the fixtures; the CLI as a subprocess."""

from __future__ import annotations

import json
import os

import pytest

from gpuprov import metrics
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.ledger import Ledger
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb
from tests.conftest import gpuprov
from tests.unit.test_metrics import samples, value

H100 = load_profile("h100-sxm-8")
# a GPU 12 C hotter than its siblings under load: load_thermal fails, nothing else
HOT = {3: 12}


@pytest.fixture
def hot_node(tmp_path):
    return eb.replace(eb.healthy_h100(tmp_path / "node07"), "gpu-telemetry.csv",
                      eb.telemetry(hotter=HOT))


def _config(tmp_path, text: str) -> dict:
    path = tmp_path / "config.yml"
    path.write_text(text)
    return {**os.environ, "GPUPROV_CONFIG": str(path)}


def test_an_observed_failure_is_reported_and_does_not_reject(hot_node):
    plain = judge(Evidence(hot_node), H100, None, observe=())
    assert plain.verdict == "rejected"
    assert [c.id for c in plain.checks if c.blocking] == ["load_thermal"]
    observed = judge(Evidence(hot_node), H100, None, observe=["load_thermal"])
    assert observed.verdict == "accepted"
    check = next(c for c in observed.checks if c.id == "load_thermal")
    assert (check.status, check.action) == ("observed", "reseat-or-inspect")
    assert check.summary.startswith("observed: would reject: GPU 3 (")
    assert observed.reason() == "all checks passed; observed: would reject: load_thermal"


@pytest.mark.parametrize("config", [
    "observe: [load_thermal]\n",
    "observe: {checks: [load_thermal]}\n",
    "observe: {profiles: {h100-sxm-8: [load_thermal]}}\n",
])
def test_evaluate_observes_what_the_configuration_names(hot_node, tmp_path, config):
    result = gpuprov("evaluate", str(hot_node), "--profile", "h100-sxm-8", "--json",
                     env=_config(tmp_path, config), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["load_thermal"]["status"] == "observed"


def test_another_profile_s_observe_list_does_not_apply(hot_node, tmp_path):
    env = _config(tmp_path, "observe: {profiles: {a100-sxm-8: [load_thermal]}}\n")
    result = gpuprov("evaluate", str(hot_node), "--profile", "h100-sxm-8", env=env, timeout=60)
    assert result.returncode == 1 and "verdict: REJECTED" in result.stdout


@pytest.mark.parametrize("config, message", [
    ("observe: [no_such_check]\n", "observe: unknown check 'no_such_check'"),
    ("observe: {checks: load_thermal}\n", "observe.checks: expected a list of check ids"),
    ("observe: {enforce: [x]}\n", "observe.enforce: unknown setting"),
    # issue 67: what makes a node usable at all cannot be observed
    ("observe: [load_thermal, kernel_log]\n",
     "observe: 'kernel_log' cannot be observed: it judges the kernel's fatal GPU events"),
    ("observe: {profiles: {h100-sxm-8: [gpu_inventory]}}\n",
     "observe: 'gpu_inventory' cannot be observed: it judges the GPUs' count and identity"),
    ("observe: [driver_version]\n", "observe: 'driver_version' cannot be observed"),
    ("observe: [rack]\n", "observe: 'rack' cannot be observed: it judges the rack's NVLink "
                          "domain"),
])
def test_a_bad_observe_setting_is_one_line_exit_2(hot_node, tmp_path, config, message):
    result = gpuprov("evaluate", str(hot_node), "--profile", "h100-sxm-8",
                     env=_config(tmp_path, config), timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1


def _recorded_observed(hot_node, tmp_path) -> Ledger:
    """A ledger holding node07 accepted because load_thermal was observed."""
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.start_run("v1", "validate", "/inv/rack.ini", ["node07"], {}, {}, "/ev")
    judgement = judge(Evidence(hot_node), H100, None, observe=["load_thermal"])
    job = NodeJob(NodeSettings(node="node07", profile=H100, lock=None, run_id="v1",
                               soak_seconds=30), hot_node, hot_node, hot_node)
    ledger.record_node("v1", _result(job, 1.0, judgement.verdict, judgement.reason(),
                                     judgement))
    ledger.finish_validation("v1")
    return ledger


def test_the_metrics_name_the_observed_check_and_no_failing_one(hot_node, tmp_path):
    ledger = _recorded_observed(hot_node, tmp_path)
    [recorded] = ledger.node_results(run_id="v1")
    assert (recorded.verdict, recorded.reason) == (
        "accepted", "all checks passed; observed: would reject: load_thermal")
    found = samples(metrics.exposition(metrics.fleet_registry(ledger, ["node07"])))
    assert value(found, "gpuprov_node_check_observed", node="node07", check="load_thermal",
                 action="reseat-or-inspect") == 1
    assert not [k for k in found if k[0] == "gpuprov_node_check_failing"]


def test_an_acceptance_with_observed_findings_is_its_own_state_everywhere(hot_node, tmp_path):
    """Issue 67: `nodes`, the metrics and Slurm's resume say accepted-observed, and
    `certify` refuses it, naming what it would have rejected."""
    from gpuprov.slurm import policy
    from gpuprov.slurm.cluster import SlurmNode
    ledger = _recorded_observed(hot_node, tmp_path)
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path),
           "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    env.pop("GPUPROV_INVENTORY", None)
    listing = gpuprov("nodes", env=env, cwd=tmp_path, timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert [line.split()[:2] for line in listing.stdout.splitlines()[1:]] == [
        ["node07", "accepted-observed"]], listing.stdout
    found = samples(metrics.exposition(metrics.fleet_registry(ledger, ["node07"])))
    assert value(found, "gpuprov_node_state", node="node07", state="accepted-observed") == 1
    assert value(found, "gpuprov_node_state", node="node07", state="accepted") == 0
    [recorded] = ledger.node_results(run_id="v1")
    drained = SlurmNode("node07", "drained", "gpuprov: validating (run v1)", ("gpu",))
    steps, _ = policy.after_verdicts({"node07": "node07"}, {"node07": drained},
                                     {"node07": drained}, {"node07": recorded}, {"node07"}, 1.0)
    assert [(s.action, s.reason) for s in steps] == [
        ("resume", "accepted with observed findings (would reject: load_thermal)")]
    key = tmp_path / "key"
    import subprocess
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    refused = gpuprov("certify", "node07", "--key", str(key), env=env, cwd=tmp_path, timeout=60)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "node07: accepted-observed (would reject: load_thermal) (run v1): only an " \
        "accepted node is certified; nothing written" in refused.stderr
    assert not list(tmp_path.glob("gpuprov-acceptance-*"))
