"""A tool the inventory has a role install, absent on the node: a failure with the reason,
judged as such, never a silent skip (the collector run here against a local shell)."""

from __future__ import annotations

import subprocess

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile
from gpuprov.validation import collect
from tests.evidence_builder import healthy_h100

H100 = load_profile("h100-sxm-8")


class LocalShell:
    def run(self, command: str):
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
        return type("Result", (), {"rc": done.returncode, "stdout": done.stdout,
                                   "stderr": done.stderr})()


def _collector(tmp_path, **variables) -> collect.Collector:
    settings = collect.NodeSettings.from_vars(
        "node07", {"gpuprov_validate_nvbandwidth_command": "no-such-nvbandwidth", **variables},
        profile=H100, lock=None, run_id="v1", soak_seconds=30)
    return collect.Collector(LocalShell(), healthy_h100(tmp_path / "node07"), settings)


def _nvbandwidth_check(directory):
    return judge(Evidence(directory), H100, None, only=("nvbandwidth",)).checks[0]


def test_nvbandwidth_absent_where_the_inventory_installs_it_fails_saying_why(tmp_path):
    c = _collector(tmp_path, nvbandwidth_url="file:///mirror/files/nvbandwidth-0.8.tar.gz")
    collect.nvbandwidth(c)
    result = _nvbandwidth_check(c.directory)
    assert result.status == "fail", result.summary
    assert "no-such-nvbandwidth not found, though the inventory sets nvbandwidth_url" in (
        result.summary)


def test_nvbandwidth_absent_where_nothing_installs_it_is_a_skip_saying_so(tmp_path):
    c = _collector(tmp_path)
    collect.nvbandwidth(c)
    assert c.meta["skipped"]["nvbandwidth"] == ("no-such-nvbandwidth not found: nvbandwidth "
                                                "is not installed")
    assert _nvbandwidth_check(c.directory).status == "skip"
