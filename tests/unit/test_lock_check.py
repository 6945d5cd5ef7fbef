"""`gpuprov lock check` as a subprocess on inventories in the Ansible layout: the example
rack passes; each broken rule is one line naming host, rule and source, exit 2; group and
host overrides apply the Ansible way; bad inventories are one-line errors naming the file
and line."""

import shutil

import pytest
import yaml

from tests.conftest import REPO, gpuprov

EXAMPLE = REPO / "inventory"


# The example lock before it moved to a current stack (R550, CUDA 12.4): the compatibility
# rules below are tested on it; its security floors are accepted, their own tests are below.
OLDER_LOCK = {"gpuprov_driver_version": "550.127.08", "gpuprov_cuda_version": "12.4",
              "gpuprov_cudnn_version": "9.1.0.70", "gpuprov_container_toolkit_version": "1.17.3",
              "gpuprov_docker_version": "5:27.3.1-1~ubuntu.24.04~noble",
              "gpuprov_torch_cuda_build": "cu126",
              "gpuprov_security_accepted": ["nvidia-5821", "nvidia-5850", "docker-29.7.0"]}


@pytest.fixture
def shipped(tmp_path):
    """A copy of the example inventory as shipped."""
    shutil.copytree(EXAMPLE, tmp_path / "inventory")
    return tmp_path / "inventory"


@pytest.fixture
def rack(shipped):
    """A copy of the example inventory on the older lock, to break."""
    _set(shipped / "group_vars/all/versions.yml", **OLDER_LOCK)
    return shipped


def _set(path, **values):
    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    data.update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


def _check(rack, *args):
    return gpuprov("lock", "check", "--inventory", str(rack / "rack3.ini"), *args)


