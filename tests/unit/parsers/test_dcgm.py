"""`dcgmi diag` tables on real captures (DCGM 2.x to 4.x): sections, per-GPU results, GPU
lists, wrapped Error/Warning text; and the dcgm_diag check's branches on them and on
minimal variations."""

from __future__ import annotations

import json

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, Status
from gpuprov.parsers.dcgm import parse_dcgm_diag
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, replace

PASS_R1 = "dcgmi/diag-r1-pass-old-dcgm.txt"
FAIL_R1 = "dcgmi/diag-r1-fail-deployment-old-dcgm.txt"
FRAGMENTS = "dcgmi/diag-fragments-row-remap-and-gpu-memory-fail.txt"
DCGM4 = "dcgmi/diag-dcgm-4.2.3-metadata-pergpu-rows.txt"
DCGM3 = "dcgmi/diag-r3-dcgm-3.0.4-deployment-section.txt"


def test_old_and_new_namings_read_as_deployment_tests():
    old = parse_dcgm_diag(capture(PASS_R1), "d")
    assert [t.name for t in old.tests][:2] == ["Blacklist", "NVML Library"]
    assert {t.section for t in old.tests} == {"Deployment"} and not old.failed
    new = parse_dcgm_diag(capture(DCGM3), "d")
    assert "Page Retirement/Row Remap" in [t.name for t in new.tests] and not new.failed


def test_dcgm_4_metadata_and_per_gpu_rows():
    diag = parse_dcgm_diag(capture(DCGM4), "d")
    assert diag.metadata == {"DCGM Version": "4.2.3", "Driver Version Detected": "570.148.08",
                             "GPU Device IDs Detected": "26b9, 26b9, 26b9, 26b9"}
    [software] = diag.tests
    assert (software.name, software.status, software.failed_gpus) == ("software", "pass", [])
    failing = capture(DCGM4).replace("GPU2: Pass  ", "GPU2: Fail  ")
    [software] = parse_dcgm_diag(failing, "d").tests
    assert (software.status, software.failed_gpus) == ("fail", [2])


def test_failed_tests_gpu_lists_and_wrapped_messages():
    deployment = parse_dcgm_diag(capture(FAIL_R1), "d")
    assert [t.name for t in deployment.failed] == [
        "Persistence Mode", "Environment Variables", "Page Retirement", "Graphics Processes",
        "Inforom"]
    fragments = parse_dcgm_diag(capture(FRAGMENTS), "d")
    error, memory = fragments.tests
    assert error.messages == [("Error", "GPU 3 has uncorrectable memory errors and row "
                                        "remappings are pending")]
    assert error.failed_gpus == [3]
    assert (memory.name, memory.status, memory.failed_gpus) == ("GPU Memory", "fail", [0])
    kind, text = memory.messages[0]
    assert kind == "Warning" and text.startswith(
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test")


@pytest.mark.parametrize("text", ["", "Error: unable to connect to host engine\n",
                                  "| Diagnostic | Result |\n"])
def test_what_is_not_a_diag_table_is_refused(text):
    with pytest.raises(ParseError, match=r"^/e/dcgmi-diag\.txt: "):
        parse_dcgm_diag(text, "/e/dcgmi-diag.txt")


H100 = load_profile("h100-sxm-8")


def _dcgm_check(tmp_path, text: str | None, level: int = 2):
    node = healthy_h100(tmp_path / "node07")
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "dcgm_level": level}))
    if text is not None:
        replace(node, "dcgmi-diag.txt", text)
    return judge(Evidence(node), H100, None, only=("dcgm_diag",)).checks[0]


def test_the_check_passes_warns_fails_and_skips(tmp_path):
    passed = _dcgm_check(tmp_path / "a", capture(PASS_R1), level=1)
    assert passed.status == Status.PASS and passed.summary == (
        "dcgmi diag -r 1: 9 test(s) passed")
    deployment = _dcgm_check(tmp_path / "b", capture(FAIL_R1), level=1)
    assert (deployment.status, deployment.action) == (Status.FAIL, Action.REBOOT)
    assert deployment.summary.startswith("dcgmi diag -r 1: Persistence Mode (Deployment); "
                                         "Environment Variables (Deployment);")
    assert deployment.summary.endswith("(+2 more)")
    skipped = _dcgm_check(tmp_path / "c", None)
    assert skipped.status == Status.SKIP and "DCGM not installed" in skipped.summary


