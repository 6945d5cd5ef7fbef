"""Kernel logs as typed events: one reader, a table of matchers, catalogs as data.

Every fault the kernel reports about the GPU system becomes a `KernelEvent` with its
time, the device (PCI address) it names, its kind and code, and the catalog's name,
class and recommended action. Matchers are a table (`MATCHERS`): each has a cheap
substring that must appear in a line before its regular expression runs, so a 200,000
line log is read in well under a second. Catalogs live beside it as data files in
gpuprov/data/kernel_events/, each citing its sources; a code a catalog does not know is
treated as needing service until catalogued.

Timestamp forms seen on real nodes: `dmesg -T` (`[Sun Feb 23 16:24:18 2025]`),
`dmesg --time-format iso` (`2025-01-21T04:41:44,283302+00:00`, possibly after a
`kern  :warn  : ` facility prefix), syslog's kern.log with an ISO stamp and host
(`2025-01-21T04:41:44.283302+00:00 node07 kernel: …`), and raw `dmesg`
(`[ 1234.567890]`, seconds since boot). A file with none of them is not a kernel log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from gpuprov.model import Action
from gpuprov.parsers.errors import ParseError
from gpuprov.pci import BusId
from gpuprov.resources import load_yaml

_T_FORM = re.compile(r"^\[(?P<ts>\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")
_ISO_FORM = re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?)")
_ISO_AT_START = re.compile(r"^(?:\w+\s*:\s*\w+\s*:\s*)?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_MONO_FORM = re.compile(r"^\[\s*(?P<secs>\d+\.\d+)\]")
_SYSLOG_FORM = re.compile(r"^\w{3}\s+\d+ \d\d:\d\d:\d\d \S+ kernel:")
# How far into a log to look for a line in a known form before calling it "not a kernel
# log": headers (a shell prompt, a grep command) come first in real captures.
_FORM_PROBE_LINES = 200

CLASS_ORDER = ("application", "reset", "reboot", "service")


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    klass: str          # application | reset | reboot | service
    action: Action
    example: str | None  # a real line, `{pci}`/`{gpu}` placeholders, for the lab


@dataclass(frozen=True)
class Catalog:
    kind: str
    classes: dict[str, dict]
    codes: dict[int, CatalogEntry]

    def entry(self, code: int | None) -> CatalogEntry:
        known = self.codes.get(code) if code is not None else None
        if known:
            return known
        # unknown codes: treated as hardware until catalogued
        return CatalogEntry(f"{self.kind} {code} (not catalogued)", "service",
                            self.action("service"), None)

    def action(self, klass: str) -> Action:
        return Action(self.classes[klass]["action"])

    def advice(self, klass: str) -> str:
        return self.classes[klass]["text"]


@cache
def catalog(kind: str) -> Catalog:
    data = load_yaml(f"kernel_events/{kind}.yml")
    classes = data["classes"]
    codes = {int(code): CatalogEntry(e["name"], e["class"], Action(classes[e["class"]]["action"]),
                                     e.get("example"))
             for code, e in data["codes"].items()}
    return Catalog(kind, classes, codes)


@dataclass(frozen=True)
class KernelEvent:
    kind: str                  # the catalog it belongs to: "xid", ...
    code: int | None
    device: BusId | None       # the PCI function the line names
    pci: str | None            # the address as printed
    text: str                  # the message after the code
    time: datetime | None      # absolute (UTC) when the log carries it
    uptime_s: float | None     # seconds since boot for raw dmesg
    line: str

    @property
    def entry(self) -> CatalogEntry:
        return catalog(self.kind).entry(self.code)

    @property
    def action(self) -> Action:
        return self.entry.action

    def bus_id(self) -> str | None:
        """The nvidia-smi form of the device's PCI address."""
        return self.device.smi if self.device else None


@dataclass(frozen=True)
class Matcher:
    kind: str
    needle: str           # must appear in the line before `pattern` runs
    pattern: re.Pattern   # groups: pci, code, text


MATCHERS: tuple[Matcher, ...] = (
    Matcher("xid", "NVRM: Xid", re.compile(
        r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F:.]+)\): (?P<code>\d+),\s*(?P<text>.*)$")),
)


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


def _in_known_form(line: str) -> bool:
    return bool(_T_FORM.match(line) or _MONO_FORM.match(line) or _ISO_AT_START.match(line)
                or _SYSLOG_FORM.match(line))


def _check_form(text: str, source: str) -> None:
    if not text.strip():
        raise ParseError(source, "empty: no kernel log lines (a restricted dmesg prints "
                                 "nothing)")
    if "\x00" in text[:65536]:
        raise ParseError(source, "binary data, not a kernel log")
    head = text.splitlines()[:_FORM_PROBE_LINES]
    if not any(_in_known_form(line.strip()) for line in head):
        raise ParseError(source, "not a kernel log: no line in a dmesg, dmesg -T, ISO or "
                                 "syslog timestamp form")


def parse_kernel_log(text: str, source: str) -> list[KernelEvent]:
    """Every event the matchers recognise, in log order. A kernel log with none gives an
    empty list; a file that is not a kernel log at all raises ParseError."""
    _check_form(text, source)
    events = []
    for raw in text.splitlines():
        for matcher in MATCHERS:
            if matcher.needle not in raw:
                continue
            m = matcher.pattern.search(raw)
            if not m:
                continue
            line = raw.strip()
            when, uptime = _when(line)
            code = m.group("code")
            events.append(KernelEvent(matcher.kind, int(code) if code else None,
                                      BusId.find(m.group("pci")), m.group("pci"),
                                      m.group("text").strip(), when, uptime, line))
            break
    return events


def example_line(kind: str, code: int, device: BusId, gpu_index: int) -> str:
    """The catalog's real example line for `code`, naming this device: what the lab
    writes into a node's kernel log to inject the fault."""
    entry = catalog(kind).codes.get(code)
    if entry is None or entry.example is None:
        raise KeyError(f"{kind} {code}: no example line in the catalog")
    return entry.example.format(pci=device.kernel, gpu=gpu_index)
