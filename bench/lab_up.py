#!/usr/bin/env python3
"""Time `gpuprov lab up` for 3 nodes: cold (image and mirror built from nothing) and warm.

Cold uses a throw-away cache directory and removes the node image, so debootstrap, the
mirror fill and the image import all run; the lab's real cache is left alone. Warm is
`lab down` followed by `lab up` with everything cached; re-up is `lab up` on a running lab.
Targets (issue 2): warm <= 60 s, cold <= 10 min on a 2-core machine.

Usage: bench/lab_up.py [--skip-cold]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPUPROV = str(Path(sys.executable).parent / "gpuprov")


def timed(*args: str, env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    subprocess.run([GPUPROV, *args], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def node_image_tags() -> list[str]:
    out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
                          "gpuprov-lab-node"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-cold", action="store_true")
    opts = parser.parse_args()

    figures: list[tuple[str, float, float]] = []
    if not opts.skip_cold:
        cache = Path(tempfile.mkdtemp(prefix="gpuprov-bench-cache-"))
        env = {**os.environ, "GPUPROV_CACHE_DIR": str(cache)}
        try:
            timed("lab", "down", env=env)
            for tag in node_image_tags():
                subprocess.run(["docker", "rmi", "-f", tag], check=True,
                               stdout=subprocess.DEVNULL)
            figures.append(("cold lab up (3 nodes)", timed("lab", "up", env=env), 600))
            timed("lab", "down", env=env)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        # the real cache's image was removed with the tags; rebuild it before timing warm
        timed("lab", "up")

    timed("lab", "down")
    figures.append(("warm lab up (3 nodes)", timed("lab", "up"), 60))
    figures.append(("re-up of a running lab", timed("lab", "up"), 60))

    print(f"{'measure':<28} {'seconds':>8} {'target':>8}")
    for name, seconds, target in figures:
        verdict = "ok" if seconds <= target else "OVER"
        print(f"{name:<28} {seconds:8.1f} {target:8.0f}  {verdict}")


if __name__ == "__main__":
    main()
