"""Evidence variations the judgement snapshot (snapshot_scenarios.py) starts from: the
healthy H100 node with each evidence file removed, each real capture of a kind swapped
in, and the fault edits the evaluator tests make, judged under every shipped profile.

(They began as issue #16's parity scenarios; the parity golden file they were judged
against is gone: the snapshot holds every one of them, with more fields.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.evidence_builder import (
    FIXTURES,
    gpu_burn_log,
    nvlink_errors,
    replace,
    topo_all_pairs,
)

PROFILES = ("h100-sxm-8", "a100-sxm-8", "l40s-pcie-4")

EVIDENCE_FILES = (
    "meta.json", "nvidia-smi-q.txt", "nvidia-smi-q-after.txt", "nvidia-smi-topo.txt",
    "nvidia-smi-nvlink-status.txt", "nvidia-smi-nvlink-errors-before.txt",
    "nvidia-smi-nvlink-errors-after.txt", "nvcc-version.txt", "cudnn-version.h",
    "torch-env.json", "gpu-burn.log", "ddp-smoke.json", "dmesg.txt", "packages.txt",
    "lsmod.txt", "lspci.txt", "systemctl.txt",
)
# Which evidence file each fixture folder's captures stand in for.
CAPTURES = {
    "nvidia-smi-q": ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"),
    "topo": ("nvidia-smi-topo.txt",),
    "nvlink": ("nvidia-smi-nvlink-status.txt",),
    "dmesg-xid": ("dmesg.txt",),
    "gpu-burn": ("gpu-burn.log",),
    "nvcc": ("nvcc-version.txt",),
}


def _edit(name: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(node: Path) -> None:
        replace(node, name, (node / name).read_text().replace(old, new))
    return apply


EDITS: dict[str, Callable[[Path], None]] = {
    "slow-gpu": lambda n: replace(n, "gpu-burn.log", gpu_burn_log(
        [358000, 356600, 358700, 304000, 358300, 356000, 358000, 357600])),
    "burn-errors": lambda n: replace(n, "gpu-burn.log", gpu_burn_log(
        [358000] * 8, [0, 0, 0, 0, 0, 7, 0, 0])),
    "nvlink-crc-during-soak": lambda n: replace(
        n, "nvidia-smi-nvlink-errors-after.txt", nvlink_errors(8, 18, {2: 43})),
    "nvlink-crc-before-soak": lambda n: (
        replace(n, "nvidia-smi-nvlink-errors-before.txt", nvlink_errors(8, 18, {2: 40})),
        replace(n, "nvidia-smi-nvlink-errors-after.txt", nvlink_errors(8, 18, {2: 40}))),
    "seven-gpus-topo": lambda n: replace(n, "nvidia-smi-topo.txt", topo_all_pairs(7, "NV18")),
    "xid-during-run": lambda n: replace(
        n, "dmesg.txt", "2026-11-21T10:05:00,000000+00:00 NVRM: Xid (PCI:0000:5d:00): 79, "
                        "pid=0, GPU has fallen off the bus.\n"),
    "xid-no-window": lambda n: (
        replace(n, "dmesg.txt", (FIXTURES / "dmesg-xid/xid119-gsp-rpc-timeout-xe9680.txt")
                .read_text()),
        replace(n, "meta.json", '{"node": "node07"}')),
    "driver-library-mismatch": _edit("packages.txt", "libnvidia-compute-565\t565.57.01",
                                     "libnvidia-compute-565\t565.77"),
    "cudnn-wrong-cuda": _edit("packages.txt", "libcudnn9-cuda-12\t9.1.0.70-1",
                              "libcudnn9-cuda-11\t9.1.0.70-1"),
    "fabricmanager-failed": _edit("systemctl.txt", "Id=nvidia-fabricmanager.service\n"
                                  "LoadState=loaded\nActiveState=active",
                                  "Id=nvidia-fabricmanager.service\nLoadState=loaded\n"
                                  "ActiveState=failed"),
    "docker-inactive": _edit("systemctl.txt", "Id=docker.service\nLoadState=loaded\n"
                             "ActiveState=active", "Id=docker.service\nLoadState=loaded\n"
                             "ActiveState=inactive"),
    "nouveau-loaded": lambda n: replace(n, "lsmod.txt", "Module Size Used by\nnouveau 1 0\n"),
    "ddp-failed": lambda n: replace(n, "ddp-smoke.json", json.dumps(
        {"ok": False, "world_size": 8, "backend": "nccl", "error": "rank 3 timed out"})),
    "ddp-loss-rising": lambda n: replace(n, "ddp-smoke.json", json.dumps(
        {"ok": True, "world_size": 8, "backend": "nccl", "losses": [0.3, 0.5],
         "allreduce_busbw_gbps": 455.0})),
    "torch-other-build": _edit("torch-env.json", "2.5.1+cu124", "2.5.1+cu121"),
    "lock-other-toolkit": _edit("packages.txt", "1.16.2-1", "1.17.0-1"),
    "smi-error": lambda n: (replace(n, "nvidia-smi-q.txt", None), replace(
        n, "nvidia-smi-error.txt", "$ nvidia-smi -q -x\nexit status 18\nFailed to initialize "
        "NVML: Driver/library version mismatch\n")),
}


def scenarios() -> Iterator[tuple[str, Callable[[Path], None]]]:
    yield "healthy", lambda n: None
    for name in EVIDENCE_FILES:
        yield f"without {name}", lambda n, name=name: replace(n, name, None)
    for folder, targets in sorted(CAPTURES.items()):
        for capture in sorted((FIXTURES / folder).iterdir()):
            for target in targets:
                yield (f"{folder}/{capture.name} as {target}",
                       lambda n, c=capture, t=target: replace(n, t, c.read_text()))
    yield from EDITS.items()
