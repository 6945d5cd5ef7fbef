"""A provisioning run that costs nothing where nothing would change: a host is skipped when
its last full run converged from the same inputs and the host still shows what that run
left.

The inputs (the fingerprint): the host's versions lock, every inventory variable it has,
and the collection's files (roles, playbooks, plugins): a hash, never the values.

What the host shows (the snapshot), read in one SSH round trip, read-only:

- every installed package with its version and hold (all of dpkg's, not only the locked
  ones: a kernel installed, a package removed or upgraded by hand);
- the drift probe's lock checks (drift/expected.py: the locked packages held at their
  versions, the loaded driver module, /usr/local/cuda, Docker's NVIDIA runtime, the
  PyTorch environments' smoke records);
- the SHA-256 of every file the last full run left in place (each task result that names
  a file: templates, copies, downloads, lines in files), or where it points (links);
- whether each unit the run started or enabled is enabled and active;
- the loaded kernel modules (`/sys/module`), the running kernel (`uname -r`), the installed
  kernels (`/lib/modules`: the driver is asserted built for each), the OS release and
  Secure Boot's state (`mokutil --sb-state`);
- apt's sources: the SHA-256 of /etc/apt/sources.list and of every file under
  sources.list.d (an entry added or changed after the run, issue 66), and, through drift's
  probe, whether apt can read them at all.

Not covered, so not judged: directories' contents (an unpacked archive, a build tree, a
conda environment's packages beyond its smoke record), Docker's images, and anything a
task changed without naming it in its result (a `command`). `gpuprov provision --full`
walks every task whatever the snapshot says.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from gpuprov import collection
from gpuprov.drift import expected, probe
from gpuprov.drift.run import where_of
from gpuprov.errors import InputError
from gpuprov.ledger import ProvisionBaseline
from gpuprov.lock import Lock
from gpuprov.remote import probing

MARK = probe.MARK          # one probe: drift's sections and the snapshot's
UNIT_ACTIONS = ("ansible.builtin.systemd_service", "ansible.builtin.systemd",
                "ansible.builtin.service")


@dataclass
class Touched:
    """What one host's full run named in its task results: the files and units it keeps.
    The keys are those Ansible's modules return (their RETURN documentation, and the job
    events of a lab run: `copy`, `template`, `file`, `get_url` return `dest` or `path` and
    `state`; `systemd_service` returns `name`)."""
    files: set[str] = field(default_factory=set)
    units: set[str] = field(default_factory=set)

    def note(self, action: str, result: dict) -> None:
        path = result.get("dest") or result.get("path")
        if isinstance(path, str) and result.get("state") in ("file", "link", "hard"):
            self.files.add(path)
        if action in UNIT_ACTIONS and isinstance(result.get("name"), str):
            self.units.add(result["name"])


@cache
def collection_digest() -> str:
    """The collection's roles, playbooks and plugins, hashed by path and content."""
    digest = hashlib.sha256()
    for top in ("roles", "playbooks", "plugins", "meta", "galaxy.yml"):
        base = collection.ROOT / top
        paths = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(collection.ROOT)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint(lock: dict, settings: dict) -> str:
    """The run's inputs for one host: its lock, every variable it is given (Inventory.
    settings), the collection."""
    text = json.dumps({"lock": lock, "variables": settings,
                       "collection": collection_digest()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# where the roles read the running kernel and the loaded modules (their defaults: a
# server's; the lab's inventory points them at its stand-ins)
KERNEL_RELEASE = ("nvidia_driver_kernel_release_command", "uname -r")
MODULE_DIR = ("gpudirect_sys_module_dir", "/sys/module")
CPU_DIR = ("cpu_governor_sysfs_dir", "/sys/devices/system/cpu")


def _script(variables: dict, files: list[str], units: list[str]) -> str:
    """Drift's probe without firmware (see decide) and the snapshot's sections."""
    quoted = " ".join(shlex.quote(f) for f in files)
    release = str(variables.get(KERNEL_RELEASE[0]) or KERNEL_RELEASE[1])
    modules = shlex.quote(str(variables.get(MODULE_DIR[0]) or MODULE_DIR[1]))
    cpus = shlex.quote(str(variables.get(CPU_DIR[0]) or CPU_DIR[1]))
    parts = [probe.script(where_of(variables), firmware_min={}),
             f"echo '{MARK}files'",
             # an empty word list is no iteration (POSIX sh's `for`)
             f"for f in {quoted}; do if [ -L \"$f\" ]; then echo \"link $(readlink \"$f\") $f\";"
             " elif [ -f \"$f\" ]; then sha256sum -- \"$f\"; else echo \"absent - $f\"; fi;"
             " done",
             f"echo '{MARK}units'"]
    parts += [f"echo \"$(systemctl is-enabled {shlex.quote(u)} 2>/dev/null || true)"
              f" $(systemctl is-active {shlex.quote(u)} 2>/dev/null || true) {u}\""
              for u in units]
    parts += [f"echo '{MARK}host'", f"{release} 2>&1", "ls /lib/modules 2>/dev/null",
              "cat /etc/os-release 2>/dev/null",
              "mokutil --sb-state 2>/dev/null || echo 'SecureBoot unknown'",
              f"echo '{MARK}modules'", f"ls {modules} 2>/dev/null",
              f"echo '{MARK}apt_sources'",
              "sha256sum -- /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null; true",
              # sysfs state the cpu_governor role sets, which no file or unit shows
              f"echo '{MARK}governors'",
              f"cat {cpus}/cpu[0-9]*/cpufreq/scaling_governor 2>/dev/null | sort | uniq -c"]
    return "; ".join(parts)


def snapshot_of(text: str, source: str) -> tuple[dict, probe.HostState]:
    """The snapshot (JSON-able, compared as a whole) and drift's view of the same output."""
    state = probe.parse(text, source)
    found = probing.sections(text, MARK)
    packages = sorted(f"{name} {version}{' held' if held else ''}"
                      for name, (version, held) in state.packages.items())
    return {"packages": hashlib.sha256("\n".join(packages).encode()).hexdigest(),
            "files": sorted(found.get("files", [])),
            "units": sorted(found.get("units", [])),
            "host": found.get("host", []),
            "modules": found.get("modules", []),
            "apt_sources": sorted(found.get("apt_sources", [])),
            "governors": [" ".join(line.split()) for line in found.get("governors", [])]}, state


@dataclass(frozen=True)
class Decision:
    host: str
    skip: bool
    why: str                 # in sync with run …, or what made it run in full


def _differs(before: dict, now: dict) -> str:
    """The first part of the snapshot that changed, in words."""
    if before["packages"] != now["packages"]:
        return "installed packages or holds changed"
    for part, words in (("files", "file"), ("units", "unit")):
        gone = sorted(set(before[part]) - set(now[part]))
        if gone:
            return f"{words} {gone[0].rsplit(' ', 1)[-1]} changed"
    if before["host"] != now["host"]:
        return "kernels, OS release or Secure Boot state changed"
    if before.get("apt_sources") != now["apt_sources"]:
        return "apt's sources changed (/etc/apt/sources.list, sources.list.d)"
    if before.get("governors") != now["governors"]:
        return "CPU governors changed"
    return "loaded kernel modules changed"


def unreadable_units(snapshot: dict) -> list[str]:
    """The units whose enabled or active state systemctl did not print (no systemd, no
    such unit): never in sync."""
    return [line.split()[-1] for line in snapshot["units"] if len(line.split()) < 3]


def _read(host: str, inventory: Path, control_dir: Path, variables: dict, files: list[str],
          units: list[str]) -> tuple[dict, probe.HostState]:
    output = probing.run_script(host, inventory, control_dir,
                                _script(variables, files, units), MARK)
    return snapshot_of(output, f"host {host}")


def decide(host: str, inventory: Path, control_dir: Path, lock: Lock, variables: dict,
           inputs: str, baseline: ProvisionBaseline | None) -> Decision:
    """Skip `host` only when its inputs (`inputs`: fingerprint()) and its snapshot are its
    baseline's and drift finds nothing; `variables`: its role variables (drift's)."""
    if baseline is None:
        return Decision(host, False, "no full converged run stands for it")
    if inputs != baseline.fingerprint:
        return Decision(host, False, "its lock, variables or the collection changed")
    try:
        now, state = _read(host, inventory, control_dir, variables, baseline.files,
                           baseline.units)
    except (probing.ProbeFailed, InputError) as exc:
        return Decision(host, False, f"not probed: {exc}")
    unread = unreadable_units(now)
    if unread:
        return Decision(host, False, f"unit {unread[0]}: its state could not be read")
    # Firmware is no role's to change: below its minimum, a full run would not mend it, so
    # the skip neither reads nor judges it (drift and validate do).
    drifted = expected.differences(state, replace(lock, firmware_min={}), variables)
    if drifted:
        return Decision(host, False, f"drifted: {drifted[0].summary}")
    if now != baseline.snapshot:
        return Decision(host, False, _differs(baseline.snapshot, now))
    return Decision(host, True, f"in sync with run {baseline.run_id}")


def take(host: str, run_id: str, inventory: Path, control_dir: Path, variables: dict,
         inputs: str, touched: Touched) -> ProvisionBaseline | None:
    """After a full converged run: the host's baseline; None when it could not be read
    (its next run is then full)."""
    files, units = sorted(touched.files), sorted(touched.units)
    try:
        snapshot, _ = _read(host, inventory, control_dir, variables, files, units)
    except (probing.ProbeFailed, InputError):
        return None
    return ProvisionBaseline(host, run_id, inputs, files, units, snapshot)
