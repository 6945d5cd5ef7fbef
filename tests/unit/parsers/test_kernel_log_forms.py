"""The kernel-log reader at its edges (found by mutation testing, issue #24): every time
form read to the exact instant, Xid 154's recovery action deciding its class, and the lab's
injected lines naming the device in the form each catalog prints."""

from __future__ import annotations

import json
import re
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
    # journalctl -o short-full names the zone: UTC and GMT (and +0000) are the instant,
    # any other zone cannot be placed without the host's zone database
    (f"Fri 2025-11-21 10:05:00 GMT node07 kernel: {XID}", datetime(2025, 11, 21, 10, 5), None),
    (f"Fri 2025-11-21 10:05:00 UTC node07 kernel: {XID}", datetime(2025, 11, 21, 10, 5), None),
    (f"Fri 2025-11-21 11:05:00 CET node07 kernel: {XID}", None, None),
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


# --- every form a kernel log reaches gpuprov in (issue 36) -------------------------------
# A real capture's messages (dmesg --time-format iso: Xid 13 and Xid 43 on one GPU), printed
# the way each tool prints a kernel message: journalctl's -o forms (systemd's journalctl(1)
# OUTPUT OPTIONS), with and without the host (--no-hostname), `grep NVRM` of the journal
# (`kernel:` and the message), and bare messages (`journalctl -o cat`, `grep NVRM` of a
# stampless file). Each must give the same events as the capture itself.
def _messages() -> list[str]:
    from tests.evidence_builder import capture
    text = capture("dmesg-xid/xid13-xid43-dmesg-iso-format.txt")
    return [m.group(1) for line in text.splitlines()
            if (m := re.match(r"^kern\s*:\w+\s*: \S+ (.*)$", line))]


EPOCH = 1_763_719_500   # 2025-11-21T10:05:00Z
BOOT = "3f5e8b1c2a9d4e6f8a7b6c5d4e3f2a1b"


def _short(host: str) -> list[str]:
    return [f"Nov 21 10:05:{i:02d} {host}kernel: {m}" for i, m in enumerate(_messages())]


FORMS = {
    "journalctl -k": lambda: _short("node07 "),
    "journalctl --no-hostname -k": lambda: _short(""),
    "journalctl -o short-iso": lambda: [f"2025-11-21T10:05:{i:02d}+0000 node07 kernel: {m}"
                                        for i, m in enumerate(_messages())],
    "journalctl -o short-full": lambda: [f"Fri 2025-11-21 10:05:{i:02d} UTC node07 kernel: {m}"
                                         for i, m in enumerate(_messages())],
    "journalctl -o short-unix": lambda: [f"{EPOCH + i}.000000 node07 kernel: {m}"
                                         for i, m in enumerate(_messages())],
    "journalctl -o short-monotonic": lambda: [f"[  {100 + i}.000000] node07 kernel: {m}"
                                              for i, m in enumerate(_messages())],
    "journalctl -o json": lambda: [json.dumps({
        "__REALTIME_TIMESTAMP": str((EPOCH + i) * 10**6), "_BOOT_ID": BOOT,
        "_TRANSPORT": "kernel", "MESSAGE": m}) for i, m in enumerate(_messages())],
    "journalctl -o verbose": lambda: [
        line for i, m in enumerate(_messages()) for line in (
            f"Fri 2025-11-21 10:05:{i:02d}.000000 UTC [s=9a8b7c;i={i:x};b={BOOT};m=5f5e100;"
            f"t={(EPOCH + i) * 10**6:x};x=1a2b3c]",
            "    _TRANSPORT=kernel", "    SYSLOG_IDENTIFIER=kernel", f"    MESSAGE={m}")],
    "journalctl -o export": lambda: [
        line for i, m in enumerate(_messages()) for line in (
            f"__REALTIME_TIMESTAMP={(EPOCH + i) * 10**6}", f"_BOOT_ID={BOOT}",
            "_TRANSPORT=kernel", f"MESSAGE={m}", "")],
    "grep NVRM of the journal (bare kernel: prefix)": lambda: [f"kernel: {m}"
                                                               for m in _messages()],
    "journalctl -o cat / grep of a stampless log": _messages,
    # issue 53: `talosctl dmesg` (siderolabs/pkgs#792, siderolabs/talos#3054)
    "talosctl dmesg": lambda: [f"10.1.10.21: kern: warning: [2025-11-21T10:05:{i:02d}."
                               f"430802804Z]: {m}" for i, m in enumerate(_messages())],
}


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_real_capture_gives_its_events(form):
    from tests.evidence_builder import capture
    real = parse_kernel_log(capture("dmesg-xid/xid13-xid43-dmesg-iso-format.txt"), "real")
    log = parse_kernel_log("\n".join(FORMS[form]()) + "\n", form)
    assert [(e.kind, e.code, e.device) for e in log.events] == \
        [(e.kind, e.code, e.device) for e in real.events]
    assert sorted({e.code for e in log.events}) == [13, 43] and len(log.events) > 2
    assert log.boots == 1 and not log.earlier_boots()


