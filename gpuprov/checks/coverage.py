"""Coverage, as one rule: a check whose evidence leaves out a member of the node fails,
naming the member (DESIGN.md "Coverage").

An evidence kind declares its members (`EvidenceKind.members`: GPUs by index or by PCI
address, RDMA NIC ports by name) and how to list those its file covers; this module says
which members the node and its profile declare, and what each of a check's files leaves
out. The registry applies it to every check after its evaluator, so no evaluator has to
remember it: a log cut short, a GPU's lines missing from one file, a port present before
the soak and gone after, a count below the profile's.
"""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.parsers.ibstat import NICS
from gpuprov.parsers.kind import GPU, GPU_ADDRESS, NIC_PORT, EvidenceKind

Gap = tuple[int | None, str]   # the GPU index it is about (None: a port), what is missing


def declared(ctx: Context, unit: str, kinds: tuple[EvidenceKind, ...]) -> list:
    """The members of `unit` the node and its profile declare: every GPU nvidia-smi listed
    before the soak and every index the profile's count implies; every RDMA port `ibstat`
    lists, and any port another of the check's files has (present before the soak and gone
    after is a gap too); every GPU nvidia-smi listed, by its PCI address."""
    if unit == GPU:
        return sorted({g.index for g in ctx.gpus()} | set(range(ctx.profile.gpu_count)))
    if unit == GPU_ADDRESS:
        return sorted(ctx.gpu_indexes_by_address())
    ports = {p.name for p in ctx.evidence.read(NICS) or []}
    for kind in kinds:
        parsed = ctx.evidence.read(kind)
        if parsed is not None and kind.members is not None and kind.members.unit == unit:
            ports |= set(kind.members.listed(parsed) or ())
    return sorted(ports)


def gaps(ctx: Context, kinds: tuple[EvidenceKind, ...]) -> list[Gap]:
    """What each of `kinds` (those present) leaves out of the members the node declares."""
    found: list[Gap] = []
    listed_by_smi = {g.index for g in ctx.gpus()}
    index_at = ctx.gpu_indexes_by_address()
    for kind in kinds:
        parsed = ctx.evidence.read(kind)
        if parsed is None or kind.members is None:
            continue
        unit = kind.members.unit
        named = kind.members.listed(parsed)
        if named is None:     # a form that names no member at all (DCGM's older tables)
            continue
        listed = set(named)
        missing = [m for m in declared(ctx, unit, kinds) if m not in listed]
        for member in missing:
            if unit == GPU_ADDRESS:
                found.append((index_at[member],
                              f"{ctx.gpu_label(index_at[member])} missing from {kind.file}"))
            elif unit == GPU:
                name = (ctx.gpu_label(member) if member in listed_by_smi else
                        f"GPU {member} (of the profile's {ctx.profile.gpu_count}; nvidia-smi "
                        f"lists {len(listed_by_smi)})")
                found.append((member, f"{name} missing from {kind.file}"))
            else:
                assert unit == NIC_PORT, unit
                found.append((None, f"NIC {member} missing from {kind.file}"))
    return found
