"""The workloads: gpu-burn soak, the PyTorch DDP smoke run, nccl-tests' all-reduce,
nvbandwidth's copies, GDRCopy's tests."""

from __future__ import annotations

import math

from gpuprov import packaging_facts
from gpuprov.checks.context import Context
from gpuprov.checks.registry import Problems, Results, below_node_median, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.gdrcopy import GDRCOPY_SANITY
from gpuprov.parsers.gpu_burn import GPU_BURN, GPU_BURN_BUILD
from gpuprov.parsers.nccl_tests import NCCL_TESTS
from gpuprov.parsers.nvbandwidth import D2D_TEST, NVBANDWIDTH, TESTS
from gpuprov.parsers.probes import DDP_JSON, TORCH_ENV
from gpuprov.parsers.system import LSMOD


@check("gpu_burn", stage="soak", needs=(GPU_BURN,), action=Action.RMA,
       rule="gpu-burn finished and measured work; no GPU FAULTY, with errors, dead or idle; "
            "no GPU over the temperature limit, below the Gflop/s floor or the allowed "
            "spread below the node median")
def gpu_burn(ctx: Context, r: Results) -> CheckResult:
    run = ctx.evidence.read(GPU_BURN)
    spec = ctx.profile["gpu_burn"]
    gpus = sorted(run.gpus.values(), key=lambda g: g.index)
    values: dict = {"seconds": run.seconds, "progress_lines": run.progress_lines,
                    "init_failures": run.init_failures, "gpus": {
                        g.index: {"gflops": g.gflops, "errors": g.errors, "died": g.died,
                                  "max_temp_c": g.max_temp_c, "verdict": g.verdict}
                        for g in gpus}}
    fails: list[tuple[int | None, str]] = []
    # compute errors call for RMA; a slow, hot or silent GPU first for an inspection
    action = Action.RESEAT_OR_INSPECT
    if run.aborted:
        fails.append((None, "gpu-burn aborted: no clients alive"))
    if run.init_failures:
        # gpu-burn carries on after a failed init and may end with every GPU "OK" (issue 7)
        reported_ok = any(g.verdict == "OK" for g in run.gpus.values())
        fails.append((None, f"gpu-burn could not initialise a GPU test "
                            f"({run.init_failures[0][:80]})"
                            + (", yet it reported OK" if reported_ok else "")))
    if not run.finished:
        fails.append((None, "gpu-burn log has no final `Tested N GPUs` list (killed or crashed)"))
    if run.progress_lines == 0:
        fails.append((None, "gpu-burn printed no progress line: no work was measured"))
    for g in gpus:
        label = ctx.gpu_label(g.index)
        if g.verdict == "FAULTY":
            fails.append((g.index, f"{label} FAULTY ({g.errors} compute errors)"))
            action = Action.RMA
        elif g.errors:
            fails.append((g.index, f"{label} {g.errors} compute errors"))
            action = Action.RMA
        if g.died:
            fails.append((g.index, f"{label} died during the soak"))
        elif g.ops == 0 and run.progress_lines:
            fails.append((g.index, f"{label} did no work"))
        if g.max_temp_c is not None and g.max_temp_c > ctx.profile["max_temp_c"]:
            fails.append((g.index, f"{label} reached {g.max_temp_c} C "
                                   f"(limit {ctx.profile['max_temp_c']} C)"))
    # GPUs the log does not cover: what it could not show, never a finding (issue 67)
    gaps: list[tuple[int | None, str]] = []
    # (a GPU missing from the log is coverage's, checks/coverage.py: only it and
    # gpu_inventory hold a file's GPUs to the profile's count); a log that says it tested
    # fewer GPUs than its final list names cannot say which of them it tested (one that
    # names fewer leaves GPUs out of the list: coverage names them)
    listed = sum(1 for g in run.gpus.values() if g.verdict)
    if run.finished and run.tested_count < listed:
        gaps.append((None, f"gpu-burn says it tested {run.tested_count} GPUs, its final list "
                           f"names {listed}"))
    rates = {g.index: g.gflops for g in gpus if g.gflops}
    if rates:
        median, below = below_node_median(rates, spec["max_spread_pct"])
        values["median_gflops"] = median
        for g in gpus:
            if not g.gflops:
                continue
            label = ctx.gpu_label(g.index)
            if g.gflops < spec["gflops_min"]:
                fails.append((g.index, f"{label} {g.gflops:.0f} Gflop/s, floor "
                                       f"{spec['gflops_min']}"))
            if g.index in below:
                fails.append((g.index, f"{label} {g.gflops:.0f} Gflop/s is "
                                       f"{below[g.index]:.0f}% below the node median "
                                       f"{median:.0f}"))
    return r.judged(fails, gaps, values, f"{len(gpus)} GPUs OK for {run.seconds}s, median "
                                         f"{values.get('median_gflops', 0):.0f} Gflop/s",
                    action=action)


