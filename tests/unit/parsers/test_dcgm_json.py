"""`dcgmi diag -j` documents as DCGM 3 and 4 printed them (real captures), `dcgmi health -c -j`
in dcgmi's generic JSON output, and the dcgm_diag / dcgm_health checks on both."""

from __future__ import annotations

import json

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, Status
from gpuprov.parsers.dcgm import parse_dcgm_diag
from gpuprov.parsers.dcgm_health import parse_dcgm_health
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, one_gpu, replace

DCGM3 = "dcgmi/diag-j-dcgm-3.1.0-8gpu-pass-nulls-banner.json"
GB10_R1 = "dcgmi/diag-j-dcgm-4.2.3-gb10-r1-software-fail.json"
GB10_R2 = "dcgmi/diag-j-dcgm-4.2.3-gb10-r2-partial-skip.json"
PERSISTENCE = ('Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence '
               'mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.')
H100 = load_profile("h100-sxm-8")
# a one-GPU node's (the GB10 captures report one GPU)
ONE = type(H100)("h100-x1", "test", {**H100.data, "gpu": {**H100.data["gpu"], "count": 1}})


def test_dcgm_3_document_after_a_stray_line_with_null_entries():
    diag = parse_dcgm_diag(capture(DCGM3), "d")
    assert diag.metadata == {"DCGM Version": "3.1.0"}
    assert [(t.section, t.name) for t in diag.tests][:2] == [("Deployment", "Denylist"),
                                                            ("Deployment", "NVML Library")]
    assert len(diag.tests) == 10 and diag.tests[-1].section == "Custom"
    assert {t.status for t in diag.tests} == {"pass"} and not diag.failed
    # the CSV gpu_ids of a Deployment test and the number of a plugin's result name GPUs alike
    failing = capture(DCGM3).replace('"status" : "PASS"', '"status" : "FAIL"', 1)
    assert parse_dcgm_diag(failing, "d").failed[0].failed_gpus == list(range(8))
    failing = capture(DCGM3).replace('"gpu_ids" : 6,\n\t\t\t\t\t\t\t\t"status" : "PASS"',
                                     '"gpu_ids" : 6,\n\t\t\t\t\t\t\t\t"status" : "FAIL"')
    [software] = parse_dcgm_diag(failing, "d").failed
    assert (software.name, software.failed_gpus) == ("software", [6])


def test_dcgm_4_document_reasons_info_and_metadata():
    diag = parse_dcgm_diag(capture(GB10_R1), "d")
    assert diag.metadata == {"DCGM Version": "4.2.3", "Driver Version Detected": "580.82.09",
                             "GPU Device IDs Detected": "2e12"}
    [software] = diag.failed
    assert (software.name, software.section, software.status, software.failed_gpus) == (
        "software", "Deployment", "fail", [0])
    assert software.messages == [
        ("Error", PERSISTENCE),
        ("Info", "Error getting the SRAM Threshold Count for GPU 0. Status = 0. Value = "
                 "9223372036854775794. SRAM Threshold checking was skipped.")]


def test_dcgm_4_skipped_tests_are_told_apart_from_passes():
    diag = parse_dcgm_diag(capture(GB10_R2), "d")
    assert [(t.name, t.status) for t in diag.tests] == [
        ("software", "fail"), ("memory", "skip"), ("pcie", "skip")]
    assert [t.name for t in diag.skipped] == ["memory", "pcie"]


def test_the_summary_outranks_passing_results_and_a_warning_result_is_not_an_error():
    doc = json.loads(capture(GB10_R2))
    memory = doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]
    memory["results"][0].update(status="Warn", warnings=[{"warning": "GPU 0 ran hot"}])
    memory["test_summary"]["status"] = "Fail"
    test = parse_dcgm_diag(json.dumps(doc), "d").tests[1]
    assert (test.status, test.messages) == ("fail", [("Warning", "GPU 0 ran hot")])


def test_a_runtime_error_is_a_failed_diagnostic():
    doc = {"DCGM GPU Diagnostic": {"version": "3.3.9", "runtime_error":
                                   "The GPU(s) are in use by other processes"}}
    [runtime] = parse_dcgm_diag(json.dumps(doc), "d").failed
    assert (runtime.name, runtime.messages) == (
        "runtime", [("Error", "The GPU(s) are in use by other processes")])


