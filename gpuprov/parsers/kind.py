"""What an evidence kind is: one file of a node's evidence directory, declared once.

A parser module declares the kinds it reads beside its parse function (`NICS` in
parsers/ibstat.py): the file, the stage that collects it, the command that writes it on the
node, what it holds, where the lab produces it. gpuprov.evidence gathers every declared kind;
the collectors, the evidence reader, the checks' `needs` and docs/evidence.md all read them
from there (docs/evidence-kinds.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# `lab` of a kind the lab node's own tool writes (dpkg-query over the stand-in packages,
# systemctl, the DDP probe under the real torchrun)
REAL_TOOL = "the real tool"
# `lab` of a kind no lab node produces yet: its checks read `skip` there (docs/limits.md)
NOT_IN_LAB = "not in the lab yet"

# The collection stages, in the order a validation runs them; `fabric` is the rack's, after
# every node's own stages (gpuprov/validation/fabric_stage.py); `rack` an NVL72 rack's
# judgement over its trays' evidence, last (gpuprov/validation/rack.py)
STAGES = ("identity", "snapshot", "soak", "ddp", "dcgm", "fabric", "rack")


# What a kind's file is about, member by member (DESIGN.md "Coverage"): a GPU by its
# nvidia-smi index, a GPU by its PCI address (a file that names GPUs only by address: lspci),
# an RDMA NIC port by `<ca> port <n>` (ibstat's and sysfs' name for it)
GPU = "GPU"
GPU_ADDRESS = "GPU by PCI address"
NIC_PORT = "NIC port"


@dataclass(frozen=True)
class Members:
    """The members of the node a kind's file must cover, and how to list those it does.

    `listed(parsed)` names each member the file has a complete record of (a GPU with its
    result line and its figures, not merely its name), or None where the file's form names
    no member at all; the checks' registry fails a check whose file leaves out a member the
    node and its profile declare (gpuprov/checks/coverage.py)."""
    unit: str                                   # GPU, GPU_ADDRESS or NIC_PORT
    listed: Callable[[Any], Iterable[Any]]


@dataclass(frozen=True)
class EvidenceKind:
    file: str
    stage: str
    parser: Callable[[str, str], Any] | None
    # run on the node, `{field}` from the node's settings (NodeSettings); None where the
    # stage does more than run one command (its collector writes the file)
    command: str | None
    holds: str
    # the lab's stand-in that writes it on a lab node (a path under gpuprov/lab/), or "the
    # real tool" where the lab node runs the distribution's own
    lab: str
    fallback: str | None = None   # read instead when `file` is absent (earlier runs' form)
    tool: str | None = None       # whose failure explains its absence (SMI_ERROR's tool)
    # collected only where the node's profile sets this key, or the inventory asks for it
    # (NodeSettings.collects: IMEX where the host's rack runs a domain)
    when: str | None = None
    again_after_soak: bool = False   # collected again (replaced) after the soak
    members: Members | None = None   # the node's members it covers (None: node-wide)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"{self.file}: unknown stage {self.stage!r}")

    def __str__(self) -> str:
        return self.file

    def applies(self, profile: Any, asked: frozenset[str] = frozenset()) -> bool:
        """Whether a node of `profile` has this file collected (`when`'s key set in the
        profile, or among what the inventory asks of the node)."""
        return self.when is None or self.when in asked or bool(profile.data.get(self.when))
