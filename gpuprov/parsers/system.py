"""Plain system evidence: `dpkg-query -W`, `lsmod`, `lspci -nn -d 10de:`, `systemctl show`."""

from __future__ import annotations

from gpuprov.parsers.errors import ParseError


def parse_packages(text: str, source: str) -> dict[str, str]:
    """`dpkg-query -W` lines `name<TAB>version` (architecture suffix dropped)."""
    packages = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            raise ParseError(source, f"not a `dpkg-query -W` line: {line!r}")
        if parts[1]:  # dpkg-query lists known-but-absent packages with no version
            packages[parts[0].split(":")[0]] = parts[1]
    return packages


def parse_lsmod(text: str, source: str) -> set[str]:
    lines = text.splitlines()
    if lines and not lines[0].startswith("Module"):
        raise ParseError(source, "not `lsmod` output (no `Module` header)")
    return {line.split()[0] for line in lines[1:] if line.strip()}


def parse_lspci(text: str, source: str) -> list[str]:
    """NVIDIA GPU functions (3D/VGA controllers) from `lspci -nn -d 10de:`."""
    return [line for line in text.splitlines()
            if ("3D controller" in line or "VGA compatible" in line) and "[10de:" in line]


def parse_systemctl(text: str, source: str) -> dict[str, dict[str, str]]:
    """`systemctl show -p Id,LoadState,ActiveState,SubState,UnitFileState UNIT…` blocks."""
    units: dict[str, dict[str, str]] = {}
    block: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if block:
                if "Id" not in block:
                    raise ParseError(source, "a `systemctl show` block without Id=")
                units[block["Id"]] = block
            block = {}
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError(source, f"not a `systemctl show` line: {line!r}")
        block[key] = value
    return units
