"""What a lab node's kernel would show the validator: loaded modules, PCI devices, a kernel log.

A container shares the controller's kernel: `lsmod` finds no /proc/modules, `lspci`
sees no NVIDIA device and `dmesg` prints the controller's ring buffer. Each node gets
small tools that print the real formats from the node's simulated state instead, and
the lab inventory points the validator at them (`gpuprov_validate_*_command`), as it
points the driver role at the simulated sysfs:

- lsmod: the NVIDIA modules once a driver module is "loaded" (its version file in /run),
  nouveau while no modprobe.d file blacklists it (as on a fresh server; the lab has no
  initramfs, so the blacklist takes effect at once);
- ibstat and the ports' sysfs counters (`grep -sH .` of them), from the described NIC ports;
- the NVSwitches' procfs `information` (`grep -sH .` of it) while the driver is loaded;
- lspci: `lspci -nn -d 10de:` lines for the simulated sysfs functions (a GPU that no
  longer enumerates to the driver stays on the bus, as one that fell off NVML does), and
  `lspci -vvv` of every simulated function with the switch ports' ACS control; setpci
  reading and writing that register, and modprobe loading nvidia-peermem;
- the kernel release (`uname -r`) and its headers, and mokutil answering from the
  simulated firmware's Secure Boot state and enrolled keys;
- the kernel log: /var/log/kern.log as rsyslog writes it, with a `Linux version` line
  appended at every boot (a unit the node's systemd runs), so the log spans boots as a
  real one does; the lab's kernel faults append the catalogs' example lines to it.
"""

from __future__ import annotations

import hashlib
import shlex

from gpuprov import packaging_facts
from gpuprov.lab import pci
from gpuprov.lab.paths import NODE_LAB_DIR, boot_unit, enabled_link
from gpuprov.lab.sim import node as sim_node
from gpuprov.parsers.ib_counters import ERROR_COUNTERS
from gpuprov.parsers.ibstat import IBSTAT_COMMAND
from gpuprov.parsers.nvswitch_info import UNREAD as NVSWITCH_UNREAD

LSMOD = "/usr/local/sbin/gpuprov-lab-lsmod"
LSPCI = "/usr/local/sbin/gpuprov-lab-lspci"
LSPCI_VVV = "/usr/local/sbin/gpuprov-lab-lspci-vvv"
SETPCI = "/usr/local/sbin/gpuprov-lab-setpci"
MODPROBE = "/usr/local/sbin/gpuprov-lab-modprobe"
LOADED_MODULES_DIR = sim_node.LOADED_MODULES_DIR
# present: the node's kernel has inbox RDMA only (no MLNX/DOCA-OFED), so its nvidia-peermem
# was built without the peer-memory symbols and cannot load (fault inbox-rdma)
INBOX_RDMA = f"{NODE_LAB_DIR}/inbox-rdma"
# The simulated kernel's release, as `uname -r` would print it (the container's own
# `uname -r` is the controller's).
KERNEL_RELEASE = "6.1.0-gpuprov-lab"
# GDRCopy's module (data/packaging.yml `gdrcopy`) as DKMS installs it for the running kernel
GDRDRV = packaging_facts.facts()["gdrcopy"]["module"]
GDRDRV_BUILT = f"/lib/modules/{KERNEL_RELEASE}/updates/dkms/{GDRDRV}.ko"
IBSTAT = "/usr/local/sbin/gpuprov-lab-ibstat"
IB_COUNTERS = "/usr/local/sbin/gpuprov-lab-ib-counters"
IB_BOARD_ID = "/usr/local/sbin/gpuprov-lab-ib-board-id"
IB_BRIDGES = "/usr/local/sbin/gpuprov-lab-ib-bridges"
# the validator's ibstat command on a lab node: the real one (parsers/ibstat.py
# IBSTAT_COMMAND), with the lab's ibstat for `ibstat` and, where that is absent (fault
# ibstat-absent: no infiniband-diags), the ports' sysfs attributes rendered under the lab's
# directory from the description, read by the real fallback
IBSTAT_OR_SYSFS = "/usr/local/sbin/gpuprov-lab-ibstat-or-sysfs"
IB_SYSFS_ROOT = f"{NODE_LAB_DIR}/sys/class/infiniband"
NVSWITCH_INFO = "/usr/local/sbin/gpuprov-lab-nvswitch-info"

