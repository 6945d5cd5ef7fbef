"""nccl-tests' all_reduce_perf output on real captures: both row formats, the footer, the
peak; and the nccl_bandwidth check's branches on minimal variations of them."""

from __future__ import annotations

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, Status
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.nccl_tests import parse_nccl_tests
from gpuprov.profiles import Profile, load_profile
from tests.evidence_builder import capture, healthy_h100, replace

CAPTURES = {
    # capture: rows, avg busbw, out of bounds, peak busbw, at bytes
    "allreduce-2x-dgx-a100-k8s-ib.txt": (30, 53.7098, 0, 188.7, 4294967296),
    "allreduce-4x-dgx-a100-ib-slurm.txt": (13, 113.289, 0, 191.56, 4294967296),
    "allreduce-k8s-roce-low-bw.txt": (29, 7.76739, 0, 22.92, 2147483648),
    "allreduce-rooted-format-nccl-tests167.txt": (11, None, None, 3.08, 204800),
}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real_outputs_parse_to_their_peak(name):
    rows, avg, bounds, peak, at = CAPTURES[name]
    run = parse_nccl_tests(capture(f"nccl-tests/{name}"), name)
    assert (len(run.rows), run.avg_busbw_gbps, run.out_of_bounds) == (rows, avg, bounds)
    assert (run.peak_busbw_gbps, run.peak.bytes) == (peak, at)
    rooted = "rooted" in name
    assert all((row.wrong == 0) if rooted else row.wrong is None for row in run.rows)
    assert {row.dtype for row in run.rows} == {"float"}


def test_a_wrong_count_and_a_malformed_row_are_read_or_refused():
    text = capture("nccl-tests/allreduce-rooted-format-nccl-tests167.txt")
    wrong = text.replace("3.06      0    124.6    1.64    3.08      0",
                         "3.06      0    124.6    1.64    3.08      7")
    assert parse_nccl_tests(wrong, "n").rows[5].wrong == 7
    with pytest.raises(ParseError, match=r"^n: a result row of 10 columns: 204800"):
        parse_nccl_tests(text.replace("1.64    3.08      0", ""), "n")
    with pytest.raises(ParseError, match=r"^n: no all_reduce_perf result rows$"):
        parse_nccl_tests("# nThread 1 nGpus 8\n", "n")


H100 = load_profile("h100-sxm-8")


def devices(ranks: int) -> str:
    """nccl-tests' own device list, one line per rank, in the form of the real run in
    nebius/soperator#428 (`# Using devices` / `#  Rank  0 Group  0 Pid …`). The captures
    above are excerpts without it; the collector keeps the whole output, which has it."""
    return "# Using devices\n" + "".join(
        f"#  Rank {i:2d} Group  0 Pid {1887 + i:6d} on     node07 device {i:2d} "
        f"[0x{0x8d + 4 * i:02x}] NVIDIA H100 80GB HBM3\n" for i in range(ranks))


def _nccl_check(tmp_path, text: str | None, profile=H100, ranks: int = 8):
    node = healthy_h100(tmp_path / "node07")
    if text is not None:
        replace(node, "nccl-tests.log", devices(ranks) + text)
    return judge(Evidence(node), profile, None, only=("nccl_bandwidth",)).checks[0]


def _scaled(text: str, factor: float) -> str:
    """The 2-node A100 capture as if its busbw were `factor` times higher (one 8-GPU node
    on NVSwitch runs ~2.5x a 2-node HDR fabric)."""
    out = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens and tokens[0].isdigit() and len(tokens) == 12:
            tokens[6] = f"{float(tokens[6]) * factor:.2f}"
            tokens[10] = f"{float(tokens[10]) * factor:.2f}"
            line = "  ".join(tokens)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_check_passes_at_the_floor_fails_below_and_skips_without_the_tool(tmp_path):
    base = capture("nccl-tests/allreduce-2x-dgx-a100-k8s-ib.txt")
    fast = _nccl_check(tmp_path / "a", _scaled(base, 2.5))
    assert fast.status == Status.PASS and fast.values["peak_busbw_gbps"] == 471.75
    assert "471.75 GB/s at 4096 MiB (floor 350)" in fast.summary
    slow = _nccl_check(tmp_path / "b", base)
    assert (slow.status, slow.action) == (Status.FAIL, Action.RESEAT_OR_INSPECT)
    assert slow.summary == ("all_reduce_perf peak bus bandwidth 188.7 GB/s at 4096 MiB below "
                            "the floor 350 (ddp.busbw_min_gbps)")
    skipped = _nccl_check(tmp_path / "c", None)
    assert skipped.status == Status.SKIP and "nccl-tests not installed" in skipped.summary
    # a profile with nccl-tests' own floor (a baseline learns it) judges by that one
    own = Profile(H100.name, "test", {**H100.data, "nccl_tests": {"busbw_min_gbps": 480}})
    learned = _nccl_check(tmp_path / "d", _scaled(base, 2.5), own)
    assert (learned.status, learned.values["floor_field"]) == (Status.FAIL,
                                                               "nccl_tests.busbw_min_gbps")
    assert learned.summary.endswith("below the floor 480 (nccl_tests.busbw_min_gbps)")


