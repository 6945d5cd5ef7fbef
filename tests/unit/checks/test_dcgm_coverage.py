"""Issue 65: coverage for DCGM is the level's tests, on every GPU. A level-3 report whose
every hardware, integration and stress test was skipped, with the software test passed,
judged nothing about the GPUs; a level-2 report whose memory test ran on half the GPUs
judged the other half on nothing. Both fail (fix-setup, naming what did not run); a report
with every required test passed on every GPU passes. The reports are DCGM 4.2.3's JSON as
the lab's dcgmi prints it (gpuprov/lab/sim/dcgmi.py), edited per GPU."""

import json

from gpuprov.checks.evaluators.dcgm import LEVELS
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lab.sim import dcgmi
from gpuprov.profiles import load_profile
from tests.conftest import gpuprov
from tests.evidence_builder import healthy_h100, replace

H100 = load_profile("h100-sxm-8")
HW = {"gpus": [{"index": g, "serial": f"16544230{g:05d}", "pcie": {"gen": 5, "width": 16}}
               for g in range(8)],
      "gpu": {"pci_device_id": "0x233010de"}, "gflops": 50000,
      "pcie": {"gen": 5, "width": 16}}


def _report(level: int, skipped: dict[str, range] | None = None) -> str:
    """The lab's DCGM 4 document for `level` on 8 GPUs, with `skipped`'s tests' results on
    those GPUs turned Skip (and a test Skip on all of them summarised Skip)."""
    doc = json.loads(dcgmi.diag_json({**HW, "kind": "h100-sxm-8"}, level, "565.57.01")[0])
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            gpus = (skipped or {}).get(test["name"], range(0))
            for result in test["results"]:
                if result["entity_id"] in gpus:
                    result.update(status="Skip")
                    result.pop("info", None)
            if len(gpus) == 8:
                test["test_summary"]["status"] = "Skip"
    return json.dumps(doc)


def _node(tmp_path, level: int, report: str):
    node = healthy_h100(tmp_path / "node07")
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "dcgm_level": level}))
    return replace(node, "dcgmi-diag.json", report)


def _dcgm(node):
    return judge(Evidence(node), H100, None, only=("dcgm_diag",)).checks[0]


def test_a_level_3_report_whose_hardware_tests_were_all_skipped_is_rejected(tmp_path):
    hardware = ("memory", "diagnostic", "nvbandwidth", "pcie", "memory_bandwidth",
                "targeted_stress", "targeted_power")
    node = _node(tmp_path, 3, _report(3, dict.fromkeys(hardware, range(8))))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "rejected"
    dcgm = next(c for c in data["checks"] if c["id"] == "dcgm_diag")
    assert (dcgm["status"], dcgm["action"]) == ("fail", "fix-setup"), dcgm
    assert dcgm["summary"].startswith(
        "dcgmi diag -r 3: memory, pcie, diagnostic, targeted_stress, targeted_power, "
        "memory_bandwidth skipped"), dcgm["summary"]
    # nvbandwidth, which level 3 runs only where it is installed, is not required
    assert "nvbandwidth" not in dcgm["summary"]


def test_a_level_2_report_whose_memory_test_ran_on_half_the_gpus_is_rejected(tmp_path):
    result = _dcgm(_node(tmp_path, 2, _report(2, {"memory": range(4, 8)})))
    assert (result.status, result.action) == ("fail", "fix-setup")
    assert result.summary.startswith("dcgmi diag -r 2: memory not run on GPU 4, 5, 6, 7 (ran "
                                     "on 4 of 8)"), result.summary
    assert result.gpu is None


def test_a_report_with_every_required_test_passed_on_every_gpu_passes(tmp_path):
    for level in (2, 3, 4):
        result = _dcgm(_node(tmp_path / str(level), level, _report(level)))
        assert result.status == "pass", (level, result.summary)
    # a test level 3 runs only where installed, skipped: reported, never a pass in silence
    result = _dcgm(_node(tmp_path / "opt", 3, _report(3, {"nvbandwidth": range(8)})))
    assert (result.status, result.action) == ("warn", "none")
    assert "skipped, nothing judged by them: nvbandwidth" in result.summary


def test_the_lab_s_dcgmi_runs_what_the_level_table_requires():
    """The lab's stand-in and the level table name the same tests per level (both from
    NVIDIA/DCGM's FillTestVectors): a required test the stand-in did not run would make
    every lab validation fail, one it ran that the table lacks would go unrequired."""
    for level in (2, 3, 4):
        ran = {t for _, t, first in dcgmi.TESTS if 1 < first <= level}
        required = {t for lvl, tests in LEVELS["levels"].items() if lvl <= level
                    for t in tests}
        optional = {t for lvl, tests in LEVELS["optional"].items() if lvl <= level
                    for t in tests}
        assert required <= ran and ran - required <= optional, level


def test_a_required_test_skipped_in_an_older_table_is_rejected_not_warned(tmp_path):
    """The older tables name no GPU (DCGM 3.0.4's `dcgmi diag -r 3`, where "tests show as
    skipped": NVIDIA/DCGM#55), so a required test's `Skip` row is read by its status alone:
    it did not run, fix-setup, not the warning an optional plugin's skip gets."""
    rows = [("Deployment", [("Denylist", "Pass"), ("NVML Library", "Pass"),
                            ("CUDA Main Library", "Pass"), ("Persistence Mode", "Pass")]),
            ("Integration", [("PCIe", "Pass")]),
            ("Hardware", [("GPU Memory", "Skip")])]
    line = "+---------------------------+------------------------------------------------+"
    table = ["Successfully ran diagnostic for group.", line,
             "| Diagnostic                | Result                                         |",
             line.replace("-", "=")]
    for section, tests in rows:
        table.append(f"+-----  {section}  ".ljust(28, "-") + line[28:])
        table += [f"| {name:<25} | {status:<46} |" for name, status in tests]
    table.append(line)
    result = _dcgm(_node(tmp_path, 2, "\n".join(table) + "\n"))
    assert (result.status, result.action) == ("fail", "fix-setup"), result.summary
    assert result.summary.startswith("dcgmi diag -r 2: memory skipped"), result.summary
