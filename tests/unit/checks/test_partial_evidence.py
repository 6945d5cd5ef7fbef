"""Issue 52: partial evidence never passes. Each case is a copy of the healthy HGX H100
node's evidence with one thing cut or changed, as a new user tried it; each must reject,
naming the member or value that is missing. The property test at the end removes any one
GPU's or port's lines from any file that has members, and never sees an acceptance."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprov.checks.run import judge
from gpuprov.evidence import KINDS, Evidence
from gpuprov.lock import Lock
from gpuprov.model import Action
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import (
    LOCK,
    healthy_h100,
    ib_counters,
    ibstat,
    replace,
    smi_edit,
    telemetry,
)

H100 = load_profile("h100-sxm-8")
LOCKED = Lock.from_vars({f"gpuprov_{k}": v for k, v in LOCK.items()}, "test")
Q_BEFORE, Q_AFTER = "nvidia-smi-q.txt", "nvidia-smi-q-after.txt"
GPU7 = "GPU 7 (00000000:DB:00.0, serial 1654223055370)"


def _judge(node: Path) -> dict:
    return {c.id: c for c in judge(Evidence(node), H100, LOCKED).checks}


def edit_text(name: str, change: Callable[[str], str]):
    def edit(node: Path) -> None:
        before = (node / name).read_text()
        after = change(before)
        assert after != before, name
        replace(node, name, after)
    return edit


def cut_after(name: str, marker: str):
    return edit_text(name, lambda t: t[:t.index(marker) + len(marker)])


def without_lines(name: str, pattern: str):
    return edit_text(name, lambda t: "".join(
        line for line in t.splitlines(keepends=True) if not re.search(pattern, line)))


def without_last_progress_column(text: str) -> str:
    """gpu-burn's progress lines with the last GPU's column gone from each section."""
    def cut(section: str) -> str:
        return section.rsplit(" - ", 1)[0] + " "
    out = []   # (read_text made gpu-burn's `\r` separators newlines)
    for line in text.splitlines(keepends=True):
        m = re.match(r"(.*proc'd: )(.*?)(   errors: )(.*?)(  temps: )(.*?)(\n?)$", line)
        if m:
            line = (m[1] + cut(m[2]).rstrip() + m[3] + cut(m[4]).rstrip() + m[5]
                    + cut(m[6]) + m[7])
        out.append(line)
    return "".join(out)


def ddp(**fields):
    base = {"ok": True, "world_size": 8, "backend": "nccl", "losses": [0.91, 0.52, 0.33],
            "allreduce_busbw_gbps": 455.0}
    return lambda node: replace(node, "ddp-smoke.json", json.dumps({**base, **fields}))


def smi(gpu: int, path: tuple[str, ...], value: str, files=(Q_BEFORE, Q_AFTER)):
    def edit(node: Path) -> None:
        for name in files:
            replace(node, name, smi_edit((node / name).read_text(), gpu, path, value))
    return edit


def written_yet_absent(name: str):
    """`name` absent though meta.json records the command that wrote it."""
    def edit(node: Path) -> None:
        meta = json.loads((node / "meta.json").read_text())
        meta["commands"] = [{"command": f"(the command writing {name})", "rc": 0,
                             "seconds": 1.0, "file": name}]
        replace(node, "meta.json", json.dumps(meta))
        replace(node, name, None)
    return edit


def without_lspci_gpu(gpu: int):
    """`lspci -vvv` without the block of its gpu-th NVIDIA GPU (3D controller)."""
    return edit_text("lspci-vvv.txt", lambda t: _drop_lspci_gpu(t, gpu))


def _drop_lspci_gpu(text: str, gpu: int) -> str:
    blocks = text.split("\n\n")
    gpus = [i for i, b in enumerate(blocks) if " 3D controller: NVIDIA" in b.split("\n", 1)[0]]
    del blocks[gpus[gpu]]
    return "\n\n".join(blocks)


def both(*edits):
    def edit(node: Path) -> None:
        for e in edits:
            e(node)
    return edit


# (id, edit, check, what its summary names)
CASES = [
    ("burn-cut-after-tested", cut_after("gpu-burn.log", "Tested 8 GPUs:"), "gpu_burn",
     "GPU 0 (00000000:18:00.0, serial 1654423001593) missing from gpu-burn.log"),
    ("burn-ok-line-missing", without_lines("gpu-burn.log", r"^\tGPU 7: OK"), "gpu_burn",
     f"{GPU7} missing from gpu-burn.log"),
    ("burn-tested-7", edit_text("gpu-burn.log", lambda t: t.replace("Tested 8 GPUs:",
                                                                    "Tested 7 GPUs:")),
     "gpu_burn", "gpu-burn says it tested 7 GPUs, its final list names 8"),
    ("burn-no-progress-column", edit_text("gpu-burn.log", without_last_progress_column),
     "gpu_burn", f"{GPU7} missing from gpu-burn.log"),
    ("telemetry-one-loaded-sample", lambda n: replace(n, "gpu-telemetry.csv", telemetry(1)),
     "load_power", "sampled under load for 0 s of a 30 s soak: the telemetry is cut short"),
    ("telemetry-one-loaded-sample-thermal",
     lambda n: replace(n, "gpu-telemetry.csv", telemetry(1)), "load_thermal",
     "the telemetry is cut short"),
    # coverage's gap alone, the GPU named (no evaluator counts its file's GPUs, issue 68)
    ("telemetry-gpu7-gone", without_lines("gpu-telemetry.csv", r"^[^,]+, 7, "), "load_clocks",
     f"{GPU7} missing from gpu-telemetry.csv"),
    ("clock-reasons-na", edit_text("gpu-telemetry.csv",
                                   lambda t: t.replace("Not Active", "[N/A]")),
     "load_throttle", "HW Slowdown, HW Thermal Slowdown, HW Power Brake Slowdown, SW Thermal "
     "Slowdown not reported ([N/A]) under load"),
    ("nvlink-after-empty", lambda n: replace(n, "nvidia-smi-nvlink-errors-after.txt", ""),
     "nvlink_errors", "missing from nvidia-smi-nvlink-errors-after.txt"),
    ("nvlink-after-cut-before-gpu7",
     edit_text("nvidia-smi-nvlink-errors-after.txt", lambda t: t[:t.index("GPU 7:")]),
     "nvlink_errors", f"{GPU7} missing from nvidia-smi-nvlink-errors-after.txt"),
    ("nvlink-gpu7-counters-na", edit_text("nvidia-smi-nvlink-errors-after.txt", lambda t: (
        t[:t.index("GPU 7:")] + re.sub(r": \d+\n", ": N/A\n", t[t.index("GPU 7:"):]))),
     "nvlink_errors", f"{GPU7} missing from nvidia-smi-nvlink-errors-after.txt"),
    ("ib-port-missing-before", both(
        without_lines("ib-counters-before.txt", r"/mlx5_7/"),
        lambda n: replace(n, "ib-counters-after.txt",
                          ib_counters(grown={7: {"symbol_error": 5000}}))),
     "ib_counters", "NIC mlx5_7 port 1 missing from ib-counters-before.txt"),
    ("ib-port-missing-both", both(without_lines("ib-counters-before.txt", r"/mlx5_7/"),
                                  without_lines("ib-counters-after.txt", r"/mlx5_7/")),
     "ib_counters", "NIC mlx5_7 port 1 missing from ib-counters-before.txt"),
    ("ddp-gloo-beside-cuda", ddp(backend="gloo"), "ddp_smoke",
     "DDP ran on gloo while torch saw 8 CUDA GPU(s)"),
    ("ddp-busbw-nan", ddp(allreduce_busbw_gbps=float("nan")), "ddp_smoke",
     "all-reduce bus bandwidth not measured (nan) on 8 ranks"),
    ("ddp-busbw-null", ddp(allreduce_busbw_gbps=None), "ddp_smoke",
     "all-reduce bus bandwidth not measured (None) on 8 ranks"),
    ("duplicate-serial", smi(7, ("Serial Number",), "1654423001593"), "gpu_inventory",
     "GPUs 0, 7 share serial 1654423001593"),
    ("duplicate-uuid", smi(7, ("GPU UUID",), "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"),
     "gpu_inventory", "GPUs 0, 7 share uuid GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"),
    ("serial-changed-across-soak", smi(7, ("Serial Number",), "1654423009999", (Q_AFTER,)),
     "gpu_inventory", f"{GPU7} serial 1654223055370 before the soak, 1654423009999 after"),
    # the case: the ACS redirect on the bridge above GPU 7 would go unjudged
    ("lspci-without-gpu7", without_lspci_gpu(7), "pcie_acs",
     f"{GPU7} missing from lspci-vvv.txt"),
    ("lspci-without-gpu7-iommu", without_lspci_gpu(7), "iommu",
     f"{GPU7} missing from lspci-vvv.txt"),
    *[(f"{name}-written-yet-absent", written_yet_absent(name), check,
       f"{name} absent, though meta.json records the command that wrote it")
      for name, check in (("nccl-tests.log", "nccl_bandwidth"),
                          ("nvbandwidth.txt", "nvbandwidth"),
                          ("gdrcopy-sanity.txt", "gdrcopy"), ("dcgmi-diag.json", "dcgm_diag"))],
]


def test_the_healthy_node_is_accepted(tmp_path):
    judged = judge(Evidence(healthy_h100(tmp_path / "node07")), H100, LOCKED)
    assert judged.verdict == "accepted", judged.reason()


@pytest.mark.parametrize(("edit", "check_id", "named"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_partial_evidence_rejects_naming_what_is_missing(tmp_path, edit, check_id, named):
    node = healthy_h100(tmp_path / "node07")
    edit(node)
    judged = judge(Evidence(node), H100, LOCKED)
    result = {c.id: c for c in judged.checks}[check_id]
    assert judged.verdict == "rejected"
    assert result.status == "fail", (result.status, result.summary)
    assert named in result.summary, result.summary
    # what gpuprov could not see is the setup's, never a hardware action (issues 53, 67)
    assert result.action == Action.FIX_SETUP, result.action


def test_a_gap_beside_a_fault_keeps_the_fault_and_records_the_gap(tmp_path):
    """A GPU with compute errors in a log that also lacks another GPU's line: the fault's
    own words and action stand; the gap is in the values."""
    node = healthy_h100(tmp_path / "node07")
    log = (node / "gpu-burn.log").read_text().replace("\tGPU 2: OK", "\tGPU 2: FAULTY")
    replace(node, "gpu-burn.log", re.sub(r"(?m)^\tGPU 7: OK\n", "", log))
    result = _judge(node)["gpu_burn"]
    assert (result.status, result.action) == ("fail", Action.RMA)
    assert result.summary.startswith("GPU 2 (00000000:3A:00.0, serial 1654423003947) FAULTY")
    assert result.values["not_covered"] == [f"{GPU7} missing from gpu-burn.log"]


# -- the property: any one member's lines gone from any file with members ----------------

# each member kind's lines in the builder's files: how a GPU or port is named on a line
MEMBER_LINES = {
    "gpu-burn.log": lambda m: rf"^\tGPU {m}: (OK|FAULTY)",
    "gpu-telemetry.csv": lambda m: rf"^[^,]+, {m}, ",
    "nvidia-smi-nvlink-status.txt": None,      # a GPU's block: its header and its links
    "nvidia-smi-nvlink-errors-before.txt": None,
    "nvidia-smi-nvlink-errors-after.txt": None,
    "ib-counters-before.txt": lambda m: rf"/mlx5_{m}/",
    "ib-counters-after.txt": lambda m: rf"/mlx5_{m}/",
    "nvidia-smi-topo.txt": lambda m: rf"^GPU{m}\t",
    Q_AFTER: None,                             # a GPU's block of `nvidia-smi -q`
    "fingerprint.json": None,                  # a GPU's entry of the probe's JSON
    "lspci-vvv.txt": _drop_lspci_gpu,          # a GPU's block of `lspci -vvv`
}
# one healthy node per pytest session's base directory (a process may run several sessions:
# mutmut's stats and clean runs)
HEALTHY: dict[Path, Path] = {}


def _healthy(tmp_root: Path) -> Path:
    if tmp_root not in HEALTHY:
        HEALTHY[tmp_root] = healthy_h100(tmp_root / "healthy")
    return HEALTHY[tmp_root]


def _drop_gpu_block(text: str, gpu: int) -> str:
    """The text without the gpu-th GPU's block: `GPU <n>: …` blocks (`nvlink -s/-e`) or
    `GPU 0000…` ones (`nvidia-smi -q`, in index order); a JSON report's `gpus` entry."""
    if text.lstrip().startswith("{"):
        report = json.loads(text)
        report["gpus"] = [g for g in report["gpus"] if g["index"] != gpu]
        return json.dumps(report, indent=2)
    if text.startswith("GPU ") or "\nGPU 0:" in text:
        blocks = re.split(r"(?m)^(?=GPU \d+: )", text)
        return "".join(b for b in blocks if not b.startswith(f"GPU {gpu}: "))
    blocks = text.split("\nGPU 0000")
    del blocks[gpu + 1]     # blocks[0] is the header
    return "\nGPU 0000".join(blocks)


