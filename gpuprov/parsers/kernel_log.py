"""Kernel logs as typed events: one reader, a table of matchers, catalogs as data.

Every fault the kernel reports about the GPU system becomes a `KernelEvent`: its time,
the boot it belongs to, the device it names (PCI address, or the driver's GPU number),
its kind and code, and the catalog's name, class and recommended action. The matchers
and catalogs are data files in gpuprov/data/kernel_events/, each citing its sources:
xid.yml (NVIDIA's Xid catalog), sxid.yml (NVSwitch SXids), messages.yml (everything
without a code: fallen off the bus, RmInitAdapter, GSP timeouts, PCIe AER, NIC faults,
lockups, ...), classes.yml (class -> action). A code a catalog does not know is treated
as needing service until catalogued. Each matcher has a cheap substring that must appear
in a line before its regular expression runs: a 200,000-line log reads in well under a
second.

Timestamp forms seen on real nodes: raw `dmesg` (`[ 1234.567890]`, seconds since boot),
`dmesg -T` (`[Sun Feb 23 16:24:18 2025]`), `dmesg --time-format iso`
(`2025-01-21T04:41:44,283302+00:00`, possibly after a `kern  :warn  : ` prefix),
`journalctl -k` short (`Feb 14 05:03:41 host kernel: `), short-precise (with
microseconds) and short-iso (`2025-02-14T05:03:41+0000 host kernel: `), syslog's
kern.log (either stamp and a host, often with the raw `[ 123.4]` after `kernel:`), and
/dev/kmsg records (`6,3973,227996636,-;`, microseconds since boot). Boots are told apart
by `Linux version` lines and journalctl's `-- Boot … --` / `-- Reboot --` separators.
A file in none of these forms is not a kernel log: a ParseError naming it.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache

from gpuprov.model import Action
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind
from gpuprov.pci import BusId
from gpuprov.resources import load_yaml

_T_FORM = re.compile(r"^\[(?P<ts>\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?"
_ISO_AT_START = re.compile(rf"^(?:\w+\s*:\s*\w+\s*:\s*)?(?P<ts>{_ISO})")
_MONO_FORM = re.compile(r"^\[\s*(?P<secs>\d+\.\d+)\]")
_RELATIVE_FORM = re.compile(r"^\[\s*\+\d+\.\d+\]")
# the host is absent under `journalctl --no-hostname`
_SYSLOG_FORM = re.compile(r"^(?P<ts>\w{3}\s+\d+ \d\d:\d\d:\d\d(?:\.\d+)?)\s+(?:\S+\s+)?kernel:\s?"
                          r"(?:\[\s*(?P<secs>\d+\.\d+)\])?")
# journalctl -o short-full: `Fri 2025-02-14 05:03:41 UTC host kernel:` (zone as printed)
_FULL_FORM = re.compile(r"^\w{3} (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) "
                        r"(?P<zone>[A-Z]{1,5}|[+-]\d{4})? ?(?:\S+ )?kernel:")
# journalctl -o short-unix: `1739509421.123456 host kernel:`
_UNIX_FORM = re.compile(r"^(?P<epoch>\d{9,11}\.\d+) (?:\S+ )?kernel:")
# a bare `kernel:` prefix (journalctl's message with its identifier, syslog without a stamp)
_BARE_FORM = re.compile(r"^kernel: ")
_KMSG_FORM = re.compile(r"^\d+,\d+,(?P<usecs>\d+),[^;]*;")
_BOOT = re.compile(r"Linux version \d|^-- Boot [0-9a-f]+ --|^-- Reboot --")
# Where to look for a line in a known form before calling a file "not a kernel log":
# real captures start with headers (a shell prompt, the command, a source line).
_FORM_PROBE_LINES = 200
_DEVICE_BEFORE_LINES = 3
# What a line's driver name says about the device it names.
DRIVER_DEVICES = {"nvidia": "gpu", "nvidia-nvswitch": "nvswitch", "mlx5_core": "nic"}


@cache
def classes() -> dict[str, dict]:
    return load_yaml("kernel_events/classes.yml")["classes"]


def class_rank(klass: str) -> int:
    """How drastic a class is: classes.yml lists them least to most."""
    return list(classes()).index(klass)


def class_action(klass: str) -> Action:
    return Action(classes()[klass]["action"])


def class_fails(klass: str) -> bool:
    return bool(classes()[klass]["fails"])


def class_advice(klass: str) -> str:
    return classes()[klass]["text"]


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    klass: str
    example: str | None = None
    immediate: str | None = None
    investigatory: str | None = None


@dataclass(frozen=True)
class Catalog:
    kind: str
    codes: dict[int, CatalogEntry]

    def entry(self, code: int | None) -> CatalogEntry:
        known = self.codes.get(code) if code is not None else None
        # unknown codes: treated as needing service until catalogued
        return known or CatalogEntry(f"{self.kind.upper()} {code} (not catalogued)",
                                     "service")


@cache
def catalog(kind: str) -> Catalog:
    """The coded catalogs: xid, sxid."""
    codes = {int(code): CatalogEntry(e["name"], e["class"], e.get("example"),
                                     e.get("immediate"), e.get("investigatory"))
             for code, e in load_yaml(f"kernel_events/{kind}.yml")["codes"].items()}
    return Catalog(kind, codes)


@dataclass(frozen=True)
class Matcher:
    kind: str
    name: str
    needle: str
    pattern: re.Pattern
    device: str                       # gpu | nvswitch | nic | any | none
    klass: str
    class_by_text: tuple[tuple[re.Pattern, str], ...] = ()
    device_before: re.Pattern | None = None
    catalog: str | None = None        # coded kinds: xid, sxid
    example: str | None = None
    spans_lines: bool = False         # one message over many matched lines: one event


_XID = Matcher("xid", "Xid", "NVRM: Xid", re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F:.]+)\): (?P<code>\d+),\s*(?P<text>.*)$"),
    "gpu", "service", catalog="xid")
_SXID = Matcher("sxid", "SXid", "SXid", re.compile(
    r"(?P<switch>nvidia-nvswitch\d+): SXid \(PCI:(?P<pci>[0-9a-fA-F:.]+)\): (?P<code>\d+),"
    r"\s*(?P<text>.*)$"), "nvswitch", "service", catalog="sxid")


@cache
def matchers() -> tuple[Matcher, ...]:
    table = [_XID, _SXID]
    for m in load_yaml("kernel_events/messages.yml")["messages"]:
        table.append(Matcher(
            m["kind"], m["name"], m["needle"], re.compile(m["pattern"]), m["device"],
            m["class"], tuple((re.compile(p), k) for p, k in m.get("class_by_text", [])),
            re.compile(m["device_before"]) if m.get("device_before") else None,
            example=m.get("example"), spans_lines=bool(m.get("spans_lines"))))
    return tuple(table)


@cache
def markers() -> tuple[tuple[str, str, re.Pattern], ...]:
    return tuple((m["kind"], m["needle"], re.compile(m["pattern"]))
                 for m in load_yaml("kernel_events/messages.yml")["markers"])


# The NVLink5 family (Xid 144-151 on Blackwell): `UNIT Fatal|Nonfatal XCn in Link N (...)`
_NVLINK5 = re.compile(r"^(?P<unit>[A-Z0-9_]+) (?P<severity>Fatal|Nonfatal|Non-fatal)\b"
                      r"(?:.*?\bLink (?P<link>-?\d+))?")
_XID154 = re.compile(r"(?:to|To) 0x[0-9a-fA-F]+ \((?P<action>[^)]*)\)")


@dataclass(frozen=True)
class KernelEvent:
    kind: str                  # xid, sxid, fallen-off-bus, pcie-aer, ...
    code: int | None
    device: BusId | None       # the PCI function the line names
    device_kind: str           # gpu | nvswitch | nic | any | none
    gpu_instance: int | None   # the driver's GPU number (`NVRM: GPU6 ...`) when no address
    name: str
    klass: str
    text: str
    time: datetime | None      # absolute (UTC) when the log carries it
    uptime_s: float | None     # seconds since boot when the log carries them
    boot: int                  # 0 for the first boot in the file, counting up
    number: int                # line number in the file
    line: str
    details: dict = field(default_factory=dict)   # decoded fields (NVLink5 unit, link, ...)

    @property
    def action(self) -> Action:
        return class_action(self.klass)

    @property
    def fails(self) -> bool:
        return class_fails(self.klass)

    def bus_id(self) -> str | None:
        """The nvidia-smi form of the device's PCI address."""
        return self.device.smi if self.device else None

    def key(self) -> tuple:
        """What makes two events 'the same fault' (for recurrence across boots)."""
        return (self.kind, self.code, self.device, self.gpu_instance)