def test_a_diagnostic_that_did_not_run_fails_without_blaming_the_hardware(tmp_path):
    doc = {"DCGM GPU Diagnostic": {"version": "3.3.9", "runtime_error":
                                   "The GPU(s) are in use by other processes"}}
    result = _check(tmp_path, "dcgm_diag", **{"dcgmi-diag.json": json.dumps(doc)})
    assert (result.status, result.action, result.gpu) == (Status.FAIL, Action.NONE, None)
    assert result.summary == ("dcgmi diag -r 2: runtime (Runtime): The GPU(s) are in use by "
                              "other processes")


@pytest.mark.parametrize("text, message", [
    ("{not json", "malformed `dcgmi diag -j` JSON: Expecting property name enclosed in double "
                  "quotes (line 1)"),
    ('{"tests": []}', 'not `dcgmi diag -j` output (no "DCGM Diagnostic" or "DCGM GPU '
                      'Diagnostic" object)'),
    ('{"DCGM Diagnostic": {"test_categories": []}}',
     "a `dcgmi diag -j` document with no test results"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": '
     '"memory", "results": [{"entity_id": 0, "status": "Inconclusive"}]}]}]}}',
     "test 'memory': unknown dcgmi status 'Inconclusive'"),
])
def test_json_refusals_name_the_file_and_say_why(text, message):
    with pytest.raises(ParseError) as err:
        parse_dcgm_diag(text, "/e/dcgmi-diag.json")
    assert str(err.value) == f"/e/dcgmi-diag.json: {message}"


def _node(tmp_path, **files: str):
    node = healthy_h100(tmp_path / "node07")
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "dcgm_level": 2}))
    for name, text in files.items():
        replace(node, name, text)
    return Evidence(node)


def _check(tmp_path, check_id: str, **files: str):
    return judge(_node(tmp_path, **files), H100, None, strict=False,
                 only=(check_id,)).checks[0]


def test_diag_check_reads_the_json_evidence(tmp_path):
    failed = _check(tmp_path / "a", "dcgm_diag", **{"dcgmi-diag.json": capture(GB10_R1)})
    assert (failed.status, failed.action) == (Status.FAIL, Action.REBOOT)
    assert failed.summary.startswith("dcgmi diag -r 2: software (Deployment) on GPU 0 "
                                     "(00000000:18:00.0, serial ")
    assert "Persistence mode for GPU 0 is disabled" in failed.summary
    # DCGM 3.1.0's document holds the deployment checks and `software` only: a level-1 run's
    # whole report, and a level-2 run's cut short (issue 52: memory and pcie missing)
    node = _node(tmp_path / "b", **{"dcgmi-diag.json": capture(DCGM3)})
    meta = json.loads((node.dir / "meta.json").read_text())
    replace(node.dir, "meta.json", json.dumps({**meta, "dcgm_level": 1}))
    passed = judge(Evidence(node.dir), H100, None, only=("dcgm_diag",)).checks[0]
    assert passed.status == Status.PASS and passed.summary == "dcgmi diag -r 1: 10 test(s) passed"
    short = _check(tmp_path / "c", "dcgm_diag", **{"dcgmi-diag.json": capture(DCGM3)})
    assert (short.status, short.action) == (Status.FAIL, Action.FIX_SETUP)
    assert short.summary.startswith("dcgmi diag -r 2: no memory, pcie test in its report")


def test_skipped_tests_the_level_requires_fail_for_the_setup(tmp_path):
    """Issue 65: a test the level runs that was skipped judged nothing; with the software
    test passed and memory and pcie skipped, nothing about the GPU was judged."""
    doc = json.loads(capture(GB10_R2))
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0] = {
        "entity_group": "GPU", "entity_id": 0, "status": "Pass"}
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"]["status"] = "Pass"
    # the GB10's report judged on a one-GPU node (every GPU it names is the node's)
    node = one_gpu(_node(tmp_path, **{"dcgmi-diag.json": json.dumps(doc)}).dir)
    result = judge(Evidence(node), ONE, None, only=("dcgm_diag",)).checks[0]
    assert (result.status, result.action) == (Status.FAIL, Action.FIX_SETUP)
    assert result.summary.startswith("dcgmi diag -r 2: memory, pcie skipped (the level runs "
                                     "each on every GPU"), result.summary