def test_every_kind_with_members_is_in_the_property(tmp_path):
    """The property below covers every kind that declares members and the healthy node has
    (a kind given members must be added to it)."""
    written = {p.name for p in healthy_h100(tmp_path / "node07").iterdir()}
    with_members = {k.file if k.file in written else k.fallback for k in KINDS
                    if k.members is not None and {k.file, k.fallback} & written}
    assert with_members == set(MEMBER_LINES)


@settings(max_examples=60, deadline=None, database=None,   # no .hypothesis/ in the tree
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(MEMBER_LINES)), member=st.integers(0, 7))
def test_no_members_lines_removed_from_any_file_is_ever_accepted(tmp_path_factory, name,
                                                                 member):
    source = _healthy(tmp_path_factory.getbasetemp())
    node = tmp_path_factory.mktemp("cut") / "node07"
    shutil.copytree(source, node)
    text = (node / name).read_text()
    pattern = MEMBER_LINES[name]
    if pattern is None:
        cut = _drop_gpu_block(text, member)
    elif pattern is _drop_lspci_gpu:
        cut = _drop_lspci_gpu(text, member)
    else:
        cut = "".join(line for line in text.splitlines(keepends=True)
                      if not re.search(pattern(member), line))
    assert cut != text, (name, member)
    replace(node, name, cut)
    try:
        judged = judge(Evidence(node), H100, LOCKED)
    except ParseError:       # refused as malformed (evaluate's exit 2): not accepted either
        return
    assert judged.verdict == "rejected", (name, member)


