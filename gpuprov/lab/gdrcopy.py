"""The lab's GDRCopy: stand-ins for NVIDIA's three package files, which the gdrcopy role
downloads from the mirror's `files/` (with SHA256SUMS) as it would from NVIDIA's redist
directory.

What they do is what the real v2.6 packages do (NVIDIA/gdrcopy v2.6 `packages/`,
data/packaging.yml `gdrcopy`), on the lab's kernel stand-ins:

- `gdrdrv-dkms`: the module's DKMS source (`/usr/src/gdrdrv-<v>/dkms.conf`), built and
  installed by the lab's `dkms` for every kernel with headers, and the init script
  `/etc/init.d/gdrdrv`, started by the postinst as debhelper's snippet does
  (`invoke-rc.d gdrdrv start || exit 1`). Its start, as the real script's: refuse unless
  lsmod lists nvidia, modprobe gdrdrv, make the device node. The node here is a plain
  file (a container's devices are the host's): what `gdrcopy_sanity` looks for.
- `libgdrapi`: the library's file.
- `gdrcopy-tests`: `gdrcopy_sanity`, printing the real suite's report: every v2.6 test
  passed where the device and the module are there, else every test failed with the
  real run's words (tests/fixtures/gdrcopy/, on an H100 without gdrdrv): its stdout exactly;
  on stderr one gdr_open line per test where the real run printed 38 for its 36 tests (a
  few tests open twice; no check reads stderr's count).

Unlike the real gdrdrv-dkms, the stand-in does not depend on the `dkms` package (the lab's
dkms is a stand-in file, as for the lab's nvidia-dkms), and its build does not look for
the NVIDIA driver's sources (the role refuses a host without them before installing).
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from pathlib import Path

from gpuprov import packaging_facts
from gpuprov.lab import kernel_view
from gpuprov.lab.debs import Deb
from gpuprov.resources import data_file, load_yaml

FACTS = packaging_facts.facts()["gdrcopy"]
DEVICE = FACTS["device"]
SERVICE = FACTS["service"]
MODULE = FACTS["module"]
SANITY = FACTS["sanity_command"]
_RECIPE = load_yaml("lab/standins.yml")["gdrcopy"]
VERSION = _RECIPE["version"]
TESTS_FILE = "lab/sources/gdrcopy/tests-v2.6.txt"
LIB = "/usr/lib/x86_64-linux-gnu"


@functools.cache
def test_names() -> list[str]:
    text = data_file(TESTS_FILE).read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def file_name(package: str) -> str:
    """NVIDIA's file name for a package: `<package>_<v>-<rev>_amd64.<platform>[+cuda<X.Y>].deb`."""
    tail = f"+cuda{_RECIPE['cuda']}" if package == "gdrcopy-tests" else ""
    return (f"{package}_{VERSION}-{_RECIPE['revision']}_amd64.{_RECIPE['platform']}{tail}.deb")


# the real gdrdrv.init's start and stop (v2.6), on the lab's lsmod and modprobe; an LSB
# header as the real one has, so update-rc.d and systemd's SysV generator take it. Each step
# of the real start() ends `&& log_success_msg || log_failure_msg` and takes that as its
# status, and lsb-base's log_failure_msg returns 0 (`log_end_msg 1 || true`): a step that
# fails is reported and the next one runs, and the script exits 0 (packaging.yml gdrcopy
# init_exits_zero). The device node needs the module's major in /proc/devices: no module,
# no node.
_INIT_SCRIPT = f"""#!/bin/bash
# gpuprov lab: GDRCopy's init script (see gpuprov/lab/gdrcopy.py)
### BEGIN INIT INFO
# Provides:       gdrcopy
# Required-Start:
# Required-Stop:
# Default-Start: 2 3 4 5
# Default-Stop: 0 1 6
# Description: GDRcopy kernel-mode driver init script
### END INIT INFO
failed() {{ echo " failed!"; }}
start() {{
    echo -n "Checking required modules: "
    if ! {kernel_view.LSMOD} | grep -qw nvidia; then
        echo "module nvidia is not loaded"; failed
    fi
    echo
    if {kernel_view.LSMOD} | grep -qw {MODULE}; then
        echo "module already loaded"
    else
        echo -n "Loading {MODULE} kernel module: "
        {kernel_view.MODPROBE} {MODULE} || failed
        echo
    fi
    echo -n "Initializing GDRcopy /dev entries: "
    rm -f {DEVICE}
    {{ {kernel_view.LSMOD} | grep -qw {MODULE} && : > {DEVICE} && chmod 666 {DEVICE}; }} || failed
    echo
}}
stop() {{
    rm -f {kernel_view.LOADED_MODULES_DIR}/{MODULE} {DEVICE}
}}
case "$1" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    status) [ -e {DEVICE} ] && {kernel_view.LSMOD} | grep -qw {MODULE} || exit 3 ;;
    *) echo "Usage: $0 {{start|stop|restart|status}}"; exit 2 ;;
esac
exit 0
"""

