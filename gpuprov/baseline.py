"""Floors learned from a site's known-good nodes (`gpuprov baseline`).

Datasheet floors are loose on purpose (0.5-0.6 x peak) and the within-node spread rule
cannot see a node whose every GPU is slow (a power cap, poor cooling). Peers can: from the
measured values of accepted nodes of one profile, each floor is a robust centre (the
median) less a stated tolerance, with iterative rejection against the rule itself —
samples the floor would reject are dropped and the centre taken again, until nothing
changes — so one weak GPU among the good ones does not drag the floor down.

What is learned (each only when the accepted results carry it):
- `gpu_burn.gflops_min` from every GPU's gpu-burn Gflop/s;
- `max_temp_c` from every GPU's hottest reading under gpu-burn: the centre plus the
  tolerance in degrees, never above the base profile's limit;
- `ddp.busbw_min_gbps` from the DDP probe's all-reduce bus bandwidth (NCCL runs only: the
  floor is an NCCL floor);
- `nccl_tests.busbw_min_gbps` from nccl-tests' all_reduce_perf peak, where installed;
- `nvlink.link_speed_gbps` from every GPU's slowest NVLink link: the median itself (links
  train at fixed rates, and the check already allows 1 % below);
- `dcgm.pcie_min_gbps` and `dcgm.gflops_min` from the figures DCGM's diagnostic prints per
  GPU (the pcie test's host-device copy bandwidth, level 2 and up; the diagnostic test's
  GEMM rate, level 3 and up);
- `fabric.busbw_min_gbps` from the fabric test's group peak, when the nodes took one;
- `under_load.power_limit_w` from every GPU's enforced power limit under load (the median:
  the limit the site sets), and `under_load.power_fraction_min` from every GPU's peak draw
  over its limit, where the base profile judges the soak's telemetry;
- `nvbandwidth.h2d_min_gbps`, `d2h_min_gbps`, `d2d_min_gbps` from every GPU's nvbandwidth
  copy bandwidth, where the nodes ran it;
- `fingerprint.golden`: per key (device, driver, CUDA, cuBLAS, torch, workload), the numeric
  fingerprint's hashes that more than half of the nodes with that key gave (each node's
  GPUs agreeing among themselves); no majority, no golden for that key, and the nodes that
  differed are named (docs/fingerprint.md).

Per-node figures (DDP, nccl-tests, fabric) need at least as many samples as nodes a
baseline needs; per-GPU figures have several per node.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuprov.errors import InputError
from gpuprov.model import NodeResult, Verdict
from gpuprov.profiles import Profile

MIN_NODES = 3
DEFAULT_TOLERANCE_PCT = 8.0     # a node 15 % slow falls well below; healthy jitter does not
TEMP_TOLERANCE_C = 5


@dataclass(frozen=True)
class Learned:
    field: str            # the profile field, dotted
    value: float
    centre: float
    samples: int
    rejected: int
    rule: str             # how `value` follows from the centre


def robust_floor(samples: list[float], tolerance_pct: float) -> tuple[float, float, int]:
    """(floor, centre, rejected): centre the median of the samples the floor keeps."""
    kept = sorted(samples)
    while True:
        centre = statistics.median(kept)
        floor = centre * (1 - tolerance_pct / 100)
        keep = [v for v in kept if v >= floor]
        if keep == kept:
            return floor, centre, len(samples) - len(kept)
        kept = keep


def robust_ceiling(samples: list[float], margin: float) -> tuple[float, float, int]:
    kept = sorted(samples)
    while True:
        centre = statistics.median(kept)
        ceiling = centre + margin
        keep = [v for v in kept if v <= ceiling]
        if keep == kept:
            return ceiling, centre, len(samples) - len(kept)
        kept = keep




def _per_gpu(results: Iterable[NodeResult], key: str) -> list[float]:
    out = []
    for r in results:
        burn = r.values_of("gpu_burn") or {}
        out += [float(g[key]) for g in (burn.get("gpus") or {}).values()
                if g.get(key) is not None]
    return out


def _under_load(results: Iterable[NodeResult], tolerance_pct: float) -> list[Learned]:
    gpus = [g for r in results for g in (r.values_of("load_power").get("gpus") or {})
            .values() if g.get("enforced_limit_w") and g.get("peak_power_w") is not None]
    if not gpus:
        return []
    limits = [float(g["enforced_limit_w"]) for g in gpus]
    limit = statistics.median(limits)
    ratios = [float(g["peak_power_w"]) / float(g["enforced_limit_w"]) for g in gpus]
    floor, centre, rejected = robust_floor(ratios, tolerance_pct)
    return [Learned("under_load.power_limit_w", limit, limit, len(limits),
                    sum(abs(v - limit) > 1 for v in limits), "median of every GPU's enforced "
                    "limit under load"),
            Learned("under_load.power_fraction_min", round(floor, 3), centre, len(ratios),
                    rejected, f"median peak draw over the limit - {tolerance_pct:g} %")]


def _dcgm_figures(results: Iterable[NodeResult], key: str) -> list[float]:
    return [float(v) for r in results
            for v in ((r.values_of("dcgm_diag").get("figures") or {}).get(key) or {})
            .values()]


def _slowest_links(results: Iterable[NodeResult]) -> list[float]:
    return [float(link["slowest_gbps"]) for r in results
            for link in (r.values_of("nvlink_status").get("links") or {}).values()
            if link.get("slowest_gbps") is not None]


def _one(results: Iterable[NodeResult], check_id: str,
         pick: Callable[[dict], float | None]) -> list[float]:
    out = []
    for r in results:
        values = r.values_of(check_id)
        value = pick(values) if values else None
        if value is not None:
            out.append(float(value))
    return out


def learn(results: list[NodeResult], base: Profile, tolerance_pct: float) -> list[Learned]:
    """Every floor the results carry samples for; InputError on too few or mixed nodes."""
    nodes = sorted({r.node for r in results})
    if len(nodes) < MIN_NODES:
        raise InputError(f"a baseline needs at least {MIN_NODES} accepted nodes, got "
                         f"{len(nodes)}: {', '.join(nodes) or 'none'}")
    for r in results:
        if r.verdict != Verdict.ACCEPTED:
            raise InputError(f"{r.node} in run {r.run_id} is {r.verdict or 'unfinished'}, "
                             "not accepted: only known-good nodes make a baseline")
        if r.profile != base.name:
            raise InputError(f"{r.node} in run {r.run_id} was validated as {r.profile}, not "
                             f"{base.name}: a baseline learns from peers of one kind")
    learned = []
    gflops = _per_gpu(results, "gflops")
    if gflops:
        floor, centre, rejected = robust_floor(gflops, tolerance_pct)
        learned.append(Learned("gpu_burn.gflops_min", round(floor), centre, len(gflops),
                               rejected, f"median - {tolerance_pct:g} %"))
    temps = _per_gpu(results, "max_temp_c")
    if temps:
        ceiling, centre, rejected = robust_ceiling(temps, TEMP_TOLERANCE_C)
        limit = min(int(ceiling), int(base["max_temp_c"]))
        learned.append(Learned("max_temp_c", limit, centre, len(temps), rejected,
                               f"median + {TEMP_TOLERANCE_C} C, at most the base's "
                               f"{base['max_temp_c']}"))
    ddp = _one(results, "ddp_smoke", lambda v: v.get("allreduce_busbw_gbps")
               if v.get("backend") == "nccl" else None)
    if len(ddp) >= MIN_NODES:
        floor, centre, rejected = robust_floor(ddp, tolerance_pct)
        learned.append(Learned("ddp.busbw_min_gbps", round(floor, 1), centre, len(ddp),
                               rejected, f"median - {tolerance_pct:g} %"))
    nccl = _one(results, "nccl_bandwidth", lambda v: v.get("peak_busbw_gbps"))
    if len(nccl) >= MIN_NODES:
        floor, centre, rejected = robust_floor(nccl, tolerance_pct)
        learned.append(Learned("nccl_tests.busbw_min_gbps", round(floor, 1), centre,
                               len(nccl), rejected, f"median - {tolerance_pct:g} %"))
    links = _slowest_links(results) if base.nvlink else []
    if links:
        speed = statistics.median(links)
        learned.append(Learned("nvlink.link_speed_gbps", speed, speed, len(links),
                               sum(v < speed * 0.99 for v in links),
                               "median of every GPU's slowest link"))
    for key, field in (("pcie_gbps", "dcgm.pcie_min_gbps"), ("gflops", "dcgm.gflops_min")):
        figures = _dcgm_figures(results, key)
        if figures:
            floor, centre, rejected = robust_floor(figures, tolerance_pct)
            learned.append(Learned(field, round(floor, 2), centre, len(figures), rejected,
                                   f"median - {tolerance_pct:g} %"))
    fabric = _one(results, "fabric", lambda v: (v.get("group") or {}).get("peak_busbw_gbps"))
    if len(fabric) >= MIN_NODES:
        floor, centre, rejected = robust_floor(fabric, tolerance_pct)
        learned.append(Learned("fabric.busbw_min_gbps", round(floor, 4), centre, len(fabric),
                               rejected, f"median - {tolerance_pct:g} %"))
    if "under_load" in base.data:
        learned += _under_load(results, tolerance_pct)
    for key in ("h2d", "d2h", "d2d"):
        copies = [float(g[key]) for r in results
                  for g in (r.values_of("nvbandwidth").get("gpus") or {}).values()
                  if g.get(key) is not None]
        if copies and "nvbandwidth" in base.data:
            floor, centre, rejected = robust_floor(copies, tolerance_pct)
            learned.append(Learned(f"nvbandwidth.{key}_min_gbps", round(floor, 1), centre,
                                   len(copies), rejected, f"median - {tolerance_pct:g} %"))
    return learned


@dataclass(frozen=True)
class Golden:
    key: dict
    hashes: dict | None      # None: no hashes held by more than half the nodes
    nodes: list[str]         # the nodes that gave them
    differing: list[str]     # the nodes with that key that gave others

    def as_profile_entry(self) -> dict:
        return {"key": self.key, "hashes": self.hashes, "nodes": self.nodes}


def learn_goldens(results: list[NodeResult]) -> list[Golden]:
    """Each fingerprint key's golden: the hashes a strict majority of its nodes gave."""
    by_key: dict[tuple, tuple[dict, dict[tuple, list[str]]]] = {}
    for r in results:
        for group in r.values_of("numeric_fingerprint").get("groups") or []:
            if not group.get("hashes"):
                continue
            key = group["key"]
            entry = by_key.setdefault(tuple(sorted(key.items())), (key, {}))
            nodes = entry[1].setdefault(tuple(sorted(group["hashes"].items())), [])
            if r.node not in nodes:
                nodes.append(r.node)
    goldens = []
    for key, seen in by_key.values():
        total = sum(len(nodes) for nodes in seen.values())
        hashes, nodes = max(seen.items(), key=lambda item: len(item[1]))
        if len(nodes) * 2 <= total:
            goldens.append(Golden(key, None, [], sorted(n for ns in seen.values() for n in ns)))
            continue
        goldens.append(Golden(key, dict(hashes), sorted(nodes), sorted(
            n for other, ns in seen.items() if other != hashes for n in ns)))
    return goldens


