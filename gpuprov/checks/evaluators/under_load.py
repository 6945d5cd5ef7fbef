"""What every GPU showed under the soak's load (gpu-telemetry.csv): power reached against its
enforced limit and the profile's, temperature against its siblings, clock-event reasons that
slow it, SM clock against its siblings. Figures from the profile's `under_load` (sourced
there; `gpuprov baseline` can learn a site's own).

Only samples taken under load count (utilization at least LOAD_UTIL_MIN): the sampler starts
before gpu-burn and stops after it. A GPU with no sample under load, a value nvidia-smi could
not read, or fewer GPUs than the profile's fail every check: never a pass.
"""

from __future__ import annotations

import statistics

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Problems, Results, below_node_median, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.gpu_burn import GPU_BURN
from gpuprov.parsers.telemetry import TELEMETRY, Sample

# gpu-burn holds every GPU it loads at 100 % (the real captures under gpu-burn read 100 %)
LOAD_UTIL_MIN = 90
# the share of gpu-burn's own length a GPU must be sampled under load for: a whole soak is
# sampled for about its length (the real H200's 60 s soak: 63 s under load,
# tests/fixtures/real-node-h200), a telemetry file cut short for far less
LOADED_SHARE_MIN = 0.5
# reasons that slow a GPU for a fault of its own or its cooling; `sw_power_cap` is the
# power limit doing its job and is judged by the power check instead
SLOWDOWNS = {"hw_slowdown": "HW Slowdown", "hw_thermal_slowdown": "HW Thermal Slowdown",
             "hw_power_brake_slowdown": "HW Power Brake Slowdown",
             "sw_thermal_slowdown": "SW Thermal Slowdown"}


def _applies(profile) -> bool:
    return "under_load" in profile.data


SKIP = "the profile sets no under_load figures"


def _loaded(ctx: Context) -> tuple[dict[int, list[Sample]], Problems]:
    """Each GPU's samples under load, and what makes the telemetry unusable for any check:
    gaps, what the telemetry could not show, never a finding about a GPU."""
    gpus = ctx.evidence.read(TELEMETRY).gpus()
    burn = ctx.evidence.read(GPU_BURN)
    soak = burn.seconds if burn is not None else None
    problems: Problems = []
    loaded = {}
    for index, samples in gpus.items():
        label = ctx.gpu_label(index)
        errors = sorted({e for s in samples for e in s.errors})
        if errors:
            problems.append((index, f"{label}: nvidia-smi could not read {', '.join(errors[:2])}"))
        loaded[index] = [s for s in samples if (s.utilization_pct or 0) >= LOAD_UTIL_MIN]
        if not loaded[index]:
            problems.append((index, f"{label} never under load: no sample at "
                                    f"{LOAD_UTIL_MIN}% utilization or more"))
        elif soak and (span := _span(loaded[index])) < LOADED_SHARE_MIN * soak:
            problems.append((index, f"{label} sampled under load for {span:.0f} s of a "
                                    f"{soak} s soak: the telemetry is cut short"))
    return {i: s for i, s in loaded.items() if s}, problems


def _span(samples: list[Sample]) -> float:
    """Seconds from a GPU's first sample under load to its last (0 without timestamps)."""
    times = [t for s in samples if (t := s.seconds()) is not None]
    return max(times) - min(times) if times else 0.0


def _peak(samples: list[Sample], attribute: str) -> float | None:
    values = [getattr(s, attribute) for s in samples if getattr(s, attribute) is not None]
    return max(values) if values else None




@check("load_power", stage="soak", needs=(TELEMETRY,), action=Action.RESEAT_OR_INSPECT,
       applies=_applies, skip_reason=SKIP,
       rule="under load, every GPU's enforced power limit is the profile's and its draw "
            "reaches under_load.power_fraction_min of it")
def load_power(ctx: Context, r: Results) -> CheckResult:
    loaded, gaps = _loaded(ctx)
    problems: Problems = []
    spec = ctx.profile["under_load"]
    floor = spec["power_fraction_min"] * spec["power_limit_w"]
    values: dict = {"floor_w": floor, "gpus": {}}
    for index, samples in loaded.items():
        label = ctx.gpu_label(index)
        draw, limits = _peak(samples, "power_w"), [s.power_limit_w for s in samples]
        limit = min((v for v in limits if v is not None), default=None)
        values["gpus"][index] = {"peak_power_w": draw, "enforced_limit_w": limit}
        if limit is None or draw is None:
            gaps.append((index, f"{label}: no power reading under load"))
            continue
        if limit < spec["power_limit_w"] - 1:   # nvidia-smi prints two decimals
            problems.append((index, f"{label} enforced power limit {limit:.0f} W, profile "
                                    f"{spec['power_limit_w']} W"))
        if draw < floor:
            problems.append((index, f"{label} drew at most {draw:.0f} W under load, below "
                                    f"{spec['power_fraction_min']} x {spec['power_limit_w']} W"))
    return r.judged(problems, gaps, values, f"{len(loaded)} GPUs reached at least "
                                            f"{floor:.0f} W under load at a "
                                            f"{spec['power_limit_w']} W limit")


