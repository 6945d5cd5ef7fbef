"""The check registry and what derives from it: ids, stages, generated missing/skip
results, the report schema's id list, docs/checks.md and docs/evidence.md."""

import json

import pytest

from gpuprov import docs_tables
from gpuprov.checks.catalog import all_checks, check_ids, stage_checks
from gpuprov.checks.registry import check
from gpuprov.checks.run import judge
from gpuprov.evidence import KINDS, STAGES, Evidence
from gpuprov.model import Action
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
    assert stage_checks("ddp") == ("ddp_smoke", "nccl_bandwidth")
    assert stage_checks("fabric") == ("fabric",)


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
    assert by_id["nvlink_errors"].action == "none"
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
