"""The matcher rows the captures elsewhere do not decide alone, each by a line written
apart from the table (issue 36): a real capture where one was found, else the text the
kernel or driver prints, named as such. Deleting or weakening any of these rows fails
here (scripts/mutate_data.py)."""

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, replace

H100 = load_profile("h100-sxm-8")

ROWS = [
    # NVIDIA/open-gpu-kernel-modules#688 (DGX Station A100, syslog)
    ("gpu-lost", "reboot", "Feb 17 08:00:34 abggdna-DGX-Station-A100 kernel: NVRM: "
     "nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] "
     "(0x0000000F) returned from rmStatus @ kernel_ce_gv100.c:106"),
    # Open-CAS/ocf#408 (a Mellanox-equipped server, syslog)
    ("hard-lockup", "reboot", "Oct 11 05:39:13 chi412 kernel: NMI watchdog: Watchdog detected "
     "hard LOCKUP on cpu 79"),
    # a Linux kernel commit message quoting dmesg (net: __dev_open and pm_runtime)
    ("hung-task", "reboot", "[  967.723577] INFO: task ip:6024 blocked for more than 120 "
     "seconds."),
    # the text mlx5's port module event handler prints (drivers/net/ethernet/mellanox/mlx5/
    # core/events.c: "Port module event[error]: module %u, Cable error, %s"); no capture found
    ("nic-module-temperature", "reseat-or-inspect", "[ 4242.000001] mlx5_core 0000:5c:00.0: "
     "Port module event[error]: module 0, Cable error, High Temperature"),
    # the machine-check core's words (arch/x86/kernel/cpu/mce: "Processor context corrupt");
    # no capture found
    ("machine-check", "reseat-or-inspect", "[ 4242.000001] mce: [Hardware Error]: Machine "
     "check: Processor context corrupt"),
]


@pytest.mark.parametrize(("kind", "action", "line"), ROWS, ids=[r[0] for r in ROWS])
def test_each_row_fails_the_node_with_its_action(tmp_path, kind, action, line):
    [event] = parse_kernel_log(line + "\n", "k").events
    assert event.kind == kind and event.fails
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt", line + "\n")
    [result] = judge(Evidence(node), H100, None, only=("kernel_log",)).checks
    assert (result.status, result.action) == ("fail", action), result.summary


def test_no_adapter_and_probe_not_called_are_both_read_from_their_capture():
    log = parse_kernel_log(capture("kernel-log/no-adapter-probe-not-called-bigdata133.txt"),
                           "bigdata133")
    assert [(e.kind, e.klass) for e in log.events] == [("no-adapter", "reboot"),
                                                        ("probe-not-called", "reboot")]
    assert log.events[1].text == "3 device(s)"


def test_corrected_host_memory_errors_and_the_mce_summary_are_notices():
    log = parse_kernel_log(
        capture("kernel-log/host-memory-ce-journalctl-no-hostname-radiasoft134.txt"), "ce")
    assert [(e.kind, e.klass) for e in log.events] == [("machine-check", "notice"),
                                                        ("host-memory-ce", "notice")]
    assert not any(e.fails for e in log.events)