# gdrcopy_sanity's report (tests/testsuites/testsuite.cpp run_tests at v2.6): every test
# passes where the module is loaded and its device made, else each fails at gdr_open
_SANITY = f"""#!/usr/bin/python3
# gpuprov lab: GDRCopy's gdrcopy_sanity (see gpuprov/lab/gdrcopy.py)
import os, subprocess, sys
TESTS = {test_names()!r}
if sys.argv[1:] == ["-l"]:
    print("List of all available tests:")
    for t in TESTS:
        print("    " + t)
    sys.exit(0)
def loaded():
    # the device made and the module listed (which the lab lists with nvidia only)
    if not os.path.exists("{DEVICE}"):
        return False
    lsmod = subprocess.run(["{kernel_view.LSMOD}"], capture_output=True, text=True).stdout
    return "{MODULE}" in lsmod.split()
if loaded():
    print(f"Total: {{len(TESTS)}}, Passed: {{len(TESTS)}}, Failed: 0, Waived: 0")
    sys.exit(0)
for _ in TESTS:
    print("gdr_open error: Is gdrdrv driver installed and loaded?", file=sys.stderr)
print(f"Total: {{len(TESTS)}}, Passed: 0, Failed: {{len(TESTS)}}, Waived: 0")
print()
print("List of failed tests:")
for t in TESTS:
    print("    " + t)
print("Error: Encountered an error or a test failure with status=1", file=sys.stderr)
sys.exit(1)
"""


def debs() -> list[Deb]:
    v = f"{VERSION}-{_RECIPE['revision']}"
    lib = Deb("libgdrapi", v, "A low-latency GPU memory copy library (stand-in)",
              section="libs").add(f"{LIB}/libgdrapi.so.{VERSION}", "stand-in\n")
    lib.symlinks[f"{LIB}/libgdrapi.so.2"] = f"libgdrapi.so.{VERSION}"
    drv = Deb("gdrdrv-dkms", v, "gdrdrv driver in DKMS format (stand-in)", section="misc")
    drv.add(f"/usr/src/{MODULE}-{VERSION}/dkms.conf",
            f'PACKAGE_NAME="{MODULE}"\nPACKAGE_VERSION="{VERSION}"\n'
            f'BUILT_MODULE_NAME[0]="{MODULE}"\nAUTOINSTALL="yes"\n')
    drv.add(f"/etc/init.d/{SERVICE}", _INIT_SCRIPT, 0o755)
    drv.scripts["postinst"] = (
        # the dkms package's common.postinst: build and install for each kernel with headers
        f"dkms add -m {MODULE} -v {VERSION} || true\n"
        "for dep in /lib/modules/*/modules.dep; do\n"
        "  [ -e \"$dep\" ] || continue; k=${dep%/modules.dep}; k=${k##*/}\n"
        "  [ -d \"/lib/modules/$k/build\" ] || continue\n"
        f"  dkms install -m {MODULE} -v {VERSION} -k \"$k\" || exit $?\n"
        "done\n"
        # debhelper's postinst-init (compat 9)
        "if [ \"$1\" = configure ] && [ -x /etc/init.d/gdrdrv ]; then\n"
        f"  update-rc.d {SERVICE} defaults >/dev/null\n"
        f"  invoke-rc.d {SERVICE} start || exit 1\n"
        "fi\n")
    drv.scripts["prerm"] = (f"invoke-rc.d {SERVICE} stop || true\n"
                            f"dkms remove -m {MODULE} -v {VERSION} --all || true\n")
    drv.scripts["postrm"] = (f"[ \"$1\" = purge ] && update-rc.d {SERVICE} remove >/dev/null"
                             " || true\n")
    tests = Deb("gdrcopy-tests", v, "Test utilities for GDRCopy (stand-in)", section="utils",
                depends=[f"libgdrapi (>= {v})"]).add(SANITY, _SANITY, 0o755)
    return [lib, drv, tests]


def build_files(files_dir: Path, digest_file: Path) -> None:
    """The three package files in the mirror's `files/`, under NVIDIA's names; built again
    only when what they install changed (a rebuilt .deb has a new sha256, and a node that
    has the old one would download it again)."""
    debs_now = debs()
    digest = hashlib.sha256(repr([(d.name, d.version, sorted(d.files.items()), d.scripts,
                                   d.symlinks, d.depends) for d in debs_now]).encode()
                            ).hexdigest()
    names = [files_dir / file_name(d.name) for d in debs_now]
    if all(p.is_file() for p in names) and digest_file.is_file() and \
            digest_file.read_text().strip() == digest:
        return
    with tempfile.TemporaryDirectory() as scratch:
        for deb, target in zip(debs_now, names, strict=True):
            deb.build(Path(scratch), Path(scratch) / "out").replace(target)
    digest_file.write_text(digest + "\n")
