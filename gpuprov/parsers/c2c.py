"""`nvidia-smi c2c -s`: each GPU's NVLink-C2C links to its Grace CPU and their speeds.

The form is a real GH200's (microsoft/VirtualClient
src/VirtualClient/VirtualClient.Monitors.UnitTests/Examples/nvidia-smi/query-c2c.txt at
2879a36, copied to tests/fixtures/nvidia-smi-c2c/): a `GPU i: NAME (UUID: …)` line, then one
`C2C Link n: X GB/s` line per link. A system without C2C prints `No Devices support C2C.`
(dmlc/xgboost tests/cpp/common/test_cuda_dr_utils.cc at ab1e531). No capture shows a link down, so
any other link line is unreadable here, never a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members
from gpuprov.parsers.text import GPU_HEADER, strip_ansi

_LINK = re.compile(r"^\s*C2C Link (?P<link>\d+): (?P<speed>\d+(?:\.\d+)?) GB/s\s*$")
NO_C2C = "No Devices support C2C."


@dataclass
class GpuC2c:
    index: int
    name: str
    uuid: str
    speeds: dict[int, float] = field(default_factory=dict)   # link -> GB/s


@dataclass
class C2cStatus:
    gpus: list[GpuC2c]
    unsupported: bool = False      # the driver's "No Devices support C2C."


def parse_c2c_status(text: str, source: str) -> C2cStatus:
    lines = [line.rstrip() for line in strip_ansi(text).splitlines() if line.strip()]
    if [line.strip() for line in lines] == [NO_C2C]:
        return C2cStatus([], unsupported=True)
    gpus: list[GpuC2c] = []
    for line in lines:
        gpu = GPU_HEADER.match(line)
        if gpu:
            gpus.append(GpuC2c(int(gpu["index"]), gpu["name"], gpu["uuid"]))
            continue
        link = _LINK.match(line)
        if link and gpus:
            gpus[-1].speeds[int(link["link"])] = float(link["speed"])
            continue
        raise ParseError(source, f"unrecognised line: {line.strip()!r}")
    if not gpus:
        raise ParseError(source, "no GPU listed")
    return C2cStatus(gpus)


C2C_STATUS = EvidenceKind(
    "nvidia-smi-c2c-status.txt", "snapshot", parse_c2c_status, "nvidia-smi c2c -s",
    "`nvidia-smi c2c -s`: each GPU's NVLink-C2C links to its Grace CPU", lab="sim/nvidia_smi.py",
    tool="nvidia-smi", when="c2c",
    members=Members(GPU, lambda status: [g.index for g in status.gpus if g.speeds]))
