"""The lab node's kernel-module tools: `dkms`, `modinfo` and loading the nvidia module.

Self-contained (gpuprov/lab/kernel_modules.py appends the node's paths to make each tool),
and every path is under `root`, so the unit tests run them in a temporary directory.

The "module" a build leaves is a small text file: its version, and the signer's name and
certificate digest when DKMS's framework.conf(.d) names a signing key and certificate
(DKMS 3 signs what it builds then). Loading refuses, under Secure Boot, a module whose
signing certificate neither the kernel's builtin keyring holds nor the firmware has enrolled, in the
kernel's words. A packaged module (Canonical's prebuilt ones, under kernel/) is found when
DKMS has none in updates/.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys

ARCH = "x86_64"
# dkms's exit status when make fails; the lab's fault `dkms-build-fails` leaves the marker
BUILD_FAILED = 10
BUILD_FAILS = "/var/lib/gpuprov-lab/dkms-build-fails"
SIGNING_SETTING = re.compile(r"""^\s*(mok_signing_key|mok_certificate)=["']?([^"'\n]*)""", re.M)


class Node:
    """Where a node keeps its kernels, DKMS tree and firmware state (all under `root`)."""

    def __init__(self, root: str, kernel_release_command: str, secure_boot_file: str,
                 enrolled_file: str, loaded_file: str, taint_file: str = "",
                 builtin_keys_file: str = ""):
        self.root = root
        self.kernel_release_command = kernel_release_command
        self.secure_boot_file, self.enrolled_file = secure_boot_file, enrolled_file
        self.builtin_keys_file = builtin_keys_file
        self.loaded_file, self.taint_file = loaded_file, taint_file

    def path(self, absolute: str) -> str:
        return os.path.join(self.root, absolute.lstrip("/"))

    def running(self) -> str:
        return subprocess.run(self.kernel_release_command, shell=True, capture_output=True,
                              text=True).stdout.strip()

    def kernels(self) -> list[str]:
        """The installed kernels: /lib/modules/K with a modules.dep, as their packages leave."""
        return sorted(os.path.basename(os.path.dirname(p))
                      for p in glob.glob(self.path("/lib/modules/*/modules.dep")))

    def installed_module(self, kernel: str, module: str) -> str:
        return self.path(f"/lib/modules/{kernel}/updates/dkms/{module}.ko")

    def module_file(self, kernel: str, module: str) -> str:
        """The file modprobe loads: DKMS's in updates/ first (Ubuntu's depmod.conf searches
        updates before the kernel's tree), then a packaged one under kernel/ (Canonical's
        prebuilt modules: kernel/nvidia-<branch>srv/)."""
        dkms = self.installed_module(kernel, module)
        if os.path.exists(dkms):
            return dkms
        packaged = sorted(glob.glob(self.path(f"/lib/modules/{kernel}/kernel/*/{module}.ko")))
        return packaged[0] if packaged else dkms

    def trusted_keys(self) -> list[str]:
        """Certificate digests the kernel accepts a signature from: its builtin keys and
        the MOKs the firmware enrolled."""
        return (_read(self.path(self.enrolled_file)).split()
                + (_read(self.path(self.builtin_keys_file)).split()
                   if self.builtin_keys_file else []))

    def built_module(self, module: str, version: str, kernel: str) -> str:
        return self.path(f"/var/lib/dkms/{module}/{version}/{kernel}/{ARCH}/module/{module}.ko")

    def tree(self, module: str = "*", version: str = "*") -> str:
        return self.path(f"/var/lib/dkms/{module}/{version}")


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def read_module(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return dict(line.rstrip("\n").split("=", 1) for line in fh if "=" in line)
    except OSError:
        return None


def signer_name(der: bytes) -> str:
    """What modinfo names as a module's signer: the first commonName of the signing
    certificate's issuer, which the module's PKCS#7 signer info carries (kmod
    libkmod/libkmod-signature.c, fill_pkcs7). In a certificate the issuer comes before the
    subject, so it is the first commonName of all (a self-signed key's is its subject's)."""
    at = der.find(bytes([0x06, 0x03, 0x55, 0x04, 0x03]))     # OID 2.5.4.3
    if at < 0:
        return ""
    length = der[at + 6]
    return der[at + 7:at + 7 + length].decode("utf-8", "replace")


class Dkms:
    def __init__(self, node: Node):
        self.node = node

    def signing(self) -> tuple[str, str]:
        """(signer, certificate sha256) DKMS signs with, or ("", "") when it does not."""
        conf = {}
        paths = [self.node.path("/etc/dkms/framework.conf"),
                 *sorted(glob.glob(self.node.path("/etc/dkms/framework.conf.d/*.conf")))]
        for path in paths:
            try:
                with open(path) as fh:
                    conf.update(SIGNING_SETTING.findall(fh.read()))
            except OSError:
                continue
        key, cert = conf.get("mok_signing_key"), conf.get("mok_certificate")
        if not (key and cert and os.path.isfile(self.node.path(key))
                and os.path.isfile(self.node.path(cert))):
            return "", ""
        with open(self.node.path(cert), "rb") as fh:
            der = fh.read()
        print(f"Signing module with {key}")
        return signer_name(der), hashlib.sha256(der).hexdigest()

    def add(self, module: str, version: str) -> None:
        src = self.node.path(f"/usr/src/{module}-{version}")
        if not os.path.isfile(f"{src}/dkms.conf"):
            sys.exit("Error! Could not find module source directory.\n"
                     f"Directory: /usr/src/{module}-{version} does not exist.")
        os.makedirs(self.node.tree(module, version), exist_ok=True)
        link = f"{self.node.tree(module, version)}/source"
        if not os.path.islink(link):
            os.symlink(src, link)
            print(f"Creating symlink /var/lib/dkms/{module}/{version}/source -> "
                  f"/usr/src/{module}-{version}")

    def build(self, module: str, version: str, kernel: str, force: bool) -> None:
        if not os.path.isdir(self.node.tree(module, version)):
            self.add(module, version)
        target = self.node.built_module(module, version, kernel)
        if os.path.exists(target) and not force:
            print(f"Module {module}/{version} already built for kernel {kernel} ({ARCH}).")
            return
        if not os.path.isdir(self.node.path(f"/lib/modules/{kernel}/build")):
            sys.exit(f"Error! Your kernel headers for kernel {kernel} cannot be found at "
                     f"/lib/modules/{kernel}/build or /lib/modules/{kernel}/source.")
        if os.path.exists(self.node.path(BUILD_FAILS)):
            # the compiler failed: dkms's words and status (open-gpu-kernel-modules#526,
            # pop-os/pop#3811: dpkg then reports "exit status 10" from the postinst)
            print("Building module(s)...(bad exit status: 2)")
            print(f"Error! Bad return status for module build on kernel: {kernel} ({ARCH})\n"
                  f"Consult /var/lib/dkms/{module}/{version}/build/make.log for more "
                  "information.", file=sys.stderr)
            sys.exit(BUILD_FAILED)
        print("Building module(s)... done.")
        signer, digest = self.signing()
        # the license its sources declare (MODULE_LICENSE in nv.c), as the kernel's build
        # records it for modinfo
        declared = re.search(r'MODULE_LICENSE\("([^"]*)"\)',
                             _read(self.node.path(f"/usr/src/{module}-{version}/{module}/nv.c")))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as fh:
            fh.write(f"version={version}\nsigner={signer}\nsig_sha256={digest}\n"
                     + (f"license={declared[1]}\n" if declared else ""))

    def install(self, module: str, version: str, kernel: str, force: bool) -> None:
        self.build(module, version, kernel, force)
        dest = self.node.installed_module(kernel, module)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(self.node.built_module(module, version, kernel), dest)
        print(f"Installing /lib/modules/{kernel}/updates/dkms/{module}.ko")

    def built_kernels(self, module: str, version: str) -> list[str]:
        base = self.node.tree(module, version)
        return sorted(k for k in os.listdir(base) if k != "source") if os.path.isdir(base) else []

    def remove(self, module: str, version: str, kernels: list[str]) -> None:
        for kernel in kernels:
            installed = read_module(self.node.installed_module(kernel, module))
            if installed and installed.get("version") == version:
                os.remove(self.node.installed_module(kernel, module))
            shutil.rmtree(f"{self.node.tree(module, version)}/{kernel}", ignore_errors=True)
        if not self.built_kernels(module, version):
            shutil.rmtree(self.node.tree(module, version), ignore_errors=True)
            print(f"Deleting module {module}/{version} completely from the DKMS tree.")

    def status(self, module: str | None, version: str | None, kernel: str | None) -> None:
        for base in sorted(glob.glob(self.node.tree())):
            m, v = base.split("/")[-2:]
            if (module and m != module) or (version and v != version):
                continue
            kernels = self.built_kernels(m, v)
            if not kernels:
                print(f"{m}/{v}: added")
            for k in kernels:
                if kernel and k != kernel:
                    continue
                installed = read_module(self.node.installed_module(k, m))
                state = "installed" if installed and installed.get("version") == v else "built"
                print(f"{m}/{v}, {k}, {ARCH}: {state}")

    def autoinstall(self, kernel: str, force: bool) -> None:
        for source in sorted(glob.glob(f"{self.node.tree()}/source")):
            m, v = source.split("/")[-3:-1]
            if force or not os.path.exists(self.node.built_module(m, v, kernel)):
                self.install(m, v, kernel, force)


def _options(argv: list[str]) -> tuple[dict, list[str], set[str]]:
    values: dict[str, str] = {}
    flags, args = set(), []
    it = iter(argv)
    for arg in it:
        if arg in ("-m", "-v", "-k"):
            values[arg] = next(it, "")
        elif arg.startswith("--"):
            flags.add(arg)
        else:
            args.append(arg)
    return values, args, flags


def dkms_main(argv: list[str], **paths: str) -> int:
    node = Node(**paths)
    dkms = Dkms(node)
    if not argv:
        sys.exit("Error! No action was specified.")
    action = argv[0]
    values, args, flags = _options(argv[1:])
    module, version = values.get("-m"), values.get("-v")
    if args and "/" in args[0]:
        module, version = args[0].split("/", 1)
    kernel, force = values.get("-k") or node.running(), "--force" in flags
    if action == "status":
        dkms.status(module, version, values.get("-k"))
    elif action == "add":
        dkms.add(module, version)
    elif action == "build":
        dkms.build(module, version, kernel, force)
    elif action == "install":
        dkms.install(module, version, kernel, force)
    elif action == "autoinstall":
        dkms.autoinstall(kernel, force)
    elif action == "remove":
        every = dkms.built_kernels(module, version)
        dkms.remove(module, version, every if "--all" in flags else [kernel])
    else:
        sys.exit(f"gpuprov lab: dkms {action} is not simulated")
    return 0


def modinfo_main(argv: list[str], **paths: str) -> int:
    """`modinfo [-k KERNEL] [-F FIELD] MODULE` of an installed DKMS module."""
    node = Node(**paths)
    values: dict[str, str] = {}
    names = []
    it = iter(argv)
    for arg in it:
        if arg in ("-k", "-F"):
            values[arg] = next(it, "")
        else:
            names.append(arg)
    kernel, name = values.get("-k") or node.running(), (names or [""])[0]
    path = node.module_file(kernel, name)
    module = read_module(path)
    if module is None:
        print(f"modinfo: ERROR: Module {name} not found.", file=sys.stderr)
        return 1
    if "-F" in values:
        if module.get(values["-F"]):
            print(module[values["-F"]])
        return 0
    print(f"{'filename:':<16}/{os.path.relpath(path, node.root)}")
    for key in ("version", "license", "signer"):
        if key in module or key != "license":
            print(f"{key + ':':<16}{module.get(key, '')}")
    return 0


def modprobe_nvidia_main(argv: list[str], **paths: str) -> int:
    """Load the nvidia module of the running kernel when none is loaded (at boot, and from
    the driver package's postinst as modprobe does on a fresh server)."""
    node = Node(**paths)
    loaded = node.path(node.loaded_file)
    if _read(loaded).strip():
        return 0
    kernel = node.running()
    module = read_module(node.module_file(kernel, "nvidia"))
    if module is None:
        print(f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{kernel}",
              file=sys.stderr)
        return 1
    secure_boot = _read(node.path(node.secure_boot_file)).strip() == "enabled"
    if secure_boot and module.get("sig_sha256", "") not in node.trusted_keys():
        print("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
              file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(loaded), exist_ok=True)
    with open(loaded, "w") as fh:
        fh.write(module["version"] + "\n")
    if node.taint_file:
        # what loading a DKMS-built module taints a kernel with: O (out-of-tree, 4096), and
        # E (unsigned, 8192) when nothing signed it
        taint = node.path(node.taint_file)
        value = int(_read(taint).strip() or 0) | 4096 | (0 if module.get("signer") else 8192)
        with open(taint, "w") as fh:
            fh.write(f"{value}\n")
    return 0
