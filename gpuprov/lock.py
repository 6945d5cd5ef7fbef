"""The versions lock: the exact stack every node of an inventory must end up with.

It is plain Ansible variables (one file in the inventory's group_vars), so a group or
host can override one field the Ansible way. `Lock.from_vars` reads those variables.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.yaml_file import read_yaml

PREFIX = "gpuprov_"
FIRMWARE_MIN = "firmware_min"
# The firmware minimums a site may lock (`gpuprov_firmware_min`, optional), per device
# model: `vbios` by a GPU's product name as nvidia-smi prints it (a substring: "H100 80GB
# HBM3"), `connectx` by the HCA's CA type as ibstat prints it ("MT4129", a ConnectX-7) or by
# its PSID ("MT_0000000838": one card's firmware image; an OEM's image has its own PSID and
# its own releases), `nvswitch` by the switch's PCI vendor:device as `lspci -nn` prints it
# ("10de:22a3", an HGX H100's NVSwitch: pci.ids often names none), and the version forms each
# takes (nvidia-smi's "96.00.74.00.0E", ibstat's "28.39.1002", the driver's procfs
# "96.10.3f.00.01": parsers/nvswitch_info.py).
_HEX_FIVE = re.compile(r"^[0-9A-Fa-f]{2}(\.[0-9A-Fa-f]{2}){4}$")
FIRMWARE_FORMS = {"vbios": _HEX_FIVE, "connectx": re.compile(r"^\d+\.\d+\.\d+$"),
                  "nvswitch": _HEX_FIVE}
_HEX_KINDS = ("vbios", "nvswitch")
# the model keys a kind takes where they have a form of their own
_MODEL_FORMS = {"nvswitch": re.compile(r"^10de:[0-9a-f]{4}$")}


def firmware_key(kind: str, version: str) -> tuple[int, ...] | None:
    """A firmware version as comparable numbers (VBIOS and NVSwitch fields are hex), None
    when it is not of its kind's form (FIRMWARE_FORMS)."""
    if not FIRMWARE_FORMS[kind].match(version or ""):
        return None
    return tuple(int(part, 16 if kind in _HEX_KINDS else 10) for part in version.split("."))


_CA_TYPE = re.compile(r"^MT\d+$")   # ibstat's CA type; any other connectx key is a PSID


def psid_keys(minimums: dict) -> list[str]:
    """The `connectx` minimums locked by PSID rather than by CA type."""
    return [k for k in minimums.get("connectx") or {} if not _CA_TYPE.match(k)]


@dataclass(frozen=True)
class FirmwareJudged:
    """One device a locked minimum applies to: a GPU (by index), a ConnectX port (by name) or
    an NVSwitch (by PCI address)."""
    kind: str              # vbios | connectx | nvswitch
    device: str            # "0", "mlx5_0 port 1", "0000:05:00.0"
    model: str             # the product name, CA type, PSID or PCI id the minimum matched
    found: str | None      # the version read; None when none was
    minimum: str

    @property
    def below(self) -> bool:
        """Below the minimum, or unreadable (never a pass where a minimum applies)."""
        return (firmware_key(self.kind, self.found or "") or ()) < \
            firmware_key(self.kind, self.minimum)

    @property
    def readable(self) -> bool:
        return firmware_key(self.kind, self.found or "") is not None


def psid_unmatched(minimums: dict, ports: list[tuple[str, str | None, str | None]]
                   ) -> list[str]:
    """The ports, as (name, CA type, PSID), whose minimum cannot be known: minimums are
    locked by PSID, the port's PSID was not read and its CA type has none to fall back on.
    Never a pass (the validator's firmware check and drift)."""
    if not psid_keys(minimums):
        return []
    return [name for name, ca_type, psid in ports
            if psid is None and ca_type not in minimums["connectx"]]


def judge_firmware(minimums: dict, gpus: list[tuple[int, str, str | None]],
                   ports: list[tuple[str, str | None, str | None, str | None]],
                   switches: list[tuple[str, str, str | None]] = ()
                   ) -> list[FirmwareJudged]:
    """Every device a minimum applies to, in order: GPUs as (index, product name, VBIOS),
    whose name contains a locked model; ConnectX ports as (name, CA type, firmware, PSID),
    whose PSID, else CA type, is a locked model; NVSwitches as (PCI address, PCI id,
    version), whose id is a locked model. The validator's `firmware` check and drift both
    judge by it."""
    judged = []
    for index, name, vbios in gpus:
        for model, least in (minimums.get("vbios") or {}).items():
            if model in (name or ""):
                judged.append(FirmwareJudged("vbios", str(index), name, vbios, least))
    connectx = minimums.get("connectx") or {}
    for name, ca_type, firmware, psid in ports:
        model = psid if psid in connectx else ca_type
        if model in connectx:
            judged.append(FirmwareJudged("connectx", name, model, firmware, connectx[model]))
    nvswitch = minimums.get("nvswitch") or {}
    judged += [FirmwareJudged("nvswitch", address, pci_id, version, nvswitch[pci_id])
               for address, pci_id, version in switches if pci_id in nvswitch]
    return judged