def test_example_rack_passes():
    result = gpuprov("lock", "check", "--inventory", str(EXAMPLE / "rack3.ini"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("lock ok: 8 host(s), 1 distinct lock(s)")


def test_cuda_newer_than_the_driver_is_refused_on_every_host(rack):
    _set(rack / "group_vars/all/versions.yml", gpuprov_cuda_version="12.6")
    result = _check(rack)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert len(lines) == 8 and all(" cuda_driver: CUDA toolkit 12.6 needs driver >= 560.28.03; "
                                   "the lock has 550.127.08 [CUDA 13.2 Update 2 release notes"
                                   in line for line in lines)
    assert "8 problem(s) on 8 of 8 host(s)" in result.stderr


def test_group_override_breaks_only_that_group(rack):
    # cuDNN 8.9 has no CUDA 13 build; only the L40S group overrides to it
    _set(rack / "group_vars/l40s.yml", gpuprov_cudnn_version="8.9.7.29")
    result = _check(rack)
    assert result.returncode == 2
    hosts = sorted({line.split(":")[0] for line in result.stdout.splitlines()})
    assert hosts == ["node05", "node06", "node07", "node08"]
    assert "node05: cudnn_cuda: cuDNN 8.9.7.29 supports CUDA 12.x only up to 12.2" in result.stdout


def test_cudnn_for_the_wrong_cuda_major(rack):
    _set(rack / "host_vars/node02.yml", gpuprov_cudnn_version="8.9.7.29",
         gpuprov_cuda_version="13.0", gpuprov_driver_version="580.65.06")
    result = _check(rack, "--limit", "node02")
    assert result.returncode == 2
    assert ("node02: cudnn_cuda: cuDNN 8.9.7.29 has no build for CUDA 13.x (it ships for CUDA "
            "11, 12)") in result.stdout


def test_torch_build_the_driver_cannot_run(rack):
    _set(rack / "group_vars/all/versions.yml", gpuprov_torch_cuda_build="cu130")
    result = _check(rack, "--limit", "node01")
    assert result.returncode == 2
    assert ("node01: torch_driver: driver 550.127.08 is too old for torch 2.13.0+cu130, "
            "CUDA 13.0 (needs >= 580.65.06)") in result.stdout


def test_torch_release_python_and_build_rows(rack):
    _set(rack / "group_vars/all/versions.yml", gpuprov_torch_version="2.5.1",
         gpuprov_torch_cuda_build="cu126", gpuprov_python_version="3.14")
    result = _check(rack, "--limit", "node05")
    assert result.returncode == 2
    assert ("node05: torch_build: torch 2.5 publishes cpu, cu118, cu121, cu124; the lock asks "
            "for cu126") in result.stdout
    assert "node05: torch_python: torch 2.5 has wheels for Python 3.9 to 3.13" in result.stdout


def test_hardware_profile_rules(rack, tmp_path):
    """A V100 rack (user profile) on R590: past the last branch for Volta; open modules
    asked for a GPU they do not support."""
    v100 = tmp_path / "v100.yml"
    profile = yaml.safe_load((REPO / "gpuprov/data/profiles/a100-sxm-8.yml").read_text())
    profile.update(name="v100-sxm-8")
    profile["gpu"].update(architecture="Volta", name_pattern="V100")
    v100.write_text(yaml.safe_dump(profile))
    _set(rack / "group_vars/dgx_a100.yml", gpuprov_profile=str(v100),
         gpuprov_driver_version="590.44.01", gpuprov_driver_flavour="open",
         gpuprov_cuda_version="13.1", gpuprov_torch_cuda_build="cu130")
    result = _check(rack, "--limit", "node03")
    assert result.returncode == 2
    out = result.stdout
    assert "node03: architecture_driver: R580 is the last driver branch for Volta GPUs" in out
    assert ("node03: architecture_driver: the open kernel modules do not support Volta GPUs; "
            "the lock asks for open") in out
    assert "node03: architecture_cuda: CUDA 12.x is the last toolkit for Volta GPUs" in out
    assert "node03: torch_architecture: torch 2.13+cu130 has no kernels for Volta GPUs" in out
    assert "[NVIDIA CUDA toolkit, driver and architecture matrix" in out


def test_a_b200_rack_needs_a_blackwell_stack(rack):
    """The shipped B200 profile on the example lock (R550, CUDA 12.4, proprietary): refused
    for what Blackwell needs; on R590 with CUDA 13.1 and open modules it passes."""
    _set(rack / "group_vars/dgx_a100.yml", gpuprov_profile="b200-sxm-8",
         gpuprov_driver_flavour="proprietary")
    refused = _check(rack, "--limit", "node03")
    assert refused.returncode == 2
    for line in ("node03: architecture_driver: Blackwell GPUs need CUDA 12.8+, so driver >= "
                 "570.26; the lock has 550.127.08",
                 "node03: architecture_driver: Blackwell GPUs need the open kernel modules; the "
                 "lock asks for proprietary",
                 "node03: architecture_cuda: Blackwell GPUs need CUDA 12.8+; the lock has "
                 "toolkit 12.4",
                 "node03: torch_architecture: torch 2.13+cu126 has no kernels for Blackwell "
                 "GPUs (they need a CUDA 12.8+ build)"):
        assert line in refused.stdout, refused.stdout
    _set(rack / "group_vars/dgx_a100.yml", gpuprov_driver_version="590.48.01",
         gpuprov_fabricmanager_version="590.48.01", gpuprov_driver_flavour="open",
         gpuprov_cuda_version="13.1", gpuprov_cudnn_version="9.17.0.29",
         gpuprov_torch_cuda_build="cu130")
    accepted = _check(rack, "--limit", "node03")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


def test_fabric_manager_must_equal_the_driver(rack):
    _set(rack / "group_vars/hgx_h100.yml", gpuprov_fabricmanager_version="550.90.07")
    result = _check(rack)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{host}: fabric_manager: fabric manager 550.90.07 with driver 550.127.08: they must "
        "be the same version [NVIDIA/apt-packaging-fabric-manager README: \"the version of "
        "fabricmanager must match the NVIDIA driver installed\"]" for host in ("node01", "node02")]


def test_unknown_profile_is_bad_input(rack):
    _set(rack / "group_vars/l40s.yml", gpuprov_profile="l40s-pcie-9")
    result = _check(rack)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "gpuprov: error: host node05: gpuprov_profile: unknown profile 'l40s-pcie-9' (shipped: "
        "a100-sxm-4, a100-sxm-8, b200-sxm-8, gb200-nvl72-tray, gb300-nvl72-tray, h100-sxm-8, "
        "h200-sxm-8, l40s-pcie-4, l40s-pcie-8; or a path to a .yml)"]


