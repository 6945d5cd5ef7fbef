"""gpuprov's own configuration file: the site's settings that are not Ansible's.

`$GPUPROV_CONFIG`, else `$XDG_CONFIG_HOME/gpuprov/config.yml` (`~/.config/gpuprov/config.yml`);
no file means no settings. Sections:

    metrics:
      textfile_dir: /var/lib/prometheus/node-exporter   # gpuprov.prom after every run
    slurm:                      # used by `validate --slurm` and `provision --slurm`
      ssh_host: slurm-head      # run Slurm's commands there (default: on this machine)
      ssh_config: ~/.ssh/config # the SSH client configuration for it (default: ssh's own)
      drain_timeout_s: 600      # how long to wait for a drained node's jobs to end
      max_drain_share: 0.2      # circuit breaker: most of a partition one run may drain
      shared_dir: /shared/gpuprov  # validate --via slurm: the same path on every node
      node_dir: /var/lib/gpuprov/campaigns  # without shared_dir: results fetched over SSH
      collector: /opt/gpuprov/bin/gpuprov  # gpuprov on the nodes (the controller's version)
      known_hosts: ~/.ssh/known_hosts      # the nodes' host keys (their results' signers)
      poll_s: 5                 # how often a campaign asks Slurm for its jobs
    ansible:
      strategy: mitogen         # mitogen (default) or linear: Ansible's own, without Mitogen
    acceptance:
      valid_for: 7d             # how long an acceptance holds (s, m, h, d, w; never)
      profiles:                 # a profile's own period
        h100-sxm-8: 3d
    offenders:                  # `gpuprov nodes --offenders`
      rejections: 3             # a node or GPU rejected this many times …
      within: 30d               # … within this period is a repeat offender

An environment variable overrides one setting (`GPUPROV_METRICS_DIR`). An unknown section or
key is an error naming the file and the key: a misspelt setting silently ignored is a
setting that never took effect.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.yaml_file import read_yaml

CONFIG_ENV = "GPUPROV_CONFIG"
METRICS_DIR_ENV = "GPUPROV_METRICS_DIR"

# section -> its keys
KNOWN = {"acceptance": {"valid_for", "profiles"},
         "ansible": {"strategy"},
         "metrics": {"textfile_dir"},
         "observe": {"checks", "profiles"},
         "offenders": {"rejections", "within"},
         "slurm": {"ssh_host", "ssh_config", "drain_timeout_s", "max_drain_share",
                   "shared_dir", "node_dir", "collector", "known_hosts", "poll_s"}}


def config_path() -> Path:
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuprov" / "config.yml"


def load(path: Path | None = None) -> dict[str, dict]:
    """The configuration file's sections; {} when there is no file (unless $GPUPROV_CONFIG
    names one: then it must exist)."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get(CONFIG_ENV) and path == Path(os.environ[CONFIG_ENV]):
            raise InputError(f"{path} (from {CONFIG_ENV}) does not exist")
        return {}
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of sections ({', '.join(sorted(KNOWN))})")
    for section, values in data.items():
        if section not in KNOWN:
            raise InputError(f"{path}: unknown section {section!r} "
                             f"(known: {', '.join(sorted(KNOWN))})")
        if section == "observe" and isinstance(values, list):
            continue    # the site-wide list alone (observed_checks)
        if not isinstance(values, dict):
            raise InputError(f"{path}: {section}: expected a mapping")
        for key in values:
            if key not in KNOWN[section]:
                raise InputError(f"{path}: {section}.{key}: unknown setting "
                                 f"(known: {', '.join(sorted(KNOWN[section]))})")
    return data


def metrics_dir() -> tuple[Path, str] | None:
    """Where node_exporter's textfile collector reads gpuprov's metrics, and where that
    setting came from (for error messages); None when metrics are not configured."""
    if os.environ.get(METRICS_DIR_ENV):
        return Path(os.environ[METRICS_DIR_ENV]), METRICS_DIR_ENV
    path = config_path()
    value = load(path).get("metrics", {}).get("textfile_dir")
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise InputError(f"{path}: metrics.textfile_dir: expected a directory path, got {value!r}")
    return Path(os.path.expanduser(value)), f"{path} metrics.textfile_dir"


@dataclass(frozen=True)
class SlurmSettings:
    ssh_host: str | None = None
    ssh_config: str | None = None
    drain_timeout_s: float = 600
    max_drain_share: float = 0.2
    # `validate --via slurm`: a directory at the same path on this machine and every node,
    # writable by the jobs (None: each node's result fetched over SSH from node_dir, a
    # root-only directory on the node); the collector's command on the nodes; the
    # known_hosts whose host keys authenticate the nodes' results; how often Slurm is asked
    shared_dir: str | None = None
    node_dir: str = "/var/lib/gpuprov/campaigns"
    collector: str = "gpuprov"
    known_hosts: str = "~/.ssh/known_hosts"
    poll_s: float = 5.0


