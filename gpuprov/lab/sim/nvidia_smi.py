"""The lab's `nvidia-smi`: the node's description in the real tool's formats and failures.

Installed as /usr/bin/nvidia-smi by the stand-in nvidia-utils-<branch> package. It fails
the way the real one does: no NVML library, no loaded kernel module, a module at a
different version than the library ("Driver/library version mismatch"), or a GPU the
driver lost ("Unable to determine the device handle", exit 15).
"""

from __future__ import annotations

import signal
import sys
import time

from . import node, render

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
NO_LIBRARY = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make "
              "sure that the NVIDIA Display Driver is properly installed and present in your "
              "system.\nPlease also try adding directory that contains libnvidia-ml.so to your "
              "system PATH.\n")
BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

# nvidia-smi(1) RETURN VALUE (15: a GPU has fallen off the bus or is otherwise inaccessible)
RC_BAD_ARGS, RC_NOT_FOUND, RC_NO_DRIVER, RC_NO_LIBRARY, RC_GPU_LOST, RC_MISMATCH = (
    2, 6, 9, 12, 15, 18)


# `nvidia-smi c2c -s` where no GPU has NVLink-C2C: its words (dmlc/xgboost
# tests/cpp/common/test_cuda_dr_utils.cc) and exit status 3 (trivialfis/dxgb_bench
# scripts/c2cinfo.py: "If there's no C2C device, it returns 3")
NO_C2C, RC_NO_C2C = "No Devices support C2C.\n", 3


class NoC2c(Exception):
    pass


class Usage(Exception):
    pass


class LoopZero(Usage):
    """`-l 0` / `-lms 0`: its own message, the same exit status (the real 580's)."""


def _handle_address(bus_id: str) -> str:
    """nvidia-smi's PCI address in that message: a 4-digit domain, `0000:4F:00.0`."""
    return bus_id[-12:] if len(bus_id) > 12 else bus_id


def _select(hw: dict, ids: list[str]) -> dict:
    if not ids:
        return hw
    chosen = [g for g in hw["gpus"] if str(g["index"]) in ids or g["bus_id"] in ids
              or g["uuid"] in ids or g["serial"] in ids]
    if not chosen:
        raise LookupError
    return {**hw, "gpus": chosen}


def _loop_ms(args: list[str]) -> tuple[list[str], int | None]:
    """The arguments without the loop option, and its interval in ms (`-l S`, `-lms MS`)."""
    rest, interval = [], None
    it = iter(args)
    for arg in it:
        if arg in ("-l", "--loop", "-lms", "--loop-ms"):
            value = next(it, "")
            if not value.isdigit():
                raise Usage
            interval = int(value) * (1 if arg.endswith("ms") else 1000)
            if interval == 0:
                raise LoopZero
        elif arg.startswith(("--loop=", "--loop-ms=")):
            name, value = arg.split("=", 1)
            if not value.isdigit():
                raise Usage
            interval = int(value) * (1 if name.endswith("ms") else 1000)
            if interval == 0:
                raise LoopZero
        else:
            rest.append(arg)
    return rest, interval


def _loop(args: list[str], interval_ms: int, driver: str) -> int:
    """`--query-gpu … -lms N`: the header once, then every GPU's row each interval until
    killed, re-reading the hardware (its load, a GPU lost) every time."""
    header = not any(a.startswith("--format=") and "noheader" in a for a in args)
    # the real loop ends on SIGTERM with exit status 0, not 143 (driver 580's, captured in
    # tests/fixtures/query-gpu/h200-580.159.04-sampler-tc-fp32-fp64.txt)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    first = True
    while True:
        hw = node.description()
        lost = node.lost_gpus(hw)
        if lost:
            sys.stdout.write(_lost_message(lost[0]))
            return RC_GPU_LOST
        text = _render(args, hw, driver, _live())
        sys.stdout.write(text if first or not header else text.split("\n", 1)[1])
        sys.stdout.flush()
        first = False
        time.sleep(interval_ms / 1000)


def _lost_message(gpu: dict) -> str:
    # a GPU the driver lost fails the whole query, as on real servers: the message of
    # open-gpu-kernel-modules#387, haotian-liu/LLaVA#1466 (`nvidia-smi`, `-a -i 0`)
    return (f"Unable to determine the device handle for GPU{_handle_address(gpu['bus_id'])}: "
            f"Unknown Error\n")


def _live() -> render.Live:
    return render.Live(persistence=node.persistence_mode(),
                       fabric_manager=node.running(node.FABRICMANAGER_PID))


