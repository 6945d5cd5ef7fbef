"""The `nvidia-smi -q` text reader on the forms real reports take beside the full captures:
the banner, elisions in shared excerpts, a report cut to its GPU sections, R610's
`CUDA UMD Version`, and what is not a report at all (variations of the real H100 capture)."""

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.smi_tree import parse_text
from tests.evidence_builder import FIXTURES

H100 = (FIXTURES / "nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt").read_text()
HEADER_END = H100.index("GPU 00000000:18:00.0")


def test_the_real_report_reads_as_a_header_and_one_tree_per_gpu():
    report = parse_text(H100, "h100")
    assert (report["driver_version"], report["cuda_version"], report["attached_gpus"]) == (
        "565.57.01", "12.7", "8")
    assert [g["@id"] for g in report["gpus"]][:2] == ["00000000:18:00.0", "00000000:2A:00.0"]
    gpu = report["gpus"][0]
    assert gpu["MIG Mode"] == {"Current": "Disabled", "Pending": "Disabled"}
    assert gpu["Product Name"] == "NVIDIA H100 80GB HBM3"
    # a section's keys end where a shallower line starts: the next key is the GPU's own
    assert "Addressing Mode" in gpu and "Addressing Mode" not in gpu["MIG Mode"]


def test_elisions_and_the_banner_leave_the_nesting_as_it_was():
    elided = H100.replace("    MIG Mode\n        Current                           : Disabled\n",
                          "    MIG Mode\n        ...\n        [...]\n"
                          "        Current                           : Disabled\n", 1)
    elided = elided.replace("==============NVSMI LOG==============",
                            "==============NVSMI LOG==============\n=====")
    assert parse_text(elided, "e") == parse_text(H100, "h100")


def test_a_report_cut_to_its_gpu_sections_reads_without_a_header():
    report = parse_text(H100[HEADER_END:], "cut")
    assert (report["driver_version"], report["cuda_version"], report["attached_gpus"]) == (
        "", "", "")
    assert len(report["gpus"]) == 8


def test_r610_names_the_cuda_version_umd():
    text = H100.replace("CUDA Version                              : 12.7",
                        "CUDA UMD Version                          : 13.3")
    assert parse_text(text, "umd")["cuda_version"] == "13.3"


def test_a_header_alone_is_a_report_of_no_gpu():
    report = parse_text(H100[:HEADER_END], "header")
    assert (report["driver_version"], report["gpus"]) == ("565.57.01", [])


@pytest.mark.parametrize("text", ["", "Segmentation fault\n", "Timestamp : now\n"])
def test_what_is_not_a_report_is_refused(text):
    with pytest.raises(ParseError) as err:
        parse_text(text, "/evidence/node07/nvidia-smi-q.txt")
    assert str(err.value) == ("/evidence/node07/nvidia-smi-q.txt: not `nvidia-smi -q` output "
                              "(no Driver Version, no GPU)")
