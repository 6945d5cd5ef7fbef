"""`gpuprov baseline` (the CLI as a subprocess) over a ledger of accepted H100 nodes judged
from evidence: the learned floors and their sources, outlier rejection against the rule,
and the point of it all: a node whose every GPU is 15 % slow passes the shipped profile
and fails the baseline. Bad input: one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import yaml

from gpuprov.baseline import learn_goldens, robust_ceiling, robust_floor
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lab import kinds
from gpuprov.lab.sim import dcgmi, nccl_tests
from gpuprov.lab.sim import node as node_sim
from gpuprov.ledger import Ledger
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb
from tests.conftest import gpuprov

H100 = load_profile("h100-sxm-8")
# four known-good nodes under gpu_burn -tc (the H100 profile's load): real-looking jitter,
# and one weak (but accepted) GPU on node04
GOOD = {"node01": [364000, 362600, 364700, 363300, 364350, 361900, 364000, 363650],
        "node02": [363300, 365400, 362950, 364000, 362250, 364700, 363650, 364350],
        "node03": [365050, 363650, 364000, 362600, 364350, 363300, 364700, 362950],
        "node04": [362600, 364000, 329000, 363300, 364700, 363650, 364000, 363300]}
# DCGM's diagnostic GEMM runs FP32: the stand-in's H100 figures per load
FP32_OF_TENSOR = 50900 / 358900


def _node_tools(node: str, gflops: list[int]) -> dict[str, str]:
    """nccl-tests' and DCGM's (level 3, JSON) output for this node, printed by the lab's
    stand-ins in the real formats: the node's GPUs as fast as its gpu-burn figures say."""
    hw = kinds.describe(node, "h100-sxm-8")
    for gpu, rate in zip(hw["gpus"], gflops, strict=True):
        gpu["gflops_factor"] = rate / node_sim.gflops(hw, "tensor")
    options = {"min": 8 << 20, "max": 1 << 30, "factor": 2, "gpus": 8}
    diag, _ = dcgmi.diag_json(hw, 3, "565.57.01")
    # nvbandwidth: the node's copy bandwidth as fast as its GPUs (a weak GPU copies slower)
    copies = [round(55.0 * rate / node_sim.gflops(hw, "tensor"), 2) for rate in gflops]
    return {"nccl-tests.log": nccl_tests.report(hw, options, node, 4242),
            "dcgmi-diag.json": diag, "nvbandwidth.txt": eb.nvbandwidth(copies, copies)}


def _record(ledger: Ledger, run_id: str, nodes: dict[str, list[int]], tmp_path, profile=H100):
    ledger.start_run(run_id, "validate", "/inv/rack.ini", list(nodes), {}, {}, "/ev")
    for node, gflops in nodes.items():
        directory = eb.replace(eb.healthy_h100(tmp_path / run_id / node), "gpu-burn.log",
                               eb.gpu_burn_log(gflops))
        for name, text in _node_tools(node, gflops).items():
            eb.replace(directory, name, text)
        judgement = judge(Evidence(directory), profile, None)
        settings = NodeSettings(node=node, profile=profile, lock=None, run_id=run_id,
                                soak_seconds=30)
        ledger.record_node(run_id, _result(NodeJob(settings, directory, directory, directory),
                                           1.0, judgement.verdict, judgement.reason(),
                                           judgement))
    ledger.finish_validation(run_id)


@pytest.fixture
def env(tmp_path):
    ledger_path = tmp_path / "ledger.sqlite3"
    _record(Ledger(ledger_path), "v1", GOOD, tmp_path)
    return {**os.environ, "GPUPROV_LEDGER": str(ledger_path),
            "GPUPROV_STATE_DIR": str(tmp_path / "state")}