@dataclass(frozen=True)
class KernelLog:
    events: list[KernelEvent]
    boots: int                          # boots seen in the file (>= 1)
    initialised: dict[BusId, list[int]]  # GPU -> line numbers where the driver (re)initialised it
    placed: bool                        # any line carries a time or uptime

    def current_boot(self) -> list[KernelEvent]:
        return [e for e in self.events if e.boot == self.boots - 1]

    def earlier_boots(self) -> list[KernelEvent]:
        return [e for e in self.events if e.boot < self.boots - 1]


def _syslog_time(stamp: str) -> datetime:
    """journalctl/syslog short stamps carry no year: the most recent past one."""
    now = datetime.now(UTC).replace(tzinfo=None)
    fmt = "%b %d %H:%M:%S.%f" if "." in stamp else "%b %d %H:%M:%S"
    parsed = datetime.strptime(f"{now.year} {' '.join(stamp.split())}", f"%Y {fmt}")
    return parsed.replace(year=now.year - 1) if parsed > now else parsed


def _when(line: str) -> tuple[datetime | None, float | None]:
    if m := _T_FORM.match(line):
        return datetime.strptime(m.group("ts").replace("  ", " "), "%a %b %d %H:%M:%S %Y"), None
    if m := _MONO_FORM.match(line):
        return None, float(m.group("secs"))
    if m := _KMSG_FORM.match(line):
        return None, int(m.group("usecs")) / 1e6
    if m := _SYSLOG_FORM.match(line):
        secs = float(m.group("secs")) if m.group("secs") else None
        return _syslog_time(m.group("ts")), secs
    if m := _FULL_FORM.match(line):
        parsed = datetime.fromisoformat(m.group("ts"))
        return (parsed if m.group("zone") in (None, "UTC", "GMT", "+0000") else None), None
    if m := _UNIX_FORM.match(line):
        return datetime.fromtimestamp(float(m.group("epoch")), UTC).replace(tzinfo=None), None
    if m := _ISO_AT_START.match(line):
        parsed = datetime.fromisoformat(m.group("ts").replace(",", "."))
        return (parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed), None
    return None, None


