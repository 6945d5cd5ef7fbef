"""The lab's `dcgmi`: DCGM 4's `dcgmi diag -r LEVEL` table over the simulated GPUs.

It prints the DCGM 4.x table (a Metadata section, then Deployment, Hardware, Integration
and Stress, one row per test with a per-GPU result row under it, and the Error text of a
failing GPU wrapped mid-word at the column's width, as dcgmi prints it), runs the tests of
the asked level (1: software; 2: + memory, pcie; 3: + the stress plugins; 4: + memtest,
pulse_test), takes a scaled-down time per level and needs the host engine running
(nv-hostengine, unit nvidia-dcgm), as the real one does.

Fault in the description: `dcgm_fail: <test>` on a GPU fails that test on that GPU.
`-j` (JSON) is not simulated: the validator reads the table (README: limits).
"""

from __future__ import annotations

import sys
import time

from . import daemons, node

VERSION = "4.2.3"   # a bare call's; the installed package passes its own
# (section, test, first level that runs it)
TESTS = [("Deployment", "software", 1), ("Hardware", "memory", 2),
         ("Integration", "pcie", 2), ("Stress", "diagnostic", 3),
         ("Stress", "targeted_stress", 3), ("Stress", "targeted_power", 3),
         ("Stress", "memory_bandwidth", 3), ("Hardware", "memtest", 4),
         ("Hardware", "pulse_test", 4)]
SECTIONS = ("Deployment", "Hardware", "Integration", "Stress")
# seconds a run of each level takes here (the real ones: seconds, ~2 min, ~30 min, 1-2 h)
SECONDS = {1: 0.5, 2: 2.0, 3: 4.0, 4: 6.0}
# DCGM's own failure texts (dcgm_errors.h) for the tests a fault fails
ERRORS = {
    "memory": "A memory mismatch was detected on GPU {gpu}, but no error was reported by "
              "CUDA or NVML.",
    "pcie": "Bandwidth of GPU {gpu} in direction host-to-device of 3.10 did not exceed "
            "minimum required bandwidth of 9.00.",
    "memtest": "A memory mismatch was detected on GPU {gpu}, but no error was reported by "
               "CUDA or NVML.",
}
GENERIC_ERROR = "GPU {gpu} failed the {test} test."
NAME_WIDTH, VALUE_WIDTH = 25, 46
USAGE = ("dcgmi -- Command line interface for DCGM.\n\nUsage: dcgmi diag -r <level> "
         "[-j]\n       dcgmi -v\n")


def _row(name: str, value: str) -> str:
    return f"| {name:<{NAME_WIDTH}} | {value:<{VALUE_WIDTH}} |"


def _section(name: str) -> str:
    head = f"-----  {name}  "
    return f"|{head:-<{NAME_WIDTH + 2}}+{'-' * (VALUE_WIDTH + 2)}|"


def _wrapped(text: str) -> list[str]:
    """dcgmi cuts a long text at the column's width, mid-word."""
    return [text[i:i + VALUE_WIDTH] for i in range(0, len(text), VALUE_WIDTH)]


def _failures(hw: dict) -> dict[str, list[int]]:
    failing: dict[str, list[int]] = {}
    for gpu in hw.get("gpus", []):
        if gpu.get("dcgm_fail"):
            failing.setdefault(gpu["dcgm_fail"], []).append(gpu["index"])
    return failing


def diag_table(hw: dict, level: int, driver: str, version: str = VERSION) -> tuple[str, bool]:
    """The table of a level-`level` run, and whether every test passed."""
    gpus = [g["index"] for g in hw.get("gpus", [])]
    device_id = hw.get("gpu", {}).get("pci_device_id", "0x0000")[2:6].lower()  # 0x233010DE
    failing = _failures(hw)
    border = f"+{'-' * (NAME_WIDTH + 2)}+{'-' * (VALUE_WIDTH + 2)}+"
    lines = ["Successfully ran diagnostic for group.", border,
             _row("Diagnostic", "Result"),
             f"+{'=' * (NAME_WIDTH + 2)}+{'=' * (VALUE_WIDTH + 2)}+",
             _section("Metadata"), _row("DCGM Version", version),
             _row("Driver Version Detected", driver),
             _row("GPU Device IDs Detected", ", ".join(device_id for _ in gpus))]
    passed = True
    for section in SECTIONS:
        tests = [t for s, t, first in TESTS if s == section and first <= level]
        if not tests:
            continue
        lines.append(_section(section))
        for test in tests:
            bad = [g for g in failing.get(test, []) if g in gpus]
            passed = passed and not bad
            lines.append(_row(test, "Fail" if bad else "Pass"))
            lines += [_row("", f"GPU{g}: {'Fail' if g in bad else 'Pass'}") for g in gpus]
            for g in bad:
                text = ERRORS.get(test, GENERIC_ERROR).format(gpu=g, test=test)
                chunks = _wrapped(text)
                lines.append(_row("Error", chunks[0]))
                lines += [_row("", chunk) for chunk in chunks[1:]]
    lines.append(border)
    return "\n".join(lines) + "\n", passed


def main(argv: list[str], version: str = VERSION) -> int:
    if argv in (["-v"], ["--version"]):
        sys.stdout.write(f"Version : {version}\nBuild ID : 5\nBuild Date : 2025-04-30\n")
        return 0
    if len(argv) < 3 or argv[0] != "diag" or argv[1] != "-r" or not argv[2].isdigit():
        sys.stderr.write(USAGE)
        return 2
    level = int(argv[2])
    if level not in SECONDS:
        sys.stderr.write(f"Error: Invalid value for -r: {argv[2]} (1, 2, 3 or 4)\n")
        return 2
    if "-j" in argv[3:]:
        sys.stderr.write("dcgmi (gpuprov lab): -j is not simulated; the table is\n")
        return 2
    if not node.running(daemons.HOSTENGINE_PID):
        sys.stderr.write("Error: unable to establish a connection to the specified host: "
                         "localhost\nError: Unable to connect to host engine. Host engine "
                         "connection invalid/disconnected.\n")
        return 255
    driver = node.loaded_module_version() or "?"
    table, passed = diag_table(node.description(), level, driver, version)
    time.sleep(SECONDS[level])
    sys.stdout.write(table)
    return 0 if passed else 1   # non-zero when a test fails, as dcgmi


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
