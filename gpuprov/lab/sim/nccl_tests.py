"""The lab's nccl-tests `all_reduce_perf`: the real output over the simulated GPUs.

The stand-in nccl-tests source tarball builds a `build/all_reduce_perf` that execs this
module (it needs libcuda and libnccl, like the real one). It prints what nccl-tests 2.13+
prints for one process driving `-g` GPUs: the run header, a `# Rank … device … [0x<bus>]`
line per GPU, the table with the `root` and `#wrong` columns, one row per size from `-b`
to `-e` by `-f`, and the out-of-bounds and average bus bandwidth footer.

Bus bandwidth follows the kind's healthy peak (`nccl_busbw_gbps` in its description),
reached at large sizes; a ring all-reduce runs at its slowest member: slower by the share
of a GPU's NVLinks that are down (nvlink-down), and by a third of a slow GPU's compute
shortfall (slow-gpu, slow-node: the reduction kernels run on the SMs, the transfers do not).
"""

from __future__ import annotations

import os
import re
import sys
import time

from . import node

HALF_PEAK_BYTES = 8 * 2**20    # the size at which half the peak bus bandwidth is reached
LATENCY_US = 12.0
COMPUTE_SHARE = 3   # a slow GPU's compute shortfall reaches the bus bandwidth divided by this
FLOAT_BYTES = 4


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.upper())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def _options(argv: list[str]) -> dict:
    opts = {"b": "32M", "e": "32M", "f": "2", "g": "1"}
    i = 0
    while i < len(argv):
        flag = argv[i].lstrip("-")
        if flag in opts and i + 1 < len(argv):
            opts[flag] = argv[i + 1]
            i += 2
        else:
            i += 1
    return {"min": _size(opts["b"]), "max": _size(opts["e"]), "factor": int(opts["f"]),
            "gpus": int(opts["g"])}


def slowdown(hw: dict) -> float:
    """The factor the slowest GPU holds the ring to."""
    links = (hw.get("nvlink") or {}).get("links_per_gpu") or 0
    factors = [1.0]
    for gpu in hw.get("gpus", []):
        factors.append(1.0 - (1.0 - float(gpu.get("gflops_factor", 1.0))) / COMPUTE_SHARE)
        down = len(set(gpu.get("nvlink_inactive", [])))
        if links and down:
            factors.append((links - down) / links)
    return min(factors)


def busbw(hw: dict, size: int) -> float:
    peak = float(hw.get("nccl_busbw_gbps", 0)) * slowdown(hw)
    return peak * size / (size + HALF_PEAK_BYTES)


def report(hw: dict, opts: dict, host: str, pid: int) -> str:
    gpus = hw.get("gpus", [])[:opts["gpus"]]
    n = len(gpus)
    lines = [f"# nThread 1 nGpus {n} minBytes {opts['min']} maxBytes {opts['max']} step: "
             f"{opts['factor']}(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 "
             "graph: 0", "#", "# Using devices"]
    for rank, gpu in enumerate(gpus):
        bus = int(gpu["bus_id"].split(":")[1], 16)
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10} device "
                     f"{gpu['index']:2d} [0x{bus:02x}] {hw['gpu']['name']}")
    lines += ["#",
              "#                                                              out-of-place  "
              "                     in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
              "          (us)  (GB/s)  (GB/s)       "]
    ring = 2 * (n - 1) / n if n > 1 else 1.0
    size, total, rows = opts["min"], 0.0, 0
    while size <= opts["max"]:
        cells = []
        for place in (0, 1):   # in-place a shade faster, as in real runs
            bw = busbw(hw, size) * (1.0 + 0.004 * place) if n > 1 else 0.0
            alg = bw / ring if n > 1 else 0.0
            us = size / (alg * 1e3) + LATENCY_US if alg else LATENCY_US
            cells.append(f"{us:8.1f} {alg:7.2f} {bw:7.2f} {0:6d}")
            total += bw
        lines.append(f"{size:12d} {size // FLOAT_BYTES:13d} {'float':>9} {'sum':>7} "
                     f"{-1:7d} " + " ".join(cells))
        rows += 1
        size *= opts["factor"]
    average = total / (2 * rows) if rows else 0.0
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {average:.4f} ", "#"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    try:
        opts = _options(argv)
    except ValueError as exc:
        sys.stderr.write(f"invalid size {exc}\n")
        return 1
    hw = node.description()
    if node.loaded_module_version() is None:
        sys.stderr.write("CUDA failure common.cu:1007 'CUDA driver version is insufficient "
                         "for CUDA runtime version'\n")
        return 1
    if opts["gpus"] > len(hw.get("gpus", [])) or opts["gpus"] < 1:
        sys.stderr.write("CUDA failure common.cu:892 'invalid device ordinal'\n .. "
                         f"{hw.get('node', 'node')} pid {os.getpid()}: Test failure common.cu:"
                         "1086\n")
        return 2
    time.sleep(0.5)
    sys.stdout.write(report(hw, opts, hw.get("node", "node"), os.getpid()))
    return 0