@check("load_thermal", stage="soak", needs=(TELEMETRY,), action=Action.RESEAT_OR_INSPECT,
       applies=_applies, skip_reason=SKIP,
       rule="under load, no GPU hotter than max_temp_c, nor more than "
            "under_load.temp_spread_max_c above the node's median peak")
def load_thermal(ctx: Context, r: Results) -> CheckResult:
    loaded, gaps = _loaded(ctx)
    problems: Problems = []
    spread = ctx.profile["under_load"]["temp_spread_max_c"]
    peaks = {i: p for i, s in loaded.items() if (p := _peak(s, "temp_c")) is not None}
    gaps += [(i, f"{ctx.gpu_label(i)}: no temperature reading under load")
             for i in loaded if i not in peaks]
    values: dict = {"gpus": {i: {"peak_temp_c": p} for i, p in peaks.items()}}
    if peaks:
        median = statistics.median(peaks.values())
        values["median_peak_c"] = median
        for index, peak in peaks.items():
            label = ctx.gpu_label(index)
            if peak > ctx.profile["max_temp_c"]:
                problems.append((index, f"{label} reached {peak:.0f} C under load (limit "
                                        f"{ctx.profile['max_temp_c']} C)"))
            if peak - median > spread:
                problems.append((index, f"{label} {peak:.0f} C under load, {peak - median:.0f} "
                                        f"C above the node median {median:.0f} C (spread "
                                        f"limit {spread} C)"))
    return r.judged(problems, gaps, values, f"{len(peaks)} GPUs within {spread} C of the "
                                            f"node median under load")


@check("load_throttle", stage="soak", needs=(TELEMETRY,), action=Action.RESEAT_OR_INSPECT,
       applies=_applies, skip_reason=SKIP,
       rule="no HW slowdown, HW thermal or power-brake slowdown or SW thermal slowdown "
            "active on any GPU under load")
def load_throttle(ctx: Context, r: Results) -> CheckResult:
    loaded, gaps = _loaded(ctx)
    problems: Problems = []
    values: dict = {"gpus": {}}
    for index, samples in loaded.items():
        active = {reason: sum(reason in s.reasons for s in samples) for reason in SLOWDOWNS}
        active = {reason: n for reason, n in active.items() if n}
        values["gpus"][index] = active
        # a reason nvidia-smi printed no state for ([N/A]) is unjudged, never "no slowdown"
        unread = [SLOWDOWNS[reason] for reason in SLOWDOWNS
                  if all(reason in s.unread for s in samples)]
        if unread:
            values.setdefault("unread", {})[index] = unread
            gaps.append((index, f"{ctx.gpu_label(index)}: {', '.join(unread)} not "
                                "reported ([N/A]) under load: its slowdown cannot be judged"))
        for reason, n in active.items():
            problems.append((index, f"{ctx.gpu_label(index)} {SLOWDOWNS[reason]} active in "
                                    f"{n} of {len(samples)} samples under load"))
    return r.judged(problems, gaps, values, f"no slowdown on {len(loaded)} GPUs under load")


@check("load_clocks", stage="soak", needs=(TELEMETRY,), action=Action.RESEAT_OR_INSPECT,
       applies=_applies, skip_reason=SKIP,
       rule="under load, no GPU's median SM clock under_load.clock_spread_max_pct or more "
            "below the node's median")
def load_clocks(ctx: Context, r: Results) -> CheckResult:
    loaded, gaps = _loaded(ctx)
    problems: Problems = []
    allowed = ctx.profile["under_load"]["clock_spread_max_pct"]
    clocks = {i: statistics.median(v) for i, s in loaded.items()
              if (v := [x.sm_clock_mhz for x in s if x.sm_clock_mhz is not None])}
    gaps += [(i, f"{ctx.gpu_label(i)}: no SM clock reading under load")
             for i in loaded if i not in clocks]
    values: dict = {"gpus": {i: {"median_sm_mhz": c} for i, c in clocks.items()}}
    if clocks:
        median, below = below_node_median(clocks, allowed)
        values["node_median_sm_mhz"] = median
        for index, shortfall in below.items():
            problems.append((index, f"{ctx.gpu_label(index)} SM clock {clocks[index]:.0f} MHz "
                                    f"under load, {shortfall:.0f}% below the node median "
                                    f"{median:.0f} MHz"))
    return r.judged(problems, gaps, values, f"{len(clocks)} GPUs' SM clocks within "
                                            f"{allowed}% of the node median under load")
