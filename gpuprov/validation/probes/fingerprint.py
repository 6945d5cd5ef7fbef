"""Numeric fingerprint probe: a fixed-seed, deterministic workload on every GPU, hashed, so
that a GPU computing wrong but plausible results (silent data corruption) differs bit for
bit from its siblings and from the site's golden (docs/fingerprint.md).

The workload is the one measured bit-exact on real GPUs (shared fixtures
numeric-fingerprint/README.md: 5 runs of 5 on two H200s and an H100, the same hashes on all
three, at workload v1): two 4096 x 4096 matrices, four chained products `c = (c @ b) /
sqrt(n)` in fp32 (TF32 off), TF32, bf16 and fp16; then 20 AdamW steps of Linear(1024, 2048) ->
GELU -> Linear(2048, 1024) on 256 inputs, loss the mean squared error against the input. Each
result's bytes are hashed with SHA-256.

From v2 every input (the matrices, the model's weights, the training inputs) is drawn from
integers alone (`grid`), so its bits are the same on every host CPU: v1 drew them with CPU
`randn`, whose ATen kernel takes an AVX2 path or a scalar one by the host's CPU capability
(aten/src/ATen/native/cpu/DistributionTemplates.h normal_fill), so one GPU SKU on two CPU
generations hashed differently (issue 65). The version moves the workload id, so a golden
learned at v1 is never reused. On the CPU (the lab) the products themselves run ATen's
CPU kernels, whose bits follow the CPU capability: it is part of the workload id there.

One child process per GPU, forked after `import torch` (so torch loads once) and before CUDA
starts, each seeing only its GPU (`CUDA_VISIBLE_DEVICES=<UUID>`), all at once. Where torch
sees no CUDA (the lab's CPU build), each GPU's child runs a smaller workload on the CPU with
one thread: the key records which. Prints the JSON on stdout; exits 0 whenever it could run
(a GPU's own error is in its entry, for gpuprov to judge), non-zero only where it could not.
Only the standard library and torch: this file is copied to nodes on its own.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import multiprocessing
import os
import sys
import time
import traceback

# deterministic cuBLAS needs a fixed workspace (CUDA's cuBLAS guide, "Results
# reproducibility"; torch.use_deterministic_algorithms says the same): set before CUDA starts
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

# torch after the environment above: it is read when CUDA starts
import torch
from torch import nn

VERSION = 2
SEEDS = {"a": 1234, "b": 1235, "model": 7, "inputs": 99}
# (matrix size, chained products, model widths, batch, AdamW steps): the GPUs' workload is the
# measured one; the CPU's is small enough for a lab node's shared cores
WORKLOADS = {"cuda": (4096, 4, (1024, 2048), 256, 20), "cpu": (256, 4, (64, 128), 32, 20)}
MODES = ("fp32", "tf32", "bf16", "fp16")


def workload_id(device_type: str) -> str:
    """What a golden is learned for: the probe's version, the device type (on the CPU with
    ATen's CPU capability, which picks the kernels that compute there) and the sizes."""
    n, chain, (width, hidden), batch, steps = WORKLOADS[device_type]
    device = device_type if device_type != "cpu" else f"cpu-{cpu_capability()}"
    return (f"v{VERSION}-{device}/gemm{n}x{chain}/mlp{width}-{hidden}-{width}"
            f"x{batch}/adamw{steps}")


def cpu_capability() -> str:
    """ATen's CPU capability in this process (DEFAULT, AVX2, AVX512; ATEN_CPU_CAPABILITY
    lowers it), lower case."""
    return str(torch.backends.cpu.get_cpu_capability()).lower()


def grid(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    """fp32 values in [-scale, scale) on a 2^-23 grid, the same bits on every CPU: integers
    from torch.randint, which ATen draws serially on the CPU (DistributionTemplates.h
    random_from_to_kernel: cpu_serial_kernel, no vectorised path), then an exact conversion
    (below 2^24) and exact power-of-two scaling (`scale` must be one)."""
    assert math.frexp(scale)[0] == 0.5, "scale must be a power of two"
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, 1 << 24, shape, generator=generator, dtype=torch.int64)
    return (draws.to(torch.float32) * 2.0 ** -23 - 1.0) * scale


def digest(tensor: torch.Tensor) -> str:
    """SHA-256 of the tensor's bytes as they sit in memory (first 16 hex digits); read
    through ctypes, since a node's environment need not have numpy."""
    data = tensor.detach().cpu().contiguous().clone()
    storage = data.untyped_storage()
    return hashlib.sha256(ctypes.string_at(storage.data_ptr(), storage.nbytes())
                          ).hexdigest()[:16]


def left_out(device: torch.device) -> dict[str, str]:
    """Modes this GPU cannot run in hardware: hashing an emulation would prove nothing."""
    if device.type != "cuda":
        return {}
    major, minor = torch.cuda.get_device_capability(device)
    out = {}
    # TF32 is an Ampere (compute capability 8.0) and later mode (PyTorch's CUDA semantics
    # notes, "TensorFloat-32 (TF32) on Ampere (and later) devices"); bf16 as torch itself
    # answers for this device
    if major < 8:
        out["tf32"] = f"no TF32 on compute capability {major}.{minor}"
    if not torch.cuda.is_bf16_supported(including_emulation=False):
        out["bf16"] = f"no bf16 on compute capability {major}.{minor}"
    return out


