"""The checks' shared helpers at their edges (found by mutation testing, issue #24): GPUs
named when nvidia-smi does not list them, package epochs, unit names, the run's start in
any zone, the tool whose failure explains an absence, and the nvswitch check's counts and
truncations."""

from __future__ import annotations

import json
import time

import pytest

from gpuprov.checks.context import Context
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, GpuRef, Status
from gpuprov.packages import upstream
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, fabric_manager_log, healthy_h100, replace

H100 = load_profile("h100-sxm-8")


def test_a_gpu_nvidia_smi_does_not_list_keeps_its_index_and_unknowns(tmp_path):
    ctx = Context(Evidence(healthy_h100(tmp_path / "node07")), H100, None)
    assert ctx.gpu_ref(8) == GpuRef(8)
    assert ctx.gpu_label(8) == "GPU 8 (?, serial ?)"
    assert ctx.gpu_ref(0) == GpuRef(0, "00000000:18:00.0", "1654423001593")


@pytest.mark.parametrize("version, expected", [
    ("550.90.07-1", "550.90.07"), ("1:550.90.07-0ubuntu1", "550.90.07"), ("565.57.01", "565.57.01"),
])
def test_package_versions_lose_epoch_and_revision(version, expected):
    assert upstream(version) == expected


def test_only_nvidia_smi_failing_explains_nvidia_smi_evidence_absent(tmp_path):
    """With nvidia-smi failed, gpu-burn's absent log is still `missing`, not nvidia-smi's
    failure: another tool's evidence."""
    node = healthy_h100(tmp_path / "node07")
    replace(node, "nvidia-smi-error.txt", "$ nvidia-smi -q -x\nexit status 18\nFailed to "
            "initialize NVML: Driver/library version mismatch\n")
    replace(node, "gpu-burn.log", None)
    [burn] = judge(Evidence(node), H100, None, only=("gpu_burn",)).checks
    assert (burn.status, burn.summary) == (Status.MISSING,
                                           "no evidence: gpu-burn.log not collected")


@pytest.mark.parametrize("started", ["2026-11-21T12:00:00+02:00", "2026-11-21T10:00:00"])
def test_the_runs_start_is_read_in_utc_whatever_the_controllers_zone(tmp_path, monkeypatch,
                                                                      started):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        node = healthy_h100(tmp_path / "node07")
        meta = json.loads((node / "meta.json").read_text())
        replace(node, "meta.json", json.dumps({**meta, "started_at": started}))
        replace(node, "dmesg.txt", "2026-11-21T09:59:59.000000+00:00 node07 kernel: NVRM: Xid "
                                   "(PCI:0000:5d:00): 13, pid=1, Graphics Exception\n")
        [log] = judge(Evidence(node), H100, None, only=("kernel_log",)).checks
        assert log.values["window_start"] == "2026-11-21T10:00:00"
        assert log.values["events"][0]["phase"] == "before"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


SXID = ("2025-01-25T10:34:{s:02d},859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): "
        "12028, Data {{0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, "
        "0x40008000, 0x5a001100, 0x00000000, 0x00000000, 0x00000000, 0x00000000, "
        "0x00000000, 0x00000000, 0x00000000}}\n")   # longer than the 160 kept


@pytest.mark.parametrize("count, more", [(2, " (+1 more)"), (3, " (+2 more)")])
def test_fatal_sxids_are_counted_and_their_text_kept_to_160_characters(tmp_path, count, more):
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt",
                   "".join(SXID.format(s=s) for s in range(count)))
    [result] = judge(Evidence(node), H100, None, only=("nvswitch",)).checks
    assert result.summary == ("SXid 12028 (egress nonposted PRIV error) on NVSwitch "
                              f"nvidia-nvswitch1 (0000:84:00.0){more}")
    assert [len(e["text"]) for e in result.values["sxid"]] == [160] * count


