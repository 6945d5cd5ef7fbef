"""Security floors: a versions lock below the fixed version of a published bulletin.

The floors are data (compat.yml `security_floors`, each row citing its bulletin). A lock
below one is a problem naming the bulletin, unless the inventory accepts that bulletin by
id in `gpuprov_security_accepted`: a risk the site takes knowingly, written where the
lock lives, never a silent pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.compat import matrix, version_tuple
from gpuprov.errors import InputError

ACCEPTED_VAR = "gpuprov_security_accepted"


@dataclass(frozen=True)
class Breach:
    component: str
    bulletin: str
    message: str
    source: str


def upstream(version: str) -> str:
    """'5:29.7.0-1~ubuntu.24.04~noble' -> '29.7.0'; '4.5.3-1' -> '4.5.3'."""
    return version.split(":", 1)[-1].split("-", 1)[0]


def _below(version: str, minimum: str) -> bool:
    return version_tuple(upstream(version)) < version_tuple(str(minimum))


def _driver(driver: str) -> Breach | None:
    rows = matrix()["security_floors"]["driver"]
    branch = driver.split(".")[0]
    row = rows["branches"].get(branch)
    if row is None:
        bulletin = rows["unfixed_bulletin"]
        fixed = ", ".join(f"R{b}" for b in sorted(rows["branches"], key=int))
        return Breach("driver", bulletin, f"driver {driver}: branch R{branch} has no fixed "
                      f"release in bulletin {bulletin} (fixed branches: {fixed})",
                      _cite(rows["bulletins"][bulletin]))
    if _below(driver, row["minimum"]):
        bulletin = row["bulletin"]
        return Breach("driver", bulletin, f"driver {driver} is below {row['minimum']}, the "
                      f"R{branch} release that fixes bulletin {bulletin}",
                      _cite(rows["bulletins"][bulletin]))
    return None


def _cite(row: dict) -> str:
    return f"{row['title']}, {row['url']}"


def _single(component: str, what: str, version: str) -> Breach | None:
    row = matrix()["security_floors"][component]
    if not version or not _below(version, row["minimum"]):
        return None
    return Breach(component, row["bulletin"], f"{what} {upstream(version)} is below "
                  f"{row['minimum']}, which fixes bulletin {row['bulletin']}", _cite(row))


def breaches(driver: str, container_toolkit: str, docker: str, dcgm: str) -> list[Breach]:
    """Every floor the lock is below. `docker` is Docker's own version string (empty for
    the distribution's docker.io, whose patches follow its own numbering: not judged
    here); `dcgm` empty where DCGM is not installed."""
    found = [_driver(driver), _single("container_toolkit", "NVIDIA Container Toolkit",
                                      container_toolkit)]
    if docker and re.match(r"^(\d+:)?\d+\.\d+", docker):
        found.append(_single("docker", "Docker Engine", docker))
    found.append(_single("dcgm", "DCGM", dcgm))
    return [b for b in found if b is not None]


def known_bulletins() -> set[str]:
    floors = matrix()["security_floors"]
    return set(floors["driver"]["bulletins"]) | {
        row["bulletin"] for name, row in floors.items() if name != "driver"}


def accepted(variables: dict, source: str) -> frozenset[str]:
    """The bulletins an inventory accepts (`gpuprov_security_accepted`: a list of ids)."""
    value = variables.get(ACCEPTED_VAR) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{source}: {ACCEPTED_VAR}: expected a list of bulletin ids, got "
                         f"{value!r}")
    unknown = sorted(set(value) - known_bulletins())
    if unknown:
        raise InputError(f"{source}: {ACCEPTED_VAR}: unknown bulletin {unknown[0]!r} "
                         f"(known: {', '.join(sorted(known_bulletins()))})")
    return frozenset(value)
