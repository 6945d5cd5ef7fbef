#!/usr/bin/env python3
"""Time the kernel-log reader on a 200,000-line log and the evaluation of one node's
evidence directory. Targets (issue 17): parse <= 0.5 s, evaluate <= 0.3 s.

The log is built from real captures (tests/fixtures/kernel-log and dmesg-xid, headers
removed) repeated among ordinary boot lines, in the ISO form `dmesg --time-format iso`
prints; about one line in twenty is a fault. The evidence directory is the tests'
healthy H100 node with that log as its dmesg.txt.

Usage: bench/kernel_log.py [--lines N] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpuprov.checks.run import judge  # noqa: E402
from gpuprov.evidence import Evidence  # noqa: E402
from gpuprov.parsers.kernel_log import parse_kernel_log  # noqa: E402
from gpuprov.profiles import load_profile  # noqa: E402
from tests.evidence_builder import FIXTURES, capture, healthy_h100, replace  # noqa: E402

ORDINARY = [
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: (null). Quota mode: none.",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "nvidia-nvlink: Nvlink Core is being initialized, major device number 509",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.158.01  Release Build",
    "mlx5_core 0000:5c:00.0: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)",
    "audit: type=1400 audit(1732011200.123:42): apparmor=\"STATUS\" operation=\"profile_load\"",
    "systemd-journald[512]: Received client request to flush runtime journal.",
]


def fault_messages() -> list[str]:
    """The message part of every line of the real captures."""
    messages = []
    for folder in ("kernel-log", "dmesg-xid"):
        for path in sorted((FIXTURES / folder).iterdir()):
            for line in capture(f"{folder}/{path.name}").splitlines():
                if "] " in line and line.lstrip().startswith("["):
                    messages.append(line.split("] ", 1)[1])
    return messages


def build_log(lines: int) -> str:
    faults = fault_messages()
    out = ["2026-11-21T08:00:00,000000+00:00 Linux version 6.8.0-45-generic"]
    for i in range(lines - 1):
        message = faults[i % len(faults)] if i % 20 == 0 else ORDINARY[i % len(ORDINARY)]
        out.append(f"2026-11-21T08:{(i // 6000) % 60:02d}:{(i // 100) % 60:02d},"
                   f"{i % 1000000:06d}+00:00 {message}")
    return "\n".join(out) + "\n"


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    text = build_log(args.lines)
    log = parse_kernel_log(text, "bench")
    parse = timed(lambda: parse_kernel_log(text, "bench"), args.runs)
    print(f"parse {args.lines:,} lines ({len(text) / 1e6:.1f} MB, {len(log.events):,} events): "
          f"best {min(parse):.3f} s, median {statistics.median(parse):.3f} s  "
          "(target <= 0.5 s)")
    with tempfile.TemporaryDirectory() as tmp:
        node = replace(healthy_h100(Path(tmp) / "node07"), "dmesg.txt", text)
        profile = load_profile("h100-sxm-8")
        evaluate = timed(lambda: judge(Evidence(node), profile, None, strict=False),
                         args.runs)
        small = replace(healthy_h100(Path(tmp) / "node08"), "dmesg.txt",
                        capture("kernel-log/rminit-syslog-gpu-operator1146.txt"))
        typical = timed(lambda: judge(Evidence(small), profile, None, strict=False),
                        args.runs)
    print(f"evaluate one node, {args.lines:,}-line log: best {min(evaluate):.3f} s, median "
          f"{statistics.median(evaluate):.3f} s")
    print(f"evaluate one node, typical evidence: best {min(typical):.3f} s, median "
          f"{statistics.median(typical):.3f} s  (target <= 0.3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
