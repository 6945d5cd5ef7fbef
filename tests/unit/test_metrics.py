"""Prometheus metrics from ledger records of real judgements: what they say, served by
Debian's real node_exporter from its textfile directory and scraped over HTTP on loopback,
clean under `promtool check metrics`; the example alert rules under `promtool test rules`;
bad settings one line, exit 2."""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuprov import metrics
from gpuprov.lifecycle import NodeState
from gpuprov.model import HostOutcome
from tests.conftest import BIN, REPO, gpuprov

LOCK = {"driver_version": "550.90.07", "cuda_version": "12.4", "torch_version": "2.5.1"}


@pytest.fixture
def fleet(recorded_ledger):
    """node07 accepted, node08 rejected (gpu-burn errors), node08 last provisioned failed,
    node07's lock recorded by its provisioning run."""
    recorded_ledger.start_run("p1", "provision", "/inv/rack3.ini", ["node07", "node08"],
                              {"check": False}, {"node07": LOCK}, None)
    recorded_ledger.finish_run("p1", [HostOutcome("node07", "converged", ok=80),
                                      HostOutcome("node08", "failed", failed=1, detail="x")])
    return recorded_ledger


def samples(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def test_the_metrics_say_what_the_ledger_holds(fleet, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))     # no configuration file
    monkeypatch.delenv("GPUPROV_CONFIG", raising=False)
    found = samples(metrics.exposition(metrics.fleet_registry(fleet, ["node07", "node09"])))
    states = {(dict(k)["node"], dict(k)["state"]): v for (name, k), v in found.items()
              if name == "gpuprov_node_state"}
    assert {key for key, v in states.items() if v == 1} == {
        ("node07", "accepted"), ("node08", "rejected"), ("node09", "never-validated")}
    assert len(states) == 3 * len(NodeState)        # every state of every node, 0 or 1
    judged = {r.node: r for r in fleet.node_results("v1")}
    assert value(found, "gpuprov_node_last_validation_timestamp_seconds",
                 node="node08") == judged["node08"].judged_at
    assert ("gpuprov_node_last_validation_timestamp_seconds", (("node", "node09"),)) not in found
    # an acceptance ends a week after it (no configuration: the default); a rejection never does
    assert value(found, "gpuprov_node_acceptance_expiry_timestamp_seconds",
                 node="node07") == judged["node07"].judged_at + 7 * 86400
    assert ("gpuprov_node_acceptance_expiry_timestamp_seconds", (("node", "node08"),)) \
        not in found
    assert value(found, "gpuprov_node_check_failing", node="node08", check="gpu_burn",
                 action="rma") == 1
    failing = [dict(k) for (name, k), v in found.items()
               if name == "gpuprov_node_check_failing" and v == 1]
    assert failing == [{"node": "node08", "check": "gpu_burn", "action": "rma"}]
    assert value(found, "gpuprov_gpu_burn_flops", node="node07", gpu="5") == 356000e9
    assert len([k for (name, k) in found if name == "gpuprov_gpu_burn_flops"]) == 16
    assert value(found, "gpuprov_ddp_allreduce_bus_bandwidth_bytes_per_second",
                 node="node07") == 455e9
    assert value(found, "gpuprov_provision_last_outcome", node="node08", outcome="failed") == 1
    assert value(found, "gpuprov_provision_last_outcome", node="node08",
                 outcome="converged") == 0
    assert value(found, "gpuprov_lock_info", node="node07", **LOCK) == 1
    # one rejection is no repeat offender; under a rule of two in a day node08 is quarantined
    assert value(found, "gpuprov_node_quarantined", node="node08") == 0
    config = tmp_path / "config.yml"
    config.write_text("offenders:\n  rejections: 2\n  within: 1d\n")
    monkeypatch.setenv("GPUPROV_CONFIG", str(config))
    rejected = next(r for r in fleet.node_results("v1") if r.node == "node08")
    fleet.start_run("v2", "validate", "/inv/rack3.ini", ["node08"], {}, {}, "/ev")
    fleet.record_node("v2", rejected)
    fleet.finish_validation("v2")
    found = samples(metrics.exposition(metrics.fleet_registry(fleet, ["node07", "node09"])))
    assert {dict(k)["node"]: v for (name, k), v in found.items()
            if name == "gpuprov_node_quarantined"} == {"node07": 0, "node08": 1, "node09": 0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node_exporter(tmp_path):
    """Debian's node_exporter on loopback, reading only its textfile directory."""
    directory = tmp_path / "textfile"
    directory.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [shutil.which("prometheus-node-exporter") or "prometheus-node-exporter",
         f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={directory}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read()
                assert time.monotonic() < deadline, "node_exporter did not start"
                time.sleep(0.1)
        yield directory, url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_node_exporter_serves_them_and_promtool_finds_them_clean(fleet, node_exporter,
                                                                  tmp_path):
    directory, url = node_exporter
    config = tmp_path / "config.yml"
    config.write_text("# metrics not configured\n")
    env = {**os.environ, "GPUPROV_LEDGER": str(tmp_path / "ledger.db"),
           "GPUPROV_CONFIG": str(config), "GPUPROV_METRICS_DIR": ""}
    env.pop("GPUPROV_INVENTORY", None)
    written = gpuprov("metrics", "--textfile", str(directory), env=env, timeout=60,
                      cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert written.stdout == f"metrics: wrote {directory / 'gpuprov.prom'}\n"
    assert sorted(p.name for p in directory.iterdir()) == ["gpuprov.prom"]   # no leftovers
    scraped = urllib.request.urlopen(url, timeout=5).read().decode()
    found = samples(scraped)
    assert value(found, "gpuprov_node_state", node="node08", state="rejected") == 1
    assert value(found, "gpuprov_node_state", node="node07", state="accepted") == 1
    assert value(found, "node_textfile_scrape_error") == 0
    lint = subprocess.run(["promtool", "check", "metrics"], input=(
        directory / "gpuprov.prom").read_text(), capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0 and lint.stdout + lint.stderr == "", lint.stdout + lint.stderr
    # without a directory anywhere, the same exposition on stdout
    printed = gpuprov("metrics", env=env, timeout=60, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert samples(printed.stdout) == samples((directory / "gpuprov.prom").read_text())


def test_the_example_alert_rules_fire_on_these_metrics():
    result = subprocess.run(["promtool", "test", "rules", "gpuprov-alerts.test.yml"],
                            cwd=REPO / "examples/prometheus", capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _read_only(directory: Path, command: list[str]) -> list[str]:
    """Run the command with `directory` read-only to it: a permission for an ordinary user,
    a read-only mount (in a mount namespace of its own) for root, whom modes do not stop."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return command
    return ["unshare", "--mount", "sh", "-c",
            'mount -t tmpfs -o ro,size=64k tmpfs "$0" && exec "$@"', str(directory), *command]


@pytest.mark.parametrize("case", ["read-only", "missing", "config-key"])
def test_a_bad_metrics_setting_is_one_line_exit_2(tmp_path, case):
    directory = tmp_path / "textfile"
    directory.mkdir()
    config = tmp_path / "config.yml"
    config.write_text("metrics:\n  textfile_dir: /nowhere\n")
    env = {**os.environ, "GPUPROV_LEDGER": str(tmp_path / "ledger.db"),
           "GPUPROV_CONFIG": str(config), "GPUPROV_METRICS_DIR": ""}
    command = [str(BIN / "gpuprov"), "metrics"]
    if case == "read-only":
        command = _read_only(directory, [*command, "--textfile", str(directory)])
        message = f"metrics textfile directory {directory} (from --textfile) is not writable"
    elif case == "missing":
        message = ("metrics textfile directory /nowhere (from "
                   f"{config} metrics.textfile_dir) does not exist or is not a directory")
    else:
        config.write_text("metrics:\n  textfile-dir: /tmp\n")
        message = f"{config}: metrics.textfile-dir: unknown setting (known: textfile_dir)"
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"gpuprov: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert list(directory.iterdir()) == []
