"""PCI addresses: one type for every form the tools print.

nvidia-smi prints `00000000:18:00.0` (8-digit domain, upper case), the kernel
`0000:18:00` or `0000:18:00.0`, sysfs and lspci `0000:18:00.0` / `18:00.0` (lower case).
`BusId.parse` takes any of them; the properties give each form back, so a kernel-log line,
an lspci row and an nvidia-smi GPU compare as equals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.errors import InputError

_FORM = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):"
                   r"(?P<device>[0-9a-fA-F]{2})(?:\.(?P<function>[0-7]))?$")


@dataclass(frozen=True, order=True)
class BusId:
    domain: int
    bus: int
    device: int
    function: int = 0

    @classmethod
    def parse(cls, text: str) -> BusId:
        m = _FORM.match(text.strip())
        if not m:
            raise InputError(f"{text!r}: not a PCI address")
        return cls(int(m.group("domain") or "0", 16), int(m.group("bus"), 16),
                   int(m.group("device"), 16), int(m.group("function") or "0"))

    @classmethod
    def find(cls, text: str) -> BusId | None:
        """The address, or None for text that is not one (no exception)."""
        try:
            return cls.parse(text)
        except InputError:
            return None

    @property
    def smi(self) -> str:
        """nvidia-smi's form: 00000000:18:00.0."""
        return f"{self.domain:08X}:{self.bus:02X}:{self.device:02X}.{self.function}"

    @property
    def kernel(self) -> str:
        """The NVIDIA kernel module's form in Xid lines: 0000:18:00."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}"

    @property
    def sysfs(self) -> str:
        """/sys/bus/pci/devices' name, also lspci -D: 0000:18:00.0."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function}"

    @property
    def short(self) -> str:
        """lspci's default form: 18:00.0."""
        return f"{self.bus:02x}:{self.device:02x}.{self.function}"

    def __str__(self) -> str:
        return self.smi