def test_malformed_inventory_names_file_and_line(rack):
    ini = rack / "rack3.ini"
    lines = ini.read_text().splitlines()
    lines[10] = "node02 ansible_host=10.3.0.12 broken"
    ini.write_text("\n".join(lines) + "\n")
    result = _check(rack)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"gpuprov: error: {ini}:11: Expected key=value host variable assignment, got: broken"]


def test_malformed_lock_file_names_file_and_line(rack):
    lock = rack / "group_vars/all/versions.yml"
    lock.write_text(lock.read_text() + "gpuprov_cuda_version: [12.4\n")
    result = _check(rack)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"gpuprov: error: host node01: {lock}:")


def test_missing_field_and_missing_inventory(rack, tmp_path):
    lock = rack / "group_vars/all/versions.yml"
    lock.write_text(lock.read_text().replace("gpuprov_python_version", "# gpuprov_python_"))
    result = _check(rack)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "gpuprov: error: host node01: gpuprov_python_version: missing from the versions lock"]
    result = gpuprov("lock", "check", "--inventory", str(tmp_path / "nope.ini"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"gpuprov: error: inventory {tmp_path / 'nope.ini'} (from --inventory) does not exist"]


def test_limit_matching_no_host(rack):
    result = _check(rack, "--limit", "node99")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"gpuprov: error: --limit 'node99' matches no host in {rack / 'rack3.ini'}"]


def test_an_r590_lock_with_cuda_13_passes(rack):
    """R590 (unsuffixed packages, pinning packages) with CUDA 13.1, cuDNN 9.17 for CUDA 13
    and a cu130 torch: the role installs that packaging, the matrix allows the set."""
    _set(rack / "group_vars/all/versions.yml", gpuprov_driver_version="590.48.01",
         gpuprov_cuda_version="13.1", gpuprov_torch_cuda_build="cu130",
         gpuprov_cudnn_version="9.17.0.29")
    result = _check(rack, "--limit", "node01")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_cudnn_older_than_its_cuda_major_is_refused(rack):
    """cuDNN 9.1 came before CUDA 13: the generation matches, the release does not."""
    _set(rack / "group_vars/all/versions.yml", gpuprov_driver_version="580.65.06",
         gpuprov_cuda_version="13.0", gpuprov_torch_cuda_build="cu130",
         gpuprov_cudnn_version="9.1.0.70")
    result = _check(rack, "--limit", "node01")
    assert result.returncode == 2
    assert result.stdout.startswith(
        "node01: cudnn_cuda: cuDNN 9.1.0.70 predates CUDA 13.x: the first cuDNN 9 with CUDA 13 "
        "builds is 9.13 [PyTorch RELEASE.md")
    assert len(result.stdout.splitlines()) == 1


# --- security floors (issue 37) ---------------------------------------------------------

def test_a_lock_below_the_security_floors_is_refused_naming_each_bulletin(shipped):
    _set(shipped / "group_vars/all/versions.yml", gpuprov_driver_version="550.127.08",
         gpuprov_cuda_version="12.4", gpuprov_cudnn_version="9.1.0.70",
         gpuprov_torch_cuda_build="cu126", gpuprov_container_toolkit_version="1.17.3")
    result = _check(shipped, "--limit", "node01")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines == [
        "node01: security_floor: driver 550.127.08: branch R550 has no fixed release in "
        "bulletin nvidia-5821 (fixed branches: R535, R570, R580, R590, R595) (accept it "
        "knowingly: gpuprov_security_accepted: [nvidia-5821]) [Security Bulletin: GPU Display "
        "Driver - May 2026, https://nvidia.custhelp.com/app/answers/detail/a_id/5821/]",
        "node01: security_floor: NVIDIA Container Toolkit 1.17.3 is below 1.19.1, which fixes "
        "bulletin nvidia-5850 (accept it knowingly: gpuprov_security_accepted: [nvidia-5850]) "
        "[Security Bulletin: NVIDIA Container Toolkit - June 2026 (CVE-2026-24260), "
        "https://nvidia.custhelp.com/app/answers/detail/a_id/5850/]"]


@pytest.mark.parametrize("driver, bulletin", [("590.44.01", "nvidia-5747"),
                                              ("580.95.05", "nvidia-5821")])
