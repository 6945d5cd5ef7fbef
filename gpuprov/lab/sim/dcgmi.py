"""The lab's `dcgmi`: DCGM 4's `dcgmi diag -r LEVEL [-j]` and `dcgmi health -s a | -c -j`
over the simulated GPUs.

`diag` prints DCGM 4.2.3's JSON document with `-j` (`"DCGM Diagnostic"` → test_categories →
tests, per-GPU entity results, a test_summary, DCGM's reason as a result's `warnings`,
`entity_groups` and `metadata`), and otherwise the DCGM 4.x table (a Metadata section,
then Deployment, Hardware, Integration and Stress, one row per test with a per-GPU result
row under it, and the Error text of a failing GPU wrapped mid-word at the column's width,
as dcgmi prints it). It runs the tests of the asked level (1: software; 2: + memory, pcie;
3: + the stress plugins; 4: + memtest, pulse_test), takes a scaled-down time per level
and needs the host engine running (nv-hostengine, unit nvidia-dcgm), as the real one does.

Fault in the description: `dcgm_fail: <test>` on a GPU fails that test on that GPU.

`health -s a` sets the background watches in the running host engine (forgotten when it
restarts, as the real one forgets them); `health -c -j` reports, in dcgmi's generic JSON
output (dcgmi/Health.cpp), what the watches see in the description: a volatile
double-bit ECC error (Memory system, Failure) and an NVLink link down (NVLINK system,
Failure), with DCGM's messages (dcgm_errors.h). The tree form without `-j` is not
simulated (docs/limits.md).
"""

from __future__ import annotations

import json
import os
import sys
import time

from . import daemons, node

VERSION = "4.2.3"   # a bare call's; the installed package passes its own
# (section, test, first level that runs it), in the order DCGM 4.2.3 and 4.4.1 run them:
# NVIDIA/DCGM nvvs/src/NvidiaValidationSuite.cpp FillTestVectors (the hardware class:
# memory from medium, then diagnostic, eud, nvbandwidth from long, memtest and pulse_test
# from xlong; integration: pcie; performance: memory_bandwidth, targeted_stress,
# targeted_power) and dcgmi/Diag.cpp (classes shown as Hardware, Integration, Stress). The
# section a test is shown under is its plugin's category (nvvs/include/PluginStrings.h:
# memtest's MEMTEST_PLUGIN_CATEGORY is PLUGIN_CATEGORY_STRESS, though it runs in the
# hardware class).
# eud runs only where its proprietary plugin is installed, which the lab does not model;
# nccl_tests joined the hardware class in 4.5.0.
TESTS = [("Deployment", "software", 1), ("Hardware", "memory", 2),
         ("Hardware", "diagnostic", 3), ("Hardware", "nvbandwidth", 3),
         ("Stress", "memtest", 4), ("Hardware", "pulse_test", 4),
         ("Integration", "pcie", 2), ("Stress", "memory_bandwidth", 3),
         ("Stress", "targeted_stress", 3), ("Stress", "targeted_power", 3)]
SECTIONS = ("Deployment", "Hardware", "Integration", "Stress")
# seconds a run of each level takes here (the real ones: seconds, ~2 min, ~30 min, 1-2 h)
SECONDS = {1: 0.5, 2: 2.0, 3: 4.0, 4: 6.0}
# DCGM's own failure codes (dcgm_errors.h: error id, category, severity 2 = isolate the GPU)
ERROR_CODES = {"memory": (58, 10), "memtest": (58, 10), "pcie": (30, 13)}
GENERIC_CODE = (58, 15)    # memory mismatch, hardware other
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
         "[-j]\n       dcgmi health -s a | -c -j\n       dcgmi -v\n")
HEALTH_WATCHES = f"{node.RUN_DIR}/dcgm-health-watches"   # the host engine's pid that holds them
DCGM_ST_GENERIC_ERROR_EXIT = 253                          # dcgmi exits with -3 as a byte


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


# GB/s per lane of each PCIe generation, and the share of it a host-device copy reaches
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
COPY_EFFICIENCY = {"GPU to Host": 0.76, "Host to GPU": 0.82}


def info(hw: dict, gpu: dict, test: str) -> list[str]:
    """The figures DCGM's plugins print as Info, in their words (DCGM issue #215): the pcie
    test's copy bandwidth from the GPU's trained link, the diagnostic's GEMM rate from its
    kind's gpu-burn rate (slowed as gpu-burn is). A model, not a measurement."""
    index = gpu["index"]
    if test == "pcie":
        link = gpu.get("pcie", hw["pcie"])
        lanes = LANE_GBPS[int(link["gen"])] * int(link["width"])
        return [", ".join(f"GPU {index} {way} bandwidth:\t\t{lanes * share:.2f} GB/s"
                          for way, share in COPY_EFFICIENCY.items())]
    if test == "diagnostic":
        rate = node.gflops(hw) * float(gpu.get("gflops_factor", 1.0))
        return [f"GPU {index} calculated at approximately {rate:.2f} gigaflops during this "
                "test"]
    return []