def _in_known_form(line: str) -> bool:
    return any(p.match(line) for p in (_T_FORM, _MONO_FORM, _RELATIVE_FORM, _ISO_AT_START,
                                       _SYSLOG_FORM, _FULL_FORM, _UNIX_FORM, _BARE_FORM,
                                       _KMSG_FORM)) or bool(_BOOT.match(line))


def _kernel_message(line: str) -> bool:
    """A line with no stamp at all that the kernel printed (`grep NVRM`, `journalctl -o
    cat`): one a matcher or marker recognises, or one of the GPU driver's own."""
    if line.startswith(("NVRM: ", "nvidia-nvswitch", "nvidia-nvlink: ", "nvidia-peermem ")):
        return True
    return any(m.needle in line and m.pattern.search(line) for m in matchers())


def _check_form(text: str, source: str) -> None:
    if not text.strip():
        raise ParseError(source, "empty: no kernel log lines (a restricted dmesg prints "
                                 "nothing)")
    if "\x00" in text[:65536]:
        raise ParseError(source, "binary data, not a kernel log")
    head = text.splitlines()[:_FORM_PROBE_LINES]
    if not any(_in_known_form(line.strip()) for line in head) and not any(
            _kernel_message(line.strip()) for line in text.splitlines()):
        raise ParseError(source, "not a kernel log: no line in a dmesg, dmesg -T, ISO, "
                                 "journalctl, syslog or kmsg form, and no kernel message")