_LSMOD_SCRIPT = f"""#!/bin/sh
# gpuprov lab: lsmod of the simulated kernel (see gpuprov/lab/kernel_view.py)
echo "Module                  Size  Used by"
if [ -s {sim_node.MODULE_VERSION} ]; then
  echo "nvidia_uvm           1437696  0"
  echo "nvidia_modeset       1306624  0"
  echo "nvidia              8814592  2 nvidia_uvm,nvidia_modeset"
fi
grep -qsE '^[[:space:]]*blacklist[[:space:]]+nouveau' /etc/modprobe.d/*.conf \\
  || echo "nouveau              2797568  0"
if [ -s {sim_node.MODULE_VERSION} ] && [ -e {LOADED_MODULES_DIR}/nvidia_peermem ]; then
  echo "nvidia_peermem         16384  0"
fi
if [ -s {sim_node.MODULE_VERSION} ] && [ -e {LOADED_MODULES_DIR}/{GDRDRV} ]; then
  echo "{GDRDRV}                 32768  0"
fi
if [ -e {LOADED_MODULES_DIR}/ib_umad ]; then
  echo "ib_umad                 45056  0"
fi
if [ -e {LOADED_MODULES_DIR}/mlx5_ib ]; then
  echo "mlx5_ib               528384  0"
fi
"""

# `modprobe nvidia-peermem`: the module ships with the driver (NCCL's troubleshooting guide),
# so it loads where the nvidia module is loaded; elsewhere kmod's "Module … not found in
# directory …" (as users quote it; not checked against kmod's source here). On a kernel with
# inbox RDMA its init returns -EINVAL (open-gpu-kernel-modules nvidia-peermem.c without
# NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT), which kmod's modprobe reports as
# "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument" (kmod
# tools/modprobe.c: ERR("could not insert '%s': %s\n", name, strerror(-err))). `modprobe gdrdrv`
# (GDRCopy's, from the gdrcopy role's packages): DKMS's build for the running kernel, loaded
# where the nvidia module is (it needs nvidia's P2P symbols). The lsmod lines' sizes are the
# lab's own figures: no check reads them.
_MODPROBE_SCRIPT = f"""#!/bin/sh
# gpuprov lab: modprobe of the simulated kernel (see gpuprov/lab/kernel_view.py)
name=$(echo "$1" | tr - _)
case "$name" in
  nvidia_peermem)
    if [ -e {INBOX_RDMA} ]; then
      echo "modprobe: ERROR: could not insert '$name': Invalid argument" >&2
      exit 1
    elif [ -s {sim_node.MODULE_VERSION} ]; then
      mkdir -p {LOADED_MODULES_DIR} && touch {LOADED_MODULES_DIR}/$name
    else
      echo "modprobe: FATAL: Module $1 not found in directory /lib/modules/{KERNEL_RELEASE}" >&2
      exit 1
    fi ;;
  {GDRDRV})
    if [ -s {sim_node.MODULE_VERSION} ] && [ -e {GDRDRV_BUILT} ]; then
      mkdir -p {LOADED_MODULES_DIR} && touch {LOADED_MODULES_DIR}/$name
    elif [ -e {GDRDRV_BUILT} ]; then
      # the lab's own words: its nvidia module is loaded by the driver's unit, not modprobe
      echo "gpuprov lab: modprobe $1: its dependency, the nvidia module, is not loaded" >&2
      exit 1
    else
      echo "modprobe: FATAL: Module $1 not found in directory /lib/modules/{KERNEL_RELEASE}" >&2
      exit 1
    fi ;;
  ib_umad|mlx5_ib)
    # in-tree (the kernel's InfiniBand user MAD access; ConnectX's InfiniBand function, in
    # the lab's kernel as in a generic one's modules-extra): loadable, not loaded at boot
    mkdir -p {LOADED_MODULES_DIR} && touch {LOADED_MODULES_DIR}/$name ;;
  *) echo "gpuprov lab: modprobe $1 is not simulated" >&2; exit 1 ;;
esac
"""

