"""The lab's gpu-burn: the real tool's output, timing and blind spots, on simulated GPUs.

The stand-in gpu-burn source tarball builds a `gpu_burn` binary that execs this module
(it needs the driver's libraries, like the real one links libcuda). It burns for the
requested seconds in real time and prints what gpu-burn prints: the GPU list, per-device
init lines, `\\r` progress lines with per-GPU Gflop/s, error counts and temperatures, a
`Summary at:` every 10 s, the teardown lines and the final `GPU n: OK|FAULTY` list. Like
the real one it exits 0 even when a GPU is FAULTY, and reports OK for a GPU whose test
could not even start (a compare.ptx built for a newer compute capability).

Its Gflop/s are the kind's for the load asked (`-tc` tensor, `-d` fp64, else fp32; sim
node.gflops), as a real GH100 ran them (tests/fixtures/gpu-burn/h200-head-*.txt).

Faults in the description: `burn_errors` (errors per reporting interval),
`gflops_factor`, a NIC port's `counter_growth_in_soak` (its sysfs error counters grow by
that over the soak), and `falls_off_in_soak` (the kernel lines to log when, halfway through the
soak, the GPU falls off the bus: its client dies, the driver loses it) on a GPU.
"""

from __future__ import annotations

import datetime
import re
import socket
import subprocess
import sys
import time

from . import node, render

USAGE = """GPU Burn
Usage: gpu_burn [OPTIONS] [TIME]

-m X\tUse X MB of memory.
-m N%\tUse N% of the available GPU memory.  Default is 90%
-d\tUse doubles
-tc\tTry to use Tensor cores
-l\tLists all GPUs in the system
-i N\tExecute only on GPU N
-c FILE\tUse FILE as compare kernel.  Default is compare.ptx
-stts T\tSet timeout threshold to T seconds for using SIGTERM to abort child processes \
before using SIGKILL.  Default is 30
-h\tShow this help message

Examples:
  gpu-burn -d 3600 # burns all GPUs with doubles for an hour
  gpu-burn -m 50% # burns using 50% of the available GPU memory
  gpu-burn -l # list GPUs
  gpu-burn -i 2 # burns only GPU of index 2
"""
SUMMARY_EVERY_S = 10
RESULT_BYTES = 268435456
DEAD_COUNT = -533715488   # what the died capture (wilicc/gpu-burn#69) shows for each


