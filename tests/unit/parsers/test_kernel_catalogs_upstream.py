"""Every Xid and SXid row of gpuprov's catalogs against the upstream table it was written
from (tests/fixtures/kernel-catalogs, verbatim copies), read through the kernel-log reader:
a row deleted, or a class weakened, fails here (issue 36: tests that bite on the data).

The expected class comes from the upstream row by the rules xid.yml and sxid.yml state,
written here a second time on purpose: NVIDIA's immediate resolution for an Xid, gpud's
repair actions (from the Fabric Manager guide) for an SXid.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprov.parsers.kernel_log import catalog, class_fails, parse_kernel_log

UPSTREAM = Path(__file__).parent.parent.parent / "fixtures" / "kernel-catalogs"

# NVIDIA's immediate resolution -> the class it calls for (xid.yml's header states the same)
XID_CLASS = {"RESTART_APP": "application", "CHECK_UVM": "application",
             "WORKFLOW_XID_45": "application", "IGNORE": "notice", "XID_154": "notice",
             "RESET_GPU": "reset", "WORKFLOW_XID_48": "reset", "WORKFLOW_NVLINK_ERR": "reset",
             "RESTART_BM": "reboot", "RESTART_VM": "reboot", "CHECK_MECHANICALS": "inspect",
             "UPDATE_SWFW": "software", "CONTACT_SUPPORT": "service", "": "service",
             "WORKFLOW_NVLINK5_ERR": "nvlink5"}


def _xid_upstream() -> dict[int, str]:
    text = (UPSTREAM / "xid-catalog_generated.go").read_text()
    rows = re.findall(r'\{Code: (\d+), .*?ImmediateResolution: "([^"]*)"', text)
    return {int(code): immediate for code, immediate in rows}


def _sxid_upstream() -> dict[int, str]:
    """SXid -> class: gpud's repair actions, REBOOT_SYSTEM alone -> reboot, with
    HARDWARE_INSPECTION -> service, none (SuggestedActionsByGPUd: nil) -> notice."""
    text = (UPSTREAM / "sxid.go").read_text()
    blocks = re.split(r"\n\t(\d{5}): \{", text.split("var details = map[int]Detail{", 1)[1])
    found = {}
    for code, body in zip(blocks[1::2], blocks[2::2], strict=True):
        actions = set(re.findall(r"RepairActionType(\w+)", body.split("EventType:", 1)[0]))
        found[int(code)] = ("service" if "HardwareInspection" in actions else
                            "reboot" if "RebootSystem" in actions else "notice")
    return found


XIDS, SXIDS = _xid_upstream(), _sxid_upstream()


def test_the_upstream_tables_are_whole():
    assert len(XIDS) == 172 and len(SXIDS) == 93


@pytest.mark.parametrize("code", sorted(XIDS))
def test_every_xid_is_catalogued_with_the_class_nvidia_s_resolution_calls_for(code):
    expected = XID_CLASS[XIDS[code]]
    assert code in catalog("xid").codes, f"Xid {code} missing from xid.yml"
    line = (f"[  100.000001] NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python, "
            "an error")
    [event] = parse_kernel_log(line + "\n", "k").events
    if expected == "nvlink5":      # decided per line: not Fatal/Nonfatal text -> reset
        assert event.klass == "reset"
        return
    if code == 154:                # names its recovery action; none named here -> notice
        assert event.klass == "notice"
        return
    assert (event.code, event.klass) == (code, expected)
    assert event.fails == (expected != "notice")


@pytest.mark.parametrize("code", sorted(SXIDS))
def test_every_sxid_is_catalogued_with_the_class_its_repair_calls_for(code):
    assert code in catalog("sxid").codes, f"SXid {code} missing from sxid.yml"
    line = (f"[  100.000001] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): {code}, Non-fatal, "
            "Link 31 an error")
    [event] = parse_kernel_log(line + "\n", "k").events
    assert (event.code, event.klass) == (code, SXIDS[code])
    assert event.fails == class_fails(SXIDS[code])
