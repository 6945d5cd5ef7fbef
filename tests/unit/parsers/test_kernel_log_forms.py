"""The kernel-log reader at its edges (found by mutation testing, issue #24): every time
form read to the exact instant, Xid 154's recovery action deciding its class, and the lab's
injected lines naming the device in the form each catalog prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuprov.parsers.kernel_log import example_line, parse_kernel_log
from gpuprov.pci import BusId

XID = "NVRM: Xid (PCI:0000:5d:00): 119, pid=1, name=nvidia-smi, Timeout after 6s of waiting"


@pytest.mark.parametrize("line, when, uptime", [
    # dmesg -T (ctime, a day of month padded with a second space)
    (f"[Mon Nov  3 09:15:02 2025] {XID}", datetime(2025, 11, 3, 9, 15, 2), None),
    # dmesg --time-format iso: a comma before the fraction, a zone converted to UTC
    (f"2026-11-21T12:05:00,250000+02:00 {XID}", datetime(2026, 11, 21, 10, 5, 0, 250000), None),
    (f"2026-11-21T10:05:00.5 {XID}", datetime(2026, 11, 21, 10, 5, 0, 500000), None),
    # plain dmesg and /dev/kmsg: seconds since boot only
    (f"[  123.456789] {XID}", None, 123.456789),
    (f"4,1234,123456789,-;{XID}", None, 123.456789),
])
def test_each_time_form_is_read_to_the_instant(line, when, uptime):
    [event] = parse_kernel_log(line + "\n", "k").events
    assert (event.time, event.uptime_s) == (when, uptime)


def test_syslog_stamps_take_the_most_recent_past_year_and_keep_fractions():
    now = datetime.now(UTC).replace(tzinfo=None)
    past = now.replace(microsecond=250000) if now.microsecond >= 250000 else now.replace(
        microsecond=0)
    stamp = past.strftime("%b %d %H:%M:%S.%f")
    [event] = parse_kernel_log(f"{stamp} node07 kernel: {XID}\n", "k").events
    assert event.time == past                     # this year, to the microsecond
    future = now + timedelta(minutes=5)     # not yet reached this year: last year's
    [event] = parse_kernel_log(f"{future:%b %d %H:%M:%S} node07 kernel: {XID}\n", "k").events
    assert event.time.year == (now.year - 1 if future.year == now.year else now.year)


# NVIDIA's Xid catalog (r570+): "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)"
XID_154 = ("2026-11-21T10:05:00,000000+00:00 NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery "
           "action changed from 0x0 (None) to 0x{n} ({action})")


@pytest.mark.parametrize("n, action, klass", [
    (1, "GPU Reset Required", "reset"),
    (2, "Node Reboot Required", "reboot"),
    (4, "Drain and Reset", "reset"),
    (0, "None", "notice"),
])
def test_xid_154_takes_the_class_of_the_recovery_action_it_names(n, action, klass):
    [event] = parse_kernel_log(XID_154.format(n=n, action=action) + "\n", "k").events
    assert (event.code, event.klass) == (154, klass)
    assert event.details["recovery_action"] == action
    assert event.details["immediate"] == "XID_154"


def test_injected_lines_name_the_device_as_each_catalog_prints_it():
    gpu = BusId.parse("00000000:5D:00.0")
    [xid] = example_line("xid", 119, gpu, 3)
    assert "NVRM: Xid (PCI:0000:5d:00): 119" in xid        # the driver's short form
    aer = example_line("pcie-aer", None, gpu, 3)
    assert any("0000:5d:00.0" in line for line in aer)     # sysfs form elsewhere
    with pytest.raises(KeyError, match=r"^'xid 9999: no example line in the catalogs'$"):
        example_line("xid", 9999, gpu, 3)
    with pytest.raises(KeyError, match=r"^'no-such-kind : no example line in the catalogs'$"):
        example_line("no-such-kind", None, gpu, 3)
