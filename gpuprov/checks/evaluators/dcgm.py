"""NVIDIA's own diagnostics: `dcgmi diag` at the validation's level, and what DCGM's
background health watches saw over the validation."""

from __future__ import annotations

from dataclasses import replace

from gpuprov.checks import coverage
from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, most_drastic
from gpuprov.parsers.dcgm import DCGM_DIAG, DcgmDiag
from gpuprov.parsers.dcgm_health import DCGM_HEALTH
from gpuprov.parsers.kind import GPU
from gpuprov.resources import load_yaml

# A failing Deployment test is the node's software or configuration (persistence mode,
# environment, a pending retirement or remap: a reset or reboot clears it); a diagnostic
# that did not run at all (`runtime_error`: GPUs in use, no host engine) judged nothing of
# the hardware; a failing hardware, integration or stress test is the GPU's.
ACTION_BY_SECTION = {"Deployment": Action.REBOOT, "Runtime": Action.NONE}

# What each `dcgmi diag -r` level must have run, on every GPU (data/dcgm_levels.yml, with
# its source)
LEVELS = load_yaml("dcgm_levels.yml")


def _name(test: str) -> str:
    """A test's name as the level table spells it (older releases' names aliased)."""
    key = test.lower().replace(" ", "_")
    return LEVELS["aliases"].get(key, key)


def _required(level: object) -> list[str]:
    """The tests `level` runs that judge the GPUs (every level up to it); none where the
    level is not known."""
    if not isinstance(level, int):
        return []
    return [t for lvl, tests in sorted(LEVELS["levels"].items()) if lvl <= level
            for t in tests]


def _not_run(ctx: Context, diag: DcgmDiag, required: list[str]) -> list[str]:
    """What the report says of the required tests that did not run on every GPU: those
    absent from it, those skipped (on every GPU), and each that ran on some of the node's
    GPUs but not all. A report whose form names no GPU (the older tables' bare `Pass`)
    cannot say which GPUs a test ran on: only absence and a skip are read from it."""
    by_name = {_name(t.name): t for t in diag.tests}
    gpus = coverage.declared(ctx, GPU, (DCGM_DIAG,))
    names_gpus = diag.gpus() is not None
    absent, skipped, partial = [], [], []
    for name in required:
        test = by_name.get(name)
        if test is None:
            absent.append(name)
        elif test.status == "skip" or (names_gpus and not test.ran_on):
            skipped.append(name)
        elif names_gpus and (left := [g for g in gpus if g not in test.ran_on]):
            partial.append(f"{name} not run on GPU {', '.join(map(str, left))} (ran on "
                           f"{len(test.ran_on)} of {len(gpus)})")
    return ([f"no {', '.join(absent)} test in its report"] if absent else []) + \
        ([f"{', '.join(skipped)} skipped"] if skipped else []) + partial


@check("dcgm_diag", stage="dcgm", needs=(DCGM_DIAG,), action=Action.RMA, optional=True,
       skip_reason="DCGM not installed on the node (role dcgm)",
       rule="every `dcgmi diag` test at the asked level passes with no Error; each failing "
            "test named with its GPUs and DCGM's reason (Deployment failures: reboot; "
            "hardware, integration and stress failures: rma; a diagnostic that did not run: "
            "fails); a GPU's PCIe copy bandwidth or diagnostic Gflop/s (DCGM's Info) below "
            "the profile's dcgm.pcie_min_gbps / dcgm.gflops_min fails (reseat-or-inspect); "
            "a Warning, or a test the level does not require (eud, nccl_tests…) skipped, "
            "warns; a test the level requires (data/dcgm_levels.yml) absent, skipped, or "
            "run on fewer than every GPU, or every test skipped, fails (fix-setup)")
