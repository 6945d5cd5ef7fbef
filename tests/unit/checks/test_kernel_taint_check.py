"""kernel_taint on real `/proc/sys/kernel/tainted` captures, and on the fault taints a
node keeps after its log lines rotated away (sums of the kernel's documented bits)."""

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.system import TAINT_FLAGS, parse_kernel_taint
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, replace

H100 = load_profile("h100-sxm-8")
BIT = {flag: 1 << bit for bit, flag, _ in TAINT_FLAGS}


def _taint(tmp_path, text: str | None):
    node = replace(healthy_h100(tmp_path / "node07"), "kernel-taint.txt", text)
    return judge(Evidence(node), H100, None, only=("kernel_taint",)).checks[0]


@pytest.mark.parametrize(("name", "flags"), [
    ("nvidia-open-out-of-tree-fwupd9737.txt", ("O",)),
    ("warning-amd-turin-checkbox1367.txt", ("W",)),
    ("proprietary-unsigned-out-of-tree-uac262.txt", ("P", "O", "E")),
    ("livepatched-hyperv-sap-arp142-531.txt", ("O", "K", "X")),
])
def test_real_values_read_as_the_kernel_documents_them(name, flags):
    assert parse_kernel_taint(capture(f"kernel-taint/{name}"), name).flags == flags


@pytest.mark.parametrize(("name", "status"), [
    ("nvidia-open-out-of-tree-fwupd9737.txt", "pass"),          # the NVIDIA module itself
    ("proprietary-unsigned-out-of-tree-uac262.txt", "pass"),
    ("livepatched-hyperv-sap-arp142-531.txt", "pass"),
    ("warning-amd-turin-checkbox1367.txt", "warn"),              # a kernel WARN since boot
])
def test_real_captures(tmp_path, name, status):
    result = _taint(tmp_path, capture(f"kernel-taint/{name}"))
    assert result.status == status, result.summary


@pytest.mark.parametrize(("flags", "action", "named"), [
    ("D", "reboot", "D: the kernel died (an oops or a BUG)"),
    ("L", "reboot", "L: a soft lockup occurred"),
    ("M", "reseat-or-inspect", "M: the processor reported a machine check exception"),
    ("B", "reseat-or-inspect", "B: a bad page was referenced"),
    ("DM", "reseat-or-inspect", "D: the kernel died"),     # the most drastic action wins
])
def test_a_fault_taint_rejects_even_with_a_clean_log(tmp_path, flags, action, named):
    value = BIT["P"] + BIT["O"] + sum(BIT[f] for f in flags)
    result = _taint(tmp_path, f"{value}\n")
    assert (result.status, result.action) == ("fail", action), result.summary
    assert named in result.summary and "since boot" in result.summary


def test_a_bit_this_gpuprov_does_not_know_warns_by_number(tmp_path):
    result = _taint(tmp_path, f"{BIT['O'] + (1 << 24)}\n")
    assert result.status == "warn" and "bit 24" in result.summary


def test_no_taint_file_is_missing_evidence_not_a_pass(tmp_path):
    assert _taint(tmp_path, None).status == "missing"


def test_something_else_than_a_number_is_a_parse_error():
    with pytest.raises(Exception, match="tainted holds"):
        parse_kernel_taint("cat: /proc/sys/kernel/tainted: No such file or directory\n", "x")
