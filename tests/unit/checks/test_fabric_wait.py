"""Issue 65: a node whose fabric manager is not running. The driver reports In Progress on
every GPU once it has sent its fabric probe (persistence mode on: always), so "every GPU In
Progress, the unit inactive" is the node's setup, as "every GPU Not Started" is: fix-setup
naming fabric manager, no GPU's hardware action. Fabric manager's own log reporting a fatal
NVSwitch error keeps the hardware's action."""

import re

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import HARDWARE_ACTIONS
from gpuprov.profiles import load_profile
from tests.evidence_builder import healthy_h100, replace

H100 = load_profile("h100-sxm-8")
ACTIVE = "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active"
# fabric manager's own form of an NVSwitch error (tests/fixtures/fabricmanager/: the
# non-fatal 12028 line), worded for the fatal case
FATAL = ("[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch fatal error 12028 on "
         "fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61\n")


def _node(tmp_path, state: str = "In Progress", unit: str = "inactive"):
    node = healthy_h100(tmp_path / "node07")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        text = (node / name).read_text()
        assert len(re.findall(r"(?m)^(\s+State\s+:) Completed$", text)) == 8
        text = re.sub(r"(?m)^(\s+State\s+:) Completed$", rf"\1 {state}", text)
        text = re.sub(r"(?m)^(\s+Status\s+:) Success$", r"\1 N/A", text)
        replace(node, name, text)
    systemctl = (node / "systemctl.txt").read_text()
    assert ACTIVE in systemctl
    replace(node, "systemctl.txt", systemctl.replace(
        ACTIVE, f"Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState={unit}"))
    return node


def _judged(node):
    judgement = judge(Evidence(node), H100, None)
    return judgement, {c.id: c for c in judgement.checks}


@pytest.mark.parametrize("unit", ["inactive", "failed"])
@pytest.mark.parametrize("state", ["In Progress", "Not Started"])
def test_every_gpu_waiting_for_a_stopped_fabric_manager_is_the_setup(tmp_path, state, unit):
    judgement, by_id = _judged(_node(tmp_path, state, unit))
    assert judgement.verdict == "rejected"
    for check_id in ("fabric_manager", "nvswitch"):
        result = by_id[check_id]
        assert (result.status, result.action, result.gpu) == ("fail", "fix-setup", None), \
            (check_id, result.summary)
        assert result.summary.startswith(f"nvidia-fabricmanager is {unit}: every one of the "
                                         f"8 GPUs waits for it (fabric state {state})"), \
            result.summary
    hardware = {c.id: c.action for c in judgement.checks
                if c.status == "fail" and c.action in HARDWARE_ACTIONS}
    assert not hardware, hardware


def test_a_fatal_switch_error_in_fabric_manager_s_log_keeps_the_hardware_action(tmp_path):
    node = _node(tmp_path)
    replace(node, "fabricmanager.log", (node / "fabricmanager.log").read_text() + FATAL)
    _, by_id = _judged(node)
    assert (by_id["fabric_manager"].status, by_id["fabric_manager"].action) == ("fail",
                                                                                "reboot")
    assert "detected NVSwitch fatal error 12028" in by_id["fabric_manager"].summary
    assert by_id["nvswitch"].action in HARDWARE_ACTIONS, by_id["nvswitch"]


def test_every_gpu_in_progress_with_fabric_manager_active_is_still_the_fabric_s(tmp_path):
    """Fabric manager running and no GPU registered: not explained by the node's setup."""
    _, by_id = _judged(_node(tmp_path, unit="active"))
    assert (by_id["nvswitch"].status, by_id["nvswitch"].action) == ("fail", "reboot")
    assert "8 GPU(s) not registered with the NVSwitch fabric" in by_id["nvswitch"].summary


def test_a_stopped_fabric_manager_whose_gpus_had_registered_is_the_setup(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    replace(node, "systemctl.txt", (node / "systemctl.txt").read_text().replace(
        ACTIVE, "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=inactive"))
    result = _judged(node)[1]["fabric_manager"]
    assert (result.status, result.action, result.summary) == (
        "fail", "fix-setup", "nvidia-fabricmanager is inactive: start it")


def test_fabric_manager_s_state_not_collected_is_never_the_gpus(tmp_path):
    node = _node(tmp_path)
    replace(node, "systemctl.txt", None)
    _, by_id = _judged(node)
    assert (by_id["nvswitch"].status, by_id["nvswitch"].action) == ("fail", "fix-setup")
    assert "state not collected (systemctl.txt absent)" in by_id["nvswitch"].summary
    assert by_id["fabric_manager"].status == "missing"