def _render(args: list[str], hw: dict, driver: str, live: render.Live) -> str:
    now = time.strftime("%a %b %d %H:%M:%S %Y")
    ids: list[str] = []
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in ("-i", "--id"):
            ids += next(it, "").split(",")
        elif arg.startswith("--id="):
            ids += arg.split("=", 1)[1].split(",")
        else:
            rest.append(arg)
    hw = _select(hw, ids)
    flags = set(rest)
    if not rest:
        return render.table(hw, driver, now, live)
    if rest[0] == "topo":
        if flags & {"-m", "--matrix"}:
            return render.topo(hw)
        raise Usage
    if rest[0] == "c2c":
        if flags & {"-s", "--status"}:
            if not hw.get("c2c"):
                raise NoC2c
            return render.c2c_status(hw)
        raise Usage
    if rest[0] == "nvlink":
        if flags & {"-s", "--status"}:
            return render.nvlink_status(hw)
        if flags & {"-e", "--errorcounters"}:
            return render.nvlink_errors(hw)
        raise Usage
    if flags <= {"-L", "--list-gpus"}:
        return render.gpu_list(hw)
    if flags <= {"-q", "--query", "-x", "--xml-format"} and flags & {"-q", "--query"}:
        if flags & {"-x", "--xml-format"}:
            return render.smi_xml(hw, driver, now, live)
        return render.smi_text(hw, driver, now, live)
    query = [a for a in rest if a.startswith("--query-gpu=")]
    apps = [a for a in rest if a.startswith("--query-compute-apps=")]
    fmt = [a for a in rest if a.startswith("--format=")]
    if apps and fmt and len(rest) == 2:
        options = fmt[0].split("=", 1)[1].split(",")
        if options[0] != "csv" or not set(options[1:]) <= {"noheader", "nounits"}:
            raise Usage
        names = [n.strip() for n in apps[0].split("=", 1)[1].split(",") if n.strip()]
        return render.compute_apps(hw, names, "noheader" in options, "nounits" in options)
    if query and fmt and len(rest) == 2:
        options = fmt[0].split("=", 1)[1].split(",")
        if options[0] != "csv" or not set(options[1:]) <= {"noheader", "nounits"}:
            raise Usage
        names = [n.strip() for n in query[0].split("=", 1)[1].split(",") if n.strip()]
        return render.query_gpu(hw, driver, names, "noheader" in options, "nounits" in options,
                                time.strftime("%Y/%m/%d %H:%M:%S.000"), live,
                                node.burn_load())
    raise Usage


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    nvml = node.nvml_version()
    if nvml is None:
        sys.stdout.write(NO_LIBRARY)
        return RC_NO_LIBRARY
    module = node.loaded_module_version()
    if module is None:
        sys.stdout.write(NO_DRIVER)
        return RC_NO_DRIVER
    if module != nvml:
        short = ".".join(nvml.split(".")[:2])
        sys.stdout.write(f"Failed to initialize NVML: Driver/library version mismatch\n"
                         f"NVML library version: {short}\n")
        return RC_MISMATCH
    if args == ["--version"]:
        sys.stdout.write(f"NVIDIA-SMI version  : {module}\nNVML version        : "
                         f"{'.'.join(nvml.split('.')[:2])}\nDRIVER version      : {module}\n"
                         f"CUDA Version        : {render.cuda_for(module)}\n")
        return 0
    hw = node.description()
    if not hw["gpus"]:
        sys.stdout.write("No devices were found\n")
        return RC_NOT_FOUND
    lost = node.lost_gpus(hw)
    if lost:
        sys.stdout.write(_lost_message(lost[0]))
        return RC_GPU_LOST
    try:
        args, interval_ms = _loop_ms(args)
        if interval_ms is not None:
            if not any(a.startswith("--query-gpu=") for a in args):
                raise Usage   # the lab loops the query form only
            return _loop(args, interval_ms, module)
        sys.stdout.write(_render(args, hw, module, _live()))
    except LoopZero:   # tests/fixtures/query-gpu/h200-580.159.04-loop-zero.txt
        sys.stdout.write("Provided [-l(ms) | --loop(-ms)=] value is incorrect. Loop frequency "
                         "must be greater than 0.\n\n")
        return RC_BAD_ARGS
    except Usage:
        sys.stdout.write(BAD_ARGS)
        return RC_BAD_ARGS
    except NoC2c:
        sys.stdout.write(NO_C2C)
        return RC_NO_C2C
    except LookupError:
        sys.stdout.write("No devices were found\n")
        return RC_NOT_FOUND
    except render.UnknownQueryField as exc:
        sys.stdout.write(f'Field "{exc}" is not a valid field to query.\n\n')
        return RC_BAD_ARGS
    return 0
