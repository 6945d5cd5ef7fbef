"""ECC counts in every form nvidia-smi has printed them, each from a real capture with the
counts changed (the captures' GPUs had none): the Ampere+ SRAM/DRAM split in XML and text
(SRAM uncorrectable split into parity and SEC-DED since R550), and the pre-Ampere schema's
single/double bit per memory with a total that repeats the parts."""

import pytest

from gpuprov.parsers.smi_gpu import EccCounts, parse_smi_query
from tests.evidence_builder import FIXTURES

A100_TEXT = "nvidia-smi-q/a100-sxm4-x4-555.42.02-q.txt"
A100_XML = "nvidia-smi-q/a100-sxm4-mig-535.54.03-qx.txt"
V100S_XML = "nvidia-smi-q/v100s-460.73.01-qx-old-ecc-schema-excerpt.txt"


def capture(name: str) -> str:
    return (FIXTURES / name).read_text()


def set_nth(text: str, old: str, new: str, n: int, after: str = "<ecc_errors>") -> str:
    """`old`'s n-th occurrence (0-based) after the first ECC section's start replaced:
    GPU 0's volatile block comes first, then its aggregate block (MIG devices, listed
    before, have counts of their own)."""
    start = text.index(after) - 1
    for _ in range(n + 1):
        start = text.index(old, start + 1)
    return text[:start] + new + text[start + len(old):]


def gpu0(text: str):
    g = parse_smi_query(text, "capture").gpus[0]
    return g.ecc_volatile, g.ecc_aggregate


def text_line(label: str, value: str) -> str:
    return f"{label:<30}: {value}"


def test_text_form_sums_sram_and_dram_and_both_sram_uncorrectable_kinds():
    text = capture(A100_TEXT)
    for label, volatile, aggregate in (("SRAM Correctable", "2", "20"),
                                       ("DRAM Correctable", "3", "30"),
                                       ("SRAM Uncorrectable Parity", "1", "10"),
                                       ("SRAM Uncorrectable SEC-DED", "4", "40"),
                                       ("DRAM Uncorrectable", "5", "50")):
        text = set_nth(text, text_line(label, "0"), text_line(label, volatile), 0, "ECC Errors")
        # the first occurrence is now gone: the aggregate block's is the next one
        text = set_nth(text, text_line(label, "0"), text_line(label, aggregate), 0, "ECC Errors")
    assert gpu0(text) == (EccCounts(5, 10), EccCounts(50, 100))


def test_xml_form_sums_sram_and_dram():
    text = capture(A100_XML)
    for tag, volatile, aggregate in (("sram_correctable", "1", "11"),
                                     ("dram_correctable", "2", "22"),
                                     ("sram_uncorrectable", "3", "33"),
                                     ("dram_uncorrectable", "4", "44")):
        zero = f"<{tag}>0</{tag}>"
        text = set_nth(text, zero, f"<{tag}>{volatile}</{tag}>", 0)
        text = set_nth(text, zero, f"<{tag}>{aggregate}</{tag}>", 0)
    assert gpu0(text) == (EccCounts(3, 7), EccCounts(33, 77))


def test_old_schema_reads_the_totals_not_the_parts_and_total_again():
    text = capture(V100S_XML)
    # volatile: single bit 3 in device memory + 2 in the register file; double bit 1 in L2
    text = set_nth(text, "<device_memory>0</device_memory>", "<device_memory>3</device_memory>", 0)
    text = set_nth(text, "<register_file>0</register_file>", "<register_file>2</register_file>", 0)
    text = set_nth(text, "<total>0</total>", "<total>5</total>", 0)
    text = set_nth(text, "<l2_cache>0</l2_cache>", "<l2_cache>1</l2_cache>", 1)
    text = set_nth(text, "<total>0</total>", "<total>1</total>", 0)
    # aggregate: single bit 9, double bit 4, both in device memory
    text = set_nth(text, "<device_memory>0</device_memory>", "<device_memory>9</device_memory>", 0)
    text = set_nth(text, "<total>0</total>", "<total>9</total>", 0)
    text = set_nth(text, "<device_memory>0</device_memory>", "<device_memory>4</device_memory>", 0)
    text = set_nth(text, "<total>0</total>", "<total>4</total>", 0)
    assert gpu0(text) == (EccCounts(5, 1), EccCounts(9, 4))


def test_old_schema_as_captured_reads_zero():
    assert gpu0(capture(V100S_XML)) == (EccCounts(0, 0), EccCounts(0, 0))


@pytest.mark.parametrize("name", [A100_TEXT, A100_XML])
def test_every_count_not_available_reads_as_unknown_not_zero(name):
    """ECC disabled: nvidia-smi prints N/A for every count; that is no reading, not 0."""
    text = capture(name)
    if name.endswith("-qx.txt"):
        for tag in ("sram_correctable", "sram_uncorrectable", "dram_correctable",
                    "dram_uncorrectable"):
            for _ in range(2):
                text = set_nth(text, f"<{tag}>0</{tag}>", f"<{tag}>N/A</{tag}>", 0)
    else:
        for label in ("SRAM Correctable", "SRAM Uncorrectable Parity",
                      "SRAM Uncorrectable SEC-DED", "DRAM Correctable", "DRAM Uncorrectable"):
            for _ in range(2):
                text = set_nth(text, text_line(label, "0"), text_line(label, "N/A"), 0,
                               "ECC Errors")
    assert gpu0(text) == (EccCounts(None, None), EccCounts(None, None))


def test_a_report_without_an_ecc_section_reads_as_unknown():
    q = parse_smi_query(capture("nvidia-smi-q/azure-8gpu-535.86.10-retired-pages.txt"), "a")
    assert [(g.ecc_volatile, g.ecc_aggregate) for g in q.gpus] == [
        (EccCounts(None, None), EccCounts(None, None))] * 8


def test_one_gpu_s_counts_stay_its_own():
    text = set_nth(capture(A100_TEXT), text_line("DRAM Uncorrectable", "0"),
                   text_line("DRAM Uncorrectable", "7"), 2, "ECC Errors")   # GPU 1's volatile block
    q = parse_smi_query(text, "a100")
    assert [g.ecc_volatile.uncorrectable for g in q.gpus] == [0, 7, 0, 0]


def test_the_throttle_schema_names_active_reasons_as_the_event_schema_does():
    """Before R535 the XML says clocks_throttle_reason_*; the reasons read the same."""
    text = capture("nvidia-smi-q/tesla-t4-515.105.01-qx.txt").replace(
        "<clocks_throttle_reason_hw_slowdown>Not Active", "<clocks_throttle_reason_hw_slowdown>"
        "Active", 1)
    assert parse_smi_query(text, "t4").gpus[0].clock_reasons_active == ["hw_slowdown"]
