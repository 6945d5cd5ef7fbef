"""A site on an emulated Slurm cluster (gpuprov/lab/emulated_slurm.py): the inventory, the
gpuprov configuration and each node's replayed evidence, for the campaign tests and
bench/campaign.py.

Healthy nodes replay tests/evidence_builder.healthy_h100 (built from real captures);
faulted nodes the same with a real kernel log of a GPU fallen off the bus
(fixtures/kernel-log/fallen-off-bus-multiline-570-nvsentinel155.txt), which rejects with a
hardware action.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuprov.lab import emulated_slurm
from tests import evidence_builder
from tests.conftest import gpuprov

FAULT_LOG = "kernel-log/fallen-off-bus-multiline-570-nvsentinel155.txt"
PROFILE = "h100-sxm-8"


def node_names(count: int) -> list[str]:
    return [f"emu{i:04d}" for i in range(1, count + 1)]


@dataclass
class Site:
    root: Path
    cluster: emulated_slurm.EmulatedCluster
    inventory: Path
    config: Path
    state: Path
    plan: dict[str, dict] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**self.cluster.env, "GPUPROV_CONFIG": str(self.config),
                "GPUPROV_STATE_DIR": str(self.state)}

    def validate(self, *args: str, timeout: float = 900, env: dict | None = None):
        return gpuprov("validate", "--via", "slurm", "-i", str(self.inventory), *args,
                       env=env or self.env, timeout=timeout)

    def start_validate(self, *args: str) -> subprocess.Popen:
        from tests.conftest import BIN
        return subprocess.Popen([str(BIN / "gpuprov"), "validate", "--via", "slurm", "-i",
                                 str(self.inventory), *args], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def replan(self) -> None:
        emulated_slurm.plan_file(self.cluster.root, self.plan)

    def slurm(self, *argv: str) -> str:
        return self.cluster.run(list(argv))

    def extras(self) -> dict[str, dict]:
        out = self.slurm("sinfo", "--noheader", "--Node", "--Format", "NodeList:|,Extra:")
        found = {}
        for line in out.splitlines():
            name, _, extra = line.partition("|")
            found[name.strip()] = {} if extra.strip() == "(null)" else json.loads(extra)
        return found

    def reasons(self) -> dict[str, tuple[str, str]]:
        out = self.slurm("sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
        return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.splitlines())}


def build(root: Path, count: int, faulted: set[str] = frozenset(), seconds: float = 2,
          poll_s: float = 1, wait_s: float = 120) -> Site:
    """The cluster up, with every node healthy but `faulted`; the caller may change
    `site.plan` (then `site.replan()`)."""
    root.mkdir(parents=True, exist_ok=True)
    names = node_names(count)
    cluster = emulated_slurm.EmulatedCluster(root / "cluster", names)
    healthy = evidence_builder.healthy_h100(root / "evidence" / "healthy")
    bad = evidence_builder.replace(evidence_builder.healthy_h100(root / "evidence" / "fault"),
                                   "dmesg.txt", evidence_builder.capture(FAULT_LOG))
    site_dir = root / "site"
    (site_dir / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (site_dir / "hosts.ini").write_text("[gpu]\n" + "".join(f"{n}\n" for n in names))
    (site_dir / "group_vars" / "all" / "versions.yml").write_text(yaml.safe_dump(
        {f"gpuprov_{k}": v for k, v in evidence_builder.LOCK.items()}))
    (site_dir / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump(
        {"gpuprov_profile": PROFILE}))
    config = root / "config.yml"
    config.write_text(yaml.safe_dump({"slurm": {
        "shared_dir": str(cluster.shared), "collector": emulated_slurm.collector(cluster.root),
        "known_hosts": str(cluster.known_hosts), "poll_s": poll_s, "drain_timeout_s": wait_s,
        "max_drain_share": 0.5}}))
    site = Site(root, cluster, site_dir / "hosts.ini", config, root / "state")
    cluster.up()
    for name in names:
        site.plan[name] = {"evidence": str(bad if name in faulted else healthy),
                           "seconds": seconds, "key": str(cluster.host_key(name)),
                           "claims": "rejected" if name in faulted else "accepted"}
    site.replan()
    os.chmod(cluster.shared, 0o755)
    return site
