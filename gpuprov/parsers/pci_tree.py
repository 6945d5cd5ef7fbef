"""The PCI tree as `lspci -vvv` prints it: each function, the bus range a bridge forwards,
and its Access Control Services (ACS) control register.

lspci prints one block per function: a header line (`17:01.0 PCI bridge: Broadcom / LSI
PEX890xx …`; the domain only where the machine has more than one), then indented lines. A
bridge says `Bus: primary=17, secondary=19, subordinate=19`: the functions on buses 19..19
sit below it. The ACS capability reads `ACSCap:`/`ACSCtl:` with one `+`/`-` per feature
(pciutils ls-ecaps.c, cap_acs). Run without root, lspci cannot read the extended
capabilities and prints `Capabilities: <access denied>` (a real capture:
ROCm/legacy-rocm-build#524); that is unreadable, never "no ACS". Real capture:
tests/fixtures/lspci-vvv/ (gpud's test data, an HGX H100).

ACS redirect: with P2P Request Redirect, P2P Completion Redirect or Egress Control set, a
bridge sends peer-to-peer traffic up to the root complex instead of across the switch; Linux's
own P2P DMA refuses such a path (drivers/pci/p2pdma.c, pci_bridge_has_acs_redir, tests
PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC), and NCCL's troubleshooting guide ("PCI Access Control
Services") says GPUDirect then slows or hangs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU_ADDRESS, EvidenceKind, Members
from gpuprov.pci import BusId

# the ACSCtl features that redirect peer-to-peer traffic upstream (p2pdma.c's RR, CR, EC)
REDIRECT_FEATURES = ("ReqRedir", "CmpltRedir", "EgressCtrl")
_HEADER = re.compile(r"^(?P<bdf>(?:[0-9a-f]{4,}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) "
                     r"(?P<cls>[^:]+?)(?: \[[0-9a-f]{4}\])?: (?P<desc>.*)$")
_BUS = re.compile(r"Bus: primary=([0-9a-f]+), secondary=([0-9a-f]+), subordinate=([0-9a-f]+)")
_FLAG = re.compile(r"(\w+)([+-])")
# PCIe's Device Serial Number capability, as lspci prints it (8 bytes, high first; gpud's
# real HGX H100 capture, tests/fixtures/lspci-vvv/: `Capabilities: [2f0 v1] Device Serial
# Number 40-d7-41-55-51-2d-b0-48`)
_DSN = re.compile(r"^Capabilities: \[[0-9a-f]+ v\d+\] Device Serial Number "
                  r"(?P<dsn>(?:[0-9a-f]{2}-){7}[0-9a-f]{2})$")


@dataclass
class PciFunction:
    bdf: str                      # with its domain: 0000:17:01.0
    pci_class: str                # "PCI bridge", "3D controller"
    description: str              # "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) …"
    buses: tuple[int, int] | None = None   # a bridge's secondary..subordinate
    acs_control: dict[str, bool] | None = None   # None: no ACS capability listed
    access_denied: bool = False   # capabilities unreadable (lspci not run as root)
    driver: str | None = None
    serial: str | None = None     # the Device Serial Number capability, where listed

    @property
    def bus(self) -> int:
        return int(self.bdf.split(":")[-2], 16)

    @property
    def domain(self) -> str:
        return self.bdf.split(":")[0]

    def redirects(self) -> list[str]:
        """The ACS features set that send peer traffic upstream."""
        return [f for f in REDIRECT_FEATURES if (self.acs_control or {}).get(f)]

    @property
    def is_nvidia_gpu(self) -> bool:
        return (self.pci_class in ("3D controller", "VGA compatible controller")
                and self.description.startswith("NVIDIA"))

    @property
    def is_nvswitch(self) -> bool:
        """An NVSwitch: an NVIDIA function of class Bridge (0680), as on an HGX board."""
        return self.pci_class == "Bridge" and self.description.startswith("NVIDIA")

    @property
    def is_rdma_nic(self) -> bool:
        """A ConnectX function (InfiniBand, or Ethernet for RoCE), as pci.ids names them."""
        return (self.pci_class == "Infiniband controller"
                or (self.pci_class == "Ethernet controller"
                    and self.description.startswith("Mellanox")))


@dataclass
class PciTree:
    functions: dict[str, PciFunction] = field(default_factory=dict)

    def bridges_above(self, function: PciFunction) -> list[PciFunction]:
        """Every bridge whose bus range holds the function, nearest last (root port first)."""
        above = [b for b in self.functions.values() if b.buses and b.domain == function.domain
                 and b.buses[0] <= function.bus <= b.buses[1] and b is not function]
        return sorted(above, key=lambda b: b.buses[1] - b.buses[0], reverse=True)

    def parent_missing(self, function: PciFunction) -> bool:
        """A function off its domain's root bus (00) with no bridge in the listing whose
        secondary bus is its own: the listing lacks the bridge right above it (cut short, or
        filtered), so its path cannot be judged."""
        return function.bus != 0 and not any(b.buses[0] == function.bus
                                              for b in self.bridges_above(function))

    def gpus(self) -> list[PciFunction]:
        return [f for f in self.functions.values() if f.is_nvidia_gpu]

    def rdma_nics(self) -> list[PciFunction]:
        return [f for f in self.functions.values() if f.is_rdma_nic]

    def nvswitches(self) -> list[PciFunction]:
        return [f for f in self.functions.values() if f.is_nvswitch]


def parse_lspci_vvv(text: str, source: str) -> PciTree:
    tree = PciTree()
    current: PciFunction | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if not line[0].isspace():
            m = _HEADER.match(line)
            if m is None:
                raise ParseError(source, f"line {number}: not an lspci device line: {line[:100]}")
            bdf = m.group("bdf") if m.group("bdf").count(":") == 2 else f"0000:{m.group('bdf')}"
            current = PciFunction(bdf, m.group("cls"), m.group("desc"))
            tree.functions[bdf] = current
            continue
        if current is None:
            raise ParseError(source, f"line {number}: indented line before any device")
        stripped = line.strip()
        if (bus := _BUS.search(stripped)) is not None:
            current.buses = (int(bus.group(2), 16), int(bus.group(3), 16))
        elif stripped.startswith("ACSCtl:"):
            current.acs_control = {name: sign == "+"
                                   for name, sign in _FLAG.findall(stripped[len("ACSCtl:"):])}
        elif stripped == "Capabilities: <access denied>":
            current.access_denied = True
        elif (dsn := _DSN.match(stripped)) is not None:
            current.serial = dsn.group("dsn")
        elif stripped.startswith("Kernel driver in use:"):
            current.driver = stripped.split(":", 1)[1].strip()
    if not tree.functions:
        raise ParseError(source, "no PCI function listed")
    return tree


LSPCI_VVV = EvidenceKind(
    "lspci-vvv.txt", "identity", parse_lspci_vvv, "{lspci_vvv_command}",
    "every PCI function with its capabilities (`lspci -vvv`, as root): the bridges above "
    "each GPU and RDMA NIC and their ACS control", lab="kernel_view.py",
    # a GPU nvidia-smi lists that lspci leaves out has its PCI path unjudged
    members=Members(GPU_ADDRESS, lambda tree: [BusId.parse(f.bdf) for f in tree.gpus()]))