def diag_json(hw: dict, level: int, driver: str, version: str = VERSION) -> tuple[str, bool]:
    """DCGM 4.2.3's `dcgmi diag -r LEVEL -j` document, and whether every test passed."""
    gpus = [g["index"] for g in hw.get("gpus", [])]
    device_id = hw.get("gpu", {}).get("pci_device_id", "0x0000")[2:6].lower()
    failing = _failures(hw)
    categories, passed = [], True
    for section in SECTIONS:
        tests = []
        for test in [t for s, t, first in TESTS if s == section and first <= level]:
            bad = [g for g in failing.get(test, []) if g in gpus]
            passed = passed and not bad
            results = []
            for gpu in hw.get("gpus", []):
                g = gpu["index"]
                result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": g,
                          "status": "Fail" if g in bad else "Pass"}
                if info(hw, gpu, test):
                    result["info"] = info(hw, gpu, test)
                if g in bad:
                    error_id, category = ERROR_CODES.get(test, GENERIC_CODE)
                    result["warnings"] = [{
                        "error_category": category, "error_id": error_id,
                        "error_severity": 2,
                        "warning": ERRORS.get(test, GENERIC_ERROR).format(gpu=g, test=test)}]
                results.append(result)
            tests.append({"name": test, "results": results,
                          "test_summary": {"status": "Fail" if bad else "Pass"}})
        if tests:
            categories.append({"category": section, "tests": tests})
    doc = {"DCGM Diagnostic": {"test_categories": categories},
           "entity_groups": [{"entities": [{"device_id": device_id, "entity_id": g,
                                            "serial_num": _serial(hw, g)} for g in gpus],
                              "entity_group": "GPU", "entity_group_id": 1}],
           "metadata": {"Driver Version Detected": driver, "version": version}}
    return json.dumps(doc, indent="\t", separators=(",", " : "), sort_keys=True) + "\n", passed


def _serial(hw: dict, index: int) -> str:
    gpu = next(g for g in hw["gpus"] if g["index"] == index)
    return str(gpu.get("serial", "<<<NOT_SUPPORTED>>>"))


def health_incidents(hw: dict) -> list[tuple[int, str, str]]:
    """(GPU, system, message) of every Failure the watches see in the description."""
    incidents = []
    for gpu in hw.get("gpus", []):
        dbe = int(gpu.get("ecc", {}).get("volatile", {}).get("dram_uncorrectable", 0))
        if dbe:
            incidents.append((gpu["index"], "Memory system",
                              f"Detected {dbe} volatile double-bit ECC error(s) in GPU "
                              f"{gpu['index']}."))
        for link in sorted(set(gpu.get("nvlink_inactive", []))):
            incidents.append((gpu["index"], "NVLINK system",
                              f"GPU {gpu['index']}'s NvLink link {link} is currently down"))
    return incidents


def _chunks(message: str, width: int = 54) -> list[str]:
    """dcgmi's cut of a long message at a word boundary (Health::AddErrorMessage)."""
    parts, line = [], ""
    for word in message.split(" "):
        if line and len(line) + 1 + len(word) > width:
            parts.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*parts, line]


def health_json(hw: dict) -> str:
    body: dict = {"Overall Health": {"value": "Healthy"}}
    for gpu, system, message in health_incidents(hw):
        body["Overall Health"]["value"] = "Failure"
        entity = body.setdefault("GPU", {"children": {}})["children"].setdefault(
            str(gpu), {"children": {"Errors": {"children": {}}}, "value": "Failure"})
        errors = entity["children"]["Errors"]["children"]
        if system in errors:   # incidents of one system are joined with ", " (Health.cpp)
            message = " ".join(errors[system]["overflow"]) + ", " + message
        errors[system] = {"overflow": _chunks(message), "value": "Failure"}
    doc = {"body": body, "header": ["Health Monitor Report"]}
    return json.dumps(doc, indent=3, separators=(",", " : "), sort_keys=True) + "\n"


def _hostengine_pid() -> str | None:
    return node.read_value(daemons.HOSTENGINE_PID) if node.running(daemons.HOSTENGINE_PID) else None


def health(argv: list[str]) -> int:
    pid = _hostengine_pid()
    if pid is None:
        sys.stderr.write(NO_HOSTENGINE)
        return 255
    if argv[:2] == ["-s", "a"]:
        os.makedirs(node.RUN_DIR, exist_ok=True)
        with open(HEALTH_WATCHES, "w") as fh:
            fh.write(pid)
        sys.stdout.write("Health monitor systems set successfully.\n")
        return 0
    if argv[:1] == ["-c"] and "-j" in argv:
        if node.read_value(HEALTH_WATCHES) != pid:
            sys.stdout.write("Error: Health watches not enabled. Please enable watches. \n")
            return DCGM_ST_GENERIC_ERROR_EXIT
        sys.stdout.write(health_json(node.description()))
        return 0
    sys.stderr.write(USAGE)
    return 2


NO_HOSTENGINE = ("Error: unable to establish a connection to the specified host: localhost\n"
                 "Error: Unable to connect to host engine. Host engine connection "
                 "invalid/disconnected.\n")


def main(argv: list[str], version: str = VERSION) -> int:
    if argv in (["-v"], ["--version"]):
        sys.stdout.write(f"Version : {version}\nBuild ID : 5\nBuild Date : 2025-04-30\n")
        return 0
    if argv[:1] == ["health"]:
        return health(argv[1:])
    if len(argv) < 3 or argv[0] != "diag" or argv[1] != "-r" or not argv[2].isdigit():
        sys.stderr.write(USAGE)
        return 2
    level = int(argv[2])
    if level not in SECONDS:
        sys.stderr.write(f"Error: Invalid value for -r: {argv[2]} (1, 2, 3 or 4)\n")
        return 2
    if not node.running(daemons.HOSTENGINE_PID):
        sys.stderr.write(NO_HOSTENGINE)
        return 255
    driver = node.loaded_module_version() or "?"
    render = diag_json if "-j" in argv[3:] else diag_table
    output, passed = render(node.description(), level, driver, version)
    time.sleep(SECONDS[level])
    sys.stdout.write(output)
    return 0 if passed else 1   # non-zero when a test fails, as dcgmi


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