def _ptx_target(path: str) -> int | None:
    try:
        with open(path) as fh:
            m = re.search(r"^\.target\s+sm_(\d+)", fh.read(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else 0


def _links_take_errors() -> None:
    """A NIC port set to take errors under load (ib-symbol-errors, ib-link-flap) has its
    sysfs counters grown once the soak's load ends, as the node's kernel would count them."""
    hw = node.description()
    grew = False
    for port in hw.get("nic_ports") or []:
        for name, count in (port.get("counter_growth_in_soak") or {}).items():
            counters = port.setdefault("counters", {})
            counters[name] = counters.get(name, 0) + int(count)
            grew = True
    if grew:
        node.save_description(hw)


def _fall_off_the_bus(hw: dict, gpus: list[dict]) -> set[int]:
    """GPUs set to fall off the bus under load do so now: the driver logs it (the lines the
    fault prepared), loses the GPU (nvidia-smi fails on it), its gpu-burn client dies."""
    falling = [g for g in gpus if g.get("falls_off_in_soak")]
    if not falling:
        return set()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    with open(node.KERNEL_LOG, "a") as log:
        for g in falling:
            for line in g.pop("falls_off_in_soak"):
                log.write(f"{stamp} {socket.gethostname()} kernel: {line}\n")
            g["lost"] = True
    node.save_description(hw)
    return {g["index"] for g in falling} | {g["index"] for g in gpus if g.get("lost")}


def _date() -> str:
    return subprocess.run(["date"], capture_output=True, text=True, check=False).stdout.strip()


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    seconds, doubles, tensor, only, compare = 10, False, False, None, "compare.ptx"
    listing, explicit_time = False, False
    it = iter(args)
    for arg in it:
        if arg == "-h":
            _out(USAGE)
            return 0
        if arg == "-d":
            doubles = True
        elif arg == "-tc":
            tensor = True
        elif arg == "-l":
            listing = True
        elif arg in ("-m", "-stts"):
            next(it, None)
        elif arg == "-i":
            only = int(next(it, "0"))
        elif arg == "-c":
            compare = next(it, compare)
        elif arg.isdigit():
            seconds, explicit_time = int(arg), True
        else:
            _out(USAGE)
            return 1
    hw = node.description()
    failure = node.cuda_init_error(hw)
    if failure:
        _out(f"Couldn't init CUDA: Error in \"init\": {failure}\n")
        return 1
    gpus = [g for g in hw["gpus"] if only is None or g["index"] == only]
    spec = hw["gpu"]
    if listing:
        for g in hw["gpus"]:
            _out(f"ID {g['index']}: {spec['name']}, {spec['memory_mib'] - 480}MB\n")
        return 0

    if not explicit_time:
        _out("Run length not specified in the command line. ")
    _out(f"Using compare file: {compare}\nBurning for {seconds} seconds.\n")
    for g in gpus:
        _out(f"GPU {g['index']}: {spec['name']} (UUID: {g['uuid']})\n")
    capability = int(spec["compute_capability"].replace(".", ""))
    target = _ptx_target(compare)
    total_mb = spec["memory_mib"] - 480
    avail_mb = total_mb - 626
    use_mb = int(avail_mb * 0.9)
    iterations = use_mb * 1024 * 1024 // RESULT_BYTES - 1
    working = []
    for g in gpus:
        _out(f"Initialized device {g['index']} with {total_mb} MB of memory ({avail_mb} MB "
             f"available, using {use_mb} MB of it), using {'DOUBLES' if doubles else 'FLOATS'}"
             f"{', using Tensor Cores' if tensor else ''}\n")
        if target is None:
            _out("Couldn't init a GPU test: Error in \"load module\": CUDA_ERROR_FILE_NOT_FOUND\n")
        elif target > capability:
            _out("Couldn't init a GPU test: Error in \"load module\": CUDA_ERROR_INVALID_PTX\n")
        else:
            working.append(g["index"])
    if working:
        _out(f"Results are {RESULT_BYTES} bytes each, thus performing {iterations} iterations\n")

    base = node.gflops(hw, "fp64" if doubles else "tensor" if tensor else "fp32")
    rate = {g["index"]: (base * float(g.get("gflops_factor", 1.0))
                         * (1 + ((g["index"] * 7919) % 13 - 6) / 1000.0)
                         if g["index"] in working else 0.0) for g in gpus}
    ops_per_iter = 2.0 * 8192 ** 3 / 1e9   # Gflop in one 8192^3 SGEMM
    procd = {i: 0 for i in rate}
    faulty = {g["index"]: False for g in gpus}
    interval_errors = {g["index"]: 0 for g in gpus}
    start = time.monotonic()
    next_summary = SUMMARY_EVERY_S
    elapsed = 0.0
    died: set[int] = set()
    with node.burning(working):   # what nvidia-smi shows meanwhile
        while elapsed < seconds:
            time.sleep(min(1.0, seconds - elapsed))
            elapsed = time.monotonic() - start
            if elapsed >= seconds / 2:
                died |= _fall_off_the_bus(hw, gpus)
            for g in gpus:
                i = g["index"]
                procd[i] = -1 if i in died else int(rate[i] * elapsed / ops_per_iter)
                if g.get("burn_errors") and i in working:
                    interval_errors[i] += int(g["burn_errors"])
                    faulty[i] = True
            temps = " - ".join(f"{render.load_temperature(hw, g, elapsed)} C" for g in gpus)
            procd_text = " - ".join(f"{procd[g['index']]} "
                                    f"({0 if g['index'] in died else rate[g['index']]:.0f} Gflop/s)"
                                    for g in gpus)
            # a dead client's count is garbage with the mark (wilicc/gpu-burn#69)
            errors_text = " - ".join(f"{DEAD_COUNT}  (DIED!)" if g["index"] in died
                                     else str(interval_errors[g["index"]]) for g in gpus)
            pct = min(100.0, 100.0 * elapsed / seconds) if seconds else 100.0
            _out(f"\r{pct:.1f}%  proc'd: {procd_text}   errors: {errors_text}   temps: {temps} ")
            if elapsed >= next_summary:
                _out(f"\n\tSummary at:   {_date()}\n\n")
                interval_errors = {k: 0 for k in interval_errors}
                next_summary += SUMMARY_EVERY_S
    _links_take_errors()
    _out("\nKilling processes with SIGTERM (soft kill)\n")
    for g in gpus:
        _out(f"Freed memory for dev {g['index']}\nUninitted cublas\n")
    _out("done\n\n")
    _out(f"Tested {len(gpus)} GPUs:\n")
    for g in gpus:
        _out(f"\tGPU {g['index']}: {'FAULTY' if faulty[g['index']] else 'OK'}\n")
    return 0
