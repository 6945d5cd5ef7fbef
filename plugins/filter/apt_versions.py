"""Exact package versions from `apt-cache madison`, for every role that installs at a lock.

One reading of madison's table for the driver, cuDNN, DCGM and NCCL: each role says which
Debian versions carry its lock (a regular expression), this picks each package's newest
such version and words what is missing.
"""

from __future__ import annotations

import re


def apt_versions(madison_lines: list[str], packages: list[str], version_regex: str,
                 wanted: str = "") -> dict:
    """For each package, the first (madison lists newest first) Debian version that
    `version_regex` matches in full; the packages without one, worded with what the
    repositories do carry (`wanted` names the lock in the words, the regex by default)."""
    pattern = re.compile(version_regex)
    available: dict[str, list[str]] = {p: [] for p in packages}
    for line in madison_lines:
        fields = [f.strip() for f in line.split("|")]
        if len(fields) >= 2 and fields[0] in available and fields[1] not in available[fields[0]]:
            available[fields[0]].append(fields[1])
    found = {}
    for package, versions in available.items():
        match = next((v for v in versions if pattern.fullmatch(v)), None)
        if match:
            found[package] = match
    missing = [p for p in packages if p not in found]
    why = "; ".join(f"{p} {wanted or version_regex} absent (the repositories have: "
                    f"{', '.join(available[p]) or 'no version of it'})" for p in missing)
    return {"found": found, "missing": missing, "why_missing": why,
            "specs": [f"{p}={found[p]}" for p in packages if p in found]}


class FilterModule:
    def filters(self) -> dict:
        return {"apt_versions": apt_versions}
