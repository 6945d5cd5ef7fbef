"""Each host's end state reaches gpuprov through custom stats, not a task-name contract:
the real playbooks/report_state.yml under ansible-runner, on local connections."""

import json
import sys
from pathlib import Path

import ansible_runner
import pytest

from gpuprov.provision.runner import (
    ANSIBLE_SETTINGS,
    PLAYBOOK,
    EventSink,
    connection_lost,
    strategy_settings,
)


@pytest.mark.parametrize("strategy", ["mitogen", "linear"])
def test_reboot_pending_comes_from_set_stats(tmp_path, strategy):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[all]\n"
        f"waits ansible_connection=local ansible_python_interpreter={sys.executable} "
        "nvidia_driver_reboot_pending=true\n"
        f"ready ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        f"enrols ansible_connection=local ansible_python_interpreter={sys.executable} "
        "nvidia_driver_reboot_pending=true nvidia_driver_mok_enrollment_pending=true\n")
    sink = EventSink(["waits", "ready", "enrols"], lambda *args: None)
    (tmp_path / "run").mkdir()
    result = ansible_runner.run(
        private_data_dir=str(tmp_path / "run"), project_dir=str(PLAYBOOK.parent),
        playbook="report_state.yml", inventory=str(inventory), event_handler=sink,
        envvars={**{k: v for k, v in ANSIBLE_SETTINGS.items()
                    if k != "ANSIBLE_COLLECTIONS_PATH"}, **strategy_settings(strategy)},
        quiet=True)
    assert result.rc == 0
    outcomes = {o.host: o for o in sink.outcomes()}
    assert outcomes["waits"].outcome == "reboot-pending" and outcomes["waits"].reboot_pending
    assert outcomes["ready"].outcome == "converged" and not outcomes["ready"].reboot_pending
    # the console step comes first: not sent to a reboot nobody answers
    assert outcomes["enrols"].outcome == "mok-enrollment-pending"
    # what the run keeps: results, not a file per host and task saying it started
    kept = {json.loads(f.read_text())["event"]
            for f in (tmp_path / "run" / "artifacts").glob("*/job_events/*.json")}
    assert "runner_on_ok" in kept and "runner_on_start" not in kept


def test_the_provisioning_playbook_ends_with_the_state_report():
    text = PLAYBOOK.read_text()
    assert text.rstrip().endswith("ansible.builtin.import_playbook: report_state.yml")


LOST = json.loads((Path(__file__).parent.parent / "fixtures" / "mitogen" /
                   "connection-lost-mid-task.json").read_text())["res"]


def _feed(sink, host, *events):
    for kind, res in events:
        sink({"event": kind, "event_data": {"host": host, "task": "Install docker.io",
                                            "res": res}})


def test_a_connection_mitogen_lost_mid_task_is_unreachable_not_failed():
    """A node powered off while Mitogen forwards a module: Ansible's recap counts a failed
    task, the operator needs to hear that the node went dark (the real result)."""
    sink = EventSink(["dark", "broken"], lambda *args: None)
    _feed(sink, "dark", ("runner_on_ok", {}), ("runner_on_failed", LOST))
    _feed(sink, "broken", ("runner_on_failed", {"msg": "No package matching 'docker.io'"}))
    sink({"event": "playbook_on_stats", "event_data": {
        "ok": {"dark": 1}, "failures": {"dark": 1, "broken": 1}, "dark": {}}})
    outcomes = {o.host: o for o in sink.outcomes()}
    dark = outcomes["dark"]
    assert (dark.outcome, dark.failed, dark.unreachable) == ("unreachable", 0, 1)
    assert dark.detail.startswith("unreachable: connection lost during Install docker.io: "
                                  "Task failed: builtins.AttributeError")
    assert (outcomes["broken"].outcome, outcomes["broken"].failed) == ("failed", 1)


def test_a_module_failure_naming_mitogen_elsewhere_stays_failed():
    assert not connection_lost({"msg": "EOF on stream"})   # no Mitogen frame: a module's words
    assert not connection_lost({"msg": "pip: mitogen 0.3.54 installed"})
    assert connection_lost(LOST) and connection_lost({"unreachable": True})
