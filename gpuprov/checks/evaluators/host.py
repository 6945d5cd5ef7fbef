"""The host's own settings that feed the GPUs: the CPU frequency governor."""

from __future__ import annotations

from collections import defaultdict

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.cpufreq import CPUFREQ, cpu_list


def _cpus(cpus: list[int]) -> str:
    return f"CPU{'s' if len(cpus) > 1 else ''} {cpu_list(cpus)}"


@check("cpu_governor", stage="identity", needs=(CPUFREQ,), action=Action.NONE,
       applies=lambda profile: bool(profile.data.get("cpu_governor")),
       skip_reason="the profile sets no cpu_governor",
       rule="every online CPU has a cpufreq policy and its governor is the profile's "
            "cpu_governor (performance); no policy on any CPU warns (the firmware owns the "
            "P-states, as under a vendor's maximum-performance profile, or a VM); some CPUs "
            "without one fails")
def cpu_governor(ctx: Context, r: Results) -> CheckResult:
    state = ctx.evidence.read(CPUFREQ)
    want = ctx.profile["cpu_governor"]
    by_governor: dict[str, list[int]] = defaultdict(list)
    for cpu in state.online:
        by_governor[state.governors.get(cpu, "")].append(cpu)
    drivers = sorted(set(state.drivers.values()))
    values = {"expected": want, "online": cpu_list(state.online), "drivers": drivers,
              "governors": {g or "none": cpu_list(c) for g, c in sorted(by_governor.items())}}
    if not state.governors and not state.drivers:
        # no cpufreq driver at all: the OS has nothing to set, and the BIOS profile decides
        # (kernel Documentation/admin-guide/pm/cpufreq.rst); only a policy can be judged
        return r.warn(f"{_cpus(state.online)}: no cpufreq policy: frequency under firmware "
                      "control (or no cpufreq driver loaded): check the BIOS power profile",
                      values)
    problems = []
    if by_governor.get(""):
        problems.append(f"{_cpus(by_governor[''])}: no cpufreq policy (the "
                        "firmware controls their frequency, or no cpufreq driver is loaded)")
    for governor, cpus in sorted(by_governor.items()):
        if governor and governor != want:
            problems.append(f"{_cpus(cpus)}: governor {governor}")
    if problems:
        return r.fail("; ".join(problems) + f", not {want}: provision role cpu_governor "
                      "(it also stops Ubuntu's ondemand.service resetting it at boot)", values)
    return r.passed(f"{len(state.online)} CPU(s) at governor {want} "
                    f"({', '.join(drivers) or 'no driver named'})", values)
