"""One kernel-log reader: typed events from a matcher table, catalogs as data, PCI
addresses in every printed form; what is not a kernel log is an error, never 'no events'."""

import pytest

from gpuprov.errors import InputError
from gpuprov.model import Action
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kernel_log import catalog, example_line, matchers, parse_kernel_log
from gpuprov.pci import BusId
from tests.evidence_builder import fixture


@pytest.mark.parametrize("text", ["00000000:9B:00.0", "0000:9b:00", "0000:9b:00.0", "9b:00.0",
                                  "9B:00"])
def test_bus_id_parses_every_printed_form(text):
    bus = BusId.parse(text)
    assert (bus.smi, bus.kernel, bus.sysfs, bus.short) == (
        "00000000:9B:00.0", "0000:9b:00", "0000:9b:00.0", "9b:00.0")


def test_bus_id_keeps_domain_and_function_and_refuses_junk():
    assert BusId.parse("0001:6c:00.1").smi == "00000001:6C:00.1"
    assert BusId.find("GPU0") is None
    with pytest.raises(InputError, match="not a PCI address"):
        BusId.parse("18:00.9")


def test_xid_events_carry_device_catalog_class_and_action():
    events = parse_kernel_log(fixture("dmesg-xid/xid119-gsp-timeout-8x-a100-sxm4.txt"),
                              "k").events
    first = events[0]
    assert (first.kind, first.code, first.device, first.klass, first.action) == (
        "xid", 119, BusId(1, 0x6C, 0), "reset", Action.RESET_GPU)
    assert first.details["immediate"] == "RESET_GPU"


def test_unknown_code_needs_service_until_catalogued():
    line = "[ 12.000001] NVRM: Xid (PCI:0000:18:00): 999, pid=1, something new\n"
    (event,) = parse_kernel_log(line, "k").events
    assert (event.klass, event.action) == ("service", Action.RMA)
    assert event.name == "XID 999 (not catalogued)"


EXAMPLES = ([(kind, c) for kind in ("xid", "sxid") for c, e in catalog(kind).codes.items()
             if e.example] + [(m.kind, None) for m in matchers() if m.example])


@pytest.mark.parametrize(("kind", "code"), EXAMPLES, ids=[f"{k}-{c}" for k, c in EXAMPLES])
def test_the_labs_injected_lines_are_what_the_matcher_reads(kind, code):
    bus = BusId.parse("00000000:3A:00.0")
    lines = "".join(f"2026-11-23T10:00:00.000000+00:00 node01 kernel: {line}\n"
                    for line in example_line(kind, code, bus, 2))
    (event,) = parse_kernel_log(lines, "kern.log").events
    assert (event.kind, event.code) == (kind, code)
    assert event.bus_id() == "00000000:3A:00.0" or event.gpu_instance == 2


EMPTY = "empty: no kernel log lines (a restricted dmesg prints nothing)"
NOT_A_LOG = ("not a kernel log: no line in a dmesg, dmesg -T, ISO, journalctl, syslog or kmsg "
             "form, and no kernel message")


@pytest.mark.parametrize("text,message", [
    ("", EMPTY),
    ("   \n\n", EMPTY),
    ("\x7fELF\x02\x01\x01\x00\x00\x00garbage", "binary data, not a kernel log"),
    ("<?xml version='1.0'?>\n<nvidia_smi_log>\n", NOT_A_LOG),
    ("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n", NOT_A_LOG),
    # a matcher's needle ("probe") in a line its pattern does not read is no kernel message
    ("starting the storage probe of /dev/sda\n", NOT_A_LOG),
])
def test_what_is_not_a_kernel_log_is_an_error_naming_the_file(text, message):
    with pytest.raises(ParseError) as err:
        parse_kernel_log(text, "/ev/node07/dmesg.txt")
    assert str(err.value) == f"/ev/node07/dmesg.txt: {message}"


def test_a_healthy_log_in_each_time_form_has_no_events():
    for text in ("[    0.000000] Linux version 6.8.0-45-generic\n",
                 "[Sun Feb 23 16:24:18 2025] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n",
                 "kern  :info  : 2025-01-21T04:41:44,283302+00:00 nvidia-nvlink: Nvlink Core "
                 "is being initialized\n",
                 "2026-11-23T10:00:00.000000+00:00 node01 kernel: Linux version 6.1.0\n",
                 "Nov 23 10:00:00 node01 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"):
        assert parse_kernel_log(text, "k").events == []


def test_two_gpus_core_dumps_side_by_side_are_two_events():
    """A spans_lines message continues only on the GPU that began it: GPU6's dump beside
    GPU7's (`NVRM: GPUn` and no address, open-gpu-kernel-modules#1230) is two events."""
    dump = ("NVRM: GPU{} kflcnCoreDumpDestructive_IMPL: ICD: s0:0xffffffff60141030   "
            "s1:0xffffffff60141030   s2:0x0000000000000000   s3:0x000000000000025d")
    text = "".join(f"[  812.{i}00000] {dump.format(gpu)}\n" for i, gpu in enumerate((6, 6, 7)))
    events = parse_kernel_log(text, "dmesg.txt").events
    assert [(e.kind, e.gpu_instance) for e in events] == [("gsp-core-dump", 6),
                                                          ("gsp-core-dump", 7)]
