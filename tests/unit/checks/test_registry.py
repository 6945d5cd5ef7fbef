"""The check registry and what derives from it: ids, stages, generated missing/skip
results, the report schema's id list, docs/checks.md and docs/evidence.md."""

import json
import re
from pathlib import Path

import pytest

from gpuprov import docs_tables
from gpuprov.checks.catalog import all_checks, check_ids, stage_checks
from gpuprov.checks.registry import beside, check
from gpuprov.checks.run import judge
from gpuprov.evidence import KINDS, STAGES, Evidence
from gpuprov.model import Action, CheckResult, Status
from gpuprov.profiles import load_profile
from gpuprov.resources import data_file
from tests.evidence_builder import healthy_h100, replace


def test_every_check_declares_stage_evidence_rule_and_action():
    assert len(set(check_ids())) == len(check_ids()) >= 18
    for c in all_checks():
        assert c.stage in STAGES and c.rule and isinstance(c.action, Action)
        for need in c.needs:
            for kind in need if isinstance(need, tuple) else (need,):
                assert kind in KINDS, (c.id, kind)
        assert (c.applies is None and not c.optional) == (not c.skip_reason), c.id


def test_checks_run_in_stage_order_and_every_stage_list_comes_from_the_registry():
    ranks = [STAGES.index(c.stage) for c in all_checks()]
    assert ranks == sorted(ranks)
    assert sum((stage_checks(s) for s in STAGES), ()) == check_ids()
    assert "container_toolkit" in stage_checks("identity")
    assert stage_checks("ddp") == ("numeric_fingerprint", "ddp_smoke", "nccl_bandwidth",
                                   "nvbandwidth", "gdrcopy")
    assert stage_checks("fabric") == ("fabric", "fabric_rails")


def test_a_check_declared_twice_is_refused():
    all_checks()
    with pytest.raises(ValueError, match="declared twice"):
        check("ecc", stage="soak", needs=(), rule="x", action=Action.NONE)(lambda ctx, r: None)
    with pytest.raises(ValueError, match="unknown stage"):
        check("new_one", stage="later", needs=(), rule="x", action=Action.NONE)


def test_missing_and_skip_are_generated_from_the_declaration(tmp_path):
    node = replace(healthy_h100(tmp_path / "n"), "nvidia-smi-nvlink-errors-after.txt", None)
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    assert by_id["nvlink_errors"].status == "missing"
    assert by_id["nvlink_errors"].summary == ("no evidence: nvidia-smi-nvlink-errors-after.txt "
                                              "not collected")
    # what gpuprov could not see is a setup finding (issue 53), never a hardware action
    assert by_id["nvlink_errors"].action == "fix-setup"
    pcie = {c.id: c for c in judge(Evidence(node), load_profile("l40s-pcie-4"), None).checks}
    assert (pcie["nvlink_errors"].status, pcie["nvlink_errors"].summary) == (
        "skip", "no NVLink in this profile")


def test_report_schema_lists_exactly_the_registered_ids():
    text = data_file("schemas/validation-report.schema.json").read_text()
    assert docs_tables.schema_with_current_ids(text) == text, (
        "the schema's check ids are stale: run python -m gpuprov.docs_tables")
    schema = json.loads(text)
    check_item = schema["properties"]["nodes"]["items"]["properties"]["checks"]["items"]
    assert check_item["properties"]["id"]["enum"] == list(check_ids())
    assert set(check_item["properties"]["action"]["enum"]) == {str(a) for a in Action}


@pytest.mark.parametrize("name", sorted(docs_tables.GENERATED))
def test_generated_docs_are_current(name):
    text = (docs_tables.DOCS / name).read_text()
    assert docs_tables.render(text, docs_tables.GENERATED[name]()) == text, (
        f"docs/{name} is stale: run python -m gpuprov.docs_tables")


def test_a_check_set_refuses_an_id_twice_and_a_result_it_did_not_declare():
    from gpuprov.checks.registry import CheckSet
    from gpuprov.model import CheckResult, Status

    rules: CheckSet[int] = CheckSet("doctor")

    @rules.check("disk", rule="enough room")
    def _disk(free: int) -> list[CheckResult]:
        return [CheckResult("disk", Status.FAIL, f"{free} GiB")] if free < 4 else []

    @rules.check("spare", rule="a typo'd result id", applies=lambda free: free > 100)
    def _spare(free: int) -> list[CheckResult]:
        return [CheckResult("sapre", Status.WARN, "?")]

    with pytest.raises(ValueError, match="doctor check disk declared twice"):
        rules.check("disk", rule="again")(_disk)
    # each declaration keeps its words: the docs' table row (docs_tables)
    assert [(c.id, c.rule) for c in rules.checks] == [("disk", "enough room"),
                                                     ("spare", "a typo'd result id")]
    assert [r.summary for r in rules.judge(2)] == ["2 GiB"]
    assert rules.judge(50) == []            # `spare` does not apply: never judged
    with pytest.raises(ValueError, match="check spare found undeclared sapre"):
        rules.judge(200)


def test_the_doctor_s_table_documents_exactly_its_declared_checks():
    from gpuprov.doctor.findings import DOCTOR

    text = (Path(__file__).resolve().parents[3] / "docs" / "day-two.md").read_text()
    table = text.split("## Doctor", 1)[1].split("## Drift", 1)[0]
    documented = re.findall(r"^\| `([a-z-]+)` \|", table, re.M)
    assert sorted(documented) == sorted(c.id for c in DOCTOR.checks) == sorted(
        set(documented))


def test_a_stage_the_run_skipped_is_named_in_its_checks_results(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    for name in ("gpu-burn.log", "gpu-telemetry.csv"):
        (node / name).unlink()
    meta = json.loads((node / "meta.json").read_text())
    why = "identity checks failed: driver_version"
    meta["skipped"] = {"soak": why, "dcgm": why}
    (node / "meta.json").write_text(json.dumps(meta))
    results = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    assert results["gpu_burn"].status == "missing"   # still blocking: never a pass
    assert results["gpu_burn"].summary == ("no evidence: gpu-burn.log not collected (soak not "
                                           f"run: {why})")
    assert (results["dcgm_diag"].status, results["dcgm_diag"].summary) == (
        "skip", f"dcgm not run: {why}")


@pytest.mark.parametrize("gaps, said", [
    (["GPU 3 missing from gpu-burn.log"], "also not covered: GPU 3 missing from gpu-burn.log"),
    (["GPU 3 missing", "GPU 4 missing"], "also not covered: GPU 3 missing (+1 more)"),
])
def test_beside_counts_only_the_gaps_it_leaves_unshown(gaps, said):
    finding = CheckResult("gpu_burn", Status.FAIL, "GPU 0 533715488 compute errors", None, {},
                          Action.RESEAT_OR_INSPECT)
    assert beside(finding, "not covered", gaps).summary == f"{finding.summary}; {said}"