# `lspci -vvv` of the simulated functions, in the lines gpud's capture of an HGX H100 has for
# them (tests/fixtures/lspci-vvv/): a bridge's bus range and its ACS capability (the PEX890xx
# ports' ACSCap; ACSCtl from the lab's register file, bits as pciutils' ls-ecaps.c reads them),
# an NVSwitch's Device Serial Number
_LSPCI_VVV_SCRIPT = f"""#!/usr/bin/python3
# gpuprov lab: `lspci -vvv` of the simulated PCI functions (see gpuprov/lab/kernel_view.py)
import os
DEVICES = "{pci.DEVICES_DIR}"
NAMES = {pci.NAMES!r}
CLASSES = {{"0x0302": "3D controller", "0x0680": "Bridge", "0x0604": "PCI bridge",
            "0x0207": "Infiniband controller", "0x0200": "Ethernet controller"}}
FEATURES = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
            "DirectTrans")
def read(dev, name):
    with open(os.path.join(DEVICES, dev, name)) as fh:
        return fh.read().strip()
def flags(word):
    return " ".join(f + ("+" if word >> bit & 1 else "-") for bit, f in enumerate(FEATURES))
for dev in sorted(os.listdir(DEVICES)):
    vendor, device, cls = read(dev, "vendor"), read(dev, "device"), read(dev, "class")
    name = NAMES.get(f"{{vendor}}:{{device}}", f"NVIDIA Corporation Device {{device[2:]}} (rev a1)")
    bus = dev.split(":")[1]
    if cls.startswith("0x0604"):
        print(f"{{dev[5:]}} PCI bridge: {{name}} (prog-if 00 [Normal decode])")
        sec = int(read(dev, "secondary_bus_number"))
        sub = int(read(dev, "subordinate_bus_number"))
        print(f"\tBus: primary={{bus}}, secondary={{sec:02x}}, subordinate={{sub:02x}}, "
              "sec-latency=0")
        if os.path.exists(os.path.join(DEVICES, dev, "{pci.ACS_CTL_FILE}")):
            print("\tCapabilities: [170 v1] Access Control Services")
            print(f"\t\tACSCap:\t{{flags(0x5f)}}")
            print(f"\t\tACSCtl:\t{{flags(int(read(dev, '{pci.ACS_CTL_FILE}'), 16))}}")
        print("\tKernel driver in use: pcieport")
    else:
        print(f"{{dev[5:]}} {{CLASSES.get(cls[:6], 'Unclassified device')}}: {{name}}")
        if os.path.exists(os.path.join(DEVICES, dev, "{pci.DSN_FILE}")):
            print(f"\tCapabilities: [2f0 v1] Device Serial Number {{read(dev, '{pci.DSN_FILE}')}}")
    print()
"""

# setpci's ACS control register (`ECAP_ACS+0x6.w`, read or `=value`) on the simulated
# functions, with pciutils' words (setpci.c): `-v` traces the slot, capability and address; a
# function without ACS dies "Instance #0 of Extended capability 000d not found …", exit 1
_SETPCI_SCRIPT = f"""#!/bin/sh
# gpuprov lab: setpci's ECAP_ACS+0x6.w of the simulated functions (see gpuprov/lab/kernel_view.py)
verbose=0
[ "$1" = "-v" ] && {{ verbose=1; shift; }}
[ "$1" = "-s" ] || {{ echo "gpuprov lab: setpci $* is not simulated" >&2; exit 1; }}
slot=$2; op=$3
case "$slot" in ????:*) ;; *) slot=0000:$slot ;; esac
dev={pci.DEVICES_DIR}/$slot
if [ ! -d "$dev" ]; then
  echo "setpci: Warning: No devices selected for operation group 1." >&2; exit 0
fi
[ $verbose = 1 ] && printf '%s ' "$slot"
if [ ! -e "$dev/{pci.ACS_CTL_FILE}" ]; then
  echo "setpci: $slot: Instance #0 of Extended capability 000d not found -" \\
    "there are no capabilities with that id." >&2
  exit 1
fi
case "$op" in
  ECAP_ACS+0x6.w)
    [ $verbose = 1 ] && printf '(ecap 000d @170) @176 = '
    cat "$dev/{pci.ACS_CTL_FILE}" ;;
  ECAP_ACS+0x6.w=*)
    value=$(printf '%04x' "0x${{op#*=}}")
    echo "$value" > "$dev/{pci.ACS_CTL_FILE}"
    [ $verbose = 1 ] && echo "(ecap 000d @170) @176 $value" ;;
  *) echo "gpuprov lab: setpci $op is not simulated" >&2; exit 1 ;;
esac
exit 0
"""