def test_what_dcgmi_printed_instead_of_a_document_rejects(tmp_path):
    refusal = ("Error: unable to establish a connection to the specified host: localhost\n"
               "Error: Unable to connect to host engine. Host engine connection "
               "invalid/disconnected.\n")
    result = _check(tmp_path, "dcgm_diag", **{"dcgmi-diag.json": refusal})
    assert result.status == Status.FAIL
    assert result.summary.endswith("Result table): Error: unable to establish a connection to "
                                   "the specified host: localhost")


def _health(incidents: dict | None = None, overall: str = "Healthy") -> str:
    """`dcgmi health -c -j` in dcgmi's generic output (dcgmi/DcgmiOutput.cpp)."""
    body: dict = {"Overall Health": {"value": overall}}
    for (group, entity), systems in (incidents or {}).items():
        errors = {system: {"value": value, "overflow": parts}
                  for system, (value, parts) in systems.items()}
        body.setdefault(group, {"children": {}})["children"][str(entity)] = {
            "value": overall, "children": {"Errors": {"children": errors}}}
    return json.dumps({"body": body, "header": ["Health Monitor Report"]}, indent=3)


def test_health_incidents_rejoin_their_message_and_name_entity_and_system():
    health = parse_dcgm_health(_health({("GPU", 5): {"Memory system": (
        "Failure", ["Detected 1 volatile double-bit ECC error(s) in GPU", "5."])},
        ("Switch", 2): {"NVLINK system": ("Warning", ["NVSwitch 2's NvLink 7 is down."])}},
        "Failure"), "h")
    assert health.overall == "fail"
    assert [(i.entity_group, i.entity_id, i.system, i.health, i.message)
            for i in health.incidents] == [
        ("GPU", 5, "Memory system", "fail",
         "Detected 1 volatile double-bit ECC error(s) in GPU 5."),
        ("Switch", 2, "NVLINK system", "warn", "NVSwitch 2's NvLink 7 is down.")]


@pytest.mark.parametrize("text, message", [
    ("Error: Health watches not enabled. Please enable watches. \n",
     "not `dcgmi health -c -j` output: Error: Health watches not enabled. Please enable "
     "watches."),
    ("{", "malformed `dcgmi health -c -j` JSON: Expecting property name enclosed in double "
          "quotes (line 1)"),
    ('{"body": {}}', 'not `dcgmi health -c -j` output (no "Overall Health")'),
    (_health(overall="Internal error"), "Overall Health: health 'Internal error' is not "
                                        "Healthy, Warning or Failure"),
    (_health(overall="Failure"), "Overall Health Failure with no incident listed"),
])
def test_health_refusals_name_the_file_and_say_why(text, message):
    with pytest.raises(ParseError) as err:
        parse_dcgm_health(text, "/e/dcgmi-health.json")
    assert str(err.value) == f"/e/dcgmi-health.json: {message}"


def test_health_check_fails_warns_passes_and_skips(tmp_path):
    memory = {("GPU", 5): {"Memory system": ("Failure", [
        "Detected 1 volatile double-bit ECC error(s) in GPU 5."])}}
    failed = _check(tmp_path / "a", "dcgm_health",
                    **{"dcgmi-health.json": _health(memory, "Failure")})
    assert (failed.status, failed.action, failed.gpu.index) == (Status.FAIL,
                                                                Action.RESET_GPU, 5)
    assert failed.summary == ("dcgmi health: Failure: GPU 5 (00000000:AB:00.0, serial "
                              "1654323021387) Memory system: Detected 1 volatile double-bit "
                              "ECC error(s) in GPU 5.")
    links = {("GPU", 1): {"NVLINK system": ("Failure", ["GPU 1's NvLink link 3 is down"])},
             ("GPU", 2): {"Thermal system": ("Warning", ["GPU 2 ran hot"]),
                          "InfoROM system": ("Failure", ["GPU 2's InfoROM is corrupt"])}}
    two = _check(tmp_path / "b", "dcgm_health",
                 **{"dcgmi-health.json": _health(links, "Failure")})
    assert (two.status, two.action, two.gpu) == (Status.FAIL, Action.RMA, None)
    assert "GPU 1 " in two.summary and "InfoROM system" in two.summary
    assert "ran hot" not in two.summary
    warned = _check(tmp_path / "c", "dcgm_health", **{"dcgmi-health.json": _health(
        {("GPU", 2): {"Thermal system": ("Warning", ["GPU 2 ran hot"])}}, "Warning")})
    assert (warned.status, warned.action) == (Status.WARN, Action.NONE)
    assert warned.summary.endswith("Thermal system: GPU 2 ran hot")
    healthy = _check(tmp_path / "d", "dcgm_health", **{"dcgmi-health.json": _health()})
    assert healthy.status == Status.PASS and healthy.values == {"overall": "pass",
                                                                 "incidents": []}
    skipped = _check(tmp_path / "e", "dcgm_health")
    assert skipped.status == Status.SKIP and "DCGM not installed" in skipped.summary


