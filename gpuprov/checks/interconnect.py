"""NVLink topology, link state and error counters; the PCIe link."""

from __future__ import annotations

from gpuprov.checks.context import Context, failed, missing, single_gpu, skip
from gpuprov.checks.result import CheckResult, Status
from gpuprov.evidence import (
    NVLINK_ERRORS_AFTER,
    NVLINK_ERRORS_BEFORE,
    NVLINK_STATUS,
    SMI_AFTER,
    SMI_BEFORE,
    TOPO,
)


def nvlink_topology(ctx: Context) -> CheckResult:
    topo = ctx.evidence.topo()
    if topo is None:
        return missing("nvlink_topology", TOPO)
    gpus = topo.gpus
    values: dict = {"gpus": len(gpus), "pairs": {f"{a}-{b}": code for a, b, code in
                                                  topo.gpu_pairs()}}
    if len(gpus) != ctx.profile.gpu_count:
        return CheckResult("nvlink_topology", Status.FAIL,
                           f"topology shows {len(gpus)} GPUs, profile expects "
                           f"{ctx.profile.gpu_count}", values=values)
    bad = []
    for a, b, code in topo.gpu_pairs():
        ia, ib = int(a[3:]), int(b[3:])
        expected = ctx.profile.expected_link(ia, ib)
        if expected == "PCIe":
            if code.startswith("NV"):
                bad.append((a, b, code, "no NVLink"))
        elif code != expected:
            bad.append((a, b, code, expected))
    values["bad_pairs"] = [f"{a}-{b}: {code} (expected {exp})" for a, b, code, exp in bad]
    if bad:
        shown = "; ".join(values["bad_pairs"][:4])
        more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
        common = set.intersection(*[{int(a[3:]), int(b[3:])} for a, b, _, _ in bad])
        gpu = ctx.gpu_ref(next(iter(common))) if len(common) == 1 and len(bad) > 1 else None
        return CheckResult("nvlink_topology", Status.FAIL,
                           f"{len(bad)} GPU pair(s) off-profile: {shown}{more}",
                           gpu=gpu, values=values)
    expected = (ctx.profile.nvlink or {}).get("all_pairs", "no NVLink")
    return CheckResult("nvlink_topology", Status.PASS,
                       f"all {len(list(topo.gpu_pairs()))} GPU pairs {expected}", values=values)


def nvlink_status(ctx: Context) -> CheckResult:
    spec = ctx.profile.nvlink
    if spec is None:
        return skip("nvlink_status", "no NVLink in this profile")
    status = ctx.evidence.nvlink_status()
    if status is None:
        return missing("nvlink_status", NVLINK_STATUS)
    values: dict = {"links": {g.index: {"active": len(g.active), "inactive": g.inactive,
                                        "all_inactive": g.all_inactive}
                              for g in status.gpus}}
    if status.empty:
        return CheckResult("nvlink_status", Status.FAIL,
                           "`nvidia-smi nvlink -s` reported no links on an NVLink system",
                           values=values)
    problems: list[tuple[int, str]] = []
    for g in status.gpus:
        if g.all_inactive:
            problems.append((g.index, f"{ctx.gpu_label(g.index)}: all links inactive"))
        elif g.inactive:
            problems.append((g.index, f"{ctx.gpu_label(g.index)}: link(s) "
                                      f"{', '.join(map(str, g.inactive))} inactive"))
        elif len(g.active) < spec["links_per_gpu"]:
            problems.append((g.index, f"{ctx.gpu_label(g.index)}: {len(g.active)} links, "
                                      f"expected {spec['links_per_gpu']}"))
        else:
            slow = [k for k, v in g.speeds.items() if v is not None and
                    v < spec["link_speed_gbps"] * 0.99]
            if slow:
                problems.append((g.index, f"{ctx.gpu_label(g.index)}: link(s) "
                                          f"{', '.join(map(str, slow))} below "
                                          f"{spec['link_speed_gbps']} GB/s"))
    seen = {g.index for g in status.gpus}
    absent = [i for i in range(ctx.profile.gpu_count) if i not in seen]
    problems += [(i, f"GPU {i}: not listed") for i in absent]
    if problems:
        return failed(ctx, "nvlink_status", problems, values)
    return CheckResult("nvlink_status", Status.PASS,
                       f"{len(status.gpus)} GPUs x {spec['links_per_gpu']} links active",
                       values=values)