_LSPCI_SCRIPT = f"""#!/bin/sh
# gpuprov lab: `lspci -nn -d 10de:` of the simulated sysfs (see gpuprov/lab/kernel_view.py)
for dev in {pci.DEVICES_DIR}/*; do
  [ -d "$dev" ] || continue
  [ "$(cat "$dev/vendor")" = "{pci.NVIDIA_VENDOR}" ] || continue
  id=$(sed 's/^0x//' "$dev/device"); class=$(cat "$dev/class")
  addr=${{dev##*/}}; addr=${{addr#0000:}}
  case "$class" in
    0x0302*) echo "$addr 3D controller [0302]: NVIDIA Corporation Device [10de:$id] (rev a1)" ;;
    *) echo "$addr Bridge [0680]: NVIDIA Corporation Device [10de:$id] (rev a1)" ;;
  esac
done
"""


# the node's RDMA ports as its kernel lists them: the compute NICs, and an HGX B200's NVLink5
# bridges (kinds.bridge_ports) only with mlx5_ib loaded: without it they are PCI functions
# and no InfiniBand device (data/packaging.yml nvlink5)
_RDMA_PORTS = f"""
def rdma_ports(hw):
    import os
    bridges = ((hw.get("bridge_ports") or [])
               if os.path.exists("{LOADED_MODULES_DIR}/mlx5_ib") else [])
    return (hw.get("nic_ports") or []) + bridges
"""

_IBSTAT_SCRIPT = f"""#!/usr/bin/python3
# gpuprov lab: `ibstat` of the node's described NIC ports (see gpuprov/lab/kernel_view.py)
import yaml
{_RDMA_PORTS}
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
for p in rdma_ports(hw):
    print(f"CA '{{p['ca']}}'")
    print(f"\\tCA type: {{p['ca_type']}}\\n\\tNumber of ports: 1")
    print(f"\\tFirmware version: {{p['firmware']}}\\n\\tHardware version: 0")
    if p.get("node_guid"):
        print(f"\\tNode GUID: {{p['node_guid']}}")
    print(f"\\tPort {{p['port']}}:")
    print(f"\\t\\tState: {{p['state']}}\\n\\t\\tPhysical state: {{p['physical_state']}}")
    print(f"\\t\\tRate: {{p['rate_gbps']:g}}\\n\\t\\tBase lid: 0\\n\\t\\tLMC: 0")
    print(f"\\t\\tLink layer: {{p['link_layer']}}")
"""

# `grep -sH . /sys/class/infiniband/*/ports/*/counters/*` of the described ports: grep's
# `path:value` lines, each error counter from the port's `counters` (0 unless a fault grew
# it), and grep's exit status 2 where no file matches (a node without RDMA ports)
_IB_COUNTERS_SCRIPT = f"""#!/usr/bin/python3
# gpuprov lab: sysfs counters of the node's described NIC ports (see gpuprov/lab/kernel_view.py)
import sys
import yaml
{_RDMA_PORTS}
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
ports = rdma_ports(hw)
for p in ports:
    counters = dict.fromkeys({sorted(ERROR_COUNTERS)!r}, 0)
    counters.update(p.get("counters") or {{}})
    counters.update(port_rcv_data=0, port_xmit_data=0)
    for name, value in sorted(counters.items()):
        print(f"/sys/class/infiniband/{{p['ca']}}/ports/{{p['port']}}/counters/{{name}}:{{value}}")
sys.exit(0 if ports else 2)
"""

