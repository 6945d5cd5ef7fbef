"""What a host shows, in one SSH round trip: one shell script, its output in sections.

Sections: every package with its version and dpkg status (`hi` when held), the loaded
driver module's version (the driver role's `nvidia_driver_module_version_file`), where
/usr/local/cuda points, Docker's daemon.json, the PyTorch environments' smoke records, each
GPU's VBIOS (`nvidia-smi --query-gpu`), each RDMA port's firmware (ibstat, or its form
from sysfs, as the validator reads it) and each NVSwitch's (`lspci -nn` and the driver's
procfs, as the validator reads them), each only where the lock sets a minimum for it; and
whether apt can read its sources (`apt-cache policy` with no cache file written: an entry
added beside gpuprov's under another keyring stops every apt command, issue 66).
Read-only: nothing on the host changes.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from gpuprov.errors import InputError
from gpuprov.lock import psid_keys
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.grep_listing import attribute
from gpuprov.parsers.ibstat import (
    BOARD_ID_COMMAND,
    IBSTAT_COMMAND,
    NicPort,
    parse_board_ids,
    parse_ibstat,
)
from gpuprov.parsers.nvswitch_info import (
    NVSWITCH_INFO_COMMAND,
    nvswitch_ids,
    parse_nvswitch_info,
)
from gpuprov.parsers.system import LSPCI_COMMAND, parse_lspci
from gpuprov.remote import probing

MARK = "### gpuprov-drift "
# apt reads every source, and stops on the first it cannot read, in apt's own words ("E: …"):
# the cache files are set empty so that nothing is written
APT_READS = ("apt-cache -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= policy "
             "2>&1 >/dev/null | grep '^E:' | head -n 3; true")
MODULE_FILE = "/sys/module/nvidia/version"
DAEMON_JSON = "/etc/docker/daemon.json"
SMOKE_DIR = "/var/lib/gpuprov/pytorch-envs"


@dataclass(frozen=True)
class Where:
    """Paths that differ from a server's on some hosts (the lab's inventory sets them)."""
    module_file: str = MODULE_FILE
    smoke_dir: str = SMOKE_DIR
    ibstat_command: str = IBSTAT_COMMAND
    board_id_command: str = BOARD_ID_COMMAND
    lspci_command: str = LSPCI_COMMAND
    nvswitch_info_command: str = NVSWITCH_INFO_COMMAND


def script(where: Where, firmware_min: dict) -> str:
    """The probe; `firmware_min`: the lock's (Lock.firmware_min), whose kinds say which
    firmware to read (nvidia-smi and ibstat take seconds on a loaded node)."""
    smoke = shlex.quote(where.smoke_dir)
    parts = [
        f"echo '{MARK}packages'",
        "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' 2>/dev/null",
        f"echo '{MARK}module'", f"cat {shlex.quote(where.module_file)} 2>/dev/null",
        f"echo '{MARK}cuda'", "readlink -f /usr/local/cuda 2>/dev/null",
        f"echo '{MARK}daemon.json'", f"cat {DAEMON_JSON} 2>/dev/null",
        f"echo '{MARK}torch'",
        f"for f in {smoke}/*.json; do [ -f \"$f\" ] && {{ echo \"## $f\"; cat \"$f\"; }}; "
        "done; true",
        f"echo '{MARK}apt'", APT_READS]
    if firmware_min.get("vbios"):
        # the query's vbios_version field, CSV rows "<value>, <value>, …": a real H100 node's
        # (tests/fixtures/query-gpu/h100-x8-name-busid-vbios-elided.txt)
        parts += [f"echo '{MARK}vbios'", "nvidia-smi --query-gpu=index,name,vbios_version "
                  "--format=csv,noheader 2>/dev/null"]
    if firmware_min.get("connectx"):
        parts += [f"echo '{MARK}ibstat'", f"( {where.ibstat_command} ) 2>/dev/null; true"]
    if psid_keys(firmware_min):
        parts += [f"echo '{MARK}board_id'", f"( {where.board_id_command} ) 2>/dev/null; true"]
    if firmware_min.get("nvswitch"):
        parts += [f"echo '{MARK}lspci'", f"( {where.lspci_command} ) 2>/dev/null; true",
                  f"echo '{MARK}nvswitch'",
                  f"( {where.nvswitch_info_command} ) 2>/dev/null; true"]
    return "; ".join(parts)


@dataclass
class HostState:
    packages: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (ver, held)
    module_version: str | None = None
    cuda_target: str | None = None
    docker_runtimes: list[str] | None = None      # None: no readable daemon.json
    torch_records: dict[str, dict] = field(default_factory=dict)   # path -> record
    vbios: dict[int, tuple[str, str]] = field(default_factory=dict)  # GPU -> (name, VBIOS)
    nic_ports: list[NicPort] = field(default_factory=list)
    ibstat_error: str | None = None   # ibstat printed something that does not parse
    psids: dict[str, str] = field(default_factory=dict)   # CA -> PSID (board_id)
    # (PCI address, PCI id, firmware or None) of each NVSwitch on the bus
    nvswitches: list[tuple[str, str, str | None]] = field(default_factory=list)
    apt_error: str | None = None      # apt's first error reading its sources; None: read


def parse(text: str, source: str) -> HostState:
    sections = probing.sections(text, MARK)
    if "packages" not in sections or "torch" not in sections:
        raise InputError(f"{source}: the drift probe's output is incomplete")
    state = HostState()
    for line in sections["packages"]:
        parts = line.split("\t")
        if len(parts) == 3 and parts[2][1:2] == "i":    # installed: ii, or hi when held
            state.packages[parts[0]] = (parts[1], parts[2].startswith("h"))
    module = "\n".join(sections.get("module", [])).strip()
    state.module_version = module or None
    state.cuda_target = "\n".join(sections.get("cuda", [])).strip() or None
    state.apt_error = next((line.strip() for line in sections.get("apt", [])
                            if line.startswith("E:")), None)
    daemon = "\n".join(sections.get("daemon.json", [])).strip()
    if daemon:
        try:
            state.docker_runtimes = sorted(json.loads(daemon).get("runtimes") or {})
        except (json.JSONDecodeError, AttributeError):
            state.docker_runtimes = None
    path, lines = None, []
    for line in [*sections["torch"], "## "]:
        if line.startswith("## "):
            if path:
                try:
                    state.torch_records[path] = json.loads("\n".join(lines))
                except json.JSONDecodeError:
                    state.torch_records[path] = {}
            path, lines = line[3:].strip() or None, []
        else:
            lines.append(line)
    for line in sections.get("vbios", []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            state.vbios[int(parts[0])] = (parts[1], parts[2])
    ibstat = "\n".join(sections.get("ibstat", []))
    if ibstat.strip():
        try:
            state.nic_ports = parse_ibstat(ibstat, f"{source} ibstat")
        except ParseError as exc:
            state.ibstat_error = str(exc)
    try:
        state.psids = attribute(parse_board_ids("\n".join(sections.get("board_id", [])),
                                                f"{source} board_id"),
                                [p.ca for p in state.nic_ports or []])
    except ParseError:
        state.psids = {}     # unread: a minimum locked by PSID then finds no PSID (drift)
    try:
        versions = parse_nvswitch_info("\n".join(sections.get("nvswitch", [])),
                                       f"{source} nvswitch")
    except ParseError:
        versions = {}        # unread: each switch's firmware is then unreadable (drift)
    switches = parse_lspci("\n".join(sections.get("lspci", [])), f"{source} lspci").nvswitches
    state.nvswitches = [(address, pci_id, versions.get(address))
                        for address, pci_id in nvswitch_ids(switches)]
    return state