def test_a_driver_below_its_branch_fix_is_refused(shipped, driver, bulletin):
    _set(shipped / "group_vars/all/versions.yml", gpuprov_driver_version=driver)
    result = _check(shipped, "--limit", "node05")
    assert result.returncode == 2
    assert f"security_floor: driver {driver} is below" in result.stdout
    assert f"fixes bulletin {bulletin}" in result.stdout


def test_docker_and_dcgm_floors_and_the_distribution_s_docker_unjudged(shipped):
    _set(shipped / "group_vars/all/versions.yml",
         gpuprov_docker_version="5:28.5.1-1~ubuntu.24.04~noble", gpuprov_dcgm_version="4.4.1-1")
    result = _check(shipped, "--limit", "node05")
    assert result.returncode == 2
    assert "Docker Engine 28.5.1 is below 29.7.0, which fixes bulletin docker-29.7.0" in (
        result.stdout)
    assert "DCGM 4.4.1 is below 4.5.3, which fixes bulletin nvidia-5857" in result.stdout
    _set(shipped / "group_vars/all/versions.yml", gpuprov_docker_source="distro",
         gpuprov_docker_version="", gpuprov_dcgm_version="4.5.3-1")
    assert _check(shipped, "--limit", "node05").returncode == 0


def test_dcgm_without_diagnostics_for_the_lock_s_cuda_major_is_refused(shipped):
    """The shipped lock's CUDA 13.1: DCGM's CUDA 13 diagnostics begin at 4.4.1."""
    versions = shipped / "group_vars/all/versions.yml"
    _set(versions, gpuprov_dcgm_version="4.3.1-1",
         gpuprov_security_accepted=["nvidia-5857"])
    result = _check(shipped, "--limit", "node05")
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("node05: dcgm_cuda: DCGM 4.3.1 has no diagnostics for CUDA 13.x "
            "(datacenter-gpu-manager-4-cuda13 from DCGM 4.4.1); the lock has CUDA 13.1 "
            "[NVIDIA/DCGM at its release tags") in result.stdout
    _set(versions, gpuprov_dcgm_version="4.4.1-1")
    assert _check(shipped, "--limit", "node05").returncode == 0


def test_an_accepted_bulletin_passes_and_an_unknown_one_is_bad_input(shipped):
    versions = shipped / "group_vars/all/versions.yml"
    _set(versions, gpuprov_container_toolkit_version="1.17.3",
         gpuprov_security_accepted=["nvidia-5850"])
    assert _check(shipped).returncode == 0
    _set(versions, gpuprov_security_accepted=["nvidia-9999"])
    result = _check(shipped)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "gpuprov: error: host node01: gpuprov_security_accepted: unknown bulletin 'nvidia-9999' "
        "(known: docker-29.7.0, nvidia-5747, nvidia-5821, nvidia-5850, nvidia-5857)")


def test_a_rack_s_trays_are_refused_a_lock_of_their_own(shipped):
    # issue 72: an NVL72 rack is changed as one; a tray pinned to another driver is refused,
    # naming the rack and what differs, and only where that tray is asked for
    ini = shipped / "rack3.ini"
    ini.write_text(ini.read_text() + "\n[gb_rack_a]\ntray01\ntray02\ntray03\n")
    _set(shipped / "group_vars/gb_rack_a.yml", gpuprov_rack="gb-a",
         gpuprov_rack_profile="gb200-nvl72")
    driver = yaml.safe_load((shipped / "group_vars/all/versions.yml").read_text())[
        "gpuprov_driver_version"]
    _set(shipped / "host_vars/tray02.yml", gpuprov_driver_version="590.44.01",
         gpuprov_security_accepted=["nvidia-5747"])
    result = _check(shipped)
    assert result.returncode == 2, result.stdout
    assert result.stdout.splitlines() == [
        f"tray02: rack_uniform_lock: rack gb-a: driver_version 590.44.01 (the rack's {driver}): "
        "a rack is provisioned under one lock [an NVL72 rack is one NVLink domain and runs one "
        "driver: \"the smallest unit of change is 18 compute trays\" (NVIDIA/DCGM#313)]"]
    assert _check(shipped, "--limit", "tray01").returncode == 0
    assert _check(shipped, "--limit", "tray02").returncode == 2
    _set(shipped / "host_vars/tray02.yml", gpuprov_driver_version=driver)
    assert _check(shipped).returncode == 0
