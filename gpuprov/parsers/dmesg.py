"""Kernel logs: `NVRM: Xid` lines with their time, GPU (PCI address) and text.

Timestamp forms seen on real nodes: `dmesg -T` (`[Sun Feb 23 16:24:18 2025]`),
`dmesg --time-format iso` (`2025-01-21T04:41:44,283302+00:00`, possibly after a
`kern  :warn  : ` facility prefix) and raw `dmesg` (`[ 1234.567890]`, seconds since boot).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F:.]+)\): (?P<code>\d+),\s*(?P<text>.*)$")
_T_FORM = re.compile(r"^\[(?P<ts>\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")
_ISO_FORM = re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?)")
_MONO_FORM = re.compile(r"^\[\s*(?P<secs>\d+\.\d+)\]")


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str  # as printed: "0000:9b:00"
    text: str
    time: datetime | None  # absolute time when the log carries it
    uptime_s: float | None  # seconds since boot for raw dmesg
    line: str

    def bus_id(self) -> str:
        """The nvidia-smi form of the PCI address: 00000000:9B:00.0."""
        parts = self.pci.split(":")
        domain, bus, device = (["0000", *parts] if len(parts) == 2 else parts)[:3]
        device = device.split(".")[0]
        return f"{int(domain, 16):08X}:{bus.upper()}:{device.upper()}.0"


def _when(line: str) -> tuple[datetime | None, float | None]:
    if m := _T_FORM.match(line):
        return datetime.strptime(m.group("ts").replace("  ", " "), "%a %b %d %H:%M:%S %Y"), None
    if m := _MONO_FORM.match(line):
        return None, float(m.group("secs"))
    if m := _ISO_FORM.search(line.split("NVRM:")[0]):
        stamp = m.group("ts").replace(",", ".")
        parsed = datetime.fromisoformat(stamp)
        return (parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed), None
    return None, None


def parse_xids(text: str, source: str) -> list[XidEvent]:
    """Every Xid line, in log order. A log with no Xid gives an empty list."""
    events = []
    for raw in text.splitlines():
        m = _XID.search(raw)
        if not m:
            continue
        when, uptime = _when(raw.strip())
        events.append(XidEvent(int(m.group("code")), m.group("pci"), m.group("text").strip(),
                               when, uptime, raw.strip()))
    return events
