"""Simulated GPUs on lab nodes: what the stand-in packages install is what nodes report,
and each fault changes what the real fault would change."""

from __future__ import annotations

import re
import time

import pytest

from gpuprov.lab import kinds
from gpuprov.lab.mirror import TOOLKIT_LAYOUT
from gpuprov.parsers.gpu_burn import parse_gpu_burn
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.nvlink import parse_nvlink_status
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.parsers.smi_table import parse_smi_header
from gpuprov.parsers.topo import parse_topo
from tests.conftest import gpuprov

pytestmark = pytest.mark.lab

KEYRING = "/usr/share/keyrings/gpuprov-lab-archive.gpg"
# Under the file names the roles use, so a role's earlier source is replaced, not doubled
# (apt refuses one URL with two Signed-By keyrings).
SOURCES = {
    name: f"Types: deb\nURIs: file:///srv/gpuprov-mirror/{repo}/\nSuites: /\nSigned-By: {KEYRING}\n"
    for name, repo in (("cuda", "cuda"),
                       ("nvidia-container-toolkit", f"libnvidia-container/{TOOLKIT_LAYOUT}"))
}
DRIVER_PACKAGES = ("nvidia-headless-{b}", "nvidia-utils-{b}", "nvidia-dkms-{b}",
                   "nvidia-kernel-common-{b}", "libnvidia-compute-{b}", "nvidia-compute-utils-{b}")


