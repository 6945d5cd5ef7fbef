"""Reports from ledger records of real judgements (evaluators over evidence built from the
fixtures): JUnit loads in junitparser, JSON matches the shipped schema, markdown names the
failing GPU's bus id and serial and bundles the evidence as one archive."""

import json
import tarfile
from importlib import resources

import jsonschema
import pytest
from junitparser import Failure, JUnitXml, Skipped

from gpuprov import report
from gpuprov.checks.catalog import check_ids


@pytest.fixture
def recorded(recorded_ledger):
    return recorded_ledger.run("v1"), recorded_ledger.node_results("v1")


def test_junit_loads_in_a_junit_parser(recorded, tmp_path):
    path = tmp_path / "report.xml"
    path.write_text(report.as_junit(*recorded))
    xml = JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"node07", "node08"}
    assert suites["node07"].tests == len(check_ids()) and suites["node07"].failures == 0
    failed = {c.name: c for c in suites["node08"] if any(isinstance(r, Failure) for r in c.result)}
    assert list(failed) == ["gpu_burn"]
    assert "GPU 2 (00000000:3A:00.0" in failed["gpu_burn"].result[0].message
    text = path.read_text()
    assert '<property name="action" value="rma" />' in text
    skipped = [c.name for c in suites["node07"] if any(isinstance(r, Skipped) for r in c.result)]
    # the H100 profile skips only C2C (no Grace), NVLink5's bridges and the NVL72 tray's rack
    # checks; no fabric stage ran, no nccl-tests or DCGM installed, and the lock sets no
    # firmware minimum
    assert skipped == ["firmware", "c2c_links", "nvlink5_bridges", "nccl_bandwidth", "nvbandwidth",
                       "gdrcopy", "dcgm_diag", "dcgm_health", "fabric", "fabric_rails",
                       "rack_tray", "rack"]


def test_json_matches_the_documented_schema(recorded):
    schema = json.loads(resources.files("gpuprov").joinpath(
        "data/schemas/validation-report.schema.json").read_text())
    from gpuprov.holds import Hold
    from gpuprov.ledger.records import Repair
    held = {"node08": [Hold("nics", Repair("node08", 2.0, "", "tests", "cable", "mlx5_0/1"),
                            1.0)]}
    data = json.loads(json.dumps(report.as_json(*recorded, held), default=str))
    jsonschema.validate(data, schema)
    verdicts = {n["node"]: n["verdict"] for n in data["nodes"]}
    assert verdicts == {"node07": "accepted", "node08": "rejected"}
    assert [n["open_holds"] for n in data["nodes"]] == [[], [{
        "check": "nics", "repair": "cable", "part": "mlx5_0/1", "repaired_at": 2.0,
        "last_pass": 1.0}]]
    broken = dict(data, nodes=[dict(data["nodes"][0], verdict="maybe")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_markdown_names_the_gpu_and_bundles_the_evidence(recorded, tmp_path):
    run, results = recorded
    node08 = next(r for r in results if r.node == "node08")
    bundle = report.archive(node08, tmp_path / "out")
    text = report.as_markdown(run, node08, "HGX H100 8-GPU", bundle)
    serial = next(g.serial for g in node08.gpus if g.index == 2)
    assert "# RMA evidence: node08 — REJECTED" in text
    assert f"| 2 | 00000000:3A:00.0 | {serial} |" in text
    assert "| `gpu_burn` | fail | `rma` |" in text and bundle[1] in text
    with tarfile.open(bundle[0]) as tar:
        assert "node08-v1/gpu-burn.log" in tar.getnames()


def test_markdown_shows_the_failing_gpus_figures_plainly_and_bundles_the_full_values(
        recorded, tmp_path):
    run, results = recorded
    node08 = next(r for r in results if r.node == "node08")
    bundle = report.archive(node08, tmp_path / "out")
    text = report.as_markdown(run, node08, "HGX H100 8-GPU", bundle)
    row = next(line for line in text.splitlines() if line.startswith("| `gpu_burn` |"))
    assert row.endswith("| GPU 2: died: False, errors: 1542, gflops: 358000, max_temp_c: 61, "
                        "verdict: FAULTY |")
    assert "{" not in row and "…" not in row
    with tarfile.open(bundle[0]) as tar:
        checks = json.load(tar.extractfile("node08-v1/checks.json"))
    burn = next(c for c in checks if c["id"] == "gpu_burn")
    assert burn["values"]["gpus"]["2"]["errors"] == 1542 and len(burn["values"]["gpus"]) == 8


def test_markdown_sets_every_gpu_s_soak_figures_side_by_side(recorded, tmp_path):
    run, results = recorded
    node08 = next(r for r in results if r.node == "node08")
    text = report.as_markdown(run, node08, "HGX H100 8-GPU", report.archive(
        node08, tmp_path / "out"))
    table = text.split("## Under load (the soak)", 1)[1].split("## ", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0] == "| GPU | Gflop/s | peak W | limit W | peak °C | SM MHz | slowdowns |"
    # the healthy evidence's telemetry: the real H100's figures under gpu-burn
    assert lines[2] == "| 0 | 358000 | 632 | 700 | 59 | 1980 | - |"
    assert len(lines) == 2 + 8


def test_a_gpu_named_by_a_setup_failure_is_not_listed_as_failing(recorded, tmp_path):
    """Issue 53: what gpuprov could not see, or the node's setup, is never a GPU's RMA: the
    same failure on GPU 2 with action fix-setup leaves the failing-GPU table empty, says
    it is no case for an RMA, and still lists the check with its action."""
    import dataclasses

    from gpuprov.model import Action
    run, results = recorded
    node08 = next(r for r in results if r.node == "node08")
    setup = dataclasses.replace(node08, checks=[
        dataclasses.replace(c, action=Action.FIX_SETUP) if c.id == "gpu_burn" else c
        for c in node08.checks])
    text = report.as_markdown(run, setup, "HGX H100 8-GPU",
                              report.archive(setup, tmp_path / "out"))
    failing_gpus = text.split("## Failing GPU", 1)[1].split("## ", 1)[0]
    assert "| index | bus id |" not in failing_gpus
    assert "No hardware fault: every failed check below is the node's setup" in failing_gpus
    assert "| `gpu_burn` | fail | `fix-setup` |" in text
