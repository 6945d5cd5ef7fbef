"""InfiniBand port counters from sysfs: `grep -sH . /sys/class/infiniband/*/ports/*/counters/*`.

grep prints one `<path>:<value>` line per counter file (its form for several files; a real
capture: tests/fixtures/ib-counters/, from prometheus/node_exporter#966, where a device
without a performance-management agent answers `N/A (no PMA)`). The kernel shows each port's
PortCounters there (Linux drivers/infiniband/core/sysfs.c). Their widths are the InfiniBand
specification's, and a counter at its width's maximum has stopped counting: a real mlx5
port's link_downed read 255, port_xmit_discards 65535 and excessive_buffer_overrun_errors 15
(leptonai/gpud#943).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import NIC_PORT, EvidenceKind, Members

# the error counters judged over the soak (issue 40), with their width in bits
# (InfiniBand Architecture Specification vol. 1, PortCounters attribute)
ERROR_COUNTERS = {"symbol_error": 16, "link_error_recovery": 8, "link_downed": 8,
                  "port_rcv_errors": 16, "port_rcv_remote_physical_errors": 16,
                  "local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4,
                  "port_xmit_discards": 16}
_LINE = re.compile(r"^(?P<path>/\S*/infiniband/(?P<ca>[^/]+)/ports/(?P<port>\d+)/counters/"
                   r"(?P<name>[^/:]+)):(?P<value>.*)$")


@dataclass
class PortCounters:
    ca: str
    port: int
    values: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)   # name: what the file held

    @property
    def name(self) -> str:
        """As the nics check names a port: `mlx5_0 port 1`."""
        return f"{self.ca} port {self.port}"

    def saturated(self, counter: str) -> bool:
        """At its width's maximum: it no longer counts (spec), growth cannot be seen."""
        width = ERROR_COUNTERS.get(counter)
        return width is not None and self.values.get(counter) == (1 << width) - 1


def parse_ib_counters(text: str, source: str) -> dict[str, PortCounters]:
    """Every port's counters, by `<ca> port <n>`; a value that is not a number (the
    device's `N/A (no PMA)`) kept as unreadable, never read as a zero."""
    ports: dict[str, PortCounters] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m is None:
            raise ParseError(source, f"line {number}: not a sysfs counter line: {line[:100]}")
        port = PortCounters(m.group("ca"), int(m.group("port")))
        port = ports.setdefault(port.name, port)
        value = m.group("value").strip()
        if value.isdigit():
            port.values[m.group("name")] = int(value)
        else:
            port.unreadable[m.group("name")] = value
    if not ports:
        raise ParseError(source, "no InfiniBand port counter: /sys/class/infiniband has none")
    return ports


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

IB_COUNTERS_BEFORE = EvidenceKind(
    "ib-counters-before.txt", "snapshot", parse_ib_counters, "{ib_counters_command}",
    "every RDMA NIC port's sysfs counters (`grep -sH . /sys/class/infiniband/*/ports/*/"
    "counters/*`) before the soak", lab="kernel_view.py", when="nics",
    members=Members(NIC_PORT, dict.keys))
IB_COUNTERS_AFTER = EvidenceKind(
    "ib-counters-after.txt", "soak", parse_ib_counters, "{ib_counters_command}",
    "the same counters after the soak", lab="kernel_view.py", when="nics",
    members=Members(NIC_PORT, dict.keys))
