"""Each online CPU's frequency governor and driver: `grep -H . <cpu>/online
<cpu>/cpu*/cpufreq/scaling_governor <cpu>/cpu*/cpufreq/scaling_driver`.

grep prints `<path>:<value>` per file. The kernel's CPU sysfs
(Documentation/ABI/testing/sysfs-devices-system-cpu, Documentation/admin-guide/pm/
cpufreq.rst): `online` lists the online CPUs as ranges (`0-7,16-23`) and is always there,
so its absence is an unreadable listing; a CPU whose frequency the kernel controls has
`cpufreq/scaling_governor` (performance, powersave, ondemand, schedutil, …) and
`cpufreq/scaling_driver` (intel_pstate, amd-pstate-epp, acpi-cpufreq, …). A CPU without
them has no OS frequency control: the firmware's, or no cpufreq driver loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_ONLINE = re.compile(r"^\S*/online:(?P<cpus>[0-9,-]+)$")
_CPUFREQ = re.compile(r"^\S*/cpu(?P<cpu>\d+)/cpufreq/scaling_(?P<what>governor|driver):"
                      r"(?P<value>\S+)$")


@dataclass
class CpuFreq:
    online: list[int]
    governors: dict[int, str] = field(default_factory=dict)   # CPU -> its governor
    drivers: dict[int, str] = field(default_factory=dict)     # CPU -> its cpufreq driver


def parse_cpu_list(text: str) -> list[int]:
    """The kernel's CPU list form (`0-3,8,10-11`) as CPU numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


def cpu_list(cpus: list[int]) -> str:
    """CPU numbers in the kernel's list form, the inverse of parse_cpu_list."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def parse_cpufreq(text: str, source: str) -> CpuFreq:
    online = None
    found: dict[str, dict[int, str]] = {"governor": {}, "driver": {}}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if (m := _ONLINE.match(line)) is not None:
            online = parse_cpu_list(m.group("cpus"))
        elif (m := _CPUFREQ.match(line)) is not None:
            found[m.group("what")][int(m.group("cpu"))] = m.group("value")
        else:
            raise ParseError(source, f"line {number}: neither the online CPUs nor a CPU's "
                                     f"cpufreq governor or driver: {line[:100]}")
    if online is None:
        raise ParseError(source, "no online CPU list: the listing is not readable")
    return CpuFreq(online, found["governor"], found["driver"])


CPUFREQ = EvidenceKind(
    "cpufreq.txt", "identity", parse_cpufreq,
    "grep -H . {cpu_sysfs_dir}/online {cpu_sysfs_dir}/cpu[0-9]*/cpufreq/scaling_governor "
    "{cpu_sysfs_dir}/cpu[0-9]*/cpufreq/scaling_driver 2>/dev/null; true",
    "the online CPUs and each one's cpufreq governor and driver", lab="cpufreq.py",
    when="cpu_governor")