def test_a_dcgm_diagnostic_whose_every_test_skipped_judged_nothing(tmp_path):
    """Issue 52: `dcgmi diag` with every test Skip fails (fix-setup), not a warning; one
    skipped test beside passing ones still warns."""
    def diag(statuses: list[str]) -> str:
        tests = [{"name": f"test{i}", "results": [{"status": s, "gpu_id": str(g)}
                                                   for g in range(8)]}
                 for i, s in enumerate(statuses)]
        return json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": tests}]}})
    node = healthy_h100(tmp_path / "node07")
    replace(node, "dcgmi-diag.json", diag(["Skip", "Skip"]))
    result = _judge(node)["dcgm_diag"]
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert "every one of its 2 test(s) skipped: nothing judged" in result.summary
    replace(node, "dcgmi-diag.json", diag(["Pass", "Skip"]))
    assert _judge(node)["dcgm_diag"].status == "warn"


def test_dcgm_results_for_half_the_gpus_are_partial(tmp_path):
    """Issue 52: `dcgmi diag` results for 4 of 8 GPUs passed; the GPUs it gave no result
    for are named (fix-setup)."""
    def diag(gpus: range) -> str:
        return json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": [{"name": "memory", "results": [
                {"status": "Pass", "gpu_id": str(g)} for g in gpus]}]}]}})
    node = replace(healthy_h100(tmp_path / "node07"), "dcgmi-diag.json", diag(range(8)))
    assert _judge(node)["dcgm_diag"].status == "pass"
    result = _judge(replace(node, "dcgmi-diag.json", diag(range(4))))["dcgm_diag"]
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert "GPU 4 (00000000:9A:00.0, serial" in result.summary
    assert "missing from dcgmi-diag.json" in result.summary