# The ports' sysfs attributes in the kernel's own forms (Linux drivers/infiniband/core/
# sysfs.c: state_show "%d: %s" with ib_port_state_to_str's names, phys_state_show "%u: %s"
# with ib_port_phys_state_str's, rate_show "%d Gb/sec (%dX %s)" with the width and the
# speed's name (the fallback reads the figure only); mlx5's hca_type "MT<device id>"
# and fw_ver, drivers/infiniband/hw/mlx5/main.c; node_guid as four colon-separated groups),
# rendered from the description each time the validator asks
_IB_SYSFS_RENDER = f"""import os, shutil, yaml
{_RDMA_PORTS}
STATES = {{"Down": (1, "DOWN"), "Initializing": (2, "INIT"), "Armed": (3, "ARMED"),
          "Active": (4, "ACTIVE")}}
PHYS = {{"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5,
         "LinkErrorRecovery": 6}}
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
shutil.rmtree("{IB_SYSFS_ROOT}", ignore_errors=True)
def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text + "\\n")
for p in rdma_ports(hw):
    ca = f"{IB_SYSFS_ROOT}/{{p['ca']}}"
    put(f"{{ca}}/hca_type", p["ca_type"])
    put(f"{{ca}}/fw_ver", p["firmware"])
    guid = (p.get("node_guid") or "0x0")[2:].rjust(16, "0")
    put(f"{{ca}}/node_guid", ":".join(guid[i:i + 4] for i in range(0, 16, 4)))
    port = f"{{ca}}/ports/{{p['port']}}"
    put(f"{{port}}/state", "%d: %s" % STATES.get(p["state"], (1, "DOWN")))
    put(f"{{port}}/phys_state", f"{{PHYS.get(p['physical_state'], 3)}}: {{p['physical_state']}}")
    speed = {{100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}}.get(int(p["rate_gbps"]), "")
    put(f"{{port}}/rate", f"{{p['rate_gbps']:g}} Gb/sec (4X {{speed}})".replace(" )", ")"))
    put(f"{{port}}/link_layer", p["link_layer"])
"""
_IBSTAT_OR_SYSFS_SCRIPT = ("#!/bin/bash\n# gpuprov lab: the validator's ibstat command (see "
                           "gpuprov/lab/kernel_view.py)\n"
                           # rendered only where the fallback reads it (no ibstat)
                           f"command -v {IBSTAT} >/dev/null 2>&1 || "
                           f"python3 -c {shlex.quote(_IB_SYSFS_RENDER)} || exit 1\n"
                           + IBSTAT_COMMAND.replace("command -v ibstat", f"command -v {IBSTAT}")
                           .replace("then ibstat;", f"then {IBSTAT};")
                           .replace("/sys/class/infiniband", IB_SYSFS_ROOT) + "\n")


def _rdma_listing(what: str, selected: str, line: str, none_status: int) -> str:
    """A grep-over-sysfs stand-in: one `line` (a Python f-string over port `p`) for each of
    the node's RDMA ports that `selected` (an expression over `p`) picks, and grep's exit
    status: 0 where it printed a line, `none_status` where it printed none."""
    return f"""#!/usr/bin/python3
# gpuprov lab: {what} (see gpuprov/lab/kernel_view.py)
import sys
import yaml
{_RDMA_PORTS}
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
ports = [p for p in rdma_ports(hw) if {selected}]
for p in ports:
    print(f"{line}")
sys.exit(0 if ports else {none_status})
"""


# `grep -sH . /sys/class/infiniband/*/board_id` of the described adapters: each one's PSID
# (its kind's `nics.psid`), grep's exit status 2 where none has one
_IB_BOARD_ID_SCRIPT = _rdma_listing(
    "the board_id (PSID) of the node's described NIC ports", 'p.get("psid")',
    "/sys/class/infiniband/{p['ca']}/board_id:{p['psid']}", 2)