@check("gpu_burn_build", stage="identity", needs=(GPU_BURN_BUILD,), action=Action.FIX_SETUP,
       applies=lambda p: bool(p["gpu"].get("compute_capability")),
       skip_reason="the profile names no compute capability",
       rule="the gpu-burn the gpu_burn role built (its BUILD.json) was compiled for the "
            "profile's GPUs' compute capability (a build for another one loads no kernel, "
            "or runs one that measures nothing of these GPUs)")
def gpu_burn_build(ctx: Context, r: Results) -> CheckResult:
    build = ctx.evidence.read(GPU_BURN_BUILD)
    want = ctx.profile["gpu"]["compute_capability"]
    values = {"compute": build["compute"], "expected": want, "url": build.get("url"),
              "sha256": build.get("sha256")}
    if str(build["compute"]) != want:
        return r.fail(f"gpu-burn built for compute capability {build['compute']}, the "
                      f"profile's GPUs are {want}: provision role gpu_burn again "
                      "(gpu_burn_compute)", values)
    return r.passed(f"gpu-burn built for compute capability {want}", values)


@check("ddp_smoke", stage="ddp", needs=(DDP_JSON,), action=Action.REBOOT,
       rule="the DDP probe's ranks agree, loss finite and falling; NCCL, one rank per GPU, "
            "wherever torch sees CUDA GPUs (gloo only where it sees none); from two ranks "
            "on, an all-reduce bus bandwidth that is a number at the profile's floor (one "
            "rank has no peer to measure); under any backend, a bus bandwidth reported that "
            "is not a number (NaN, infinity) is a failed measurement, and fewer ranks than "
            "GPUs tested fewer GPUs (both fix-setup)")
def ddp_smoke(ctx: Context, r: Results) -> CheckResult:
    result = ctx.evidence.read(DDP_JSON)
    values = dict(result)
    if not result["ok"]:
        return r.fail(f"DDP smoke failed: {result.get('error', 'no reason given')}", values)
    losses = result.get("losses") or []
    if not losses or not all(_finite(x) for x in losses) or losses[-1] >= losses[0]:
        return r.fail(f"DDP loss not finite and falling: {losses}", values)
    env = ctx.evidence.read(TORCH_ENV) or {}
    cuda_gpus = env.get("device_count") or 0
    if result["backend"] != "nccl" and cuda_gpus:
        return r.unseen(f"DDP ran on {result['backend']} while torch saw {cuda_gpus} CUDA "
                        "GPU(s): the GPUs' collectives were not tested", values)
    expected = ctx.profile.gpu_count if result["backend"] == "nccl" else result["world_size"]
    if result["world_size"] != expected:
        # ranks that never joined tested nothing of their GPUs: what the run could not
        # show (a GPU gone is gpu_inventory's finding, not DDP's)
        return r.unseen(f"DDP ran {result['world_size']} ranks, expected {expected}", values)
    busbw = result.get("allreduce_busbw_gbps")
    floor = ctx.profile["ddp"]["busbw_min_gbps"]
    if result["backend"] == "nccl" and result["world_size"] > 1:
        if not _finite(busbw):
            return r.unseen(f"all-reduce bus bandwidth not measured ({busbw!r}) on "
                            f"{result['world_size']} ranks", values)
        if busbw < floor:
            return r.fail(f"all-reduce bus bandwidth {busbw:.1f} GB/s below the floor {floor}",
                          values, action=Action.RESEAT_OR_INSPECT)
    if busbw is not None and not _finite(busbw):   # wherever the probe reports a figure
        return r.unseen(f"all-reduce bus bandwidth not a number ({busbw!r}) on "
                        f"{result['world_size']} rank(s) ({result['backend']}): a failed "
                        "measurement", values)
    bw = f", all-reduce {busbw:.2f} GB/s" if busbw is not None else ""
    return r.passed(f"{result['world_size']} ranks ({result['backend']}) agree, loss "
                    f"{losses[0]:.4f} -> {losses[-1]:.4f}{bw}", values)