def test_floors_come_from_the_peers_with_their_sources(env, tmp_path):
    out = tmp_path / "h100-site.yml"
    result = gpuprov("baseline", "--from", "v1", "--base", "h100-sxm-8", "-o", str(out),
                     env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(out.read_text())
    assert data["name"] == "h100-site"
    assert data["gpu_burn"]["gflops_min"] == round(363650 * 0.92)   # median - 8 %
    assert data["gpu_burn"]["max_spread_pct"] == 10                  # kept from the base
    assert data["max_temp_c"] == 66                                  # 61 C + 5
    assert data["ddp"]["busbw_min_gbps"] == round(455.0 * 0.92, 1)
    source = data["sources"]["gpu_burn.gflops_min"]
    assert "median 363650 of 32 samples, 1 rejected as outliers" in source
    assert "nodes node01, node02, node03, node04, runs v1" in source
    assert "gpu_burn.gflops_min: 334558" in result.stdout
    assert load_profile(str(out)).name == "h100-site"
    # nccl-tests, NVLink and DCGM figures (the stand-ins' healthy H100 figures)
    nccl = data["sources"]["nccl_tests.busbw_min_gbps"]
    assert data["nccl_tests"]["busbw_min_gbps"] < 460 and "of 4 samples" in nccl
    assert data["nvlink"]["link_speed_gbps"] == 26.562       # every GPU's slowest link
    assert "median 26.562 of 32 samples, 0 rejected" in data["sources"][
        "nvlink.link_speed_gbps"]
    assert data["nvlink"]["links_per_gpu"] == 18              # the rest kept from the base
    pcie = data["dcgm"]["pcie_min_gbps"]
    assert pcie == round(5 * 3.938 * 16 * 0.76 * 0.92 / 5, 2)  # gen 5 x16, GPU to Host
    gemm = data["sources"]["dcgm.gflops_min"]
    assert data["dcgm"]["gflops_min"] == pytest.approx(363650 * FP32_OF_TENSOR * 0.92, abs=0.01)
    assert "of 32 samples, 1 rejected as outliers" in gemm     # node04's weak GPU
    # the soak's telemetry: the limit the site runs at, and how near its GPUs come to it
    # (the evidence's real-H100 figures: 631.95 W less a watt per GPU index, of 700 W)
    assert data["under_load"]["power_limit_w"] == 700.0
    peaks = sorted((631.95 - i) / 700 for i in range(8))
    assert data["under_load"]["power_fraction_min"] == round(
        (peaks[3] + peaks[4]) / 2 * 0.92, 3)
    assert "of 32 samples" in data["sources"]["under_load.power_fraction_min"]
    assert data["under_load"]["temp_spread_max_c"] == 5        # kept from the base
    h2d = data["sources"]["nvbandwidth.h2d_min_gbps"]
    assert data["nvbandwidth"]["h2d_min_gbps"] < 55.0 and "of 32 samples" in h2d
    assert data["nvbandwidth"]["spread_pct"] == 10              # kept from the base


def test_a_slow_node_passes_the_shipped_profile_and_fails_its_peers(env, tmp_path):
    out = tmp_path / "h100-site.yml"
    assert gpuprov("baseline", "--from", "node01", "--from", "node02", "--from", "node03",
                   "--base", "h100-sxm-8", "-o", str(out), env=env, timeout=60).returncode == 0
    slow = eb.replace(eb.healthy_h100(tmp_path / "slow" / "node09"), "gpu-burn.log",
                      eb.gpu_burn_log([round(g * 0.85) for g in GOOD["node01"]]))
    shipped = judge(Evidence(slow), H100, None, only=("gpu_burn",)).checks[0]
    assert str(shipped.status) == "pass"
    learned = judge(Evidence(slow), load_profile(str(out)), None, only=("gpu_burn",)).checks[0]
    assert str(learned.status) == "fail"
    assert "309400 Gflop/s, floor 334719" in learned.summary   # 363825 (nodes 1-3) - 8 %
    # DCGM's diagnostic sees the same node slow: its GEMM figure against the learned floor
    for name, text in _node_tools("node09", [round(g * 0.85) for g in GOOD["node01"]]).items():
        eb.replace(slow, name, text)
    meta = json.loads((slow / "meta.json").read_text())
    eb.replace(slow, "meta.json", json.dumps({**meta, "dcgm_level": 3}))
    shipped, learned = (judge(Evidence(slow), profile, None, only=("dcgm_diag",)).checks[0]
                        for profile in (H100, load_profile(str(out))))
    assert str(shipped.status) == "pass"
    assert (str(learned.status), str(learned.action)) == ("fail", "reseat-or-inspect")
    assert learned.summary.startswith("dcgmi diag -r 3: GPU 0 (00000000:18:00.0, serial ")
    # 309400 and 363825 (nodes 1-3) - 8 % at DCGM's FP32 rate: x 50900 / 358900
    assert "43879.8 Gflop/s below dcgm.gflops_min 47470.6" in learned.summary
    assert learned.summary.endswith("(+5 more)")


def test_the_golden_fingerprint_comes_from_the_peers_and_rejects_a_node_off_as_a_whole(
        env, tmp_path):
    """Issue 56: the accepted nodes' agreeing hashes become the golden for their key; a node
    whose every GPU agrees with its siblings yet not with the golden passes the shipped
    profile (a warning: no golden) and fails the baseline, naming the key."""
    out = tmp_path / "h100-site.yml"
    result = gpuprov("baseline", "--from", "v1", "--base", "h100-sxm-8", "-o", str(out),
                     env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(out.read_text())
    real = json.loads(eb.capture("fingerprint/h200-probe-run-1.txt"))["gpus"][0]["hashes"]
    [golden] = data["fingerprint"]["golden"]
    assert golden["hashes"] == real
    assert golden["nodes"] == ["node01", "node02", "node03", "node04"]
    assert (golden["key"]["device"], golden["key"]["driver"]) == ("NVIDIA H100 80GB HBM3",
                                                                   "565.57.01")
    assert "fingerprint.golden: device NVIDIA H100 80GB HBM3 / driver 565.57.01" in result.stdout
    off = {i: {"fp32": "0f0f0f0f0f0f0f0f"} for i in range(8)}
    node = eb.replace(eb.healthy_h100(tmp_path / "off" / "node09"), "fingerprint.json",
                      eb.fingerprint(eb.H100_Q.read_text(), off=off))
    shipped, learned = (judge(Evidence(node), profile, None,
                              only=("numeric_fingerprint",)).checks[0]
                        for profile in (H100, load_profile(str(out))))
    assert str(shipped.status) == "warn" and "no golden yet" in shipped.summary
    assert (str(learned.status), learned.gpu) == ("fail", None)
    assert learned.summary.startswith("every GPU agrees with the others but not with the "
                                      "golden for device NVIDIA H100 80GB HBM3")
    assert "fp32 0f0f0f0f0f0f0f0f (ddfbb82eac4d23be)" in learned.summary
    # offline, as an operator would: `gpuprov evaluate` with the learned profile
    evaluated = gpuprov("evaluate", str(node), "--profile", str(out), "--json", env=env,
                        timeout=60)
    assert evaluated.returncode == 1, evaluated.stderr
    checks = {c["id"]: c for c in json.loads(evaluated.stdout)["checks"]}
    assert checks["numeric_fingerprint"]["status"] == "fail"


def test_the_golden_is_what_more_than_half_the_nodes_gave(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    _record(ledger, "v2", {n: GOOD[n] for n in ("node01", "node02")}, tmp_path)
    results = list(ledger.node_results(run_id="v2"))
    # two of three agree: their hashes are the golden, the third named as differing
    [most] = learn_goldens([*results, _renamed(results[0], "node05", "0123456789abcdef")])
    assert (most.nodes, most.differing) == (["node01", "node02"], ["node05"])
    assert most.hashes["fp32"] == "ddfbb82eac4d23be"
    [even] = learn_goldens([results[0], _renamed(results[1], "node02", "0123456789abcdef")])
    assert (even.hashes, even.differing) == (None, ["node01", "node02"])


def _renamed(result, node: str, fp32: str):
    """`result` as another node's, its fingerprint's fp32 hash another."""
    checks = []
    for c in result.checks:
        if c.id == "numeric_fingerprint":
            group = dict(c.values["groups"][0], hashes={**c.values["groups"][0]["hashes"],
                                                         "fp32": fp32})
            c = replace(c, values={**c.values, "groups": [group]})
        checks.append(c)
    return replace(result, node=node, checks=checks)


def test_the_rule_rejects_its_own_outliers_until_stable():
    assert robust_floor([100, 101, 99, 100, 60, 100], 8) == (92.0, 100.0, 1)
    assert robust_floor([100.0] * 5, 8) == (92.0, 100.0, 0)
    assert robust_ceiling([61, 62, 61, 90, 60], 5) == (66, 61, 1)


BASE = ["--base", "h100-sxm-8"]


@pytest.mark.parametrize("args, message", [
    (["--from", "node01", "--from", "node02", *BASE],
     "a baseline needs at least 3 accepted nodes, got 2: node01, node02"),
    (["--from", "v9", *BASE], "--from v9: neither a run in the ledger nor a node with an "
                              "accepted validation"),
    (["--from", "v1", "--base", "a100-sxm-8"],
     "was validated as h100-sxm-8, not a100-sxm-8: a baseline learns from peers of one kind"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(env, tmp_path, args, message):
    out = tmp_path / "x.yml"
    result = gpuprov("baseline", *args, "-o", str(out), env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not out.exists()


def test_the_output_must_be_a_profile_file(env):
    result = gpuprov("baseline", "--from", "v1", *BASE, "-o", "site.json", env=env, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("--output site.json: a profile is a .yml file")