def test_a_hardware_failure_names_its_gpu_and_calls_for_rma(tmp_path):
    hardware = ("+-----  Hardware  ----------+------------------------------------------------+\n"
                "| GPU Memory                | Pass - GPUs: 0, 1, 2, 3, 4, 6, 7               |\n"
                "|                           | Fail - GPU: 5                                  |\n")
    text = capture(PASS_R1) + hardware
    result = _dcgm_check(tmp_path, text, level=3)
    assert (result.status, result.action) == (Status.FAIL, Action.RMA)
    assert result.summary.startswith("dcgmi diag -r 3: GPU Memory (Hardware) on GPU 5 "
                                     "(00000000:AB:00.0, serial 1654323021387)")
    assert (result.gpu.index, result.gpu.serial) == (5, "1654323021387")
    assert result.values["tests"]["GPU Memory"]["failed_gpus"] == [5]


def test_the_older_tables_names_count_as_the_tests_level_2_runs(tmp_path):
    """DCGM's older tables name the level-2 plugins `GPU Memory` and `PCIe`: a report with
    both passing covers level 2 (not "no memory test")."""
    level_2 = ("+-----  Integration  -------+------------------------------------------------+\n"
               "| PCIe                      | Pass - All                                     |\n"
               "+-----  Hardware  ----------+------------------------------------------------+\n"
               "| GPU Memory                | Pass - All                                     |\n")
    result = _dcgm_check(tmp_path, capture(PASS_R1) + level_2, level=2)
    assert (result.status, result.summary) == (Status.PASS, "dcgmi diag -r 2: 11 test(s) passed")


def test_a_warning_alone_warns(tmp_path):
    warning = ("| Warning                   | GPU 0 Thermal violations totaling 13.3 second  |\n"
               "|                           | s started at 9.7 seconds into the test         |\n")
    result = _dcgm_check(tmp_path, capture(PASS_R1) + warning, level=1)
    assert (result.status, result.action) == (Status.WARN, Action.NONE)
    assert result.summary == ("dcgmi diag -r 1: Inforom warns: GPU 0 Thermal violations "
                              "totaling 13.3 seconds started at 9.7 seconds into the test")


def test_messages_belong_to_their_section_and_gpus_accumulate():
    table = ("| Diagnostic                | Result                                         |\n"
             "| Error                     | GPU 6 is not responding                        |\n"
             "|-----  Deployment  --------+------------------------------------------------|\n"
             "| Persistence Mode          | Pass                                           |\n"
             "+-----  Hardware  ----------+------------------------------------------------+\n"
             "| Error                     | GPU 2 has uncorrectable memory errors          |\n"
             "| GPU Memory                | Fail - GPU: 0                                  |\n"
             "|                           | GPU3: Fail                                     |\n"
             "| Error                     | GPU 5 failed the memory test                   |\n")
    diag = parse_dcgm_diag(table, "d")
    assert [(t.name, t.section) for t in diag.tests] == [
        ("diagnostic", ""), ("Persistence Mode", "Deployment"), ("Hardware", "Hardware"),
        ("GPU Memory", "Hardware")]
    assert diag.tests[0].failed_gpus == [6] and diag.tests[2].failed_gpus == [2]
    assert diag.tests[1].messages == [] and diag.tests[1].status == "pass"
    assert diag.tests[3].failed_gpus == [0, 3, 5]
    assert [t.name for t in diag.failed] == ["diagnostic", "Hardware", "GPU Memory"]


@pytest.mark.parametrize("text, message", [
    ("", "/e/d.txt: not `dcgmi diag` output (no JSON document or Diagnostic | Result "
         "table): no output"),
    ("\nDiagnostic only\n", "/e/d.txt: not `dcgmi diag` output (no JSON document or "
                             "Diagnostic | Result table): Diagnostic only"),
    ("| Diagnostic | Result |\n+---+---+\n", "/e/d.txt: a `dcgmi diag` table with no test rows"),
])
def test_refusals_name_the_file_and_say_why(text, message):
    with pytest.raises(ParseError) as err:
        parse_dcgm_diag(text, "/e/d.txt")
    assert str(err.value) == message