def test_non_fatal_sxids_name_the_first_and_fabric_manager_lists_twenty(tmp_path):
    nonfatal = capture("kernel-log/sxid-22013-nonfatal-boot-570-nvtrust124.txt")
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt", nonfatal)
    errors = "".join(f"[Feb 27 2025 15:12:{s:02d}] [ERROR] [tid 1808] failed to train NVLink "
                     f"trunk port {s}\n" for s in range(25))
    replace(node, "fabricmanager.log", errors)
    [result] = judge(Evidence(node), H100, None, only=("nvswitch",)).checks
    assert len(result.values["fabric_manager_log"]["errors"]) == 20
    replace(node, "fabricmanager.log", errors.replace("failed to train", "non-fatal error on"))
    [result] = judge(Evidence(node), H100, None, only=("nvswitch",)).checks
    assert len(result.values["fabric_manager_log"]["nonfatal"]) == 20
    replace(node, "fabricmanager.log", fabric_manager_log())
    [result] = judge(Evidence(node), H100, None, only=("nvswitch",)).checks
    assert result.status == Status.WARN
    first = result.values["sxid"][0]
    assert result.summary.startswith(f"{len(result.values['sxid'])} non-fatal SXid line(s) "
                                     f"reported: SXid {first['code']} ({first['name']})")


def test_every_absent_need_is_named(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    for name in ("packages.txt", "systemctl.txt"):
        replace(node, name, None)
    [toolkit] = judge(Evidence(node), H100, None, only=("container_toolkit",)).checks
    assert toolkit.summary == "no evidence: packages.txt, systemctl.txt not collected"


def test_a_live_nodes_malformed_evidence_fails_its_readers_offline_it_is_refused(tmp_path):
    """Validation judges with strict=False: a truncated report fails the checks that read
    it (and rejects the node); `gpuprov evaluate` (strict) refuses it, naming the file."""
    node = healthy_h100(tmp_path / "node07")
    replace(node, "nvidia-smi-topo.txt", "GPU0\tGPU1\n")
    judgement = judge(Evidence(node), H100, None, strict=False)
    [topology] = [c for c in judgement.checks if c.id == "nvlink_topology"]
    assert (topology.status, topology.action) == (Status.FAIL, Action.FIX_SETUP)   # the setup's
    assert topology.summary.startswith(f"unreadable evidence: {node}/nvidia-smi-topo.txt: ")
    assert str(judgement.verdict) == "rejected"
    with pytest.raises(ParseError, match=r"nvidia-smi-topo\.txt: "):
        judge(Evidence(node), H100, None)


def test_the_judgement_names_the_node_its_evidence_says(tmp_path):
    node = healthy_h100(tmp_path / "evidence-dir")
    assert judge(Evidence(node), H100, None, only=("nouveau",)).node == "node07"
    replace(node, "meta.json", "{}")
    assert judge(Evidence(node), H100, None, only=("nouveau",)).node == "evidence-dir"


def test_the_after_soak_report_is_required_only_once_the_soak_was_reached(tmp_path):
    """Judged as the run goes (identity first), the soak's evidence is not yet due; judged
    whole, or with the soak reached and not skipped, its absence fails gpu_inventory."""
    from gpuprov.checks.catalog import stage_checks
    node = replace(healthy_h100(tmp_path / "node07"), "nvidia-smi-q-after.txt", None)
    early = judge(Evidence(node), H100, None, only=stage_checks("identity"), upto="identity")
    assert {c.id: c.status for c in early.checks}["gpu_inventory"] == Status.PASS
    for upto in ("soak", None):
        [late] = judge(Evidence(node), H100, None, only=("gpu_inventory",), upto=upto).checks
        assert late.status == Status.FAIL and "no nvidia-smi report after the soak" in late.summary
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "skipped": {"soak": "identity failed"}}))
    [skipped] = judge(Evidence(node), H100, None, only=("gpu_inventory",)).checks
    assert skipped.status == Status.PASS