def _run(lab, node: str, command: str, timeout: float = 300):
    result = lab.ssh(node, command, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def _ok(lab, node: str, command: str, timeout: float = 300) -> str:
    rc, out = _run(lab, node, command, timeout)
    assert rc == 0, f"{node}: {command}\n{out}"
    return out


def install_driver(lab, node: str, version: str, fabric_manager: bool = False) -> None:
    branch = version.split(".")[0]
    pins = [f"{p.format(b=branch)}={version}-0ubuntu1" for p in DRIVER_PACKAGES]
    if fabric_manager:
        pins.append(f"nvidia-fabricmanager-{branch}={version}-1")
    _ok(lab, node, "DEBIAN_FRONTEND=noninteractive apt-get -qy install --allow-downgrades "
        + " ".join(pins))


def reboot(lab, node: str) -> None:
    """`systemctl reboot` on the node; the lab boots it again."""
    before = _ok(lab, node, "ps -o lstart= -p 1")
    lab.ssh(node, "systemctl reboot", timeout=30)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        rc, out = _run(lab, node, "ps -o lstart= -p 1 && systemctl is-active ssh", timeout=20)
        if rc == 0 and out.splitlines()[0] != before.strip():
            return
        time.sleep(1)
    raise AssertionError(f"{node} did not come back from reboot")


@pytest.fixture(scope="module")
def vendor_repos(lab):
    """Bare nodes (the role tests before leave pins and holds) with the stand-in vendor
    repositories configured."""
    assert gpuprov("lab", "reset").returncode == 0
    for node in lab.nodes:
        for name, source in SOURCES.items():
            _ok(lab, node, f"printf '%s' '{source}' > /etc/apt/sources.list.d/{name}.sources")
        _ok(lab, node, "apt-get -q update")
    return lab


def test_driver_reports_exactly_the_installed_version(vendor_repos):
    lab = vendor_repos
    rc, out = _run(lab, "node03", "nvidia-smi")
    assert rc == 127, out  # bare node: no nvidia-smi at all
    install_driver(lab, "node03", "535.161.08")
    header = parse_smi_header(_ok(lab, "node03", "nvidia-smi"), "node03")
    assert (header.driver_version, header.cuda_version) == ("535.161.08", "12.2")
    query = _ok(lab, "node03", "nvidia-smi --query-gpu=index,driver_version,pci.bus_id "
                "--format=csv,noheader")
    hw = kinds.describe("node03", lab.nodes["node03"])
    assert query.splitlines() == [f"{g['index']}, 535.161.08, {g['bus_id']}" for g in hw["gpus"]]

    # another exact version: the userspace changes at once, the loaded module at reboot
    install_driver(lab, "node03", "535.183.06")
    rc, out = _run(lab, "node03", "nvidia-smi")
    assert rc == 18 and "Driver/library version mismatch" in out, out
    reboot(lab, "node03")
    header = parse_smi_header(_ok(lab, "node03", "nvidia-smi"), "node03")
    assert header.driver_version == "535.183.06"


def test_simulated_outputs_match_the_node_description(vendor_repos):
    lab = vendor_repos
    install_driver(lab, "node01", "550.90.07", fabric_manager=True)
    _ok(lab, "node01", "systemctl enable --now nvidia-fabricmanager")
    # the packaged unit, as NVIDIA's and Ubuntu's: static, and persistence mode off
    _ok(lab, "node01", "systemctl start nvidia-persistenced")
    q = parse_smi_query(_ok(lab, "node01", "nvidia-smi -q -x"), "node01")
    assert not any(g.persistence_mode for g in q.gpus)
    assert _ok(lab, "node01", "systemctl is-enabled nvidia-persistenced || true").strip() == \
        "static"
    # the daemon run as the driver role's drop-in runs it: persistence mode on
    _ok(lab, "node01", "systemctl stop nvidia-persistenced; nvidia-persistenced --user "
                       "nvidia-persistenced --persistence-mode --verbose")
    hw = kinds.describe("node01", lab.nodes["node01"])
    for flags in ("-q -x", "-q"):
        q = parse_smi_query(_ok(lab, "node01", f"nvidia-smi {flags}"), f"node01 {flags}")
        assert q.driver_version == "550.90.07" and q.cuda_version == "12.4"
        assert [(g.serial, g.bus_id) for g in q.gpus] == [(g["serial"], g["bus_id"])
                                                          for g in hw["gpus"]]
        assert all(g.persistence_mode and g.fabric_state == "Completed" for g in q.gpus)
    topo = parse_topo(_ok(lab, "node01", "nvidia-smi topo -m"), "node01")
    assert {link for _, _, link in topo.gpu_pairs()} == {"NV18"}
    status = parse_nvlink_status(_ok(lab, "node01", "nvidia-smi nvlink -s"), "node01")
    assert all(len(g.active) == 18 for g in status.gpus)
    listing = _ok(lab, "node01", "nvidia-smi -L").splitlines()
    assert listing[0] == f"GPU 0: {hw['gpu']['name']} (UUID: {hw['gpus'][0]['uuid']})"

    # without fabric manager an NVSwitch system's fabric is not set up: the driver sent its
    # probe when it brought the GPUs up, so every GPU waits In Progress (issue 65)
    _ok(lab, "node01", "systemctl stop nvidia-fabricmanager")
    q = parse_smi_query(_ok(lab, "node01", "nvidia-smi -q -x"), "node01")
    assert {(g.fabric_state, g.fabric_status) for g in q.gpus} == {("In Progress", None)}
    _ok(lab, "node01", "systemctl start nvidia-fabricmanager")


def test_fabric_manager_refuses_a_mismatched_driver_and_a_pcie_system(vendor_repos):
    lab = vendor_repos
    install_driver(lab, "node01", "550.90.07", fabric_manager=True)
    install_driver(lab, "node01", "550.127.08", fabric_manager=True)  # no reboot yet
    rc, _ = _run(lab, "node01", "systemctl restart nvidia-fabricmanager")
    assert rc != 0
    log = _ok(lab, "node01", "cat /var/log/fabricmanager.log")
    assert ("fabric manager NVIDIA GPU driver interface version 550.127.08 don't match with "
            "driver version 550.90.07") in log
    reboot(lab, "node01")
    assert _ok(lab, "node01", "systemctl is-active nvidia-fabricmanager").strip() == "active"

    install_driver(lab, "node03", "535.183.06", fabric_manager=True)
    rc, _ = _run(lab, "node03", "systemctl start nvidia-fabricmanager")
    assert rc != 0
    assert "NVSwitches don't match" in _ok(lab, "node03", "cat /var/log/fabricmanager.log")


def test_toolkit_cudnn_and_container_toolkit(vendor_repos):
    lab = vendor_repos
    _ok(lab, "node02", "DEBIAN_FRONTEND=noninteractive apt-get -qy install "
        "cuda-toolkit-12-2=12.2.2-1 libcudnn8=8.9.7.29-1+cuda12.2 "
        "libcudnn8-dev=8.9.7.29-1+cuda12.2 nvidia-container-toolkit=1.16.2-1 "
        "nvidia-container-toolkit-base=1.16.2-1 libnvidia-container-tools=1.16.2-1 "
        "libnvidia-container1=1.16.2-1")
    nvcc = _ok(lab, "node02", "/usr/local/cuda-12.2/bin/nvcc --version")
    assert "Cuda compilation tools, release 12.2, V12.2.140" in nvcc
    header = _ok(lab, "node02", "cat /usr/include/cudnn_version.h")
    assert re.search(r"#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7",
                     header)
    assert "cli-version: 1.16.2\nlib-version: 1.16.2" in _ok(
        lab, "node02", "nvidia-container-cli --version")
    _ok(lab, "node02", "mkdir -p /etc/docker && echo '{\"log-driver\": \"json-file\", "
        "\"data-root\": \"/srv/docker\"}' > /etc/docker/daemon.json")
    _ok(lab, "node02", "nvidia-ctk runtime configure --runtime=docker")
    merged = _ok(lab, "node02", "python3 -c 'import json; d = json.load(open("
                 "\"/etc/docker/daemon.json\")); print(sorted(d), d[\"runtimes\"])'")
    assert "['data-root', 'log-driver', 'runtimes']" in merged
    assert "'nvidia': {'args': [], 'path': 'nvidia-container-runtime'}" in merged


@pytest.fixture(scope="module")
def burn_ready(vendor_repos):
    """node01 with driver, fabric manager, toolkit and a gpu-burn built from the tarball."""
    lab = vendor_repos
    install_driver(lab, "node01", "550.127.08", fabric_manager=True)
    _ok(lab, "node01", "systemctl enable --now nvidia-persistenced nvidia-fabricmanager")
    _ok(lab, "node01", "DEBIAN_FRONTEND=noninteractive apt-get -qy install make g++ "
        "cuda-toolkit-12-4=12.4.1-1", timeout=600)
    _ok(lab, "node01", "cd /srv/gpuprov-mirror/files && sha256sum -c --ignore-missing "
        "SHA256SUMS && rm -rf /opt/gpu-burn && mkdir -p /opt/gpu-burn && tar -xzf "
        "gpu-burn-*.tar.gz --strip-components=1 -C /opt/gpu-burn && cd /opt/gpu-burn && "
        "make CUDAPATH=/usr/local/cuda-12.4 COMPUTE=9.0")
    return lab


def _burn(lab, node: str, seconds: int = 3):
    rc, out = _run(lab, node, f"cd /opt/gpu-burn && ./gpu_burn -tc {seconds}", timeout=120)
    assert rc == 0, out  # gpu-burn exits 0 even when a GPU is FAULTY
    return parse_gpu_burn(out, node)


def test_gpu_burn_prints_the_real_output_and_sees_faults(burn_ready):
    lab = burn_ready
    healthy = _burn(lab, "node01")
    assert healthy.finished and healthy.progress_lines >= 2
    assert {g.verdict for g in healthy.gpus.values()} == {"OK"}
    gpuprov("lab", "fault", "node01", "burn-errors", "--gpu", "2", check=True)
    gpuprov("lab", "fault", "node01", "slow-gpu", "--gpu", "5", check=True)
    faulty = _burn(lab, "node01")
    assert {i for i, g in faulty.gpus.items() if g.verdict == "FAULTY"} == {2}
    rates = {i: g.gflops for i, g in faulty.gpus.items()}
    assert rates[5] / rates[4] == pytest.approx(0.85, abs=0.02)
    gpuprov("lab", "fault", "node01", "--clear", check=True)
    assert {g.verdict for g in _burn(lab, "node01", 1).gpus.values()} == {"OK"}


def _snapshot(lab, node: str) -> dict:
    q = parse_smi_query(_ok(lab, node, "nvidia-smi -q -x"), node)
    return {g.bus_id: g for g in q.gpus}


def _kernel_events(lab) -> list[tuple[int | None, str | None]]:
    """(code, bus id) of every event in node01's kernel log."""
    log = parse_kernel_log(_ok(lab, "node01", "cat /var/log/kern.log"), "kern.log")
    return [(e.code, e.bus_id()) for e in log.events]


@pytest.mark.parametrize("kind,check", [
    ("missing-gpu", lambda before, after, lab: len(after) == len(before) - 1
     and "00000000:3A:00.0" not in after),
    ("pcie-degraded", lambda before, after, lab: after["00000000:3A:00.0"].pcie_width_current
     == 8 and after["00000000:18:00.0"].pcie_width_current == 16),
    ("ecc-uncorrectable", lambda before, after, lab: after["00000000:3A:00.0"]
     .ecc_volatile.uncorrectable == 1 and after["00000000:3A:00.0"].remap_pending
     and _kernel_events(lab) == [(94, "00000000:3A:00.0")]),
    ("row-remap-pending", lambda before, after, lab: after["00000000:3A:00.0"].remap_pending
     and not before["00000000:3A:00.0"].remap_pending
     and after["00000000:3A:00.0"].ecc_volatile.uncorrectable == 0),
    ("xid", lambda before, after, lab: before == after
     and _kernel_events(lab) == [(119, "00000000:3A:00.0")]),
    ("nvlink-down", lambda before, after, lab: parse_topo(
        _ok(lab, "node01", "nvidia-smi topo -m"), "t").link("GPU2", "GPU0") == "NV17"
     and parse_nvlink_status(_ok(lab, "node01", "nvidia-smi nvlink -s"), "s")
     .gpus[2].inactive == [17]),
])
def test_each_fault_changes_what_the_real_one_changes(burn_ready, kind, check):
    lab = burn_ready
    before = _snapshot(lab, "node01")
    gpuprov("lab", "fault", "node01", kind, "--gpu", "2", check=True)
    try:
        after = _snapshot(lab, "node01")
        assert check(before, after, lab), kind
    finally:
        gpuprov("lab", "fault", "node01", "--clear", check=True)
    assert _snapshot(lab, "node01") == before
    assert "NVRM" not in _ok(lab, "node01", "cat /var/log/kern.log 2>/dev/null || true")


def test_driver_mismatch_fault(burn_ready):
    lab = burn_ready
    gpuprov("lab", "fault", "node01", "driver-mismatch", check=True)
    rc, out = _run(lab, "node01", "nvidia-smi")
    assert rc == 18 and "NVML library version: 550.127" in out
    rc, out = _run(lab, "node01", "cd /opt/gpu-burn && ./gpu_burn 1")
    assert rc == 1 and "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in out
    gpuprov("lab", "fault", "node01", "--clear", check=True)
    assert parse_smi_header(_ok(lab, "node01", "nvidia-smi"), "n").driver_version == "550.127.08"
