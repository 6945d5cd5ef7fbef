"""The stand-in vendor packages: NVIDIA's CUDA repository and its container-toolkit repo.

Package names, version strings and the dependencies that matter are the real ones
(data/packaging.yml, each with its source): branch-named driver packages that
exclude each other, `cuda-drivers-<branch>` with the unbounded `>=` dependency that
drags drivers along, fabric manager at exactly its driver's version, cuDNN 8 builds
naming their CUDA, toolkit packages whose `>=` dependencies let unpinned libraries
float. What they install is the lab's simulator (gpuprov/lab/sim), so what the node
reports is what was installed.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

from gpuprov import compat, packaging_facts
from gpuprov.lab import kernel_modules, kernel_view, sim
from gpuprov.lab.debs import Deb
from gpuprov.lab.paths import enabled_link
from gpuprov.lab.sim import node
from gpuprov.parsers.system import OPEN_LICENSE, PROPRIETARY_LICENSE
from gpuprov.resources import data_file, load_yaml

RESOURCE = "lab/standins.yml"
# What the stand-ins install that is not the simulator: data files, `@NAME@` placeholders.
SOURCES = "lab/sources"
SIM_DIR = "/usr/lib/gpuprov-sim"
LIB = node.LIB_DIR
UNIT_DIR = "/usr/lib/systemd/system"
SIM_SOURCES = Path(sim.__file__).parent
SIM_MODULES = ("__init__", "node", "render", "nvidia_smi", "gpu_burn", "daemons", "dcgmi",
               "nccl_tests", "nvbandwidth", "imex")
MODULE_UNIT = "gpuprov-lab-nvidia-module.service"
# each flavour's nvidia module declares its license (parsers/system.py)
MODULE_LICENSES = {"proprietary": PROPRIETARY_LICENSE, "open": OPEN_LICENSE}
# What a 590+ pinning package pins: the driver packages under their unsuffixed names.
PINNED_NAMES = ("nvidia-headless", "nvidia-headless-open", "nvidia-dkms", "nvidia-dkms-open",
                "nvidia-kernel-common", "libnvidia-compute", "nvidia-compute-utils",
                "nvidia-utils", "nvidia-fabricmanager", "libnvidia-nscq", "cuda-drivers")


@functools.cache
def recipe() -> dict:
    return load_yaml(RESOURCE)


def recipe_digest() -> str:
    """Changes whenever the package list or anything the packages install changes."""
    h = hashlib.sha256(repr(sorted(recipe().items())).encode())
    here = Path(__file__).parent
    for path in [*sorted(SIM_SOURCES.glob("*.py")), here / "standins.py", here / "debs.py",
                 here / "kernel_modules.py", here / "kernel_view.py",
                 here / "docker_standins.py", Path(str(data_file("packaging.yml")))]:
        h.update(path.name.encode() + path.read_bytes())
    for path in sorted(Path(str(data_file(SOURCES))).rglob("*")):
        if path.is_file():
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def _source(relative: str, **values: str) -> str:
    """A stand-in source file from gpuprov/data/lab/sources, `@NAME@` filled in."""
    text = data_file(f"{SOURCES}/{relative}").read_text()
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    return text


def _python_tool(module: str, call: str) -> str:
    """A /usr/bin script that runs one of the simulator's modules from SIM_DIR."""
    return (f"#!/usr/bin/python3\nimport sys\nsys.path.insert(0, {SIM_DIR!r})\n"
            f"from gpuprov_sim import {module}\nsys.exit({module}.{call})\n")


def _standalone_tool(module: str, **config: str) -> str:
    """A self-contained script: the module's source plus its constants."""
    source = (SIM_SOURCES / f"{module}.py").read_text()
    return (f"#!/usr/bin/python3\n{source}\n\nCONFIG = {config!r}\n\n"
            "if __name__ == \"__main__\":\n    sys.exit(main(sys.argv[1:], **CONFIG))\n")


def _exclusive(deb: Deb, role: str) -> Deb:
    """One branch at a time, as the real branch-named packages are (the virtual package is
    not the 590+ name itself: a package cannot conflict with its own name)."""
    virtual = f"{role}-driver-branch"
    deb.provides.append(virtual)
    deb.conflicts.append(virtual)
    deb.replaces.append(virtual)
    return deb


def _unit(description: str, exec_start: str, extra: str = "", pre: str = "") -> str:
    return (f"[Unit]\nDescription={description}\n{extra}\n[Service]\nType=forking\n"
            + (f"ExecStartPre={pre}\n" if pre else "")
            + f"ExecStart={exec_start}\n\n[Install]\nWantedBy=multi-user.target\n")


