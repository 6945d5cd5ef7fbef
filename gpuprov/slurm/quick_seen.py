"""The quick check's drains as the controller sees them: one `sinfo`, each host's Slurm node
held by a `gpuprov: quick check:` reason (or no longer), recorded in the ledger when it
changed since the last look (`gpuprov nodes --slurm`)."""

from __future__ import annotations

from gpuprov.ledger import Ledger
from gpuprov.slurm.cluster import Slurm, SlurmNode
from gpuprov.slurm.policy import QUICK_PREFIX


def observe(ledger: Ledger, slurm: Slurm, names: dict[str, str]) -> dict[str, SlurmNode]:
    """host -> its Slurm node as sinfo shows it now (hosts Slurm does not know are left out);
    each quick-check drain that appeared or went since the last look recorded."""
    cluster = slurm.nodes()
    seen = ledger.quick_check_drains()
    found = {}
    for host, name in names.items():
        node = cluster.get(name)
        if node is None:
            continue
        found[host] = node
        reason = node.reason if node.reason.startswith(QUICK_PREFIX) else ""
        last = seen.get(host)
        if (last[3] if last else "") != reason:
            ledger.record_quick_check(host, name, node.state, reason)
    return found