def dcgm_diag(ctx: Context, r: Results) -> CheckResult:
    diag = ctx.evidence.read(DCGM_DIAG)
    level = ctx.evidence.meta.get("dcgm_level")
    values = {"level": level, "metadata": diag.metadata,
              "tests": {t.name: {"section": t.section, "status": t.status,
                                 "failed_gpus": t.failed_gpus,
                                 "messages": [list(m) for m in t.messages]}
                        for t in diag.tests}}
    figures = diag.figures()
    values["figures"] = {key: {str(g): v for g, v in sorted(per_gpu.items())}
                         for key, per_gpu in figures.items()}
    failed = diag.failed
    if failed:
        def named(t) -> str:
            gpus = ", ".join(ctx.gpu_label(g) for g in t.failed_gpus)
            error = next((text for kind, text in t.messages if kind == "Error"), "")
            return (f"{t.name} ({t.section})" + (f" on {gpus}" if gpus else "")
                    + (f": {error[:160]}" if error else ""))
        gpus = {g for t in failed for g in t.failed_gpus}
        actions = {ACTION_BY_SECTION.get(t.section, Action.RMA) for t in failed}
        action = Action.RMA if Action.RMA in actions else actions.pop()
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return r.fail(f"dcgmi diag -r {level or '?'}: "
                      + "; ".join(named(t) for t in failed[:3]) + more, values,
                      gpu=r.at_fault(gpus) if len(gpus) == 1 else None, action=action)
    said = _not_run(ctx, diag, _required(level))
    if said:
        # a test the level runs that did not run judged nothing: coverage for DCGM is the
        # level's tests on every GPU (issue 65), what gpuprov could not see (fix-setup)
        values["not_run"] = said
        more = f" (+{len(said) - 4} more)" if len(said) > 4 else ""
        return r.unseen(f"dcgmi diag -r {level}: " + "; ".join(said[:4]) + more
                        + " (the level runs each on every GPU: not run, it judged nothing)",
                        values)
    short = _below_floors(ctx, figures)
    if short:    # DCGM passed its own bar, not the site's (a learned baseline's) floor
        result = r.failed(short, values, action=Action.RESEAT_OR_INSPECT)
        return replace(result, summary=f"dcgmi diag -r {level or '?'}: {result.summary}")
    warnings = [(t, text) for t in diag.tests for kind, text in t.messages if kind == "Warning"]
    if warnings:
        t, text = warnings[0]
        return r.warn(f"dcgmi diag -r {level or '?'}: {t.name} warns: {text[:200]}", values,
                      action=Action.NONE)
    if diag.tests and len(diag.skipped) == len(diag.tests):
        # not one test ran: the diagnostic judged nothing, so it cannot pass (issue 52)
        return r.unseen(f"dcgmi diag -r {level or '?'}: every one of its {len(diag.tests)} "
                        "test(s) skipped: nothing judged", values)
    if diag.skipped:   # a test the level does not require (eud, nccl_tests…) not run
        names = ", ".join(t.name for t in diag.skipped)
        return r.warn(f"dcgmi diag -r {level or '?'}: {len(diag.skipped)} of "
                      f"{len(diag.tests)} test(s) skipped, nothing judged by them: {names}",
                      values, action=Action.NONE)
    return r.passed(f"dcgmi diag -r {level or '?'}: {len(diag.tests)} test(s) passed", values)


# (figure, profile field under `dcgm`, unit) judged when the profile sets the field
FLOORS = (("pcie_gbps", "pcie_min_gbps", "GB/s host-device copy"),
          ("gflops", "gflops_min", "Gflop/s"))


def _below_floors(ctx: Context, figures: dict[str, dict[int, float]]
                  ) -> list[tuple[int | None, str]]:
    floors = ctx.profile.data.get("dcgm") or {}
    return [(gpu, f"{ctx.gpu_label(gpu)}: {value:g} {unit} below dcgm.{field} "
                  f"{floors[field]:g}")
            for key, field, unit in FLOORS if field in floors
            for gpu, value in sorted(figures.get(key, {}).items()) if value < floors[field]]


# What a health watch's failure usually calls for: a volatile double-bit error or a pending
# retirement clears with a GPU reset; links and cooling are looked at in the rack.
ACTION_BY_SYSTEM = {"Memory system": Action.RESET_GPU, "PCIe system": Action.RESEAT_OR_INSPECT,
                    "NVLINK system": Action.RESEAT_OR_INSPECT,
                    "Thermal system": Action.RESEAT_OR_INSPECT,
                    "Power system": Action.RESEAT_OR_INSPECT, "Driver": Action.REBOOT}


@check("dcgm_health", stage="dcgm", needs=(DCGM_HEALTH,), action=Action.RMA, optional=True,
       skip_reason="DCGM not installed on the node (role dcgm)",
       rule="DCGM's health watches (every system, set before the soak) report Healthy over "
            "the validation; a Failure fails naming the entity, system and DCGM's message "
            "(memory: reset-gpu; PCIe, NVLink, thermal, power: reseat-or-inspect; driver: "
            "reboot; others: rma); a Warning warns")
def dcgm_health(ctx: Context, r: Results) -> CheckResult:
    health = ctx.evidence.read(DCGM_HEALTH)
    values = {"overall": health.overall,
              "incidents": [{"entity": f"{i.entity_group} {i.entity_id}", "system": i.system,
                             "health": i.health, "message": i.message}
                            for i in health.incidents]}

    def named(i) -> str:
        who = ctx.gpu_label(i.entity_id) if i.entity_group == "GPU" else \
            f"{i.entity_group} {i.entity_id}"
        return f"{who} {i.system}: {i.message[:160]}"
    failures = [i for i in health.incidents if i.health == "fail"]
    if failures:
        gpus = {i.entity_id for i in failures if i.entity_group == "GPU"}
        actions = [ACTION_BY_SYSTEM.get(i.system, Action.RMA) for i in failures]
        more = f" (+{len(failures) - 2} more)" if len(failures) > 2 else ""
        return r.fail("dcgmi health: Failure: " + "; ".join(named(i) for i in failures[:2])
                      + more, values, gpu=r.at_fault(gpus) if len(gpus) == 1 else None,
                      action=most_drastic(actions))
    if health.incidents:
        return r.warn("dcgmi health: Warning: " + "; ".join(named(i) for i in
                                                            health.incidents[:2]),
                      values, action=Action.NONE)
    return r.passed("dcgmi health: Healthy (every watched system)", values)