def _classify(matcher: Matcher, code: int | None, text: str) -> tuple[str, str, dict]:
    """(name, class, decoded details) of one matched line."""
    details: dict = {}
    if matcher.catalog:
        entry = catalog(matcher.catalog).entry(code)
        name, klass = entry.name, entry.klass
        if matcher.kind == "xid" and klass == "nvlink5":
            m = _NVLINK5.match(text)
            fatal = bool(m and m.group("severity") == "Fatal")
            if m:
                details = {"unit": m.group("unit"), "fatal": fatal,
                           "link": int(m.group("link")) if m.group("link") else None}
            klass = "reset" if fatal or not m else "notice"
        elif matcher.kind == "xid" and code == 154 and (m := _XID154.search(text)):
            wanted = m.group("action").lower()
            details = {"recovery_action": m.group("action")}
            klass = ("reboot" if "reboot" in wanted else "reset" if "reset" in wanted
                     or "drain" in wanted else "notice")
        elif matcher.kind == "sxid" and klass == "notice" and re.search(r"\bFatal\b", text):
            klass = "reboot"
        if entry.immediate:   # NVIDIA's catalog: what to do now, and what to look into
            details["immediate"] = entry.immediate
        if entry.investigatory:
            details["investigatory"] = entry.investigatory
        return name, klass, details
    for pattern, klass in matcher.class_by_text:
        if pattern.search(text):
            return matcher.name, klass, details
    return matcher.name, matcher.klass, details


# `talosctl dmesg`: `<node>: kern: <level>: [<RFC 3339 time, nanoseconds, Z>]: <message>`,
# the level padded to seven (real captures: siderolabs/pkgs#792 `k3s-node5.lab: kern:    info:
# […]`, siderolabs/talos#3054 `10.1.10.21: kern: warning: […]`)
_TALOS_LINE = re.compile(r"^(?P<node>\S+): kern:\s*\w+: \[(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
                         r"(?:\.(?P<frac>\d+))?Z\]: (?P<message>.*)$")


def _talos_records(text: str) -> str:
    """`talosctl dmesg` lines as `<ISO time> <node> kernel: <message>` (microseconds: Python
    reads no finer); any other line unchanged."""
    if ": kern:" not in text[:65536]:
        return text
    out = []
    for line in text.splitlines():
        if m := _TALOS_LINE.match(line.strip()):
            frac = (m.group("frac") or "0")[:6].ljust(6, "0")
            line = f"{m.group('ts')}.{frac}+00:00 {m.group('node')} kernel: {m.group('message')}"
        out.append(line)
    return "\n".join(out) + "\n"


def _journal_records(text: str) -> str:
    """journalctl's record forms (`-o json`, `-o verbose`, `-o export`) as one line per
    message, `<ISO time> kernel: MESSAGE`, with `-- Boot <id> --` where the boot changes;
    any other text unchanged."""
    start = text.lstrip()[:4096]
    if start.startswith("{") and '"MESSAGE"' in start:
        records = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    elif re.search(r"^\s+MESSAGE=|^MESSAGE=", start, re.M) and (
            "__REALTIME_TIMESTAMP=" in start or _VERBOSE_HEADER.search(start)):
        records = _field_records(text)
    else:
        return text
    out, boot = [], None
    for record in records:
        if record.get("_BOOT_ID") and record["_BOOT_ID"] != boot:
            boot = record["_BOOT_ID"]
            out.append(f"-- Boot {boot} --")
        when = record.get("__REALTIME_TIMESTAMP")
        stamp = (datetime.fromtimestamp(int(when) / 1e6, UTC).isoformat()
                 if str(when or "").isdigit() else "")
        message = record.get("MESSAGE", "")
        if isinstance(message, list):   # journald's form for a message that is not UTF-8
            message = bytes(message).decode(errors="replace")
        for part in str(message).splitlines() or [""]:
            out.append(f"{stamp} kernel: {part}".strip() if stamp else f"kernel: {part}")
    return "\n".join(out) + "\n"


# journalctl -o verbose: `Fri 2025-02-14 05:03:41.123456 UTC [s=…;i=…;b=<boot>;m=…;t=<µs>;x=…]`
_VERBOSE_HEADER = re.compile(r"^\w{3} \d{4}-\d\d-\d\d [\d:.]+ \S+ \[s=\w+;i=\w+;b=(?P<boot>\w+);"
                             r"m=\w+;t=(?P<t>[0-9a-f]+);", re.M)


def _field_records(text: str) -> list[dict]:
    """`-o verbose` (a header line, then indented FIELD=value) and `-o export` (FIELD=value
    lines, a blank line between records) as dicts."""
    records: list[dict] = []
    current: dict | None = None
    for line in text.splitlines():
        if header := _VERBOSE_HEADER.match(line):
            current = {"_BOOT_ID": header["boot"],
                       "__REALTIME_TIMESTAMP": str(int(header["t"], 16))}
            records.append(current)
        elif not line.strip():
            current = None
        elif "=" in line:
            if current is None:
                current = {}
                records.append(current)
            name, _, value = line.strip().partition("=")
            current.setdefault(name, value)
    return records


