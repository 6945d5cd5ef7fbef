"""`validate --stale --slurm` re-checks idle nodes only: sinfo's states decide."""

from __future__ import annotations

from gpuprov.slurm.cluster import SlurmNode
from gpuprov.slurm.policy import holding_reason, idle_for_recheck


def test_only_idle_nodes_and_those_gpuprov_holds_are_picked():
    cluster = {
        "n1": SlurmNode("n1", "idle", "", ("gpu",)),
        "n2": SlurmNode("n2", "mixed", "", ("gpu",)),
        "n3": SlurmNode("n3", "allocated", "", ("gpu",)),
        "n4": SlurmNode("n4", "drained", holding_reason("provisioning", "p-1"), ("gpu",)),
        "n5": SlurmNode("n5", "drained", "bad DIMM, ticket 4711", ("gpu",)),
        "n6": SlurmNode("n6", "down*", "Not responding", ("gpu",)),
        "n7": SlurmNode("n7", "idle~", "", ("gpu",)),       # powered down by Slurm's saving
    }
    names = {f"host{n[1:]}": n for n in cluster}
    picked, left = idle_for_recheck(names, cluster)
    assert picked == ["host1", "host4"]
    assert left == {"host2": "mixed (jobs may run on it)",
                    "host3": "allocated (jobs may run on it)",
                    "host5": "drained (bad DIMM, ticket 4711)",
                    "host6": "down* (Not responding)", "host7": "idle~"}
