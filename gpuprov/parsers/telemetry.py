"""The soak's GPU telemetry: `nvidia-smi --query-gpu=… --format=csv -lms N` while gpu-burn runs.

One header line (`timestamp, index, …, power.draw [W], …`: the field names as queried, a
unit in brackets where the field has one), then one line per GPU per interval; values carry
their units (`631.95 W`, `1980 MHz`, `100 %`), clock-event reasons read `Active` or
`Not Active`, and a value the GPU does not report reads `[N/A]` (real captures:
tests/fixtures/query-gpu/). Columns are found by name, so any superset of the fields parses
(the wide captures of nvidia_gpu_exporter do). The header prints each field's full name
whatever alias was asked (`clocks.sm` prints `clocks.current.sm`); drivers before 535 name
the clock-event reasons `clocks_throttle_reasons.*` (nvidia-smi --help-query-gpu lists both).

A value the GPU does not have reads `[N/A]` or `[Not Supported]`; any other bracketed value
is nvidia-smi saying it could not read one (`[Insufficient Permissions]`,
nvidia_gpu_exporter's docs/METRICS.md; NVML's own words, as `[Unknown Error]`) and is kept as
an error of its sample: the checks fail on it, never read it as zero.

Sources for the command: `-lms, --loop-ms= Probe until Ctrl+C at specified millisecond
interval`, and the field names with their pre-535 aliases, are nvidia-smi 590.48.01's `-h`
and `--help-query-gpu` (nvidia_gpu_exporter@e656cd8, internal/captures/
linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt); `clocks_throttle_reasons.*` before
driver 535.54.03 (validation-practice.md, AzNHC's throttling check).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members

# the clock-event reasons sampled (nvidia-smi --help-query-gpu, "clocks_event_reasons.*")
REASONS = ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
           "sw_thermal_slowdown")
FIELDS = ("timestamp", "index", "serial", "pci.bus_id", "utilization.gpu", "power.draw",
          "enforced.power.limit", "temperature.gpu", "temperature.memory", "clocks.current.sm",
          "clocks.max.sm", *(f"clocks_event_reasons.{r}" for r in REASONS))
# the names drivers before 535 print for the same fields
ALIASES = {f"clocks_throttle_reasons.{r}": f"clocks_event_reasons.{r}" for r in REASONS}
# what nvidia-smi prints for a value the GPU does not have: not an error
NOT_REPORTED = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "",
                "[Requested functionality has been deprecated]"}
# nvidia-smi's `timestamp` field (the real captures: `2026/11/27 17:57:55.758`)
TIMESTAMP = "%Y/%m/%d %H:%M:%S.%f"
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*(?:W|MHz|%|C))?$")


@dataclass(frozen=True)
class Sample:
    timestamp: str | None
    index: int
    serial: str | None
    bus_id: str | None
    utilization_pct: float | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    memory_temp_c: float | None
    sm_clock_mhz: float | None
    max_sm_clock_mhz: float | None
    reasons: frozenset[str]          # the active clock-event reasons, REASONS' names
    errors: tuple[str, ...] = ()     # "power.draw: [Unknown Error]"
    unread: frozenset[str] = frozenset()   # reasons the GPU printed no state for ([N/A])

    def seconds(self) -> float | None:
        """Its timestamp in seconds (nvidia-smi's `YYYY/MM/DD HH:MM:SS.mmm`), None if none."""
        try:
            return datetime.strptime(self.timestamp or "", TIMESTAMP).timestamp()
        except ValueError:
            return None


@dataclass
class Telemetry:
    fields: list[str]
    samples: list[Sample] = field(default_factory=list)

    def gpus(self) -> dict[int, list[Sample]]:
        """Each GPU's samples, in time order, by index."""
        by_gpu: dict[int, list[Sample]] = {}
        for s in self.samples:
            by_gpu.setdefault(s.index, []).append(s)
        return dict(sorted(by_gpu.items()))


def _name(header: str) -> str:
    name = header.split(" [", 1)[0].strip()
    return ALIASES.get(name, name)


def _number(value: str) -> float | None:
    match = _NUMBER.match(value)
    return float(match.group(1)) if match else None


def parse_gpu_telemetry(text: str, source: str) -> Telemetry:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(source, "empty: nvidia-smi sampled nothing")
    header = lines[0]
    names = [_name(h) for h in header.split(",")]
    if "index" not in names:
        raise ParseError(source, f"not nvidia-smi --query-gpu CSV with a GPU index: "
                                 f"{header[:120]}")
    telemetry = Telemetry(names)
    for number, line in enumerate(lines[1:], start=2):
        if line == header:   # a repeated header: nvidia-smi restarted its loop
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(names):
            if number == len(lines):   # the sampler killed mid-line when the soak ended
                break
            raise ParseError(source, f"line {number}: {len(values)} values for "
                                     f"{len(names)} fields: {line[:120]}")
        telemetry.samples.append(_sample(dict(zip(names, values, strict=True)), source, number))
    if not telemetry.samples:
        raise ParseError(source, "no sample: nvidia-smi printed its header only")
    return telemetry


def _sample(row: dict[str, str], source: str, number: int) -> Sample:
    errors: list[str] = []

    def value(name: str) -> float | None:
        text = row.get(name, "")
        if text in NOT_REPORTED:
            return None
        number_value = _number(text)
        if number_value is None:
            errors.append(f"{name}: {text}")
        return number_value

    index = _number(row["index"])
    if index is None:
        raise ParseError(source, f"line {number}: GPU index {row['index']!r}")
    active = frozenset(r for r in REASONS if row.get(f"clocks_event_reasons.{r}") == "Active")
    unread = frozenset(r for r in REASONS
                       if row.get(f"clocks_event_reasons.{r}", "") in NOT_REPORTED)
    for r in REASONS:
        state = row.get(f"clocks_event_reasons.{r}", "")
        if state not in ("Active", "Not Active") and state not in NOT_REPORTED:
            errors.append(f"clocks_event_reasons.{r}: {state}")
    serial = row.get("serial")
    bus_id = row.get("pci.bus_id")
    return Sample(
        timestamp=row.get("timestamp"), index=int(index),
        serial=None if serial in NOT_REPORTED else serial,
        bus_id=None if bus_id in NOT_REPORTED else bus_id,
        utilization_pct=value("utilization.gpu"), power_w=value("power.draw"),
        power_limit_w=value("enforced.power.limit"), temp_c=value("temperature.gpu"),
        memory_temp_c=value("temperature.memory"), sm_clock_mhz=value("clocks.current.sm"),
        max_sm_clock_mhz=value("clocks.max.sm"), reasons=active, errors=tuple(errors),
        unread=unread)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

# nvidia-smi's loop (`-lms`) writes one line per GPU per interval until it is killed
SAMPLER = "nvidia-smi --query-gpu=" + ",".join(FIELDS) + " --format=csv -lms {interval_ms}"

TELEMETRY = EvidenceKind(
    "gpu-telemetry.csv", "soak", parse_gpu_telemetry, None,
    f"every GPU's power, enforced limit, temperatures, SM clock and clock-event reasons "
    f"while gpu-burn runs (`{SAMPLER}`, the interval from `gpuprov_validate_telemetry_"
    f"interval_ms`, default 1000)", lab="sim/nvidia_smi.py", tool="nvidia-smi",
    members=Members(GPU, lambda telemetry: telemetry.gpus()))