def test_a_level_2_dcgm_report_with_only_the_software_test_is_partial(tmp_path):
    """Issue 52: level 2 asked for, and only the deployment (software) test in the report:
    memory and pcie, which level 2 runs, are named as missing (fix-setup)."""
    def diag(names: list[str]) -> str:
        return json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": [{"name": n, "results": [
                {"status": "Pass", "gpu_id": str(g)} for g in range(8)]} for n in names]}]}})
    node = healthy_h100(tmp_path / "node07")
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "dcgm_level": 2}))
    replace(node, "dcgmi-diag.json", diag(["software", "memory", "pcie"]))
    assert _judge(node)["dcgm_diag"].status == "pass"
    result = _judge(replace(node, "dcgmi-diag.json", diag(["software"])))["dcgm_diag"]
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert result.summary.startswith("dcgmi diag -r 2: no memory, pcie test in its report")


def test_the_reason_names_each_blocking_check_with_its_summary(tmp_path):
    """A rejection's one line: every blocking check's id and summary, `; ` between them."""
    node = healthy_h100(tmp_path / "node07")
    without_lspci_gpu(7)(node)
    judged = judge(Evidence(node), H100, LOCKED)
    checks = {c.id: c for c in judged.checks}
    assert judged.reason() == (f"pcie_acs: {checks['pcie_acs'].summary}; "
                               f"iommu: {checks['iommu'].summary}")


def test_a_port_only_the_counters_before_the_soak_list_is_still_a_member(tmp_path):
    """A port ibstat no longer lists, in the counters before the soak and gone after: the
    evaluator names it gone (reseat-or-inspect), and coverage records the file it is missing
    from: a member is any port one of the check's files lists."""
    node = healthy_h100(tmp_path / "node07")
    replace(node, "ibstat.txt", ibstat(7))
    without_lines("ib-counters-after.txt", r"/mlx5_7/")(node)
    result = _judge(node)["ib_counters"]
    assert (result.status, result.action) == ("fail", Action.RESEAT_OR_INSPECT)
    assert result.summary.startswith("NIC mlx5_7 port 1: gone from sysfs after the soak")
    assert result.values["not_covered"] == ["NIC mlx5_7 port 1 missing from "
                                            "ib-counters-after.txt"]


def test_lost_evidence_is_named_in_the_values(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    written_yet_absent("nvbandwidth.txt")(node)
    result = _judge(node)["nvbandwidth"]
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert result.values == {"lost": ["nvbandwidth.txt"]}
