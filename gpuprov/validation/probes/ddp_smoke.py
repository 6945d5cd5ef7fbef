"""DDP smoke probe, run on the node by `torchrun --nproc-per-node=<GPUs>` (one rank per GPU).

NCCL on GPUs, gloo where torch sees none (the lab). Every rank trains the same small model
for a few steps with a fixed seed on its own data shard; the probe checks that an
all-reduce of ones equals the world size, that gradients, parameters and the global loss
agree across ranks, and that the loss is finite and falls. It then times all-reduce of a
large tensor and reports the bus bandwidth (nccl-tests' formula: bytes * 2(n-1)/n / time).

Rank 0 writes the result JSON (`--out`); every rank logs to stdout (torchrun tees it per
rank). Collective timeouts are `--timeout` seconds: a rank that never joins fails the run.
Only the standard library and torch: this file is copied to nodes on its own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SEED = 20261121
# Agreement tolerance between ranks: DDP averages gradients with one all-reduce, so every
# rank holds bit-identical values; anything above rounding noise is a broken collective.
TOLERANCE = 1e-6


def log(rank: int, message: str) -> None:
    print(f"rank {rank}: {message}", flush=True)


def spread_each(values: list[torch.Tensor]) -> list[float]:
    """For each tensor, the largest difference of an element between any two ranks."""
    flat = torch.cat([v.detach().flatten().float() for v in values])
    high, low = flat.clone(), flat.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    gaps, spreads, start = (high - low).abs(), [], 0
    for v in values:
        part = gaps[start:start + v.numel()]
        spreads.append(float(part.max().item()) if part.numel() else 0.0)
        start += v.numel()
    return spreads


def train(rank: int, world: int, device: torch.device, steps: int) -> dict:
    torch.manual_seed(SEED)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                  else None)
    optimiser = torch.optim.SGD(ddp.parameters(), lr=0.05)
    shard = torch.Generator().manual_seed(SEED + 1 + rank)  # each rank its own data
    truth = torch.Generator().manual_seed(SEED)
    weights = torch.randn(32, 1, generator=truth)
    inputs = torch.randn(512, 32, generator=shard)
    targets = inputs @ weights + 0.01 * torch.randn(512, 1, generator=shard)
    inputs, targets = inputs.to(device), targets.to(device)

    losses = []
    for _ in range(steps):
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        optimiser.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world)
    # the last step's gradients, the trained parameters and the loss history, compared
    # across ranks with one MAX and one MIN all-reduce
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    history = torch.tensor(losses, device=device)
    parts = spread_each([grads, params, history])
    return {"losses": losses, "grad_spread": parts[0], "param_spread": parts[1],
            "loss_spread": parts[2]}


def bus_bandwidth(device: torch.device, world: int, mib: int, iterations: int) -> dict:
    tensor = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=device)
    dist.all_reduce(tensor)  # warm-up: connections and buffers
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    sync()
    seconds = (time.perf_counter() - started) / iterations
    size = tensor.numel() * 4
    busbw = size * 2 * (world - 1) / world / seconds / 1e9 if world > 1 else 0.0
    return {"allreduce_bytes": size, "allreduce_seconds": seconds,
            "allreduce_busbw_gbps": busbw}


def run(args: argparse.Namespace, rank: int, world: int, local_rank: int) -> dict:
    use_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = "nccl" if use_gpu else "gloo"
    if use_gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")
    result: dict = {"ok": False, "world_size": world, "backend": backend}
    started = time.monotonic()
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    log(rank, f"joined: world {world}, backend {backend}, device {device}")

    ones = torch.ones(1, device=device)
    dist.all_reduce(ones)
    result["allreduce_sum"] = ones.item()
    result.update(train(rank, world, device, args.steps))
    log(rank, f"trained {args.steps} steps, loss {result['losses'][0]:.5f} -> "
              f"{result['losses'][-1]:.5f}")
    # a large tensor on GPUs; on CPUs (gloo, the lab) a smaller one keeps the probe short
    mib = args.bandwidth_mib or (256 if use_gpu else 8)
    result.update(bus_bandwidth(device, world, mib, args.iterations))
    log(rank, f"all-reduce {result['allreduce_bytes']} B: "
              f"{result['allreduce_busbw_gbps']:.3f} GB/s bus bandwidth")
    dist.barrier()
    dist.destroy_process_group()

    problems = []
    if result["allreduce_sum"] != world:
        problems.append(f"all-reduce of ones gave {result['allreduce_sum']}, not {world}")
    for key in ("grad_spread", "param_spread", "loss_spread"):
        if result[key] > TOLERANCE:
            problems.append(f"{key.split('_')[0]}s differ across ranks by {result[key]:.3g}")
    losses = result["losses"]
    if not all(math.isfinite(x) for x in losses):
        problems.append(f"loss not finite: {losses}")
    elif losses[-1] >= losses[0]:
        problems.append(f"loss did not fall: {losses[0]:.5f} -> {losses[-1]:.5f}")
    result["ok"] = not problems
    if problems:
        result["error"] = "; ".join(problems)
    result["seconds"] = round(time.monotonic() - started, 3)
    result["torch_version"] = torch.__version__
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="result JSON, written by rank 0")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--bandwidth-mib", type=int, default=0,
                        help="all-reduce tensor size (default: 256 on GPUs, 8 on CPUs)")
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds a collective (or a rank joining) may take")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    try:
        result = run(args, rank, world, local_rank)
    except Exception as exc:  # the reason goes into the JSON; torchrun sees the failure
        traceback.print_exc()
        result = {"ok": False, "world_size": world, "backend": "unknown",
                  "error": f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0]}"}
    if rank == 0:
        tmp = f"{args.out}.tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=2)
        os.replace(tmp, args.out)
    if not result["ok"]:
        log(rank, f"FAILED: {result.get('error')}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
