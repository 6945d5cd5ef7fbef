"""The numeric fingerprint: a screen for silent data corruption (docs/fingerprint.md).

Every GPU ran the same fixed-seed deterministic workload and hashed its results. GPUs of one
kind under one software stack compute bit for bit alike (measured: tests/fixtures/
fingerprint/, shared fixtures numeric-fingerprint/), so a GPU whose hashes differ from its
siblings' computes wrong but plausible results; a node whose GPUs agree with each other and
not with the site's golden (learned by `gpuprov baseline` from accepted nodes, for the same
key: device, driver, CUDA, cuBLAS, torch, workload) is off as a whole.
"""

from __future__ import annotations

from collections import Counter

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Problems, Results, check
from gpuprov.model import Action, CheckResult, most_drastic
from gpuprov.parsers.fingerprint import FINGERPRINT, MODES, FingerprintReport, GpuFingerprint
from gpuprov.parsers.probes import TORCH_ENV
from gpuprov.parsers.smi_gpu import SMI_BEFORE
from gpuprov.profiles import FINGERPRINT_KEY as KEY_FIELDS


def key_of(gpu: GpuFingerprint, report: FingerprintReport, driver: str | None) -> dict:
    """What a golden is for: a different value of any of these may change the hashes."""
    return {"device": gpu.device, "driver": driver, "cuda": report.cuda_version,
            "cublas": gpu.cublas_version, "torch": report.torch_version,
            "workload": gpu.workload}


def key_text(key: dict) -> str:
    return " / ".join(f"{name} {key.get(name) or 'none'}" for name in KEY_FIELDS)


def golden_for(profile_data: dict, key: dict) -> dict | None:
    """The profile's golden hashes for `key`, if it has them."""
    for entry in (profile_data.get("fingerprint") or {}).get("golden") or []:
        if {name: entry["key"].get(name) for name in KEY_FIELDS} == key:
            return entry["hashes"]
    return None


def _differ(hashes: dict, reference: dict) -> str:
    """The modes whose hash differs, each as `mode <own> (<reference>)`."""
    return ", ".join(f"{mode} {hashes.get(mode)} ({reference.get(mode)})" for mode in MODES
                     if hashes.get(mode) != reference.get(mode))


@check("numeric_fingerprint", stage="ddp", needs=(FINGERPRINT,),
       action=Action.RESEAT_OR_INSPECT,
       rule="every GPU ran the fixed-seed deterministic workload (GEMM chains in fp32, TF32, "
            "bf16, fp16; AdamW steps); GPUs of one kind give bit-identical hashes (a "
            "minority GPU computes wrong: reseat-or-inspect, rma on repeat), and equal the "
            "profile's golden for their key (device, driver, CUDA, cuBLAS, torch, "
            "workload); no golden for the key: a warning, never a silent pass")
def numeric_fingerprint(ctx: Context, r: Results) -> CheckResult:
    report = ctx.evidence.read(FINGERPRINT)
    smi = ctx.evidence.read(SMI_BEFORE)
    driver = smi.driver_version if smi else None
    problems: Problems = []
    # each group's hashes once; a GPU's own only where they differ or it failed ("off")
    values: dict = {"seconds": report.seconds, "groups": [], "off": {}}
    if not report.gpus:    # nothing fingerprinted is no evidence of any GPU
        return r.unseen("the fingerprint probe reported no GPU", values)
    failed = [g for g in report.gpus.values() if g.error]
    ran = [g for g in report.gpus.values() if not g.error]
    cuda_gpus = (ctx.evidence.read(TORCH_ENV) or {}).get("device_count") or 0
    on_cpu = [g.index for g in ran if g.device == "cpu"]
    if on_cpu and cuda_gpus:   # hashes of the CPU's arithmetic say nothing of the GPUs
        return r.unseen(f"the fingerprint ran on the CPU for GPU(s) {', '.join(map(str, on_cpu))}"
                        f" while torch saw {cuda_gpus} CUDA GPU(s): no GPU was checked", values)
    actions = []
    for g in failed:
        values["off"][g.index] = {"uuid": g.uuid, "error": g.error}
        problems.append((g.index, f"{ctx.gpu_label(g.index)}: the workload failed ({g.error})"))
        # CUDA's own error on this GPU while its siblings ran: the GPU's (a reboot first);
        # any other failure (a timeout, the process killed) is the node's setup
        actions.append(Action.REBOOT if "CUDA" in g.error.upper() else Action.FIX_SETUP)
    if failed and not ran:   # the environment, not one GPU: nothing ran anywhere
        return r.failed(problems, values, action=Action.FIX_SETUP)
    no_golden, whole_off = [], []
    groups: dict[tuple, list[GpuFingerprint]] = {}
    for g in ran:
        groups.setdefault(tuple(key_of(g, report, driver).values()), []).append(g)
    for members in groups.values():
        key = key_of(members[0], report, driver)
        golden = golden_for(ctx.profile.data, key)
        counts = Counter(g.signature for g in members)
        top, held = counts.most_common(1)[0]
        majority = dict(zip(MODES, top, strict=True)) if held * 2 > len(members) else None
        values["groups"].append({"key": key, "gpus": sorted(g.index for g in members),
                                 "hashes": majority, "golden": golden})
        if golden is None:
            no_golden.append(key)
        reference = golden or majority
        if reference is None:
            values["off"].update({g.index: {"uuid": g.uuid, "hashes": g.hashes}
                                  for g in members})
            split = "; ".join(
                f"GPU(s) {', '.join(str(g.index) for g in members if g.signature == s)} give "
                f"fp32 {s[0]}" for s in counts)
            problems.append((None, f"{len(members)} {key['device']} GPUs disagree with no "
                                   f"majority and no golden to tell which are wrong ({split})"))
            actions.append(r.default_action)
            continue
        off = [g for g in sorted(members, key=lambda g: g.index)
               if g.signature != tuple(reference.get(m) for m in MODES)]
        if golden is not None and off and len(off) == len(members) and len(counts) == 1:
            whole_off.append((key, _differ(majority or {}, golden)))
            continue
        whose = "the golden's" if golden is not None else "its siblings'"
        actions += [r.default_action] * len(off)
        for g in off:
            values["off"][g.index] = {"uuid": g.uuid, "hashes": g.hashes}
            problems.append((g.index, f"{ctx.gpu_label(g.index)} computes differently from "
                                      f"{whose} hashes: {_differ(g.hashes, reference)}"))
    if problems:
        return r.failed(problems, values, action=most_drastic(actions or [r.default_action]))
    if whole_off:
        key, diff = whole_off[0]
        return r.fail(f"every GPU agrees with the others but not with the golden for "
                      f"{key_text(key)}: {diff}; compare the node's software and firmware with "
                      "the golden's nodes", values, action=Action.NONE)
    count = len(ran)
    if no_golden:
        return r.warn(f"{count} GPUs give identical hashes; no golden yet for "
                      f"{key_text(no_golden[0])} (`gpuprov baseline` learns it from accepted "
                      "nodes)", values, action=Action.NONE)
    return r.passed(f"{count} GPUs give identical hashes, equal to the golden for "
                    f"{key_text(values['groups'][0]['key'])}", values)
