"""Fabric all-reduce probe, run on every node of a group by `torchrun` with c10d rendezvous.

NCCL on GPU nodes (one rank per GPU, over the fabric's NICs), gloo where torch sees no GPU
(the lab: one rank per node, over the lab fabric). Every rank all-reduces a float32 tensor
of each size in `--sizes-mib` and rank 0 reports the bus bandwidth per size with
nccl-tests' formula (bytes * 2(n-1)/n / seconds) and the host of every rank. The load is
bounded: one warm-up, then iterations until `--budget-s` seconds per size are spent
(at least one). Collective timeouts are `--timeout` seconds: a rank that never joins, or a
link that drops mid-run, fails the run instead of hanging it.

Rank 0 writes the result JSON (`--out`). Only the standard library and torch: this file
is copied to nodes on its own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist

HOST_BYTES = 64
NCCL_SHOWN = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_SOCKET_IFNAME")


def measure(device: torch.device, world: int, mib: float, budget_s: float) -> dict:
    tensor = torch.ones(max(int(mib * 2**20) // 4, 1), dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dist.all_reduce(tensor)   # warm-up: connections and buffers
    sync()
    dist.barrier()
    iterations, started = 0, time.perf_counter()
    while True:
        dist.all_reduce(tensor)
        sync()
        iterations += 1
        # every rank must run the same number of collectives: rank 0 decides
        done = torch.tensor([time.perf_counter() - started >= budget_s], dtype=torch.int32,
                            device=device)
        dist.broadcast(done, 0)
        if done.item():
            break
    seconds = (time.perf_counter() - started) / iterations
    size = tensor.numel() * 4
    busbw = size * 2 * (world - 1) / world / seconds / 1e9 if world > 1 else 0.0
    return {"bytes": size, "iterations": iterations, "seconds": round(seconds, 6),
            "busbw_gbps": round(busbw, 4)}


def gather_hosts(device: torch.device, world: int) -> list[str]:
    """Each rank's host name, in rank order (as fixed-width bytes: gather_object would
    need numpy, which a minimal environment may lack)."""
    name = socket.gethostname().encode()[:HOST_BYTES].ljust(HOST_BYTES, b"\0")
    mine = torch.tensor(list(name), dtype=torch.uint8, device=device)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    return [bytes(t.tolist()).rstrip(b"\0").decode(errors="replace") for t in every]


def run(args: argparse.Namespace, rank: int, world: int, local_rank: int) -> dict:
    use_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = "nccl" if use_gpu else "gloo"
    if use_gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    hosts = gather_hosts(device, world)
    sizes = [measure(device, world, mib, args.budget_s) for mib in args.sizes_mib]
    dist.barrier()
    dist.destroy_process_group()
    return {"ok": True, "world_size": world, "backend": backend, "hosts": hosts,
            "nodes": len(set(hosts)), "sizes": sizes,
            "peak_busbw_gbps": max(s["busbw_gbps"] for s in sizes),
            "torch_version": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="result JSON, written by rank 0")
    parser.add_argument("--sizes-mib", type=float, nargs="+", default=[1, 4, 16])
    parser.add_argument("--budget-s", type=float, default=1.0,
                        help="seconds of timed all-reduces per size (at least one)")
    parser.add_argument("--timeout", type=int, default=30,
                        help="seconds a collective (or a rank joining) may take")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    started = time.monotonic()
    try:
        result = run(args, rank, world, local_rank)
    except Exception as exc:  # the reason goes into the JSON; torchrun sees the failure
        traceback.print_exc()
        result = {"ok": False, "world_size": world, "backend": "unknown",
                  "error": f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0]}"}
    result["seconds"] = round(time.monotonic() - started, 3)
    # NCCL's settings as the ranks saw them: the evidence of a network-only run
    result["nccl_env"] = {k: v for k, v in sorted(os.environ.items()) if k in NCCL_SHOWN}
    if rank == 0:
        tmp = f"{args.out}.tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=2)
        os.replace(tmp, args.out)
    print(f"rank {rank}: {'ok' if result['ok'] else 'FAILED: ' + result['error']}", flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