def names_branch(branch: str) -> str:
    """What a driver package's name carries of its branch (data/packaging.yml)."""
    return packaging_facts.driver_names_branch(branch)


def dkms_postinst(version: str, modules: str = "/lib/modules") -> str:
    """As dh_dkms's scriptlet: build for every kernel with headers, skip the others with its
    message; a failed build fails the scriptlet with dkms's status, so dpkg leaves the
    package unconfigured ("post-installation script subprocess returned error exit status
    10": pop-os/pop#3811, NVIDIA/nvidia-container-toolkit#361)."""
    return (
        f"dkms add -m nvidia -v {version} || true\n"
        f"for dep in {modules}/*/modules.dep; do\n"
        "  [ -e \"$dep\" ] || continue; k=${dep%/modules.dep}; k=${k##*/}\n"
        f"  if [ -d \"{modules}/$k/build\" ]; then\n"
        f"    dkms install -m nvidia -v {version} -k \"$k\" || exit $?\n"
        "  else\n"
        "    echo \"Module build for kernel $k was skipped since the kernel headers for "
        "this kernel do not seem to be installed.\"\n"
        "  fi\n"
        "done\n"
        f"{kernel_modules.MODPROBE_NVIDIA} || true\n")


def driver_packages(branch: str, version: str, revision: str) -> Iterator[Deb]:
    """NVIDIA's CUDA repository: the driver's libraries and tools, DKMS-built modules."""
    dv = f"{version}-{revision}"
    exact = f"(= {dv})"
    b = names_branch(branch)
    fabric = packaging_facts.fabric_names_branch(branch)
    yield from _userspace(version, dv, names=b, fabric_names=fabric,
                          fabric_version=f"{version}-1")
    yield imex_package(branch, version)
    nvlink5 = packaging_facts.facts()["nvlink5"]
    if int(branch) >= nvlink5["nvsdm_from_branch"]:
        yield _exclusive(Deb(f"{nvlink5['nvsdm_package']}{fabric}", f"{version}-1",
                             "NVIDIA Switch Device Monitoring library (stand-in)\nNVLink5's "
                             "replacement for NSCQ.")
                         .add(f"{LIB}/libnvsdm.so.{version}", "stand-in\n"), "libnvsdm")

    for suffix, flavour in (("", "proprietary"), ("-open", "open")):
        dkms = Deb(f"nvidia-dkms{b}{suffix}", dv,
                   f"NVIDIA DKMS package ({flavour} kernel module, stand-in)\n"
                   "A container has no kernel to build for: installing it loads the module "
                   "when none is loaded, as modprobe would on a fresh server; an upgrade "
                   "leaves the old module loaded until the node reboots.",
                   depends=[f"nvidia-kernel-common{b} {exact}"])
        _exclusive(dkms, "nvidia-dkms-kernel")
        dkms.add(f"/usr/src/nvidia-{version}/dkms.conf",
                 f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{version}"\n')
        # the module's sources, nv-p2p.c among them: what GDRCopy's gdrdrv builds against
        # (its Makefile finds the first nv-p2p.c under /usr/src/nvidia-*, data/packaging.yml)
        dkms.add(f"/usr/src/nvidia-{version}/nvidia/nv-p2p.c", "/* stand-in */\n")
        # its license as the real nv.c declares it, which the DKMS stand-in builds into the
        # module for `modinfo -F license` (parsers/system.py: the flavour)
        dkms.add(f"/usr/src/nvidia-{version}/nvidia/nv.c",
                 f'MODULE_LICENSE("{MODULE_LICENSES[flavour]}");\n')
        _loads_at_boot(dkms)
        dkms.scripts["postinst"] = dkms_postinst(version)
        dkms.scripts["prerm"] = f"dkms remove -m nvidia -v {version} --all || true\n"
        yield dkms

        yield Deb(f"nvidia-headless{b}{suffix}", dv,
                  f"NVIDIA headless metapackage ({flavour} kernel module, stand-in)",
                  depends=[f"nvidia-dkms{b}{suffix} {exact}",
                           f"nvidia-kernel-common{b} {exact}",
                           f"libnvidia-compute{b} {exact}",
                           f"nvidia-compute-utils{b} {exact}"])

    # What the roles must never install: it follows the newest driver (>=), not the lock.
    yield Deb(f"cuda-drivers{b}", f"{version}-1", "CUDA Driver meta-package, branch "
              "specific (stand-in)", depends=[f"nvidia-headless{b} (>= {dv})",
                                               f"nvidia-utils{b} (>= {dv})"])
    if not b:
        yield pinning_package(version)


def ubuntu_driver_packages(branch: str, version: str, revision: str,
                           modules_version: str) -> Iterator[Deb]:
    """Canonical's packaging of the same driver in the Ubuntu archive: `-<branch>-server`
    names at Ubuntu's revision, no DKMS (`nvidia-headless-no-dkms-…`), and the kernel
    module prebuilt for one kernel and signed by Canonical's module signing key
    (`linux-modules-nvidia-<branch>-server[-open]-<kernel release>`, versioned as the
    kernel, tied to its driver by nvidia-kernel-common's version as
    linux-restricted-modules' packages are: see data/lab/standins.yml)."""
    dv = f"{version}-{revision}"
    names = f"-{branch}-server"
    yield from _userspace(version, dv, names=names, fabric_names=f"-{branch}",
                          fabric_version=dv)
    release = kernel_view.KERNEL_RELEASE
    for suffix, flavour in (("", "proprietary"), ("-open", "open")):
        yield Deb(f"nvidia-headless-no-dkms{names}{suffix}", dv,
                  f"NVIDIA headless metapackage, no DKMS ({flavour} kernel module, stand-in)",
                  depends=[f"nvidia-kernel-common{names} (= {dv})",
                           f"libnvidia-compute{names} (= {dv})",
                           f"nvidia-compute-utils{names} (= {dv})"])
        # the real ones: the open flavour bounds the version both ways, the proprietary
        # one from below only
        common = f"nvidia-kernel-common{names}"
        bounds = ([f"{common} (<= {version}-1)"] if suffix else []) + [f"{common} (>= {version})"]
        module = Deb(f"linux-modules-nvidia{names}{suffix}-{release}", modules_version,
                     f"Linux kernel nvidia modules for version {release} ({flavour}, "
                     "stand-in)\nPrebuilt and signed with Canonical's module signing key, which "
                     "the kernel trusts: loads under Secure Boot with no key to enrol.",
                     depends=bounds, section="restricted/kernel")
        _exclusive(module, "nvidia-dkms-kernel")
        module.add(f"/lib/modules/{release}/kernel/nvidia-{branch}srv/nvidia.ko",
                   f"version={version}\nsigner={kernel_view.CANONICAL_MODULE_SIGNER}\n"
                   f"sig_sha256={kernel_view.CANONICAL_MODULE_KEY_SHA256}\n"
                   f"license={MODULE_LICENSES[flavour]}\n")
        _loads_at_boot(module)
        module.scripts["postinst"] = f"{kernel_modules.MODPROBE_NVIDIA} || true\n"
        yield module


def _userspace(version: str, dv: str, names: str, fabric_names: str,
               fabric_version: str) -> Iterator[Deb]:
    """The packages both packagings share by role: the libraries (the simulator), tools,
    the persistence daemon, the kernel module's common files, fabric manager and NSCQ;
    `names` is what their names carry of the branch (`-550`, ``, `-550-server`)."""
    exact = f"(= {dv})"
    compute = _exclusive(Deb(f"libnvidia-compute{names}", dv,
                             f"NVIDIA libcompute package (stand-in)\n"
                             f"libcuda and libnvidia-ml {version}; in the gpuprov lab they "
                             "drive the simulated GPUs of the node's hardware description.",
                             depends=["python3", "python3-yaml"]), "libnvidia-compute")
    for lib in ("libnvidia-ml", "libcuda"):
        compute.add(f"{LIB}/{lib}.so.{version}", f"stand-in {lib} {version}\n")
        compute.symlinks[f"{LIB}/{lib}.so.1"] = f"{lib}.so.{version}"
    for name in SIM_MODULES:
        compute.add(f"{SIM_DIR}/gpuprov_sim/{name}.py", (SIM_SOURCES / f"{name}.py").read_text())
    yield compute

    yield _exclusive(Deb(f"nvidia-utils{names}", dv, "NVIDIA driver support binaries "
                         "(stand-in)\nnvidia-smi.", depends=[f"libnvidia-compute{names} {exact}"])
                     .add("/usr/bin/nvidia-smi", _python_tool("nvidia_smi", "main()"), 0o755),
                     "nvidia-utils")

    yield _exclusive(
        Deb(f"nvidia-compute-utils{names}", dv, "NVIDIA compute utilities (stand-in)\n"
            "nvidia-persistenced and its unit.", depends=[f"libnvidia-compute{names} {exact}"])
        .add("/usr/bin/nvidia-persistenced",
             _python_tool("daemons", "persistenced(sys.argv[1:])"), 0o755)
        .add(packaging_facts.facts()["persistenced_unit"]["path"],
             packaging_facts.facts()["persistenced_unit"]["text"]),
        "nvidia-compute-utils")

    yield _exclusive(Deb(f"nvidia-kernel-common{names}", dv, "Shared files used by the "
                         "NVIDIA kernel module (stand-in)\nGSP firmware.")
                     .add(f"/usr/lib/firmware/nvidia/{version}/gsp_ga10x.bin", b"\0" * 64),
                     "nvidia-kernel-common")

    nvlink5 = packaging_facts.facts()["nvlink5"]
    fm = (Deb(f"nvidia-fabricmanager{fabric_names}", fabric_version, "Fabric Manager "
              "for NVSwitch based systems (stand-in)\nRefuses to start when the loaded driver "
              "is at another version, as the real one does.",
              depends=[f"nvidia-kernel-common{names} {exact}",
                       f"libnvidia-compute{names} {exact}"])
          .add("/usr/bin/nv-fabricmanager",
               _python_tool("daemons", f"fabricmanager(sys.argv[1:], version={version!r}, "
                                       f"nvlsm_pid={nvlink5['nvlsm_pid_file']!r})"), 0o755)
          .add(nvlink5["fm_config"],
               "LOG_LEVEL=4\nLOG_FILE_NAME=/var/log/fabricmanager.log\nFABRIC_MODE=0\n"))
    if int(version.split(".")[0]) >= nvlink5["nvlsm_from_branch"]:
        # from the branches with the NVLink subnet manager, the unit runs the start script,
        # which picks the NVLSM path on an NVLink5 system (data/packaging.yml nvlink5)
        script = nvlink5["start_script"]
        fm.add(script, _python_tool("daemons", (
            f"fabricmanager_start(sys.argv[1:], version={version!r}, "
            f"config={nvlink5['fm_config']!r}, nvlsm_binary={nvlink5['nvlsm_binary']!r}, "
            f"nvlsm_pid={nvlink5['nvlsm_pid_file']!r})")), 0o755)
        fm.add(f"{UNIT_DIR}/nvidia-fabricmanager.service", _unit(
            "NVIDIA fabric manager service", f"{script} --mode start",
            "After=network-online.target\n", pre=f"{script} --mode precheck"))
    else:
        fm.add(f"{UNIT_DIR}/nvidia-fabricmanager.service",
               _unit("NVIDIA fabric manager service",
                     f"/usr/bin/nv-fabricmanager -c {nvlink5['fm_config']}",
                     "After=network-online.target\n"))
    yield _exclusive(fm, "nvidia-fabricmanager")
    yield _exclusive(Deb(f"libnvidia-nscq{fabric_names}", fabric_version, "NVSwitch "
                         "Configuration and Query library (stand-in)")
                     .add(f"{LIB}/libnvidia-nscq.so.{version}", "stand-in\n"), "libnvidia-nscq")


def imex_package(branch: str, version: str) -> Deb:
    """NVIDIA IMEX at the driver's version (data/packaging.yml `imex`): the daemon, its
    control tool, the config file and the unit, installed disabled (the nvidia_imex role
    enables it where the rack runs a domain). Its version may differ from the libraries'
    (the imex-version-mismatch fault installs the other), so it needs them at any version:
    the simulator's modules come with them."""
    imex = packaging_facts.facts()["imex"]
    deb = (Deb(packaging_facts.imex_package(branch), f"{version}-1",
                "IMEX Manager for NVIDIA based systems (stand-in)\nThe daemon of an NVLink "
                "domain's memory export and import; in the gpuprov lab it answers its peers "
                "over the lab fabric.",
                depends=[f"libnvidia-compute{names_branch(branch)}"])
            .add(imex["daemon"], _python_tool("imex", (
                f"daemon(sys.argv[1:], version={version!r}, config={imex['config']!r}, "
                f"nodes={imex['nodes_config']!r}, server_port={imex['server_port']}, "
                f"cmd_port={imex['cmd_port']})")), 0o755)
            .add(imex["ctl"], _python_tool("imex", (
                f"ctl(sys.argv[1:], config={imex['config']!r}, "
                f"cmd_port={imex['cmd_port']})")), 0o755)
            .add(imex["config"], (
                "# NVIDIA IMEX configuration file (gpuprov lab stand-in: the options the\n"
                "# simulated daemon reads, named and defaulted as the real file's)\n"
                f"SERVER_PORT={imex['server_port']}\nIMEX_CMD_ENABLED=1\n"
                f"IMEX_CMD_PORT={imex['cmd_port']}\n"
                f"IMEX_NODE_CONFIG_FILE={imex['nodes_config']}\nBIND_INTERFACE_IP=\n"))
            .add(f"{UNIT_DIR}/{imex['unit']}", _unit(
                "NVIDIA IMEX service", f"{imex['daemon']} -c {imex['config']}",
                "After=network-online.target\n")))
    deb.conffiles.append(imex["config"])
    return deb


def _loads_at_boot(deb: Deb) -> None:
    """The lab's boot-time module load (what modprobe does for a server's GPUs)."""
    deb.add(f"{UNIT_DIR}/{MODULE_UNIT}",
            "[Unit]\nDescription=Load the NVIDIA kernel module (gpuprov lab)\n"
            "DefaultDependencies=no\nBefore=sysinit.target\n\n[Service]\nType=oneshot\n"
            f"ExecStart=-{kernel_modules.MODPROBE_NVIDIA}\n\n"
            "[Install]\nWantedBy=sysinit.target\n")
    link, target = enabled_link(MODULE_UNIT, "sysinit.target", UNIT_DIR)
    deb.symlinks[f"/{link}"] = target


def pinning_package(version: str) -> Deb:
    """`nvidia-driver-pinning-<version>`: apt preferences that hold every driver package
    at that version (the 590+ way to lock a driver)."""
    names = " ".join(PINNED_NAMES)
    return Deb(f"nvidia-driver-pinning-{version}", f"{version}-1",
               f"Pins the NVIDIA driver packages at {version} (stand-in)").add(
        f"/etc/apt/preferences.d/nvidia-driver-pinning-{version}",
        f"Package: {names}\nPin: version {version}-*\nPin-Priority: 1000\n")


def toolkit_package(cuda: str, rel: dict) -> Deb:
    dashed = cuda.replace(".", "-")
    root = f"/usr/local/cuda-{cuda}"
    major, minor = cuda.split(".")
    return (Deb(f"cuda-toolkit-{dashed}", f"{rel['release']}-1",
                f"CUDA Toolkit {cuda} meta-package (stand-in)\nnvcc and the runtime headers.")
            .add(f"{root}/bin/nvcc", _standalone_tool("nvcc", release=rel["release"],
                                                      nvcc=rel["nvcc"], built_on=rel["built_on"],
                                                      build=rel["build"]), 0o755)
            .add(f"{root}/include/cuda_runtime_api.h",
                 f"#define CUDART_VERSION {int(major) * 1000 + int(minor) * 10}\n")
            .add(f"{root}/lib64/libcudart.so.{rel['nvcc']}", "stand-in\n")
            .add(f"{root}/version.json",
                 f'{{\n   "cuda" : {{\n      "name" : "CUDA SDK",\n      "version" : '
                 f'"{rel["release"]}"\n   }}\n}}\n'))


def _cudnn_header(version: str) -> str:
    major, minor, patch = version.split(".")[:3]
    scale = 10000 if int(major) >= 9 else 1000
    return ("/**\n * \\file: The master cuDNN version file.\n */\n\n"
            "#ifndef CUDNN_VERSION_H_\n#define CUDNN_VERSION_H_\n\n"
            f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n"
            f"#define CUDNN_PATCHLEVEL {patch}\n\n"
            f"#define CUDNN_VERSION (CUDNN_MAJOR * {scale} + CUDNN_MINOR * 100 + "
            "CUDNN_PATCHLEVEL)\n\n#endif /* CUDNN_VERSION_H */\n")


def cudnn_packages(runtime: str, cuda: str, version: str) -> Iterator[Deb]:
    major = version.split(".")[0]
    deb_version = f"{version}-1+cuda{cuda}" if runtime == "libcudnn8" else f"{version}-1"
    dev = "libcudnn8-dev" if runtime == "libcudnn8" else runtime.replace("libcudnn9",
                                                                         "libcudnn9-dev")
    short = ".".join(version.split(".")[:3])
    yield (Deb(runtime, deb_version, f"cuDNN runtime libraries (stand-in)\nbuilt for CUDA {cuda}")
           .add(f"{LIB}/libcudnn.so.{short}", "stand-in\n"))
    inc = "/usr/include/x86_64-linux-gnu"
    deb = Deb(dev, deb_version, f"cuDNN development headers (stand-in)\nbuilt for CUDA {cuda}",
              depends=[f"{runtime} (= {deb_version})"])
    deb.add(f"{inc}/cudnn_version_v{major}.h", _cudnn_header(version))
    deb.add(f"{inc}/cudnn_v{major}.h", f'#include "cudnn_version_v{major}.h"\n')
    deb.scripts["postinst"] = (
        f"update-alternatives --install /usr/include/cudnn.h libcudnn {inc}/cudnn_v{major}.h "
        f"{major}0 --slave /usr/include/cudnn_version.h libcudnn_version_h "
        f"{inc}/cudnn_version_v{major}.h\n")
    deb.scripts["prerm"] = (
        'if [ "$1" = remove ] || [ "$1" = deconfigure ]; then\n'
        f"  update-alternatives --remove libcudnn {inc}/cudnn_v{major}.h\nfi\n")
    yield deb


def nccl_packages(version: str, cuda: str) -> Iterator[Deb]:
    """NCCL as NVIDIA's CUDA repository ships it: libnccl2 and libnccl-dev at
    <version>+cuda<X.Y>; the header carries the version, as the real nccl.h does."""
    dv = f"{version}+cuda{cuda}"
    upstream = version.split("-")[0]
    major, minor, patch = upstream.split(".")
    yield (Deb("libnccl2", dv, f"NVIDIA Collective Communication Library (NCCL) Runtime "
               f"(stand-in)\nbuilt for CUDA {cuda}")
           .add(f"{LIB}/libnccl.so.{upstream}", "stand-in\n"))
    dev = Deb("libnccl-dev", dv, f"NVIDIA Collective Communication Library (NCCL) Development "
              f"Files (stand-in)\nbuilt for CUDA {cuda}", depends=[f"libnccl2 (= {dv})"])
    dev.symlinks[f"{LIB}/libnccl.so.2"] = f"libnccl.so.{upstream}"
    dev.add("/usr/include/nccl.h",
            f"#ifndef NCCL_H_\n#define NCCL_H_\n#define NCCL_MAJOR {major}\n"
            f"#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n"
            f"#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n"
            "#endif\n")
    yield dev


def dcgm_packages(version: str, epoch: int, cuda_majors: list) -> Iterator[Deb]:
    """DCGM 4 as NVIDIA's CUDA repository ships it: the core (dcgmi, nv-hostengine and its
    nvidia-dcgm unit) and one package per CUDA major that the diagnostics need. dcgmi is
    the simulator's (shipped with the driver's libraries, like the GPUs it tests)."""
    dv, upstream = f"{epoch}:{version}", version.split("-")[0]
    facts = packaging_facts.facts()["dcgm"]
    core = (Deb("datacenter-gpu-manager-4-core", dv, "NVIDIA Data Center GPU Manager core "
                "(stand-in)\ndcgmi and the host engine.")
            .add("/usr/bin/dcgmi",
                 _python_tool("dcgmi", f"main(sys.argv[1:], version={upstream!r})"), 0o755)
            .add("/usr/bin/nv-hostengine",
                 _python_tool("daemons", "hostengine(sys.argv[1:])"), 0o755)
            .add(facts["unit"]["path"], facts["unit"]["text"]))
    # the real postinst: the service account (exit 9: it exists already) and its log folder
    account, log_dir = facts["service_account"], facts["log_dir"]
    core.scripts["postinst"] = (
        # (the builder's `set -e`: the status is taken apart, as the real script's `set -uf`)
        f"rc=0; useradd -Urs /usr/sbin/nologin {account} || rc=$?\n"
        "[ $rc -eq 0 ] || [ $rc -eq 9 ] || exit $rc\n"
        f"mkdir -p {log_dir} && chown {account}:{account} {log_dir} && chmod 755 {log_dir}\n")
    yield core
    yield Deb(facts["proprietary_package"], dv, "Proprietary DCGM components common to "
              "every CUDA major (stand-in)", depends=[f"datacenter-gpu-manager-4-core (= {dv})"])
    # diagnostics only for the CUDA majors this release was built for (data/compat.yml)
    for major in [m for m in cuda_majors if compat.dcgm_supports_cuda(version, f"{m}.0").ok]:
        plugins = f"{packaging_facts.facts()['dcgm']['plugins_package']}{major}"
        yield Deb(f"datacenter-gpu-manager-4-cuda{major}", dv, "NVIDIA Data Center GPU "
                  f"Manager diagnostics for CUDA {major} (stand-in)",
                  depends=[f"datacenter-gpu-manager-4-core (= {dv})"], recommends=[plugins])
        yield Deb(plugins, dv, "Proprietary DCGM "
                  f"diagnostic plugins for CUDA {major} (stand-in)",
                  depends=[f"datacenter-gpu-manager-4-core (= {dv})"])


def container_toolkit_packages(version: str) -> Iterator[Deb]:
    dv = f"{version}-1"
    commit = hashlib.sha1(version.encode()).hexdigest()
    lib = Deb("libnvidia-container1", dv, "NVIDIA container runtime library (stand-in)")
    lib.add(f"{LIB}/libnvidia-container.so.{version}", "stand-in\n")
    lib.symlinks[f"{LIB}/libnvidia-container.so.1"] = f"libnvidia-container.so.{version}"
    yield lib
    yield (Deb("libnvidia-container-tools", dv, "NVIDIA container runtime library "
               "(command-line tools, stand-in)", depends=[f"libnvidia-container1 (>= {dv})"])
           .add("/usr/bin/nvidia-container-cli",
                _source("nvidia-container-cli.in", LIB=LIB, VERSION=version), 0o755))
    base = Deb("nvidia-container-toolkit-base", dv, "NVIDIA Container Toolkit Base (stand-in)")
    base.add("/usr/bin/nvidia-ctk", _standalone_tool("nvidia_ctk", version=version,
                                                     commit=commit), 0o755)
    base.add("/usr/bin/nvidia-container-runtime",
             "#!/bin/sh\nexec runc \"$@\"\n", 0o755)
    base.add("/etc/nvidia-container-runtime/config.toml",
             "#accept-nvidia-visible-devices-as-volume-mounts = false\n"
             "[nvidia-container-runtime]\nlog-level = \"info\"\nmode = \"auto\"\n")
    base.conffiles.append("/etc/nvidia-container-runtime/config.toml")
    yield base
    yield (Deb("nvidia-container-toolkit", dv, "NVIDIA Container toolkit (stand-in)",
               depends=[f"nvidia-container-toolkit-base (= {dv})",
                        f"libnvidia-container-tools (>= {dv})",
                        "libnvidia-container-tools (<< 2.0.0)"])
           .add("/usr/bin/nvidia-container-runtime-hook", "#!/bin/sh\nexit 0\n", 0o755))


def cuda_repo_packages() -> Iterator[Deb]:
    data = recipe()
    for branch, versions in data["drivers"].items():
        for version in versions:
            yield from driver_packages(str(branch), version, data["driver_revision"])
    for cuda, releases in data["cuda_toolkits"].items():
        for rel in releases:
            yield toolkit_package(str(cuda), rel)
    for runtime, spec in data["cudnn"].items():
        for version in spec["versions"]:
            yield from cudnn_packages(runtime, str(spec["cuda"]), version)
    for build in data["nccl"]:
        for version in build["versions"]:
            yield from nccl_packages(version, str(build["cuda"]))
    for version in data["dcgm"]["versions"]:
        yield from dcgm_packages(version, data["dcgm"]["epoch"], data["dcgm"]["cuda_majors"])
    yield nvlsm_package(data["nvlsm"]["version"])


def nvlsm_package(version: str) -> Deb:
    """NVIDIA's NVLink subnet manager (unsuffixed, date-versioned), which fabric manager's
    start script runs on an NVLink5 system."""
    facts = packaging_facts.facts()["nvlink5"]
    return (Deb("nvlsm", version, "NVIDIA NVLink Subnet Manager (stand-in)")
            .add(facts["nvlsm_binary"], _python_tool(
                "daemons", f"nvlsm(sys.argv[1:], pid_file={facts['nvlsm_pid_file']!r})"), 0o755)
            .add(facts["nvlsm_config"], "# NVLink subnet manager configuration (stand-in)\n"))


def archive_repo_packages() -> Iterator[Deb]:
    """The distribution archive's packages of the lab's kernel: its headers (what the driver
    role installs before a DKMS driver) and Canonical's own driver packages with the
    prebuilt, signed modules for it (gpuprov_module_signing: canonical-precompiled)."""
    data = recipe()["ubuntu_drivers"]
    for branch, spec in data["branches"].items():
        for rebuild, version in enumerate(spec["versions"], start=1):
            yield from ubuntu_driver_packages(str(branch), version, data["revision"],
                                              f"{data['kernel_version']}+{rebuild}")
    yield from _kernel_headers()


def _kernel_headers() -> Iterator[Deb]:
    """The lab kernel's headers. Their postinst runs the header hooks (DKMS rebuilds its
    modules for the kernel), as Ubuntu's linux-headers-<release> does."""
    release = kernel_view.KERNEL_RELEASE
    version = recipe()["ubuntu_drivers"]["kernel_version"]
    deb = Deb(f"linux-headers-{release}", version, f"Linux kernel headers for {release} "
              "(stand-in)\nWhat DKMS builds against.", section="kernel")
    deb.add(f"{kernel_view.HEADERS_DIR}/Makefile", kernel_view.HEADERS_MAKEFILE)
    deb.scripts["postinst"] = (
        'if [ "$1" = configure ] && [ -d /etc/kernel/header_postinst.d ]; then\n'
        f"  run-parts --report --exit-on-error --arg={release} /etc/kernel/header_postinst.d\n"
        "fi\n")
    yield deb
    # the meta-package an Ubuntu server installs, which follows the newest kernel's headers
    # (what gpuprov_kernel_hold holds)
    yield Deb("linux-headers-generic", "6.1.0.1", "Generic Linux kernel headers (stand-in)",
              depends=[f"linux-headers-{release} (= {version})"], section="kernel")


def container_repo_packages() -> Iterator[Deb]:
    for version in recipe()["container_toolkit"]:
        yield from container_toolkit_packages(version)


def gpu_burn_tarball(dest_dir: Path) -> Path:
    version = recipe()["gpu_burn"]["version"]
    return _tarball(dest_dir, f"gpu-burn-{version}", "gpu-burn",
                    ("Makefile", "compare.cu", "README.md"),
                    {"gpu_burn-drv.cpp": _sim_tool("gpu-burn driver", "gpu_burn", ("libcuda",))})


def nccl_tests_tarball(dest_dir: Path) -> Path:
    version = recipe()["nccl_tests"]["version"]
    return _tarball(dest_dir, f"nccl-tests-{version}", "nccl-tests", ("Makefile", "README.md"),
                    {"src/all_reduce_perf.cpp": _sim_tool("all_reduce_perf", "nccl_tests",
                                                          ("libcuda", "libnccl"))})


def nvbandwidth_tarball(dest_dir: Path) -> Path:
    version = recipe()["nvbandwidth"]["version"]
    return _tarball(dest_dir, f"nvbandwidth-{version}", "nvbandwidth",
                    ("CMakeLists.txt", "README.md"),
                    {"nvbandwidth-drv.cpp": _sim_tool("nvbandwidth", "nvbandwidth",
                                                      ("libcuda", "libnvidia-ml"))})


# the shared-library file names the stand-in tools check for, as the real ones link them
_TOOL_LIBS = {"libcuda": "libcuda.so.1", "libnccl": "libnccl.so.2",
              "libnvidia-ml": "libnvidia-ml.so.1"}


def _sim_tool(tool: str, module: str, libs: tuple[str, ...]) -> str:
    """A stand-in tool's C++ source: it fails as the real one does without its libraries,
    then hands its arguments to the simulator's `module`."""
    paths = [f"{LIB}/{_TOOL_LIBS[lib]}" for lib in libs]
    return _source("sim-tool.cpp.in", TOOL=tool, MODULE=module,
                   NEEDS=" and ".join(libs), LIBS=", ".join(f'"{p}"' for p in paths))


def _tarball(dest_dir: Path, top: str, source_dir: str, names: tuple[str, ...],
             generated: dict[str, str] | None = None) -> Path:
    """A reproducible source tarball (fixed mtimes, gzip without a timestamp): `names` from
    the source directory, `generated` as given."""
    members = {name: _source(f"{source_dir}/{name}") for name in names}
    members.update(generated or {})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 1733011200
            tar.addfile(info, io.BytesIO(data))
    dest = dest_dir / f"{top}.tar.gz"
    with open(dest, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh,
                                               mtime=0) as gz:
        gz.write(raw.getvalue())
    return dest


def conda_installer(dest_dir: Path) -> Path:
    """Miniforge3-<version>-Linux-x86_64.sh: a batch installer of the stand-in conda."""
    version = recipe()["conda_installer"]["version"]
    dest = dest_dir / f"Miniforge3-{version}-Linux-x86_64.sh"
    dest.write_text(_source("miniforge-installer.sh.in", VERSION=version)
                    + _standalone_tool("conda", version=version.split("-")[0]))
    return dest
