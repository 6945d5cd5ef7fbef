"""What stops provisioning: the faults `gpuprov doctor` must find before anything is
changed, and a driver module that fails to build."""

from __future__ import annotations

from gpuprov.errors import InputError
from gpuprov.lab import docker, kernel_view
from gpuprov.lab.faults.base import (
    Expect,
    FaultKind,
)
from gpuprov.lab.sim import kmod

# What `gpuprov doctor` must find before provisioning: real state on the node, undone by
# `--clear` (files removed, names restored, the dpkg status line put back, a mount undone).
RUN_INSTALLER_TRACES = {"/usr/bin/nvidia-uninstall": "#!/bin/sh\n# left by NVIDIA-Linux-x86_64-"
                        "535.104.05.run (gpuprov lab)\nexit 0\n",
                        "/var/log/nvidia-installer.log": "nvidia-installer log file "
                        "'/var/log/nvidia-installer.log'\ncreation time: Tue Sep  5 10:12:01 2023"
                        "\ninstaller version: 535.104.05\n"}


DPKG_STATUS = "/var/lib/dpkg/status"


# packages every lab image has whose configuration is harmless to interrupt
DPKG_VICTIMS = ("less", "netbase", "hostname")


DISK_FULL_PATH, DISK_FULL_SIZE = "/opt", "16m"


def _secure_boot(access, hw, gpu):
    access.write(kernel_view.SECURE_BOOT_STATE, "enabled\n")
    return "Secure Boot enabled in the firmware, no key enrolled", {
        "remove_files": [kernel_view.SECURE_BOOT_STATE]}


# The site mirror not carrying a package, as apt sees it: a version pinned below 0.
NO_HEADERS_PIN = "/etc/apt/preferences.d/gpuprov-lab-fault-no-headers"


# A kernel an update installed beside the running one, never booted, its headers not.
UPDATED_KERNEL = "6.1.5-gpuprov-lab"


def _no_headers(access, hw, gpu):
    moved = kernel_view.HEADERS_DIR + ".gpuprov-fault"
    docker.exec_in(access.container, "mv", kernel_view.HEADERS_DIR, moved)
    access.write(NO_HEADERS_PIN, f"# gpuprov lab fault no-headers: the mirror lacks them\n"
                 f"Package: linux-headers-{kernel_view.KERNEL_RELEASE}\nPin: version *\n"
                 "Pin-Priority: -1\n")
    return (f"the headers of the running kernel {kernel_view.KERNEL_RELEASE} removed, and "
            "the mirror does not carry them",
            {"rename": [[moved, kernel_view.HEADERS_DIR]], "remove_files": [NO_HEADERS_PIN]})


def _kernel_update(access, hw, gpu):
    modules = f"/lib/modules/{UPDATED_KERNEL}"
    access.write(f"{modules}/modules.dep", "")
    return (f"kernel {UPDATED_KERNEL} installed by an update, without its headers",
            {"remove_tree": [modules]})


def _run_installer(access, hw, gpu):
    for path, text in RUN_INSTALLER_TRACES.items():
        access.write(path, text)
    return "a driver once installed from NVIDIA's .run file (its traces)", {
        "remove_files": list(RUN_INSTALLER_TRACES)}


def _dpkg_interrupted(access, hw, gpu):
    status = access.read(DPKG_STATUS) or ""
    victim = next((p for p in DPKG_VICTIMS if f"Package: {p}\nStatus: install ok installed\n"
                   in status), None)
    if victim is None:
        raise InputError(f"{access.node}: none of {', '.join(DPKG_VICTIMS)} is installed")
    access.write(DPKG_STATUS, status.replace(
        f"Package: {victim}\nStatus: install ok installed\n",
        f"Package: {victim}\nStatus: install ok half-configured\n"))
    return f"dpkg interrupted while configuring {victim}", {"dpkg_half_configured": victim}


def _dkms_build_fails(access, hw, gpu):
    """The module no longer compiles (a kernel the driver does not support yet): dkms
    fails as the real one does, and so does the driver package's postinst."""
    access.write(kmod.BUILD_FAILS, "make: *** [Makefile:81: modules] Error 2\n")
    return "DKMS builds of the nvidia module fail (bad exit status: 2)", {
        "remove_files": [kmod.BUILD_FAILS]}


def _disk_full(access, hw, gpu):
    docker.exec_in(access.container, "mount", "-t", "tmpfs", "-o",
                   f"size={DISK_FULL_SIZE}", "gpuprov-disk-full", DISK_FULL_PATH)
    return f"{DISK_FULL_PATH} all but full ({DISK_FULL_SIZE})", {"unmount": DISK_FULL_PATH}


def _gpu_busy(access, hw, gpu):
    if not hw["gpus"]:
        raise InputError(f"{access.node}: no GPU to be busy")
    first = hw["gpus"][0]
    hw.setdefault("processes", []).append(
        {"pid": 4242, "name": "python3", "bus_id": first["bus_id"], "used_mib": 30512})
    return f"a training process (pid 4242) holds GPU {first['index']}", {}


FAULTS = (
    FaultKind("secure-boot", False, _secure_boot,
              "Secure Boot on in the firmware, no signing key enrolled (doctor)",
              expect=Expect("secure-boot", by="doctor")),
    FaultKind("no-headers", False, _no_headers,
              "no headers for the running kernel, nor in the mirror (doctor)",
              expect=Expect("kernel-headers", by="doctor")),
    FaultKind("kernel-update", False, _kernel_update,
              "a second kernel installed without headers (doctor warns, DKMS check fails)"),
    FaultKind("run-installer", False, _run_installer,
              "a driver once installed from NVIDIA's .run file (doctor)",
              expect=Expect("run-installer", by="doctor")),
    FaultKind("dpkg-interrupted", False, _dpkg_interrupted,
              "an interrupted dpkg run: a package half-configured (doctor)",
              expect=Expect("dpkg", by="doctor")),
    FaultKind("disk-full", False, _disk_full, f"{DISK_FULL_PATH} all but full (doctor)",
              expect=Expect("disk-space", by="doctor")),
    FaultKind("dkms-build-fails", False, _dkms_build_fails,
              "the nvidia module fails to build (dkms exits 10, dpkg fails the package)"),
    FaultKind("gpu-busy", False, _gpu_busy, "a process holds a GPU (doctor)",
              expect=Expect("gpu-busy", by="doctor")),
)