def nvlink_errors(ctx: Context) -> CheckResult:
    if ctx.profile.nvlink is None:
        return skip("nvlink_errors", "no NVLink in this profile")
    before, after = ctx.evidence.nvlink_errors(False), ctx.evidence.nvlink_errors(True)
    if before is None or after is None:
        absent = [f for f, v in ((NVLINK_ERRORS_BEFORE, before), (NVLINK_ERRORS_AFTER, after))
                  if v is None]
        return missing("nvlink_errors", *absent)
    b, a = before.totals(), after.totals()
    deltas: dict[int, dict[str, int]] = {}
    for gpu, counters in a.items():
        for name, value in counters.items():
            delta = value - b.get(gpu, {}).get(name, 0)
            if delta:
                deltas.setdefault(gpu, {})[name] = delta
    old = {gpu: {k: v for k, v in c.items() if v} for gpu, c in b.items() if any(c.values())}
    values = {"new_during_soak": deltas, "before_soak": old}
    if deltas:
        gpu = sorted(deltas)[0]
        what = ", ".join(f"{k} +{v}" for k, v in deltas[gpu].items())
        return CheckResult("nvlink_errors", Status.FAIL,
                           f"NVLink errors during the soak on {ctx.gpu_label(gpu)}: {what}",
                           gpu=single_gpu(ctx, list(deltas)), values=values)
    if old:
        return CheckResult("nvlink_errors", Status.PASS,
                           f"no new NVLink errors during the soak (older counts on GPU "
                           f"{', '.join(map(str, old))} reported)", values=values)
    return CheckResult("nvlink_errors", Status.PASS, "no NVLink errors", values=values)


REPLAYS_PER_SOAK_MAX = 80  # DCGM's pcie plugin default (validation-practice.md §3)


def pcie_link(ctx: Context) -> CheckResult:
    before = ctx.evidence.smi()
    if before is None:
        return missing("pcie_link", SMI_BEFORE)
    after = ctx.evidence.smi(after=True)
    want = ctx.profile["pcie"]
    problems: list[tuple[int, str]] = []
    warnings: list[str] = []
    values: dict = {"expected": want, "gpus": {}}
    after_by_bus = after.by_bus_id() if after else {}
    for g in before.gpus:
        values["gpus"][g.index] = {"gen": [g.pcie_gen_current, g.pcie_gen_max],
                                   "width": [g.pcie_width_current, g.pcie_width_max],
                                   "replays": g.pcie_replays}
        if (g.pcie_width_current or 0) < want["width"]:
            problems.append((g.index, f"{g.label()} link x{g.pcie_width_current}, "
                                      f"expected x{want['width']}"))
        elif (g.pcie_gen_max or 0) < want["gen"]:
            problems.append((g.index, f"{g.label()} link Gen{g.pcie_gen_max} max, "
                                      f"expected Gen{want['gen']}"))
        elif (g.pcie_gen_current or 0) < (g.pcie_gen_max or 0):
            warnings.append(f"{g.label()} at Gen{g.pcie_gen_current} of {g.pcie_gen_max} "
                            "(idle power saving, or a degraded link)")
        later = after_by_bus.get(g.bus_id)
        if later and later.pcie_replays is not None and g.pcie_replays is not None:
            delta = later.pcie_replays - g.pcie_replays
            values["gpus"][g.index]["replays_during_soak"] = delta
            if delta > REPLAYS_PER_SOAK_MAX:
                problems.append((g.index, f"{g.label()} {delta} PCIe replays during the soak"))
    if problems:
        return failed(ctx, "pcie_link", problems, values)
    if warnings:
        return CheckResult("pcie_link", Status.WARN, warnings[0], values=values)
    note = "" if after else f" ({SMI_AFTER} absent: replay delta not judged)"
    return CheckResult("pcie_link", Status.PASS,
                       f"every GPU at Gen{want['gen']} x{want['width']}{note}", values=values)
