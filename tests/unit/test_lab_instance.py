"""Labs side by side (GPUPROV_LAB_INSTANCE, issue 54): lab 1 keeps the names it always had;
lab 2 has its own containers, fabric network, subnet and state; a bad number is one line,
exit 2. Each case in a fresh interpreter: the names are read once, at import."""

import json
import os
import subprocess
import sys

from tests.conftest import gpuprov

SHOW = """
import json
from gpuprov.lab import docker, fabric
from gpuprov.lab.paths import LAB_FILTER, LabPaths
print(json.dumps({"container": docker.container_name("node01"), "network": fabric.NETWORK,
                  "bridge": fabric.BRIDGE, "subnet": str(fabric.SUBNET),
                  "gateway": fabric.GATEWAY, "head": fabric.HEAD_ADDRESS,
                  "node01": fabric.address("node01"), "filter": LAB_FILTER,
                  "state": str(LabPaths.default().state)}))
"""


def _names(tmp_path, instance: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GPUPROV_LAB_INSTANCE", "GPUPROV_LAB_DIR")}
    env["XDG_STATE_HOME"] = str(tmp_path)
    if instance is not None:
        env["GPUPROV_LAB_INSTANCE"] = instance
    out = subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def test_lab_one_keeps_its_names(tmp_path):
    assert _names(tmp_path, None) == _names(tmp_path, "1") == {
        "container": "gpuprov-lab-node01", "network": "gpuprov-lab-fabric",
        "bridge": "gpl-fabric", "subnet": "198.18.0.0/24", "gateway": "198.18.0.254",
        "head": "198.18.0.10", "node01": "198.18.0.11", "filter": "label=io.gpuprov.lab=1",
        "state": f"{tmp_path}/gpuprov/lab"}


def test_lab_two_has_its_own(tmp_path):
    assert _names(tmp_path, "2") == {
        "container": "gpuprov-lab2-node01", "network": "gpuprov-lab2-fabric",
        "bridge": "gpl2-fabric", "subnet": "198.18.1.0/24", "gateway": "198.18.1.254",
        "head": "198.18.1.10", "node01": "198.18.1.11", "filter": "label=io.gpuprov.lab=2",
        "state": f"{tmp_path}/gpuprov/lab2"}


def test_a_bad_lab_number_is_one_line_exit_2():
    for value in ("0", "10", "x"):
        result = gpuprov("lab", "status", env={**os.environ, "GPUPROV_LAB_INSTANCE": value})
        assert result.returncode == 2, result
        assert result.stderr == (f"gpuprov: error: GPUPROV_LAB_INSTANCE='{value}': not a lab "
                                 "number from 1 to 9\n")
