"""The versions lock: the exact stack every node of an inventory must end up with.

It is plain Ansible variables (one file in the inventory's group_vars), so a group or
host can override one field the Ansible way. `Lock.from_vars` reads those variables.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.yaml_file import read_yaml

PREFIX = "gpuprov_"


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

    @classmethod
    def from_vars(cls, variables: dict, source: str) -> Lock:
        values = {}
        for f in fields(cls):
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
