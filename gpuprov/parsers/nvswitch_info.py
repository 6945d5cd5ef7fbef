"""Each NVSwitch's firmware (its BIOS) version, as the nvidia driver reports it in procfs.

When the driver's NVSwitch probe claims a switch it adds
`/proc/driver/nvidia-nvswitch/devices/<domain:bus:slot.fn>/information` (the address as
`%04x:%02x:%02x.%1x`), whose one line is `BIOS Version: ` and the version as five
two-digit lowercase hex fields, or `N/A` where the driver read none
(kernel-open/nvidia/procfs_nvswitch.c, `nvswitch_procfs_device_add` and
`nv_procfs_read_device_info`, the same at NVIDIA/open-gpu-kernel-modules@63c05c6 and
@1739a20). It is the one
on-host source of the NVSwitch firmware version; NVIDIA's firmware tools read the same
component over the BMC's Redfish (`HGX_FW_NVSwitch_0` … in a DGX H100's firmware status,
96.00.3F.00.01 before and 96.10.3F.00.01 after a GPU-tray update: NVIDIA Base Command
Manager 11 Administrator Manual, section 14.5).
"""

from __future__ import annotations

import re

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.grep_listing import UNNAMED
from gpuprov.parsers.kind import EvidenceKind

# `grep -sH .` prefixes each line with its file (parsers/grep_listing.py); no switch
# claimed (or no driver loaded): grep's exit 2 and an empty listing, which the firmware
# check reads as no switch listed
NVSWITCH_INFO_COMMAND = ("grep -sH . /proc/driver/nvidia-nvswitch/devices/*/information "
                         "|| true")
_LINE = re.compile(r"^\S*/devices/(?P<address>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])"
                   r"/information:(?P<key>[^:]+):\s*(?P<value>.*?)\s*$")
# the BIOS line alone: `grep -s .` (no -H) of a host with one switch listed
_LONE = re.compile(r"^(?P<key>BIOS Version):\s*(?P<value>.*?)\s*$")
BIOS_KEY = "BIOS Version"
UNREAD = "N/A"   # the driver's word where it read no version


def parse_nvswitch_info(text: str, source: str) -> dict[str, str | None]:
    """Each listed switch's BIOS version by PCI address; None where the driver printed
    N/A. A switch whose file lacks the BIOS line is left out (so: unreadable). The BIOS
    line alone (one switch, listed without -H) is keyed UNNAMED."""
    versions: dict[str, str | None] = {}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and (lone := _LONE.match(lines[0])) is not None:
        value = lone.group("value")
        return {UNNAMED: None if value in ("", UNREAD) else value}
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            raise ParseError(source, f"not an NVSwitch information line: {line[:120]}")
        if m.group("key") == BIOS_KEY:
            value = m.group("value")
            versions[m.group("address")] = None if value in ("", UNREAD) else value
    return versions


# `lspci -nn` line of an NVSwitch: its address (the domain left out where every one is
# 0000) and its [vendor:device]
_LSPCI = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<rest>[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                    r"\.[0-7])\s.*\[(?P<id>10de:[0-9a-fA-F]{4})\]")


def nvswitch_ids(lspci_lines: list[str]) -> list[tuple[str, str]]:
    """(procfs address, `10de:xxxx`) of each NVSwitch line of `lspci -nn -d 10de:`."""
    found = []
    for line in lspci_lines:
        m = _LSPCI.match(line.strip())
        if m:
            found.append((f"{(m.group('domain') or '0000').lower()}:{m.group('rest').lower()}",
                          m.group("id").lower()))
    return found


NVSWITCH_INFO = EvidenceKind(
    "nvswitch-info.txt", "identity", parse_nvswitch_info, "{nvswitch_info_command}",
    "each NVSwitch's firmware version as the driver reports it (`grep -sH . "
    "/proc/driver/nvidia-nvswitch/devices/*/information`), for firmware minimums",
    lab="kernel_view.py", when="nvswitch")
