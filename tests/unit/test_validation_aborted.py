"""Issue 53: a validation that aborts keeps its traceback with the evidence, and the node is
rejected, never accepted."""

from __future__ import annotations

from gpuprov.model import Verdict
from gpuprov.profiles import load_profile
from gpuprov.validation import pipeline
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob

H100 = load_profile("h100-sxm-8")


def test_an_aborted_validation_keeps_its_traceback_and_rejects(tmp_path, monkeypatch):
    def broken(node, inventory, control_dir):
        raise KeyError("an answer the collector did not expect")
    monkeypatch.setattr(pipeline, "node_host", broken)
    evidence = tmp_path / "node07"
    evidence.mkdir()
    job = NodeJob(NodeSettings(node="node07", profile=H100, lock=None, run_id="v1",
                               soak_seconds=30), tmp_path / "inv", evidence, tmp_path / "ctl")
    result = pipeline.validate_node(job, lambda *_: None)
    assert result.judged == Verdict.REJECTED
    assert result.reason == ("validation aborted: KeyError: 'an answer the collector did not "
                             "expect' (traceback in aborted.txt)")
    kept = (evidence / "aborted.txt").read_text()
    assert kept.startswith("Traceback (most recent call last):")
    assert "in broken" in kept and kept.rstrip().endswith(
        "KeyError: 'an answer the collector did not expect'")
