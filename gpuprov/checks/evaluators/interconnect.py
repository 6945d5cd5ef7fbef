"""NVLink topology, link state and error counters; NVLink-C2C to the Grace CPU; the PCIe
link."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.c2c import C2C_STATUS
from gpuprov.parsers.nvlink import NVLINK_ERRORS_AFTER, NVLINK_ERRORS_BEFORE, NVLINK_STATUS
from gpuprov.parsers.smi_gpu import SMI_AFTER, SMI_BEFORE
from gpuprov.parsers.topo import TOPO


def _has_nvlink(profile) -> bool:
    return profile.nvlink is not None


@check("nvlink_topology", stage="snapshot", needs=(TOPO,), action=Action.RESEAT_OR_INSPECT,
       rule="`topo -m` shows the profile's link for every GPU pair (a GPU missing from the "
            "matrix is a coverage gap: fix-setup)")
def nvlink_topology(ctx: Context, r: Results) -> CheckResult:
    topo = ctx.evidence.read(TOPO)
    gpus = topo.gpus
    values: dict = {"gpus": len(gpus), "pairs": {f"{a}-{b}": code for a, b, code in
                                                  topo.gpu_pairs()}}
    # a GPU missing from the matrix is coverage's (checks/coverage.py): the setup's, named
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
        # the GPU in every off-profile pair (a lone pair names no single GPU)
        common = set.intersection(*[{int(a[3:]), int(b[3:])} for a, b, _, _ in bad])
        gpu = r.at_fault(common) if len(bad) > 1 else None
        return r.fail(f"{len(bad)} GPU pair(s) off-profile: {shown}{more}", values, gpu=gpu)
    expected = (ctx.profile.nvlink or {}).get("all_pairs", "no NVLink")
    return r.passed(f"all {len(list(topo.gpu_pairs()))} GPU pairs {expected}", values)


@check("nvlink_status", stage="snapshot", needs=(NVLINK_STATUS,),
       action=Action.RESEAT_OR_INSPECT, applies=_has_nvlink,
       skip_reason="no NVLink in this profile",
       rule="every GPU listed with the profile's link count, all active, at the profile's "
            "per-link speed")
def nvlink_status(ctx: Context, r: Results) -> CheckResult:
    spec = ctx.profile.nvlink
    status = ctx.evidence.read(NVLINK_STATUS)
    values: dict = {"links": {g.index: {"active": len(g.active), "inactive": g.inactive,
                                        "all_inactive": g.all_inactive,
                                        "slowest_gbps": min((v for v in g.speeds.values()
                                                             if v is not None), default=None)}
                              for g in status.gpus}}
    if status.empty:
        return r.fail("`nvidia-smi nvlink -s` reported no links on an NVLink system", values)
    problems: list[tuple[int | None, str]] = []
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
    if problems:
        return r.failed(problems, values)
    return r.passed(f"{len(status.gpus)} GPUs x {spec['links_per_gpu']} links active", values)


@check("nvlink_errors", stage="soak", needs=(NVLINK_ERRORS_BEFORE, NVLINK_ERRORS_AFTER),
       action=Action.RESEAT_OR_INSPECT, applies=_has_nvlink,
       skip_reason="no NVLink in this profile",
       rule="no NVLink replay, recovery or CRC error counter grew during the soak")
def nvlink_errors(ctx: Context, r: Results) -> CheckResult:
    before = ctx.evidence.read(NVLINK_ERRORS_BEFORE)
    after = ctx.evidence.read(NVLINK_ERRORS_AFTER)
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
        return r.fail(f"NVLink errors during the soak on {ctx.gpu_label(gpu)}: {what}", values,
                      gpu=r.at_fault(deltas))
    if old:
        return r.passed(f"no new NVLink errors during the soak (older counts on GPU "
                        f"{', '.join(map(str, old))} reported)", values)
    return r.passed("no NVLink errors", values)


def _has_c2c(profile) -> bool:
    return bool(profile.data.get("c2c"))


@check("c2c_links", stage="snapshot", needs=(C2C_STATUS,), action=Action.RESEAT_OR_INSPECT,
       applies=_has_c2c, skip_reason="no NVLink-C2C in this profile",
       rule="every GPU reports NVLink-C2C links to its Grace CPU, as many and as fast as its "
            "siblings' (no GB200 or GB300 link count or rate is published to hold them to); "
            "the driver's `No Devices support C2C` on a Grace tray is the setup's")
def c2c_links(ctx: Context, r: Results) -> CheckResult:
    status = ctx.evidence.read(C2C_STATUS)
    values: dict = {"links": {g.index: {"count": len(g.speeds),
                                        "slowest_gbps": min(g.speeds.values(), default=None)}
                              for g in status.gpus}}
    if status.unsupported:
        return r.unseen("`nvidia-smi c2c -s`: No Devices support C2C, on a profile whose GPUs "
                        "reach their Grace CPU over NVLink-C2C (the driver does not report it)",
                        values)
    # the tray's own figure: the most links any GPU has, at the fastest rate seen
    count = max(len(g.speeds) for g in status.gpus)
    rate = max(max(g.speeds.values(), default=0.0) for g in status.gpus)
    values.update({"links_per_gpu": count, "link_speed_gbps": rate})
    if count == 0:
        return r.unseen("`nvidia-smi c2c -s` listed the GPUs with no C2C link", values)
    problems: list[tuple[int | None, str]] = []
    for g in status.gpus:
        slow = [k for k, v in g.speeds.items() if v < rate * 0.99]
        if len(g.speeds) < count:
            problems.append((g.index, f"{ctx.gpu_label(g.index)}: {len(g.speeds)} C2C links, "
                                      f"its siblings {count}"))
        elif slow:
            problems.append((g.index, f"{ctx.gpu_label(g.index)}: C2C link(s) "
                                      f"{', '.join(map(str, slow))} below {rate:g} GB/s"))
    if problems:
        return r.failed(problems, values)
    return r.passed(f"{len(status.gpus)} GPUs x {count} C2C links at {rate:g} GB/s", values)


REPLAYS_PER_SOAK_MAX = 80  # DCGM's pcie plugin default (validation-practice.md §3)


@check("pcie_link", stage="snapshot", needs=(SMI_BEFORE,), action=Action.RESEAT_OR_INSPECT,
       rule=f"every GPU's link at the profile's width and generation; at most "
            f"{REPLAYS_PER_SOAK_MAX} PCIe replays during the soak; below max generation at "
            "idle warns")
def pcie_link(ctx: Context, r: Results) -> CheckResult:
    before = ctx.evidence.read(SMI_BEFORE)
    after = ctx.evidence.read(SMI_AFTER)
    want = ctx.profile["pcie"]
    problems: list[tuple[int | None, str]] = []
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
        return r.failed(problems, values)
    if warnings:
        return r.warn(warnings[0], values, action=Action.NONE)
    note = "" if after else f" ({SMI_AFTER} absent: replay delta not judged)"
    return r.passed(f"every GPU at Gen{want['gen']} x{want['width']}{note}", values)
