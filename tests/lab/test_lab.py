"""The lab as later issues rely on it: reachable, isolated, bare, installing offline."""

import json
import subprocess
import threading

import pytest

from gpuprov.lab import fabric as lab_fabric
from gpuprov.lab.paths import LAB_FILTER
from tests.conftest import gpuprov

pytestmark = pytest.mark.lab


def test_three_nodes_of_different_kinds(lab):
    assert list(lab.nodes) == ["node01", "node02", "node03"]
    assert len(set(lab.nodes.values())) == 3


def test_ansible_reaches_every_node_over_ssh_with_host_keys_checked(lab):
    result = lab.ansible("all", "ansible.builtin.ping")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 3
    config = lab.ssh_config.read_text()
    assert "StrictHostKeyChecking yes" in config
    assert "nc 127.0.0.1 22" in config


def test_unknown_host_key_is_refused(lab, tmp_path):
    """Host key checking is really on: a known_hosts without the node's key fails."""
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    argv = ["ssh", "-F", str(lab.ssh_config), "-o", f"UserKnownHostsFile={empty}",
            "-o", "BatchMode=yes", "node01", "true"]
    # ssh prints its verdict, then may wait many seconds for its ProxyCommand (docker exec
    # … nc) to end: the verdict is what this test is about, so it is read as it comes
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(30, proc.kill)
    timer.start()
    try:
        said = []
        for line in proc.stderr:
            said.append(line)
            if "Host key verification failed" in line:
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    assert "Host key verification failed" in "".join(said), said


@pytest.mark.parametrize("node", ["node01", "node02", "node03"])
def test_node_is_isolated(lab, node):
    """Loopback and the lab fabric only: no default route, no route anywhere else, and
    this machine holds no address on the fabric. `ip route get` decides locally: no packet
    leaves."""
    links = lab.ssh(node, "ip -o link show | awk -F': ' '{print $2}'")
    assert [name.split("@")[0] for name in links.stdout.split()] == ["lo", "eth0"]
    address = lab_fabric.address(node)
    routes = [line.strip() for line in
              lab.ssh(node, "ip route show; ip -6 route show").stdout.strip().splitlines()]
    assert routes == [f"{lab_fabric.SUBNET} dev eth0 proto kernel scope link src {address}"]
    for outside in ("10.0.0.1", "192.168.1.1", "8.8.8.8"):
        probe = lab.ssh(node, f"ip route get {outside}")
        assert probe.returncode != 0
        assert "unreachable" in probe.stderr
    assert lab_fabric.host_addresses() == []
    peer = "node02" if node != "node02" else "node01"
    reach = lab.ssh(node, f"python3 -c \"import socket; socket.create_connection(("
                          f"'{lab_fabric.address(peer)}', 22), 5)\"")
    assert reach.returncode == 0, reach.stderr


@pytest.mark.parametrize("node", ["node01", "node02", "node03"])
def test_node_is_bare(lab, node):
    probe = lab.ssh(
        node,
        "for c in nvidia-smi nvcc docker gpu_burn; do command -v $c || echo no-$c; done;"
        " dpkg-query -W -f='${Package}\\n' | grep -E '^(nvidia|cuda|libcudnn|docker)' || true;"
        " python3 -c 'import torch' 2>&1 | tail -1",
    )
    out = probe.stdout
    for cmd in ("nvidia-smi", "nvcc", "docker", "gpu_burn"):
        assert f"no-{cmd}" in out
    assert "No module named 'torch'" in out
    assert "systemd" in lab.ssh(node, "ps -p 1 -o comm=").stdout


def test_hardware_description_is_on_the_node(lab):
    out = lab.ssh("node02", "cat /var/lib/gpuprov-lab/hardware.yml").stdout
    assert "kind: a100-sxm-8" in out
    assert out.count("serial:") == 8


def test_install_from_the_signed_mirror(lab):
    result = lab.ansible("node03", "ansible.builtin.apt", "name=make update_cache=true")
    assert result.returncode == 0, result.stdout
    assert "make" in lab.ssh("node03", "make --version").stdout.lower()
    sources = lab.ssh("node03", "cat /etc/apt/sources.list.d/debian.sources").stdout
    assert "Signed-By: /usr/share/keyrings/gpuprov-lab-archive.gpg" in sources


def test_pip_resolves_torch_from_the_wheelhouse_only(lab):
    """/etc/pip.conf points pip at the mirror's wheelhouse, with no index at all."""
    probe = lab.ssh(
        "node03",
        "apt-get install -y -q python3-venv >/dev/null && python3 -m venv /tmp/venv &&"
        " /tmp/venv/bin/pip install --dry-run torch==2.13.0 2>&1 | tail -1",
        timeout=300,
    )
    assert "torch-2.13.0+cpu" in probe.stdout, probe.stdout + probe.stderr
    assert "sympy" in probe.stdout


TAMPER = """
set -e
rm -rf /tmp/repo-{name}; mkdir -p /tmp/repo-{name}/dists
cp -r /srv/gpuprov-mirror/debian/dists/bookworm /tmp/repo-{name}/dists/
ln -s /srv/gpuprov-mirror/debian/pool /tmp/repo-{name}/pool
{edit}
key=/usr/share/keyrings/gpuprov-lab-archive.gpg
echo "deb [signed-by=$key] file:/tmp/repo-{name} bookworm main" > /tmp/repo-{name}.list
apt-get update -o Dir::Etc::SourceList=/tmp/repo-{name}.list -o Dir::Etc::SourceParts=- \
  -o Dir::State::Lists=/tmp/lists-{name} 2>&1
"""


def test_tampered_mirror_is_refused(lab):
    """A Release edited after signing fails apt's signature check; an intact copy passes."""
    setup = "mkdir -p /tmp/lists-{n}/partial"
    intact = lab.ssh("node01", setup.format(n="intact") + ";" + TAMPER.format(name="intact",
                                                                              edit=""))
    assert intact.returncode == 0, intact.stdout
    edit = ("sed -i 's/^Label: gpuprov-lab/Label: gpuprov-lab-evil/' "
            "/tmp/repo-evil/dists/bookworm/Release /tmp/repo-evil/dists/bookworm/InRelease")
    tampered = lab.ssh("node01", setup.format(n="evil") + ";" + TAMPER.format(name="evil",
                                                                              edit=edit))
    assert tampered.returncode != 0
    assert "BADSIG" in tampered.stdout or "not signed" in tampered.stdout, tampered.stdout


def test_up_twice_is_harmless(lab):
    before = subprocess.run(["docker", "ps", "-q", "--filter", LAB_FILTER],
                            capture_output=True, text=True, check=True).stdout.split()
    again = gpuprov("lab", "up")
    assert again.returncode == 0, again.stderr
    after = subprocess.run(["docker", "ps", "-q", "--filter", LAB_FILTER],
                           capture_output=True, text=True, check=True).stdout.split()
    assert sorted(before) == sorted(after)
    assert "created" not in again.stderr


def test_status_shows_every_node_running(lab):
    result = gpuprov("lab", "status")
    assert result.returncode == 0
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == list(lab.nodes)
    assert all(r[2] == "running" for r in rows)


def test_unknown_node_is_one_line_exit_2(lab):
    result = gpuprov("lab", "ssh", "node42", "true")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "node42" in result.stderr and "node01" in result.stderr


def test_state_file_lists_the_nodes(lab):
    state = json.loads((lab.inventory.parent.parent / "lab.json").read_text())
    assert state["nodes"] == lab.nodes