def parse_kernel_log(text: str, source: str) -> KernelLog:
    """Every event the matchers recognise, in log order, with the boot it belongs to. A
    kernel log with none gives no events; a file that is not a kernel log raises."""
    text = _talos_records(_journal_records(text))
    _check_form(text, source)
    table, marks = matchers(), markers()
    events: list[KernelEvent] = []
    initialised: dict[BusId, list[int]] = {}
    recent: deque[str] = deque(maxlen=_DEVICE_BEFORE_LINES)
    boot, seen_line, placed = 0, False, False
    last_line = -_DEVICE_BEFORE_LINES - 1   # the line of the latest event
    for number, raw in enumerate(text.splitlines()):
        if ("Linux version" in raw or raw.startswith("--")) and _BOOT.search(raw):
            boot += seen_line   # a marker with nothing before it (or right after one)
            seen_line = False   # starts no new boot
            recent.clear()
            continue
        seen_line = seen_line or bool(raw.strip())
        for _kind, needle, pattern in marks:
            if needle in raw and (m := pattern.search(raw)) and (bus := BusId.find(m["pci"])):
                initialised.setdefault(bus, []).append(number)
        for matcher in table:
            if matcher.needle not in raw or not (m := matcher.pattern.search(raw)):
                continue
            groups = m.groupdict()
            pci = groups.get("pci")
            if not pci and matcher.device_before:
                for earlier in reversed(recent):
                    if before := matcher.device_before.search(earlier):
                        pci = before.group("pci")
                        break
            code = int(groups["code"]) if groups.get("code") else None
            body = (groups.get("text") or "").strip()
            name, klass, details = _classify(matcher, code, body)
            if groups.get("switch"):
                details["nvswitch"] = groups["switch"]
            device_kind = matcher.device
            if device_kind == "any" and groups.get("driver"):
                device_kind = DRIVER_DEVICES.get(groups["driver"], "any")
            line = raw.strip()
            when, uptime = _when(line)
            placed = placed or when is not None or uptime is not None
            event = KernelEvent(
                matcher.kind, code, BusId.find(pci) if pci else None, device_kind,
                int(groups["gpu"]) if groups.get("gpu") else None, name, klass, body,
                when, uptime, boot, number, line, details)
            if matcher.spans_lines and events and number - last_line <= _DEVICE_BEFORE_LINES \
                    and (merged := _continued(events[-1], event)):
                events[-1] = merged
            else:
                events.append(event)
            last_line = number
            break
        recent.append(raw)
    return KernelLog(events, boot + 1, initialised, placed)


def _continued(first: KernelEvent, line: KernelEvent) -> KernelEvent | None:
    """`first` with `line` as one message (a spans_lines kind): the same kind and boot, and
    one device or the first naming none; it keeps its first line and takes the device the
    later line names. None where they are two events."""
    if (first.kind, first.boot) != (line.kind, line.boot):
        return None
    if first.device and line.device and first.device != line.device:
        return None
    if first.gpu_instance is not None and line.gpu_instance not in (None, first.gpu_instance):
        return None
    if first.device is None and line.device is not None:   # the line that names it
        return replace(first, device=line.device, text=line.text)
    if first.gpu_instance is None and line.gpu_instance is not None:
        return replace(first, gpu_instance=line.gpu_instance)
    return first


def example_line(kind: str, code: int | None, device: BusId, gpu_index: int) -> list[str]:
    """The catalog's real example line(s) for this kind (and code), naming this device:
    what the lab writes into a node's kernel log to inject the fault."""
    if kind in ("xid", "sxid"):
        entry = catalog(kind).codes.get(code)  # type: ignore[arg-type]
        example = entry.example if entry else None
    else:
        example = next((m.example for m in matchers() if m.kind == kind), None)
    if example is None:
        raise KeyError(f"{kind} {code or ''}: no example line in the catalogs")
    return [line.format(pci=device.kernel if kind == "xid" else device.sysfs, gpu=gpu_index)
            for line in example.splitlines()]


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

KERNEL_LOG = EvidenceKind("dmesg.txt", "snapshot", parse_kernel_log, None,
                          "the kernel log with timestamps (`dmesg --time-format iso`, or "
                          "the node's `gpuprov_validate_kernel_log` file), again after the "
                          "soak", lab="kernel_view.py", again_after_soak=True)
