"""The lab's nvbandwidth v0.8: the real plain-text report over the simulated GPUs.

The stand-in nvbandwidth source builds (with CMake and Boost.ProgramOptions, as the real one)
a binary that execs this module. It prints what v0.8 prints (tests/fixtures/nvbandwidth/
h200-x1-v0.8-*.txt, NVIDIA/nvbandwidth@66746a3): the version and CUDA lines, the host's name,
a `Device N: <name> (<bus>)` line per GPU, then per asked test `Running <test>.`, its title,
the matrix and `SUM <test> <GB/s>`; a GPU-to-GPU test on one GPU prints `Waived: `, a test
it does not know `ERROR: Testcase <name> not found!` — exit status 0 either way, as the real
one — and the closing NOTE.

It measures the three tests the validator runs (parsers/nvbandwidth.py TESTS); another real
test name, or none (the real one then runs all 35), makes it say so on stderr and exit 3: a
lab limit, not a real behaviour.

Figures: host<->device by the GPU's PCIe link, as real CE copies reach it (Gen5 x16 55.27 on
the H200 capture, Gen4 x16 26.3 on the RTX 4090 one, fixtures above); GPU to GPU by the
kind's `d2d_gbps` (its source in the kind), or the PCIe figure where the GPUs have no
NVLink. Faults: `d2d_factor` on a GPU (slow-d2d) scales every pair it is in, read either way.
"""

from __future__ import annotations

import socket
import sys
import time

from . import node, render

VERSION = "v0.8"
# every test v0.8 knows, by index (`nvbandwidth -l`, tests/fixtures/nvbandwidth/
# h200-x1-v0.8-list.txt): `-t` takes a name or its index
KNOWN = (
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
    "host_to_device_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce",
    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
    "device_to_device_bidirectional_memcpy_write_ce", "all_to_host_memcpy_ce",
    "all_to_host_bidirectional_memcpy_ce", "host_to_all_memcpy_ce",
    "host_to_all_bidirectional_memcpy_ce", "all_to_one_write_ce", "all_to_one_read_ce",
    "one_to_all_write_ce", "one_to_all_read_ce", "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm", "host_to_device_bidirectional_memcpy_sm",
    "device_to_host_bidirectional_memcpy_sm", "device_to_device_memcpy_read_sm",
    "device_to_device_memcpy_write_sm", "device_to_device_bidirectional_memcpy_read_sm",
    "device_to_device_bidirectional_memcpy_write_sm", "all_to_host_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm", "host_to_all_memcpy_sm",
    "host_to_all_bidirectional_memcpy_sm", "all_to_one_write_sm", "all_to_one_read_sm",
    "one_to_all_write_sm", "one_to_all_read_sm", "host_device_latency_sm",
    "device_to_device_latency_sm", "device_local_copy")
TITLES = {"host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
          "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
          "device_to_device_memcpy_read_ce": "memcpy CE GPU(row) -> GPU(column) bandwidth "
                                             "(GB/s)"}
# a CE copy over a x16 link, by PCIe generation (the captures above)
X16_GBPS = {4: 26.3, 5: 55.27}
NOTE = ("NOTE: The reported results may not reflect the full capabilities of the platform.\n"
        "Performance can vary with software drivers, hardware clocks, and system topology.\n\n")
INVALID = "ERROR: Invalid Arguments \n"
# its usage after the refusal (the capture of `nvbandwidth --bogus`, exit status 1)
USAGE = """nvbandwidth CLI:
  -h [ --help ]                  Produce help message
  -b [ --bufferSize ] arg (=512) Memcpy buffer size in MiB
  -l [ --list ]                  List available testcases
  -t [ --testcase ] arg          Testcase(s) to run (by name or index)
  -p [ --testcasePrefixes ] arg  Testcase(s) to run (by prefix))
  -v [ --verbose ]               Verbose output
  -s [ --skipVerification ]      Skips data verification after copy
  -d [ --disableAffinity ]       Disable automatic CPU affinity control
  -i [ --testSamples ] arg (=3)  Iterations of the benchmark
  -m [ --useMean ]               Use mean instead of median for results
  -j [ --json ]                  Print output in json format instead of plain \n\
                                 text.

"""
SECONDS_PER_TEST = 0.3


def _host_gbps(hw: dict, gpu: dict) -> float:
    link = gpu.get("pcie", hw["pcie"])
    return X16_GBPS.get(int(link["gen"]), 26.3) * int(link["width"]) / 16