# DCGM's own Info text, as NVIDIA/DCGM issue #215 quotes it (DCGM 3: the pcie test's one
# string; DCGM 4, `dcgmi diag -r 3 -j` on 8 GPUs: the diagnostic test's per-GPU entries)
PCIE_INFO = ("GPU 0 GPU to Host bandwidth:\t\t24.02 GB/s, GPU 0 Host to GPU bandwidth:\t\t"
             "25.93 GB/s, GPU 0 bidirectional bandwidth:\t39.32 GB/s, GPU 0 GPU to Host "
             "latency:\t\t3.024 us, GPU 0 Host to GPU latency:\t\t3.715 us, GPU 0 "
             "bidirectional latency:\t\t5.019 us")
GEMM_INFO = ["Allocated space for 138 output matricies from 76077622886 bytes available.",
             "Running with precisions: FP64 1, FP32 1, FP16 1",
             "GPU 1 calculated at approximately 859.08 gigaflops during this test"]


def test_figures_come_from_dcgm_s_info_text():
    doc = {"DCGM Diagnostic": {"test_categories": [
        {"category": "Integration", "tests": [{"name": "pcie", "results": [
            {"entity_group": "GPU", "entity_id": 0, "status": "Pass", "info": PCIE_INFO}]}]},
        {"category": "Stress", "tests": [{"name": "diagnostic", "results": [
            {"entity_group": "GPU", "entity_id": 1, "status": "Pass", "info": GEMM_INFO}]}]}]}}
    figures = parse_dcgm_diag(json.dumps(doc), "d").figures()
    assert figures == {"pcie_gbps": {0: 24.02}, "gflops": {1: 859.08}}   # the slower way


def test_figures_below_the_profile_s_dcgm_floors_fail(tmp_path):
    doc = json.loads(capture(GB10_R2))
    software = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    software["results"][0] = {"entity_group": "GPU", "entity_id": 0, "status": "Pass"}
    software["test_summary"]["status"] = "Pass"
    pcie = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    pcie["results"][0].update(status="Pass", info=[PCIE_INFO])
    pcie["test_summary"]["status"] = "Pass"
    memory = doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]
    assert memory["name"] == "memory"
    memory["results"][0].update(status="Pass")
    memory["test_summary"]["status"] = "Pass"
    node = Evidence(one_gpu(_node(tmp_path, **{"dcgmi-diag.json": json.dumps(doc)}).dir))
    floors = {**ONE.data, "dcgm": {"level": 2, "pcie_min_gbps": 40}}
    result = judge(node, type(H100)(H100.name, "t", floors), None, only=("dcgm_diag",)).checks[0]
    assert (result.status, result.action, result.gpu.index) == (
        Status.FAIL, Action.RESEAT_OR_INSPECT, 0)
    assert result.summary.endswith("24.02 GB/s host-device copy below dcgm.pcie_min_gbps 40")
    assert result.values["figures"] == {"pcie_gbps": {"0": 24.02}}
    shipped = judge(node, ONE, None, only=("dcgm_diag",)).checks[0]   # no DCGM floors
    assert shipped.status == Status.PASS, shipped.summary   # no DCGM floors: passes
