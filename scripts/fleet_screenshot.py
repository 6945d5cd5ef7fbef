"""The docs' screenshot of `gpuprov fleet --html` (docs/fleet-figures.md), taken in a real
headless browser, Debian's chromium: the page of the known history that
tests/unit/test_fleet.py checks by hand (tests/fleet_history.py), rendered by the installed
gpuprov, then shot.

    .venv/bin/python -m scripts.fleet_screenshot [OUT.png]   # needs `apt-get install chromium`

Prints the page's path and the screenshot's; exit 2 when chromium is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests import fleet_history

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs/img/fleet-html.png"


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    browser = shutil.which("chromium")
    if browser is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="gpuprov-fleet-"))
    env = {**os.environ, "GPUPROV_LEDGER": str(fleet_history.build(work)),
           "GPUPROV_STATE_DIR": str(work / "state")}
    page = work / "fleet.html"
    subprocess.run([str(REPO / ".venv/bin/gpuprov"), "fleet", "--html", str(page)], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1100,1250", f"--screenshot={out}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    print(f"{page}\n{out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