def slurm() -> SlurmSettings:
    """The `slurm` section, each value checked (a bad one names the file and the key)."""
    path = config_path()
    section = load(path).get("slurm", {})
    defaults = SlurmSettings()

    def text(key: str) -> str | None:
        value = section.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError(f"{path}: slurm.{key}: expected a name, got {value!r}")
        return value

    def number(key: str, low: float, high: float) -> float:
        value = section.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not low < value <= high:
            raise InputError(f"{path}: slurm.{key}: expected a number in ({low:g}, {high:g}],"
                             f" got {value!r}")
        return float(value)

    ssh_config = text("ssh_config")
    shared_dir = text("shared_dir")
    node_dir = text("node_dir") or defaults.node_dir
    if not node_dir.startswith("/"):
        raise InputError(f"{path}: slurm.node_dir: expected an absolute path on the nodes, "
                         f"got {node_dir!r}")
    return SlurmSettings(
        ssh_host=text("ssh_host"),
        ssh_config=os.path.expanduser(ssh_config) if ssh_config else None,
        drain_timeout_s=number("drain_timeout_s", 0, 7 * 86400),
        max_drain_share=number("max_drain_share", 0, 1),
        shared_dir=os.path.expanduser(shared_dir) if shared_dir else None,
        node_dir=node_dir.rstrip("/") or "/",
        collector=text("collector") or defaults.collector,
        known_hosts=os.path.expanduser(text("known_hosts") or defaults.known_hosts),
        poll_s=number("poll_s", 0, 3600),
    )


STRATEGIES = ("mitogen", "linear")


def ansible_strategy() -> str:
    """How provisioning runs tasks on hosts: `mitogen` (Mitogen for Ansible's linear
    strategy, the default: a no-op run in about half the time) or `linear` (Ansible's own),
    for a site that meets a module Mitogen cannot run."""
    path = config_path()
    value = load(path).get("ansible", {}).get("strategy", "mitogen")
    if value not in STRATEGIES:
        raise InputError(f"{path}: ansible.strategy: expected one of {', '.join(STRATEGIES)},"
                         f" got {value!r}")
    return value


# How long an acceptance holds unless the configuration says: a week, as ClusterMAX expects
# active health checks on idle nodes weekly (clustermax.ai, expectations: health checks)
ACCEPTANCE_VALID_FOR_S = 7 * 86400
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")


def duration(value: object, where: str) -> float | None:
    """Seconds from `90`, `12h`, `7d`, `2w`; None for `never`."""
    if value == "never":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = _DURATION.match(value.strip()) if isinstance(value, str) else None
    if match is None or int(match.group(1)) == 0:
        raise InputError(f"{where}: expected a duration such as 12h, 7d or 2w (or never), "
                         f"got {value!r}")
    return float(int(match.group(1)) * _UNITS[match.group(2)])


def acceptance_periods() -> Callable[[str | None], float | None]:
    """The configuration read once: for a profile, the seconds an acceptance under it holds
    (its own period, else the site's, else a week); None: it never expires."""
    path = config_path()
    section = load(path).get("acceptance", {})
    profiles = section.get("profiles") or {}
    if not isinstance(profiles, dict):
        raise InputError(f"{path}: acceptance.profiles: expected a mapping of profile names")
    site = (duration(section["valid_for"], f"{path}: acceptance.valid_for")
            if "valid_for" in section else float(ACCEPTANCE_VALID_FOR_S))
    own = {name: duration(value, f"{path}: acceptance.profiles.{name}")
           for name, value in profiles.items()}
    return lambda profile: own.get(profile, site)


def _check_list(value: object, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: expected a list of check ids")
    return frozenset(value)


def observed_checks() -> Callable[[str | None], frozenset[str]]:
    """The configuration read once: for a profile, the checks judged in observe mode (their
    findings reported, never a rejection): the site's (`observe: [ids]`, or `observe:
    {checks: [ids]}`) and the profile's own (`observe: {profiles: {NAME: [ids]}}`)."""
    path = config_path()
    section = load(path).get("observe") or {}
    if isinstance(section, list):
        section = {"checks": section}
    site = _check_list(section.get("checks"), f"{path}: observe.checks")
    profiles = section.get("profiles") or {}
    if not isinstance(profiles, dict):
        raise InputError(f"{path}: observe.profiles: expected a mapping of profile names")
    own = {name: _check_list(value, f"{path}: observe.profiles.{name}")
           for name, value in profiles.items()}
    return lambda profile: site | own.get(profile or "", frozenset())


def acceptance_valid_for(profile: str | None) -> float | None:
    """One profile's period (acceptance_periods, for a single look-up)."""
    return acceptance_periods()(profile)


# our defaults: three rejections (issue 41's); a month, about the 3-4 weeks between
# burn-ins that NVIDIA recommends (as issue 41 quotes it)
OFFENDER_REJECTIONS = 3
OFFENDER_WITHIN_S = 30 * 86400


def offender_rule() -> tuple[int, float]:
    """(rejections, within seconds) that make a repeat offender (the `offenders` section)."""
    path = config_path()
    section = load(path).get("offenders", {})
    count = section.get("rejections", OFFENDER_REJECTIONS)
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise InputError(f"{path}: offenders.rejections: expected a whole number of at least "
                         f"2, got {count!r}")
    within = (duration(section["within"], f"{path}: offenders.within")
              if "within" in section else float(OFFENDER_WITHIN_S))
    if within is None:
        raise InputError(f"{path}: offenders.within: a period, not never")
    return count, within