@dataclass(frozen=True)
class Lock:
    driver_version: str          # exact, e.g. 550.90.07
    driver_flavour: str          # open | proprietary | auto (from the GPU architecture)
    cuda_version: str            # toolkit X.Y, e.g. 12.4
    cudnn_version: str           # e.g. 9.1.0.70
    container_toolkit_version: str
    docker_version: str          # "" for the distribution's docker.io
    torch_version: str
    torch_cuda_build: str        # cu124 … or cpu
    python_version: str
    # optional (FIRMWARE_FORMS); out of the hash, as a dict cannot be hashed
    firmware_min: dict = field(default_factory=dict, hash=False)

    @classmethod
    def from_vars(cls, variables: dict, source: str) -> Lock:
        values: dict = {FIRMWARE_MIN: _firmware_min(variables.get(PREFIX + FIRMWARE_MIN), source)}
        for f in fields(cls):
            if f.name == FIRMWARE_MIN:
                continue
            key = PREFIX + f.name
            if key not in variables:
                raise InputError(f"{source}: {key}: missing from the versions lock")
            value = variables[key]
            if value is None:
                value = ""
            if not isinstance(value, (str, int, float)):
                raise InputError(f"{source}: {key}: must be a string, got {value!r}")
            values[f.name] = str(value)
        if values["driver_flavour"] not in ("open", "proprietary", "auto"):
            raise InputError(f"{source}: {PREFIX}driver_flavour: "
                             f"{values['driver_flavour']!r} is not open, proprietary or auto")
        return cls(**values)

    @classmethod
    def of_host(cls, variables: dict, source: str) -> Lock | None:
        """A host's lock from its inventory variables; None when it has no lock at all."""
        if PREFIX + "driver_version" not in variables:
            return None
        return cls.from_vars(variables, source)

    @classmethod
    def of_inventory_host(cls, variables: dict, host: str, inventory: Path) -> Lock:
        """A host's lock, which it must have (drift and doctor judge against it)."""
        lock = cls.of_host(variables, f"host {host}")
        if lock is None:
            raise InputError(f"host {host}: no versions lock (gpuprov_* variables) in "
                             f"{inventory}")
        return lock

    @classmethod
    def load(cls, path: Path) -> Lock:
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected a mapping of {PREFIX}* variables")
        return cls.from_vars(data, str(path))

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def cudnn_major(self) -> str:
        return self.cudnn_version.split(".")[0]


def _firmware_min(value, source: str) -> dict[str, dict[str, str]]:
    """`gpuprov_firmware_min`: {vbios|connectx|nvswitch: {model: minimum version}}, each
    version in its tool's form; absent or empty locks no firmware."""
    key = PREFIX + FIRMWARE_MIN
    if not value:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{source}: {key}: must be a mapping of "
                         f"{'/'.join(FIRMWARE_FORMS)} minimums")
    result: dict[str, dict[str, str]] = {}
    for kind, minimums in value.items():
        if kind not in FIRMWARE_FORMS:
            raise InputError(f"{source}: {key}.{kind}: unknown firmware kind (known: "
                             f"{', '.join(FIRMWARE_FORMS)})")
        if not isinstance(minimums, dict) or not minimums:
            raise InputError(f"{source}: {key}.{kind}: must map a device model to its minimum")
        for model, version in minimums.items():
            if kind in _MODEL_FORMS and not _MODEL_FORMS[kind].match(str(model)):
                raise InputError(f"{source}: {key}.{kind}.{model}: not a PCI id as lspci -nn "
                                 "prints it (10de:xxxx, lowercase)")
            if not FIRMWARE_FORMS[kind].match(str(version)):
                raise InputError(f"{source}: {key}.{kind}.{model}: {version!r} is not a "
                                 f"{kind} version")
        result[kind] = {str(m): str(v) for m, v in minimums.items()}
    return result