# `grep -ls SW_MNG /sys/class/infiniband/*/device/vpd` (parsers/nvlink5.py IB_BRIDGES): the
# RDMA adapters that are NVLink5 bridges, as grep -l lists them; exit 1 where none matches
_IB_BRIDGES_SCRIPT = _rdma_listing(
    "the NVLink5 bridges among the node's RDMA adapters", 'p.get("nvlink5_bridge")',
    "/sys/class/infiniband/{p['ca']}/device/vpd", 1)

# `grep -sH . /proc/driver/nvidia-nvswitch/devices/*/information` of the described switches
# (parsers/nvswitch_info.py): their entries exist while the driver is loaded, each one line,
# the version or N/A; grep's exit status 2 where none is listed
_NVSWITCH_INFO_SCRIPT = f"""#!/usr/bin/python3
# gpuprov lab: the NVSwitches' procfs information (see gpuprov/lab/kernel_view.py)
import os
import sys
import yaml
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
loaded = os.path.exists("{sim_node.MODULE_VERSION}") and \\
    os.path.getsize("{sim_node.MODULE_VERSION}") > 0
switches = sorted((hw.get("nvswitch_bios") or {{}}).items()) if loaded else []
for bus, bios in switches:
    print(f"/proc/driver/nvidia-nvswitch/devices/0000:{{bus.lower()}}:00.0/information:"
          f"BIOS Version: {{bios or '{NVSWITCH_UNREAD}'}}")
sys.exit(0 if switches else 2)
"""

# the simulated `uname -r`; its headers, as linux-headers-<release> would leave them
KERNEL_RELEASE_COMMAND = "/usr/local/sbin/gpuprov-lab-uname-r"
HEADERS_DIR = f"/lib/modules/{KERNEL_RELEASE}/build"
HEADERS_MAKEFILE = (f"# gpuprov lab: stands in for linux-headers-{KERNEL_RELEASE}\n"
                     "# (gpuprov/lab/kernel_view.py)\n")

# The key that signs linux-restricted-modules' prebuilt nvidia modules: not the kernel's
# own (ephemeral) build key, which signs only the in-tree modules of that one build, but
# Canonical's module signing key, which Ubuntu's kernels carry in .builtin_trusted_keys
# (the modules are built after the kernel and signed apart: their signatures ship as
# linux-signatures-nvidia-<release>, NVIDIA/gpu-driver-container#35; issue 37). So what it
# signed loads under Secure Boot with no MOK.
# (the lab's kernels carry the first of Canonical's keys, as kernels before 2025 do)
CANONICAL_MODULE_SIGNER = packaging_facts.facts()["canonical_precompiled"]["module_signers"][0]
CANONICAL_MODULE_KEY_SHA256 = hashlib.sha256(CANONICAL_MODULE_SIGNER.encode()).hexdigest()
BUILTIN_TRUSTED_KEYS = f"/usr/lib/gpuprov-lab/{KERNEL_RELEASE}.builtin_trusted_keys"

