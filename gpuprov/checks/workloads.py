"""The workloads: gpu-burn soak and the PyTorch DDP smoke run."""

from __future__ import annotations

import math
import statistics

from gpuprov.checks.context import Context, failed, missing
from gpuprov.checks.result import CheckResult, Status
from gpuprov.evidence import DDP_JSON, GPU_BURN


def gpu_burn(ctx: Context) -> CheckResult:
    run = ctx.evidence.gpu_burn()
    if run is None:
        return missing("gpu_burn", GPU_BURN)
    spec = ctx.profile["gpu_burn"]
    gpus = sorted(run.gpus.values(), key=lambda g: g.index)
    values: dict = {"seconds": run.seconds, "progress_lines": run.progress_lines,
                    "init_failures": run.init_failures, "gpus": {
                        g.index: {"gflops": g.gflops, "errors": g.errors, "died": g.died,
                                  "max_temp_c": g.max_temp_c, "verdict": g.verdict}
                        for g in gpus}}
    fails: list[tuple[int | None, str]] = []
    if run.aborted:
        fails.append((None, "gpu-burn aborted: no clients alive"))
    if run.init_failures:
        fails.append((None, f"gpu-burn could not initialise a GPU test "
                            f"({run.init_failures[0][:80]}), yet it reported OK"))
    if not run.finished:
        fails.append((None, "gpu-burn log has no final `Tested N GPUs` list (killed or crashed)"))
    if run.progress_lines == 0:
        fails.append((None, "gpu-burn printed no progress line: no work was measured"))
    for g in gpus:
        label = ctx.gpu_label(g.index)
        if g.verdict == "FAULTY":
            fails.append((g.index, f"{label} FAULTY ({g.errors} compute errors)"))
        elif g.errors:
            fails.append((g.index, f"{label} {g.errors} compute errors"))
        if g.died:
            fails.append((g.index, f"{label} died during the soak"))
        elif g.ops == 0 and run.progress_lines:
            fails.append((g.index, f"{label} did no work"))
        if g.max_temp_c is not None and g.max_temp_c > ctx.profile["max_temp_c"]:
            fails.append((g.index, f"{label} reached {g.max_temp_c} C "
                                   f"(limit {ctx.profile['max_temp_c']} C)"))
    if len(gpus) != ctx.profile.gpu_count and run.finished:
        fails.append((None, f"gpu-burn tested {len(gpus)} GPUs, profile expects "
                            f"{ctx.profile.gpu_count}"))
    rates = [g.gflops for g in gpus if g.gflops]
    if rates:
        median = statistics.median(rates)
        values["median_gflops"] = median
        for g in gpus:
            if not g.gflops:
                continue
            label = ctx.gpu_label(g.index)
            if g.gflops < spec["gflops_min"]:
                fails.append((g.index, f"{label} {g.gflops:.0f} Gflop/s, floor "
                                       f"{spec['gflops_min']}"))
            shortfall = 100 * (median - g.gflops) / median
            if shortfall >= spec["max_spread_pct"]:
                fails.append((g.index, f"{label} {g.gflops:.0f} Gflop/s is {shortfall:.0f}% "
                                       f"below the node median {median:.0f}"))
    if fails:
        return failed(ctx, "gpu_burn", fails, values)
    return CheckResult("gpu_burn", Status.PASS,
                       f"{len(gpus)} GPUs OK for {run.seconds}s, median "
                       f"{values.get('median_gflops', 0):.0f} Gflop/s", values=values)


def ddp_smoke(ctx: Context) -> CheckResult:
    result = ctx.evidence.ddp()
    if result is None:
        return missing("ddp_smoke", DDP_JSON)
    values = dict(result)
    if not result["ok"]:
        return CheckResult("ddp_smoke", Status.FAIL,
                           f"DDP smoke failed: {result.get('error', 'no reason given')}",
                           values=values)
    losses = result.get("losses") or []
    if not losses or not all(math.isfinite(x) for x in losses) or losses[-1] >= losses[0]:
        return CheckResult("ddp_smoke", Status.FAIL,
                           f"DDP loss not finite and falling: {losses}", values=values)
    expected = ctx.profile.gpu_count if result["backend"] == "nccl" else result["world_size"]
    if result["world_size"] != expected:
        return CheckResult("ddp_smoke", Status.FAIL,
                           f"DDP ran {result['world_size']} ranks, expected {expected}",
                           values=values)
    busbw = result.get("allreduce_busbw_gbps")
    floor = ctx.profile["ddp"]["busbw_min_gbps"]
    if result["backend"] == "nccl" and busbw is not None and busbw < floor:
        return CheckResult("ddp_smoke", Status.FAIL,
                           f"all-reduce bus bandwidth {busbw:.1f} GB/s below the floor {floor}",
                           values=values)
    bw = f", all-reduce {busbw:.2f} GB/s" if busbw is not None else ""
    return CheckResult("ddp_smoke", Status.PASS,
                       f"{result['world_size']} ranks ({result['backend']}) agree, loss "
                       f"{losses[0]:.4f} -> {losses[-1]:.4f}{bw}", values=values)