def baseline_profile(base: Profile, name: str, learned: list[Learned],
                     results: list[NodeResult], goldens: list[Golden] = ()) -> dict:
    """The base profile's data with the learned floors, its sources citing the evidence."""
    data = copy.deepcopy(base.data)
    data["name"] = name
    runs = sorted({r.run_id for r in results})
    nodes = sorted({r.node for r in results})
    data["description"] = (f"{base.data.get('description', base.name)}; floors learned from "
                           f"{len(nodes)} known-good nodes")
    sources = data.setdefault("sources", {})
    for item in learned:
        section, _, key = item.field.rpartition(".")
        target = data.setdefault(section, {}) if section else data
        target[key] = item.value
        sources[item.field] = (
            f"baseline of {base.name}: {item.rule} = {item.value:g} (median {item.centre:g} "
            f"of {item.samples} samples, {item.rejected} rejected as outliers) from nodes "
            f"{', '.join(nodes)}, runs {', '.join(runs)}")
    found = [g.as_profile_entry() for g in goldens if g.hashes]
    if found:
        kept = [g for g in (data.get("fingerprint") or {}).get("golden") or []
                if g["key"] not in [f["key"] for f in found]]
        data["fingerprint"] = {"golden": kept + found}
        sources["fingerprint.golden"] = (
            f"baseline of {base.name}: per key, the hashes more than half of its nodes gave, "
            f"from nodes {', '.join(nodes)}, runs {', '.join(runs)}")
    return data