# Secure Boot as the firmware reports it: the state in the node's lab directory, keys
# enrolled by their certificate's sha256; answered in mokutil's own words.
SECURE_BOOT_STATE = f"{NODE_LAB_DIR}/secure-boot"
MOK_ENROLLED = f"{NODE_LAB_DIR}/mok-enrolled"
# keys `mokutil --import` queued for MokManager at the next boot (`gpuprov lab mok-enroll`
# is the operator at the console confirming them)
MOK_PENDING = f"{NODE_LAB_DIR}/mok-pending"
MOKUTIL = "/usr/bin/mokutil"
_MOKUTIL_SCRIPT = f"""#!/bin/sh
# gpuprov lab: mokutil of the simulated firmware (see gpuprov/lab/kernel_view.py)
key_sum() {{ sha256sum "$1" | cut -d' ' -f1; }}
case "$1" in
  --sb-state)
    if [ "$(cat {SECURE_BOOT_STATE} 2>/dev/null)" = enabled ]; then
      echo "SecureBoot enabled"
    else
      echo "SecureBoot disabled"
    fi ;;
  --test-key)
    [ -r "$2" ] || {{ echo "Failed to read $2"; exit 1; }}
    sum=$(key_sum "$2")
    if grep -qsx "$sum" {MOK_ENROLLED}; then
      echo "$2 is already enrolled"
    elif grep -qsx "$sum" {MOK_PENDING}; then
      echo "$2 is already in the enrollment request"
    else
      echo "$2 is not enrolled"
    fi ;;
  --import)
    [ -r "$2" ] || {{ echo "Failed to read $2"; exit 1; }}
    case "$3" in
      --hash-file) [ -s "$4" ] || {{ echo "Failed to read $4"; exit 1; }} ;;
      --root-pw) ;;
      *) echo "gpuprov lab: mokutil --import would ask at a terminal: give --hash-file" >&2
         exit 1 ;;
    esac
    sum=$(key_sum "$2")
    if grep -qsx "$sum" {MOK_ENROLLED}; then echo "SKIP: $2 is already enrolled"; exit 0; fi
    if grep -qsx "$sum" {MOK_PENDING}; then
      echo "SKIP: $2 is already in the enrollment request"; exit 0
    fi
    echo "$sum" >> {MOK_PENDING} ;;
  --list-new)
    [ -s {MOK_PENDING} ] || {{ echo "MokNew is empty"; exit 1; }}
    sed 's/^/[key] SHA256 /' {MOK_PENDING} ;;
  *) echo "gpuprov lab: mokutil $1 is not simulated" >&2; exit 1 ;;
esac
"""

BOOT_UNIT = "gpuprov-lab-boot.service"
# as rsyslog writes the kernel's first line ($ and % doubled for systemd)
_BOOT_LINE = ("$$(date -u +%%Y-%%m-%%dT%%H:%%M:%%S.%%6N+00:00) $$(hostname) kernel: "
              f"Linux version {KERNEL_RELEASE} (simulated boot)")
# the kernel boots untainted; the nvidia module's load may have come first and added its own
_FRESH_TAINT = (f"mkdir -p {sim_node.RUN_DIR}; "
                f"[ -e {sim_node.KERNEL_TAINT} ] || echo 0 > {sim_node.KERNEL_TAINT}")
# the firmware turns ACS back on at every boot (what the gpudirect role's unit then undoes)
_FIRMWARE_ACS = (f"for f in {pci.DEVICES_DIR}/*/{pci.ACS_CTL_FILE}; do [ -e $$f ] && "
                 f"echo {pci.ACS_FIRMWARE} > $$f; done; true")
# systemd-modules-load: the modules /etc/modules-load.d names, once the driver's is loaded
_MODULES_LOAD = (f"for m in $$(cat /etc/modules-load.d/*.conf 2>/dev/null | sed \"s/#.*//\"); "
                 f"do {MODPROBE} $$m; done; true")
_BOOT_UNIT = boot_unit(
    f"gpuprov lab: the kernel's boot line in {sim_node.KERNEL_LOG}, its taint at boot",
    f'echo "{_BOOT_LINE}" >> {sim_node.KERNEL_LOG}', _FRESH_TAINT, _FIRMWARE_ACS)

MODULES_UNIT = "gpuprov-lab-modules-load.service"
# after sysinit.target, so after the driver's own module unit (standins: Before=sysinit.target)
_MODULES_UNIT = f"""[Unit]
Description=gpuprov lab: load the modules /etc/modules-load.d names (systemd-modules-load)

[Service]
Type=oneshot
ExecStart=/bin/sh -c '{_MODULES_LOAD}'

[Install]
WantedBy=multi-user.target
"""


