"""kernel_log's placement of events against the run (wall time, else uptime), the device
each is pinned on, and what a reset clears: each rule at its boundary, asserting the
recorded phase, device and GPU (found by mutation testing, issue #24)."""

import json

import pytest

from gpuprov.checks.registry import Results
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, GpuRef, Status
from gpuprov.profiles import load_profile
from tests.evidence_builder import healthy_h100, replace

H100 = load_profile("h100-sxm-8")
STARTED = "2026-11-21T10:00:00+00:00"   # the healthy node's run start (meta.json)
XID_13 = ("{stamp} node07 kernel: NVRM: Xid (PCI:0000:5d:00): 13, pid=1, name=python3, "
          "Graphics Exception\n")


def _judge(tmp_path, log: str, meta: dict | None = None, only: str = "kernel_log"):
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt", log)
    if meta is not None:
        replace(node, "meta.json", json.dumps(meta))
    return judge(Evidence(node), H100, None, only=(only,)).checks[0]


@pytest.mark.parametrize("stamp, status, phase", [
    ("2026-11-21T10:00:00.000000+00:00", Status.FAIL, "during"),    # at the start: during
    ("2026-11-21T09:59:59.999999+00:00", Status.WARN, "before"),
])
def test_an_application_fault_at_the_start_is_during_the_run(tmp_path, stamp, status, phase):
    result = _judge(tmp_path, XID_13.format(stamp=stamp))
    assert result.status == status
    assert result.values["events"][0]["phase"] == phase


@pytest.mark.parametrize("uptime, status, phase", [
    (100.0, Status.FAIL, "during"),    # the event at exactly the uptime the run began at
    (100.5, Status.WARN, "before"),
])
def test_uptime_stamps_are_placed_against_the_uptime_at_start(tmp_path, uptime, status, phase):
    log = "[  100.000000] NVRM: Xid (PCI:0000:5d:00): 13, pid=1, Graphics Exception\n"
    result = _judge(tmp_path, log, {"node": "node07", "uptime_at_start_s": uptime})
    assert result.status == status and result.values["events"][0]["phase"] == phase


def test_an_event_that_cannot_be_placed_counts_as_during(tmp_path):
    log = "[  100.000000] NVRM: Xid (PCI:0000:5d:00): 13, pid=1, Graphics Exception\n"
    result = _judge(tmp_path, log, {"node": "node07"})
    assert result.status == Status.FAIL
    assert result.values["events"][0]["phase"] == "unplaced"


def test_an_event_on_another_function_of_a_gpu_names_that_gpu(tmp_path):
    """AER on function 1 of the GPU at 18:00 (its audio or a VF) is that GPU's fault."""
    log = ("2026-11-21T10:05:00.000000+00:00 node07 kernel: snd_hda_intel 0000:18:00.1: "
           "PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester "
           "ID)\n")
    result = _judge(tmp_path, log)
    assert result.status == Status.FAIL
    assert result.gpu == GpuRef(0, "00000000:18:00.0", "1654423001593")
    assert result.values["events"][0]["gpu"] == 0
    assert result.values["events"][0]["device"].startswith("GPU 0 (00000000:18:00.0")


def test_a_gpu_gone_from_the_driver_is_named_by_its_address_alone(tmp_path):
    log = ("2026-11-21T10:05:00.000000+00:00 node07 kernel: NVRM: Xid (PCI:0000:b3:00): 79, "
           "pid=1, GPU has fallen off the bus.\n")
    result = _judge(tmp_path, log)
    assert result.gpu == GpuRef(None, "00000000:B3:00.0")
    assert result.values["events"][0]["device"] == "GPU 0000:b3:00.0"
    assert result.values["events"][0]["pci"] == "0000:b3:00.0"


def test_an_event_on_an_nvswitch_bridge_is_named_as_that_switch(tmp_path):
    log = ("2026-11-21T10:05:00.000000+00:00 node07 kernel: pcieport 0000:05:00.0: "
           "PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester "
           "ID)\n")
    result = _judge(tmp_path, log)
    assert result.status == Status.FAIL and result.gpu is None
    assert result.values["events"][0]["device"] == "NVSwitch (0000:05:00.0)"
    assert "on NVSwitch (0000:05:00.0)" in result.summary


def test_a_reinitialised_gpu_clears_only_reset_class_events(tmp_path):
    """A reboot-class fault (fallen off the bus) is not cleared by the driver seeing the
    GPU again later in the same boot; a reset-class one is."""
    fell = ("2026-11-21T09:30:00.000000+00:00 node07 kernel: NVRM: Xid (PCI:0000:5d:00): 79, "
            "pid=1, GPU has fallen off the bus.\n")
    reinit = ("2026-11-21T09:40:00.000000+00:00 node07 kernel: NVRM: GPU at PCI:0000:5d:00: "
              "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b3\n")
    result = _judge(tmp_path, fell + reinit)
    assert result.status == Status.FAIL and result.values["events"][0]["cleared_by_reset"] is False
    reinit_first = _judge(tmp_path / "b", reinit + fell.replace("79, ", "119, "))
    assert reinit_first.status == Status.FAIL   # initialised before the fault: not cleared


def test_alternatives_absent_are_named_with_or(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        replace(node, name, None)
    [result] = judge(Evidence(node), H100, None, only=("clocks_throttle",)).checks
    assert result.status == Status.MISSING
    assert result.summary == ("no evidence: nvidia-smi-q-after.xml or nvidia-smi-q.xml not "
                              "collected")


def test_a_warning_keeps_the_gpu_it_names(tmp_path):
    ctx = type("Ctx", (), {"gpu_ref": staticmethod(lambda i: None)})()
    gpu = GpuRef(2, "00000000:3A:00.0", "1654423001595")
    warned = Results("ecc", ctx, Action.RESET_GPU).warn("corrected errors", gpu=gpu)
    assert (warned.status, warned.gpu, warned.action) == (Status.WARN, gpu, Action.RESET_GPU)