def gemm_chain(device: torch.device, mode: str) -> str:
    n, chain = WORKLOADS[device.type][:2]
    a, b = grid((n, n), SEEDS["a"]), grid((n, n), SEEDS["b"])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode, torch.float32)
    torch.set_float32_matmul_precision("high" if mode == "tf32" else "highest")
    a, b = a.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)
    c = a
    for _ in range(chain):
        c = (c @ b) / math.sqrt(n)
    torch.set_float32_matmul_precision("highest")
    return digest(c)


def train(device: torch.device) -> tuple[str, float]:
    _, _, (width, hidden), batch, steps = WORKLOADS[device.type]
    model = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
    with torch.no_grad():   # nn.Linear's own initialisation draws on the CPU: replaced
        for k, p in enumerate(model.parameters()):
            p.copy_(grid(tuple(p.shape), SEEDS["model"] + k, _bound(p.shape[-1])))
    model = model.to(device)
    inputs = grid((batch, width), SEEDS["inputs"]).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = torch.zeros(())
    for _ in range(steps):
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), inputs)
        loss.backward()
        optimiser.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    return digest(params), float(loss.item())


def _bound(fan_in: int) -> float:
    """The power of two at or below nn.Linear's own initialisation bound 1/sqrt(fan_in)."""
    return 2.0 ** -math.ceil(math.log2(math.sqrt(fan_in)))


def cublas_version() -> str | None:
    """cuBLAS's own version (cublasGetProperty), from the library this process loaded."""
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "libcublas.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            parts = []
            # CUDA's library_types.h: libraryPropertyType MAJOR_VERSION 0, MINOR_VERSION 1,
            # PATCH_LEVEL 2
            for kind in (0, 1, 2):
                value = ctypes.c_int()
                if lib.cublasGetProperty(kind, ctypes.byref(value)) != 0:
                    break
                parts.append(str(value.value))
            if len(parts) == 3:
                return ".".join(parts)
        except (OSError, AttributeError):
            continue
    return None


def fingerprint(index: int, uuid: str) -> dict:
    """One GPU's fingerprint, in the child that sees only it."""
    started = time.monotonic()
    if torch.cuda.is_available():
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        props = torch.cuda.get_device_properties(device)
        entry = {"device": props.name,
                 "compute_capability": f"{props.major}.{props.minor}",
                 "bus_id": _bus_id(props)}
    else:   # the lab's CPU torch: one thread, so the sums run in one order
        torch.set_num_threads(1)
        device = torch.device("cpu")
        entry = {"device": "cpu"}
    entry.update({"index": index, "uuid": uuid, "workload": workload_id(device.type)})
    skipped = left_out(device)
    hashes = {mode: None if mode in skipped else gemm_chain(device, mode) for mode in MODES}
    hashes["train"], entry["loss"] = train(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
        entry["cublas_version"] = cublas_version()
    entry.update({"hashes": hashes, "left_out": skipped,
                  "seconds": round(time.monotonic() - started, 3)})
    return entry


def _bus_id(props) -> str | None:
    """The GPU's PCI address as nvidia-smi writes it, where this torch tells it."""
    if getattr(props, "pci_bus_id", None) is None:
        return None
    return (f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:"
            f"{getattr(props, 'pci_device_id', 0):02X}.0")


def _child(index: int, uuid: str, pipe) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = uuid
    try:
        result = fingerprint(index, uuid)
    except Exception as exc:   # this GPU's failure is its entry: gpuprov judges it
        traceback.print_exc(file=sys.stderr)
        result = {"index": index, "uuid": uuid,
                  "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}
    pipe.send(result)
    pipe.close()


def run(gpus: list[tuple[int, str]], timeout: float) -> list[dict]:
    """Every GPU's child at once; a child with no answer by `timeout` is killed."""
    # set once here, inherited by every child: it imports much of torch (a second's CPU)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    if torch.cuda.is_initialized():   # a forked child could not use CUDA then
        raise RuntimeError("CUDA started before the GPUs' processes were forked")
    context = multiprocessing.get_context("fork")
    running = []
    for index, uuid in gpus:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(index, uuid, send), daemon=True)
        process.start()
        send.close()
        running.append((index, uuid, process, receive))
    deadline = time.monotonic() + timeout
    results = []
    for index, uuid, process, receive in running:
        left = max(deadline - time.monotonic(), 0)
        if receive.poll(left):
            try:
                results.append(receive.recv())
            except EOFError:
                results.append({"index": index, "uuid": uuid,
                                "error": "the probe's process died without an answer"})
        else:
            results.append({"index": index, "uuid": uuid,
                            "error": f"no answer within {timeout:g}s (hung, killed)"})
        process.join(1)
        if process.is_alive():
            process.kill()
            process.join()
        elif "error" in results[-1] and process.exitcode:
            results[-1]["exit_code"] = process.exitcode
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="append", default=[], metavar="INDEX=UUID",
                        help="a GPU as nvidia-smi lists it; repeat for each")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds every GPU's fingerprint may take together")
    args = parser.parse_args()
    gpus = []
    for item in args.gpu:
        index, _, uuid = item.partition("=")
        if not index.isdigit() or not uuid:
            parser.error(f"--gpu {item!r}: expected INDEX=UUID")
        gpus.append((int(index), uuid))
    if not gpus:
        parser.error("no --gpu given")
    started = time.monotonic()
    results = run(gpus, args.timeout)
    report = {"probe_version": VERSION, "torch_version": torch.__version__,
              "cuda_version": torch.version.cuda, "deterministic": True,
              "cublas_workspace_config": os.environ["CUBLAS_WORKSPACE_CONFIG"],
              "gpus": results, "seconds": round(time.monotonic() - started, 3)}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