def files(node: str) -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for the node's configuration tar."""
    return [(LSMOD.lstrip("/"), _LSMOD_SCRIPT.encode(), 0o755),
            (LSPCI.lstrip("/"), _LSPCI_SCRIPT.encode(), 0o755),
            (LSPCI_VVV.lstrip("/"), _LSPCI_VVV_SCRIPT.encode(), 0o755),
            (SETPCI.lstrip("/"), _SETPCI_SCRIPT.encode(), 0o755),
            (MODPROBE.lstrip("/"), _MODPROBE_SCRIPT.encode(), 0o755),
            (IBSTAT.lstrip("/"), _IBSTAT_SCRIPT.encode(), 0o755),
            (IB_COUNTERS.lstrip("/"), _IB_COUNTERS_SCRIPT.encode(), 0o755),
            (IB_BOARD_ID.lstrip("/"), _IB_BOARD_ID_SCRIPT.encode(), 0o755),
            (IB_BRIDGES.lstrip("/"), _IB_BRIDGES_SCRIPT.encode(), 0o755),
            (IBSTAT_OR_SYSFS.lstrip("/"), _IBSTAT_OR_SYSFS_SCRIPT.encode(), 0o755),
            (NVSWITCH_INFO.lstrip("/"), _NVSWITCH_INFO_SCRIPT.encode(), 0o755),
            (KERNEL_RELEASE_COMMAND.lstrip("/"), f"#!/bin/sh\necho {KERNEL_RELEASE}\n".encode(),
             0o755),
            (f"{HEADERS_DIR.lstrip('/')}/Makefile", HEADERS_MAKEFILE.encode(), 0o644),
            (MOKUTIL.lstrip("/"), _MOKUTIL_SCRIPT.encode(), 0o755),
            (BUILTIN_TRUSTED_KEYS.lstrip("/"), f"{CANONICAL_MODULE_KEY_SHA256}\n".encode(),
             0o644),
            (f"etc/systemd/system/{BOOT_UNIT}", _BOOT_UNIT.encode(), 0o644),
            (f"etc/systemd/system/{MODULES_UNIT}", _MODULES_UNIT.encode(), 0o644)]


def symlinks() -> list[tuple[str, str]]:
    """(path relative to /, target): the boot unit enabled, as `systemctl enable` would."""
    return [enabled_link(BOOT_UNIT, "sysinit.target"),
            enabled_link(MODULES_UNIT, "multi-user.target")]


def inventory_vars() -> str:
    """The lab's group_vars lines pointing the validator at these views."""
    return (f"gpuprov_validate_lsmod_command: {LSMOD}\n"
            f"gpuprov_validate_lspci_command: {LSPCI}\n"
            f"gpuprov_validate_lspci_vvv_command: {LSPCI_VVV}\n"
            f"gpuprov_validate_pci_devices_dir: {pci.DEVICES_DIR}\n"
            "# the gpudirect role's tools, on the simulated PCI functions and kernel\n"
            f"gpudirect_setpci_command: {SETPCI}\n"
            f"gpudirect_modprobe_command: {MODPROBE}\n"
            f"gpudirect_pci_devices_dir: {pci.DEVICES_DIR}\n"
            f"gpudirect_sys_module_dir: {LOADED_MODULES_DIR}\n"
            f"gdrcopy_sys_module_dir: {LOADED_MODULES_DIR}\n"
            "# the driver role's on NVLink5 (ib_umad for the subnet manager)\n"
            f"nvidia_driver_modprobe_command: {MODPROBE}\n"
            f"nvidia_driver_sys_module_dir: {LOADED_MODULES_DIR}\n"
            f"gpuprov_validate_ibstat_command: {IBSTAT_OR_SYSFS}\n"
            f"gpuprov_validate_ib_counters_command: {IB_COUNTERS}\n"
            # drift reads it too (gpuprov/drift/run.py); grep's status 2 read as no adapter
            f"gpuprov_validate_ib_board_id_command: {IB_BOARD_ID} || true\n"
            f"gpuprov_validate_ib_bridges_command: {IB_BRIDGES} || true\n"
            f"gpuprov_validate_nvswitch_info_command: {NVSWITCH_INFO} || true\n"
            f"gpuprov_validate_kernel_log: {sim_node.KERNEL_LOG}\n"
            f"gpuprov_doctor_kernel_release_command: {KERNEL_RELEASE_COMMAND}\n"
            "# the lab's stand-in stack is small; a real one needs the doctor's defaults\n"
            "gpuprov_doctor_min_free_gib: {/var: 0.5, /usr: 0.5, /opt: 0.5}\n")