def test_fewer_ranks_than_gpus_or_no_device_list_is_not_a_measurement(tmp_path):
    """Issue 52: nccl-tests with 4 ranks on an 8-GPU node measured half the GPUs; a log
    without its device list is cut short. Either fails (fix-setup), however fast."""
    fast = _scaled(capture("nccl-tests/allreduce-2x-dgx-a100-k8s-ib.txt"), 2.5)
    for ranks in (4, 0):
        result = _nccl_check(tmp_path / f"r{ranks}", fast, ranks=ranks)
        assert (result.status, result.action) == (Status.FAIL, Action.FIX_SETUP)
        assert f"all_reduce_perf ran {ranks} rank(s), the profile has 8 GPUs" in \
            result.summary


def test_wrong_results_are_an_rma_whatever_the_bandwidth(tmp_path):
    fast = _scaled(capture("nccl-tests/allreduce-2x-dgx-a100-k8s-ib.txt"), 2.5)
    bounds = _nccl_check(tmp_path / "a", fast.replace("Out of bounds values : 0 OK",
                                                      "Out of bounds values : 3 FAILED"))
    assert (bounds.status, bounds.action) == (Status.FAIL, Action.RMA)
    assert bounds.summary.endswith("3 value(s) out of bounds")
    row = "3.06      0    124.6    1.64    3.08      {}"
    rooted = capture("nccl-tests/allreduce-rooted-format-nccl-tests167.txt").replace(
        row.format(0), row.format(7))
    wrong = _nccl_check(tmp_path / "b", rooted)
    assert (wrong.status, wrong.action) == (Status.FAIL, Action.RMA)
    assert "#wrong results at 1 size(s), first at 204800 B" in wrong.summary


def test_ranks_operations_and_unvalidated_counts_are_read():
    """The device list nccl-tests prints before its table, the reduction of each row, and
    `N/A` where validation was off (-c 0)."""
    devices = "".join(f"#  Rank  {i} Group  0 Pid  4242 on  node07 device  {i} [0x18] NVIDIA "
                      "H100 80GB HBM3\n" for i in range(8))
    rows = capture("nccl-tests/allreduce-rooted-format-nccl-tests167.txt")
    run = parse_nccl_tests(devices + rows, "n")
    assert run.ranks == 8
    assert [r.redop for r in run.rows] == ["max"] * 6 + ["min"] * 5
    unvalidated = rows.replace("3.08      0", "3.08    N/A").replace("3.06      0", "3.06    N/A")
    assert parse_nccl_tests(unvalidated, "n").rows[5].wrong == 0
    assert parse_nccl_tests(rows, "n").ranks == 0


def test_a_garbled_number_names_the_file_and_row():
    text = capture("nccl-tests/allreduce-rooted-format-nccl-tests167.txt").replace(
        "3.08      0", "3.08     x7")
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text, "/e/nccl-tests.log")
    assert str(err.value).startswith("/e/nccl-tests.log: not a number 'x7' in row: 204800 ")



@pytest.mark.parametrize("column,old,new", [
    ("out-of-place busbw", "2.98      0    125.1", "x.98      0    125.1"),
    ("in-place busbw", "2.99      0\n", "x.99      0\n"),
    ("out-of-place #wrong", "2.98      0    125.1", "2.98     x0    125.1"),
    ("in-place #wrong", "2.99      0\n", "2.99     x0\n"),
])
def test_every_read_column_names_the_file_and_row_when_garbled(column, old, new):
    text = capture("nccl-tests/allreduce-rooted-format-nccl-tests167.txt")
    assert old in text, column
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text.replace(old, new, 1), "/e/nccl-tests.log")
    assert str(err.value).startswith("/e/nccl-tests.log: not a number 'x"), column
    assert "in row: 199680 " in str(err.value), column