def _finite(value: object) -> bool:
    """A number that is one: JSON's null, NaN and infinities are not measurements."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


@check("nccl_bandwidth", stage="ddp", needs=(NCCL_TESTS,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="nccl-tests not installed on the node (role nccl_tests)",
       rule="nccl-tests' all_reduce_perf across the node's GPUs: no value out of bounds and "
            "no #wrong result (else rma: the GPUs compute wrong sums); peak bus bandwidth "
            "at or above the profile's nccl_tests.busbw_min_gbps, or without it its "
            "intra-node floor ddp.busbw_min_gbps")
def nccl_bandwidth(ctx: Context, r: Results) -> CheckResult:
    run = ctx.evidence.read(NCCL_TESTS)
    own = (ctx.profile.data.get("nccl_tests") or {}).get("busbw_min_gbps")
    field = "ddp.busbw_min_gbps" if own is None else "nccl_tests.busbw_min_gbps"
    peak, floor = run.peak, ctx.profile["ddp"]["busbw_min_gbps"] if own is None else own
    values = {"peak_busbw_gbps": run.peak_busbw_gbps, "peak_bytes": peak.bytes,
              "avg_busbw_gbps": run.avg_busbw_gbps, "out_of_bounds": run.out_of_bounds,
              "ranks": run.ranks, "sizes": len(run.rows), "floor_gbps": floor,
              "floor_field": field}
    wrong = [row for row in run.rows if row.wrong]
    if run.out_of_bounds or wrong:
        what = (f"{run.out_of_bounds} value(s) out of bounds" if run.out_of_bounds else
                f"#wrong results at {len(wrong)} size(s), first at {wrong[0].bytes} B")
        return r.fail(f"all_reduce_perf computed wrong results: {what}", values,
                      action=Action.RMA)
    if run.ranks != ctx.profile.gpu_count:
        # one rank per GPU (`-g <GPUs>`): fewer measured fewer GPUs' links; none listed is
        # a log without its device list (cut short, or not the whole output)
        return r.unseen(f"all_reduce_perf ran {run.ranks} rank(s), the profile has "
                        f"{ctx.profile.gpu_count} GPUs: not every GPU was measured", values)
    at = f"at {peak.bytes / 2**20:g} MiB"
    if run.peak_busbw_gbps < floor:
        return r.fail(f"all_reduce_perf peak bus bandwidth {run.peak_busbw_gbps:g} GB/s {at} "
                      f"below the floor {floor:g} ({field})", values)
    return r.passed(f"all_reduce_perf peak bus bandwidth {run.peak_busbw_gbps:g} GB/s {at} "
                    f"(floor {floor:g}), results correct", values)


# -- nvbandwidth: copy bandwidth per GPU, against the floors and the GPU's siblings --

# each test's figure in the profile (nvbandwidth.<floor>) and in what it says
FLOORS = {"host_to_device_memcpy_ce": ("h2d_min_gbps", "host to device"),
          "device_to_host_memcpy_ce": ("d2h_min_gbps", "device to host"),
          "device_to_device_memcpy_read_ce": ("d2d_min_gbps", "GPU to GPU")}


@check("nvbandwidth", stage="ddp", needs=(NVBANDWIDTH,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="nvbandwidth not installed on the node",
       applies=lambda p: "nvbandwidth" in p.data,
       rule="every GPU's host-to-device, device-to-host and GPU-to-GPU copy bandwidth at or "
            "above the profile's floors, and less than nvbandwidth.spread_pct below the "
            "node's median; each test ran")
def nvbandwidth(ctx: Context, r: Results) -> CheckResult:
    run = ctx.evidence.read(NVBANDWIDTH)
    spec = ctx.profile["nvbandwidth"]
    problems: Problems = []
    values: dict = {"version": run.version, "gpus": {}}
    for test in TESTS:
        floor_key, words = FLOORS[test]
        matrix = run.tests.get(test)
        figures = matrix.per_gpu() if matrix else {}
        if not figures:
            if test == D2D_TEST and run.waived and ctx.profile.gpu_count == 1:
                values["not_applicable"] = f"{test} waived by nvbandwidth: one GPU"
                continue
            problems.append((None, f"nvbandwidth gave no {test} result" + (
                f": {run.errors[0]}" if run.errors else " (waived)" if run.waived else "")))
            continue
        median, below = below_node_median(figures, spec["spread_pct"])
        for index, gbps in sorted(figures.items()):
            values["gpus"].setdefault(index, {})[floor_key.removesuffix("_min_gbps")] = gbps
            label = ctx.gpu_label(index)
            floor = spec.get(floor_key)
            if floor is not None and gbps < floor:
                problems.append((index, f"{label} {words} {gbps:.1f} GB/s, floor {floor}"))
            if index in below:
                problems.append((index, f"{label} {words} {gbps:.1f} GB/s, {below[index]:.0f}% "
                                        f"below the node median {median:.1f}"))
    if problems:
        return r.failed(problems, values)
    return r.passed(f"{len(values['gpus'])} GPUs' copy bandwidth within "
                    f"{spec['spread_pct']}% of the node median", values)



# -- GDRCopy: its functional tests on the node's GPU, where the lock installs it --

# GDRCopy's module as lsmod names it (data/packaging.yml `gdrcopy`)
GDRDRV_MODULE = packaging_facts.facts()["gdrcopy"]["module"]


@check("gdrcopy", stage="ddp", needs=(GDRCOPY_SANITY, LSMOD), action=Action.NONE,
       optional=True, skip_reason="GDRCopy not installed on the node (the lock sets no "
       "gpuprov_gdrcopy_version)",
       rule="gdrcopy_sanity fails no test and passes some (waived ones do not apply to the "
            "node), and the gdrdrv module is loaded; where the lock sets "
            "gpuprov_gdrcopy_version, gdrcopy_sanity absent fails")
def gdrcopy(ctx: Context, r: Results) -> CheckResult:
    report = ctx.evidence.read(GDRCOPY_SANITY)
    loaded = GDRDRV_MODULE in ctx.evidence.read(LSMOD)
    values = {"total": report.total, "passed": report.passed, "failed": report.failed,
              "waived": report.waived, "failed_tests": report.failed_tests,
              "module": GDRDRV_MODULE, "loaded": loaded}
    problems = []
    if report.failed:
        named = ", ".join(report.failed_tests[:3]) + (
            f" and {report.failed - 3} more" if report.failed > 3 else "")
        problems.append(f"gdrcopy_sanity: {report.failed} of {report.total} tests failed "
                        f"({named})")
    elif not report.ok:
        problems.append(f"gdrcopy_sanity: no test passed ({report.waived} of {report.total} "
                        "waived)")
    if not loaded:
        problems.append(f"{GDRDRV_MODULE} not loaded (its service, gdrdrv, loads it and makes "
                        "/dev/gdrdrv once the nvidia module is loaded)")
    if problems:
        return r.fail("; ".join(problems), values)
    waived = f", {report.waived} waived" if report.waived else ""
    return r.passed(f"gdrcopy_sanity: {report.passed} of {report.total} tests passed{waived}; "
                    f"{GDRDRV_MODULE} loaded", values)
