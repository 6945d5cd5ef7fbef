"""An HGX B200 (NVLink5) on a one-node lab of its own (GPUPROV_LAB_INSTANCE 3, beside labs 1
and 2; issue 55): its switches are off the PCI bus, behind ConnectX-7 bridges whose VPD
carries SW_MNG. Provisioning detects them and installs fabric manager with libnvsdm, the
NVLink subnet manager and ibstat, loads ib_umad; fabric manager's start script then starts
the subnet manager, the fabric trains, and the node is accepted."""

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from gpuprov.lab.inventory import NEWER_STACK
from gpuprov.lab.kernel_view import IBSTAT, LSMOD
from tests.conftest import bare_lab_up, gpuprov

pytestmark = pytest.mark.lab

DRIVER = NEWER_STACK["gpuprov_driver_version"]

def test_an_hgx_b200_provisions_fabric_manager_with_its_subnet_manager_and_is_accepted():
    # a short state path: the SSH control sockets live under it (a Unix socket's path is
    # limited to about a hundred bytes)
    state = Path(tempfile.mkdtemp(prefix="gpuprov-b200-"))
    env = {**os.environ, "GPUPROV_LAB_INSTANCE": "3", "NO_COLOR": "1",
           "GPUPROV_STATE_DIR": str(state), "GPUPROV_LEDGER": str(state / "ledger.db")}
    env.pop("GPUPROV_LAB_DIR", None)
    up = bare_lab_up("--nodes", "1", "--kind", "node01=b200-sxm-8", env=env, timeout=1200)
    try:
        assert up.returncode == 0, up.stderr
        # the lab's own inventory, as `lab up` wrote it (issue 66): its lock is the lab's,
        # and the kind's group brings the stack Blackwell runs
        hosts = gpuprov("lab", "inventory", env=env, check=True).stdout.strip()

        def on_node(command: str) -> str:
            return gpuprov("lab", "ssh", "node01", "--", command, env=env, check=True).stdout

        # the kernel has mlx5_ib, not loaded: the bridges are no InfiniBand device yet
        assert "mlx5_ib" not in on_node(LSMOD)
        assert "CA 'mlx5_8'" not in on_node(IBSTAT)

        first = gpuprov("provision", "-i", hosts, "--allow-reboot", env=env, timeout=1500)
        assert first.returncode == 0, first.stdout[-3000:]
        # idempotent where the B200 differs from the kinds the roles' scenarios converge
        # twice: the driver's NVLink5 path and gpu-burn for compute capability 10.0 (the
        # whole Blackwell stack converges twice in lab 2's R590 test)
        again = gpuprov("provision", "-i", hosts, "--tags", "driver,gpu_burn", env=env,
                        timeout=900)
        assert again.returncode == 0, again.stdout[-3000:]
        assert re.search(r"(?m)^node01\s+converged\s+\d+\s+0\s", again.stdout), again.stdout

        packages = dict(line.split("\t") for line in on_node(
            "dpkg-query -W -f='${Package}\\t${Version}\\n' nvidia-fabricmanager libnvsdm "
            "nvlsm infiniband-diags 'libnvidia-nscq*' 2>/dev/null || true").splitlines())
        assert packages["nvidia-fabricmanager"] == packages["libnvsdm"] == f"{DRIVER}-1"
        assert "nvlsm" in packages and "infiniband-diags" in packages
        assert not [p for p in packages if p.startswith("libnvidia-nscq")], packages
        assert on_node("cat /etc/modules-load.d/gpuprov-nvlink5.conf") == "ib_umad\nmlx5_ib\n"
        assert "mlx5_ib" in on_node(LSMOD)
        # with it, the four bridges are CAs beside the eight compute NICs (issue 66)
        listed = on_node(IBSTAT)
        assert [f"CA 'mlx5_{i}'" in listed for i in range(13)] == [True] * 12 + [False]
        # the unit ran the start script, which started the subnet manager before fabric manager
        assert on_node("systemctl show -p ExecStart --value nvidia-fabricmanager").startswith(
            "{ path=/usr/bin/nvidia-fabricmanager-start.sh")
        assert on_node("kill -0 $(cat /var/run/nvidia-fabricmanager/nvlsm.pid) && echo up"
                       ) == "up\n"

        validated = gpuprov("validate", "-i", hosts, "node01", "--soak", "5", "--json",
                            env=env, timeout=900)
        assert validated.returncode in (0, 1), validated.stderr[-3000:]
        [node] = json.loads(validated.stdout)["nodes"]
        checks = {c["id"]: c for c in node["checks"]}
        assert node["verdict"] == "accepted", {i: c["summary"] for i, c in checks.items()
                                               if c["status"] in ("fail", "missing")}
        assert checks["nvlink5_bridges"]["summary"].startswith("4 NVLink5 switch bridges")
        assert checks["nvswitch"]["summary"].startswith(
            "NVLink5 switches, fabric Completed/Success on 8 GPUs")
        assert checks["nics"]["summary"].startswith("8 x InfiniBand ports Active/LinkUp")

        # a compute NIC down: rejected at identity, the NIC named, no bridge in the reason
        assert gpuprov("lab", "fault", "node01", "nic-down", env=env).returncode == 0
        down = gpuprov("validate", "-i", hosts, "node01", "--soak", "5", "--json", env=env,
                       timeout=900)
        [node] = json.loads(down.stdout)["nodes"]
        nics = {c["id"]: c for c in node["checks"]}["nics"]
        assert node["verdict"] == "rejected" and nics["status"] == "fail", nics
        assert nics["summary"].startswith("NIC mlx5_0 port 1: Down"), nics["summary"]
        assert "mlx5_8" not in nics["summary"]
    finally:
        gpuprov("lab", "down", env=env, timeout=600)
        shutil.rmtree(state, ignore_errors=True)