def _pair_gbps(hw: dict, a: dict, b: dict) -> float:
    base = float(hw["d2d_gbps"]) if hw.get("nvlink") and hw.get("d2d_gbps") else min(
        _host_gbps(hw, a), _host_gbps(hw, b))
    jitter = 1 + ((a["index"] * 31 + b["index"] * 17) % 7 - 3) / 1000.0
    return base * float(a.get("d2d_factor", 1.0)) * float(b.get("d2d_factor", 1.0)) * jitter


def _matrix(header: list[str], rows: list[list[float | None]]) -> str:
    lines = ["  " + "".join(f"{h:>10}" for h in header)]
    for i, row in enumerate(rows):
        lines.append(f"{i:2d}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}"
                                         for v in row))
    return "\n".join(lines)


def _test(hw: dict, name: str) -> str:
    gpus = hw["gpus"]
    columns = [str(g["index"]) for g in gpus]
    if name == "device_to_device_memcpy_read_ce":
        if len(gpus) < 2:
            return "Waived: \n"
        rows = [[None if a is b else _pair_gbps(hw, a, b) for b in gpus] for a in gpus]
    else:
        rows = [[_host_gbps(hw, g) * (1 - (g["index"] % 3) / 1000.0) for g in gpus]]
    total = sum(v for row in rows for v in row if v is not None)
    time.sleep(SECONDS_PER_TEST)
    return (f"Running {name}.\n{TITLES[name]}\n{_matrix(columns, rows)}\n\n"
            f"SUM {name} {total:.2f}\n\n")


def _args(argv: list[str]) -> list[str] | None:
    """The test names or indices `-t`/`--testcase` lists; None on an option it refuses."""
    tests: list[str] = []
    taking = False
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg in ("-t", "--testcase"):
            taking = True
        elif arg in ("-b", "--bufferSize", "-i", "--testSamples"):
            taking, skip_value = False, True
        elif arg in ("-s", "--skipVerification", "-d", "--disableAffinity", "-m", "--useMean"):
            taking = False
        elif taking and not arg.startswith("-"):
            tests.append(arg)
        else:
            return None
    return tests


def main(argv: list[str]) -> int:
    header = f"nvbandwidth Version: {VERSION}\nBuilt from Git version: \n\n"
    tests = _args(argv)
    if tests is None:   # its Boost option parser's refusal, then its usage (the capture's)
        sys.stdout.write(header + INVALID + f"nvbandwidth {' '.join(argv)} :\n\n" + USAGE)
        return 1
    if not tests:
        sys.stderr.write("gpuprov lab: nvbandwidth runs only the tests -t names here\n")
        return 3
    hw = node.description()
    failure = node.cuda_init_error(hw)
    if failure:   # CU_ASSERT(cuInit(0)) (error_handling.h, nvbandwidth.cpp:270), to stderr
        sys.stdout.write(header)
        sys.stderr.write(f"[{failure}] {node.CUDA_ERROR_TEXT[failure]} in expression "
                         "cuInit(0) in int main(int, char**)() : nvbandwidth.cpp:270\n")
        return 1
    driver = node.loaded_module_version() or ""
    major, minor = (int(x) for x in render.cuda_for(driver).split("."))
    out = [header, f"CUDA Runtime Version: {major * 1000 + minor * 10}\n"
                   f"CUDA Driver Version: {major * 1000 + minor * 10}\n"
                   f"Driver Version: {driver}\n\n{socket.gethostname()}\n"]
    out += [f"Device {g['index']}: {hw['gpu']['name']} ({g['bus_id'][:-2]})\n"
            for g in hw["gpus"]]
    sys.stdout.write("".join(out) + "\n")
    for asked in tests:
        name = KNOWN[int(asked)] if asked.isdigit() and int(asked) < len(KNOWN) else asked
        sys.stdout.flush()
        if asked.isdigit() and int(asked) >= len(KNOWN):   # both to stderr (output.cpp:55)
            sys.stderr.write(f"ERROR: Testcase index {asked} out of bound!\n")
        elif name not in KNOWN:
            sys.stderr.write(f"ERROR: Testcase {name} not found!\n")
        elif name not in TITLES:
            sys.stderr.write(f"gpuprov lab: nvbandwidth's {name} is not simulated\n")
            return 3
        else:
            sys.stdout.write(_test(hw, name))
        sys.stdout.flush()
    sys.stdout.write(NOTE)
    return 0
