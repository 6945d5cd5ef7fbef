"""The collection's apt_hold module, run as Ansible runs a module (a process reading its
arguments file) against dpkg stand-ins that record what they were asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import collection

MODULE = collection.ROOT / "plugins" / "modules" / "apt_hold.py"

# `dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n'` as dpkg prints it: the
# status abbreviation is three characters (desired, state, error), the last a space.
DPKG_STATUS = {
    "cuda-toolkit-12-4": "12.4.1-1 ii ",
    "libcudnn9-cuda-12": "9.1.0.70-1 hi ",
    "nvidia-driver-550": "550.90.07-0ubuntu1 rc ",     # removed, configuration left
}


@pytest.fixture
def dpkg(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "status.json").write_text(json.dumps(DPKG_STATUS))
    (bin_dir / "dpkg-query").write_text(f"""#!{sys.executable}
import json, sys
status = json.load(open({str(tmp_path / "status.json")!r}))
rc = 0
for name in sys.argv[3:]:
    if name in status:
        print(name, status[name])
    else:
        print(f"dpkg-query: no packages found matching {{name}}", file=sys.stderr)
        rc = 1
sys.exit(rc)
""")
    (bin_dir / "dpkg").write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path / "dpkg-calls"}
cat >> {tmp_path / "dpkg-calls"}
""")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return tmp_path


def run_module(dpkg: Path, packages: list[str], check_mode: bool = False) -> dict:
    args = dpkg / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "packages": packages, "_ansible_check_mode": check_mode}}))
    result = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True,
                            text=True, env={**os.environ, "PATH": f"{dpkg / 'bin'}:/usr/bin:/bin"})
    return json.loads(result.stdout)


def test_holds_the_installed_unheld_packages_in_one_dpkg_run(dpkg):
    result = run_module(dpkg, ["cuda-toolkit-12-4", "libcudnn9-cuda-12", "nvidia-driver-550",
                               "nvidia-fabricmanager-550"])
    assert result["changed"] is True
    assert result["held"] == ["cuda-toolkit-12-4"]
    assert result["versions"] == {"cuda-toolkit-12-4": "12.4.1-1",
                                  "libcudnn9-cuda-12": "9.1.0.70-1"}
    assert result["absent"] == ["nvidia-driver-550", "nvidia-fabricmanager-550"]
    assert (dpkg / "dpkg-calls").read_text() == "--set-selections\ncuda-toolkit-12-4 hold\n"


def test_nothing_to_hold_is_no_change_and_no_dpkg_run(dpkg):
    result = run_module(dpkg, ["libcudnn9-cuda-12"])
    assert (result["changed"], result["held"]) == (False, [])
    assert not (dpkg / "dpkg-calls").exists()


def test_check_mode_reports_what_it_would_hold_and_changes_nothing(dpkg):
    result = run_module(dpkg, ["cuda-toolkit-12-4"], check_mode=True)
    assert (result["changed"], result["held"]) == (True, ["cuda-toolkit-12-4"])
    assert not (dpkg / "dpkg-calls").exists()