@pytest.mark.parametrize("form", ["journalctl -o short-full", "journalctl -o short-unix",
                                  "journalctl -o json", "journalctl -o verbose",
                                  "journalctl -o export"])
def test_journal_forms_keep_each_message_s_instant(form):
    log = parse_kernel_log("\n".join(FORMS[form]()) + "\n", form)
    start = datetime.fromtimestamp(EPOCH, UTC).replace(tzinfo=None)
    assert [e.time for e in log.events] == [start + timedelta(seconds=i)
                                            for i in range(len(_messages()))
                                            if "NVRM: Xid" in _messages()[i]]


def test_a_journal_record_of_another_boot_starts_a_boot():
    first = FORMS["journalctl -o json"]()
    later = [line.replace(BOOT, "0" * 32) for line in first]
    log = parse_kernel_log("\n".join(first + later) + "\n", "json")
    half = len(_messages())
    assert log.boots == 2
    assert len(log.earlier_boots()) == len(log.current_boot()) == half   # every line an Xid


def test_lines_without_any_stamp_cannot_be_placed_in_time():
    log = parse_kernel_log("\n".join(_messages()) + "\n", "cat")
    assert all(e.time is None and e.uptime_s is None for e in log.events)
    assert not log.placed


def test_the_driver_s_reset_required_assertion_is_a_reset_class_event():
    # the form of the driver's nvAssertOkFailedNoLog line with NV_ERR_RESET_REQUIRED (0x62),
    # as scitix/sichek's dmesg rules test it (not a capture)
    line = ("[Mon Jan  1 12:00:01 2024] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset "
            "required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ "
            "kernel_channel.c:2874")
    [event] = parse_kernel_log(line + "\n", "k").events
    assert (event.kind, event.klass, event.action) == ("reset-required", "reset", "reset-gpu")


def test_a_real_talos_log_is_a_kernel_log_and_its_instants_are_read():
    """Issue 53: `talosctl dmesg` was refused as not a kernel log. The real capture reads
    (nothing in it is the GPU system's), and a Talos line's nanosecond RFC 3339 stamp is
    read to the microsecond, in UTC."""
    from datetime import datetime

    from tests.evidence_builder import capture
    log = parse_kernel_log(capture("kernel-log/talos-dmesg-amdgpu-siderolabs-pkgs792.txt"),
                           "talos")
    assert log.events == [] and log.boots == 1
    line = ("k3s-node5.lab: kern:     err: [2023-08-18T13:40:01.123456789Z]: NVRM: Xid "
            "(PCI:0000:5d:00): 79, pid=1, name=nvidia-smi, GPU has fallen off the bus.\n")
    [event] = parse_kernel_log(line, "talos").events
    assert (event.kind, event.code, event.time) == ("xid", 79,
                                                    datetime(2023, 8, 18, 13, 40, 1, 123456))


def test_a_journal_record_without_its_time_keeps_its_message_unplaced():
    """`journalctl -o json` records without `__REALTIME_TIMESTAMP` (a filtered export):
    every event still read, none placed in time."""
    records = [json.dumps({k: v for k, v in json.loads(line).items()
                           if k != "__REALTIME_TIMESTAMP"})
               for line in FORMS["journalctl -o json"]()]
    log = parse_kernel_log("\n".join(records) + "\n", "json")
    assert sorted({e.code for e in log.events}) == [13, 43]
    assert all(e.time is None for e in log.events)
    # each recorded as the bare `kernel:` form, as the evidence's values show it
    assert all(e.line.startswith("kernel: NVRM: Xid") for e in log.events), log.events[0].line
