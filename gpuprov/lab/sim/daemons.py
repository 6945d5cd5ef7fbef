"""nvidia-persistenced, nv-fabricmanager and DCGM's nv-hostengine, as their systemd units
see them.

Each checks that it can run and exits non-zero when not, so `systemctl start` fails the
way it does on a real server; then it forks like the real daemons (`Type=forking`), or, as
DCGM's unit runs the host engine (`-n`), stays in the foreground.
Fabric manager refuses a driver whose loaded kernel module is at another version than
its own, with the real message, and a system without NVSwitches.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable

from . import node

FM_LOG = "/var/log/fabricmanager.log"


def daemonize(pid_file: str, serving: Callable[[], None] | None = None) -> None:
    """Fork; the child starts `serving` (its threads: a fork keeps none), records its pid
    and sleeps until SIGTERM; the parent returns."""
    if os.fork() > 0:
        # wait for the child's pid file so `systemctl start` returns with it running
        for _ in range(50):
            if os.path.exists(pid_file):
                return
            time.sleep(0.05)
        return
    os.setsid()
    if serving:
        serving()
    _serve(pid_file)


def _serve(pid_file: str) -> None:
    """Record this process's pid and sleep until SIGTERM."""
    os.makedirs(os.path.dirname(pid_file), exist_ok=True)
    with open(pid_file, "w") as fh:
        fh.write(f"{os.getpid()}\n")

    def stop(*_: object) -> None:
        try:
            os.unlink(pid_file)
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        signal.pause()


def persistenced(argv: list[str]) -> int:
    if node.loaded_module_version() is None:
        sys.stderr.write("nvidia-persistenced failed to initialize. Check syslog for more "
                         "details.\n")
        return 1
    # nvidia-persistenced(1): persistence mode on by default, off with --no-persistence-mode
    os.makedirs(os.path.dirname(node.PERSISTENCE_MODE), exist_ok=True)
    with open(node.PERSISTENCE_MODE, "w") as fh:
        fh.write("0\n" if "--no-persistence-mode" in argv else "1\n")
    daemonize(node.PERSISTENCED_PID)
    return 0


def _fm_log(message: str, level: str = "ERROR") -> None:
    stamp = time.strftime("[%b %d %Y %H:%M:%S]")
    with open(FM_LOG, "a") as fh:
        fh.write(f"{stamp} [{level}] [tid {os.getpid()}] {message}\n")
    if level == "ERROR":
        sys.stderr.write(message + "\n")


def fabricmanager(argv: list[str], version: str, nvlsm_pid: str = "") -> int:
    if argv in (["--version"], ["-v"]):
        sys.stdout.write(f"Fabric Manager version is : {version}\n")
        return 0
    # every start opens its part of the (appended) log, as the real one's does
    _fm_log(f"Fabric Manager version {version} is running with the following configuration "
            "options", "INFO")
    module = node.loaded_module_version()
    if module is None:
        _fm_log("request to query NVIDIA GPU driver information failed with error: "
                "NVIDIA driver is not loaded")
        return 1
    if module != version:
        _fm_log(f"fabric manager NVIDIA GPU driver interface version {version} don't match "
                f"with driver version {module}. Please update with matching NVIDIA driver "
                "package.")
        return 1
    hw = node.description()
    if not hw.get("nvswitch"):
        _fm_log("detected number of NVSwitches don't match with any supported system "
                "topology, aborting fabric manager")
        return 1
    if hw.get("nvlink5_bridges") and not (nvlsm_pid and node.running(nvlsm_pid)):
        # NVLink5 without the subnet manager: no switch to configure, the fabric never
        # trains (nvlsm ships beside fabric manager from Blackwell: data/packaging.yml
        # nvlink5; the warning as fabric manager logs it where it finds no NVSwitch)
        _fm_log("request to query NVSwitch device information failed with error: "
                "WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]", "WARNING")
        sys.stderr.write("request to query NVSwitch device information failed: WARNING "
                         "Nothing to do [NV_WARN_NOTHING_TO_DO]\n")
        return 1
    daemonize(node.FABRICMANAGER_PID)
    return 0


LOADED_MODULES = node.LOADED_MODULES_DIR


def nvlsm(argv: list[str], pid_file: str) -> int:
    """The NVLink subnet manager: runs where ib_umad is loaded (its MAD transport)."""
    if not os.path.exists(f"{LOADED_MODULES}/ib_umad"):
        sys.stderr.write("gpuprov lab: nvlsm: cannot open /dev/infiniband/umad*: ib_umad is "
                         "not loaded\n")
        return 1
    daemonize(pid_file)
    return 0


def fabricmanager_start(argv: list[str], version: str, config: str, nvlsm_binary: str,
                        nvlsm_pid: str) -> int:
    """nvidia-fabricmanager-start.sh as fabric manager's unit runs it: `--mode precheck`,
    then `--mode start`. An NVLink5 system is one whose SW_MNG bridges are InfiniBand devices,
    which they are only with mlx5_ib loaded: without it the script says "Detected Pre-NVL5
    system" (a real node's journal) and starts nv-fabricmanager, which finds nothing to do
    and the fabric stays In Progress (a P6-B300 on a kernel without linux-modules-extra:
    data/packaging.yml nvlink5). With it, "Detected NVL5+ system", and the subnet manager is
    started before nv-fabricmanager; the script's words where nvlsm is missing and when it
    starts are the real ones (the same notes). ibstat missing and ib_umad missing are in
    the lab's own words: no capture of them is in reach. The paths come from
    data/packaging.yml nvlink5, through the package builder."""
    mode = argv[argv.index("--mode") + 1] if "--mode" in argv[:-1] else ""
    if mode == "precheck":
        return 0
    if mode != "start":
        sys.stderr.write(f"gpuprov lab: nvidia-fabricmanager-start.sh: mode {mode!r} is not "
                         "simulated\n")
        return 2
    bridges_are_ib = (node.description().get("nvlink5_bridges")
                      and os.path.exists(f"{LOADED_MODULES}/mlx5_ib"))
    if not bridges_are_ib:
        print("Detected Pre-NVL5 system")
        return fabricmanager(["-c", config], version, nvlsm_pid)
    print("Detected NVL5+ system")
    if shutil.which("ibstat") is None:
        sys.stderr.write("gpuprov lab: nvidia-fabricmanager-start.sh: ibstat not found "
                         "(infiniband-diags)\n")
        return 1
    if not os.path.exists(nvlsm_binary):
        sys.stderr.write(f"{nvlsm_binary} does not exist. Please install \"Nvidia NVLink "
                         "Subnet Manager\" (nvlsm) package\n")
        return 1
    if not node.running(nvlsm_pid):
        if nvlsm([], nvlsm_pid) != 0:
            return 1
        print("Started \"Nvidia NVLink Subnet Manager\"")
    return fabricmanager(["-c", config], version, nvlsm_pid)


HOSTENGINE_PID = "/var/run/nvhostengine.pid"


def hostengine(argv: list[str]) -> int:
    """DCGM's host engine: needs the driver loaded (NVML), as the real one does. `-n` keeps
    it in the foreground, as DCGM's own unit starts it (Type=simple); without, it forks."""
    if node.loaded_module_version() is None:
        sys.stderr.write("Error: DCGM Failed to initialize the host engine: NVML Library "
                         "not loaded\n")
        return 1
    if "-n" in argv:
        _serve(HOSTENGINE_PID)
    daemonize(HOSTENGINE_PID)
    return 0
