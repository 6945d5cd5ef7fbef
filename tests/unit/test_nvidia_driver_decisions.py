"""The nvidia_driver role's decisions (the collection's filter plugin) on what nodes really show:
sysfs values of real devices and `dpkg-query` output."""

import importlib.util

import pytest
import yaml

from gpuprov import collection
from tests.certificates import site_certificate, site_key_pair

ROLE = collection.ROLES / "nvidia_driver"
_spec = importlib.util.spec_from_file_location(
    "nvidia_driver_filters", collection.ROOT / "plugins" / "filter" / "nvidia_driver.py")
filters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filters)
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
TABLE = DEFAULTS["nvidia_driver_pci_architectures"]
FAMILY = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["nvidia_driver_family_regex"]


def _flavour(devices, requested="auto", branch="535"):
    gpus = filters.gpu_architectures(
        [{"bus": f"0000:{i:02x}:00.0", "device": d} for i, d in enumerate(devices)], TABLE)
    return filters.module_flavour(gpus, requested, branch,
                                  DEFAULTS["nvidia_driver_open_unsupported"],
                                  DEFAULTS["nvidia_driver_open_required"],
                                  DEFAULTS["nvidia_driver_open_default_branch"])


def test_sysfs_lines_split_into_gpus_and_nvswitches():
    lines = ["0000:18:00.0 0x10de 0x2330 0x030200",     # H100 SXM5 (3D controller)
             "0000:05:00.0 0x10de 0x22a3 0x068000",     # NVSwitch (bridge)
             "0000:17:00.0 0x15b3 0x101b 0x020700",     # ConnectX-6 (not NVIDIA)
             "0000:00:00.0 0x8086 0x09a2 0x060000"]
    inventory = filters.pci_inventory(lines)
    assert inventory == {"gpus": [{"bus": "0000:18:00.0", "device": "2330"}],
                         "nvswitches": [{"bus": "0000:05:00.0", "device": "22a3"}],
                         "nvlink5_bridges": []}


def test_an_hgx_b200_s_switches_are_its_sw_mng_bridges():
    """NVLink5: no NVSwitch on the PCI bus; the ConnectX-7 functions whose VPD carries
    SW_MNG (marked by the role's listing) manage them, a NIC of the same id does not."""
    lines = ["0000:1a:00.0 0x10de 0x2901 0x030200",     # B200
             "0000:1b:00.0 0x15b3 0x1021 0x020700",     # ConnectX-7 NIC
             "0000:c1:00.0 0x15b3 0x1021 0x020700 sw_mng",
             "0000:c1:00.1 0x15b3 0x1021 0x020700 sw_mng",
             "0000:c2:00.0 0x10de 0x2901 0x030200 sw_mng"]   # the mark counts on Mellanox only
    inventory = filters.pci_inventory(lines)
    assert inventory["nvswitches"] == []
    assert inventory["nvlink5_bridges"] == [{"bus": "0000:c1:00.0", "device": "1021"},
                                            {"bus": "0000:c1:00.1", "device": "1021"}]
    assert [g["bus"] for g in inventory["gpus"]] == ["0000:1a:00.0", "0000:c2:00.0"]


@pytest.mark.parametrize("device,architecture", [
    ("2330", "Hopper"), ("2335", "Hopper"), ("2342", "Grace Hopper"), ("20b2", "Ampere"),
    ("2236", "Ampere"), ("26b9", "Ada Lovelace"), ("27b8", "Ada Lovelace"), ("1eb8", "Turing"),
    ("1db1", "Volta"), ("15f8", "Pascal"), ("1b38", "Pascal"), ("2901", "Blackwell"),
    ("2bb1", "Blackwell"), ("13f2", "Maxwell"), ("0fff", None)])
def test_architecture_from_device_id(device, architecture):
    [gpu] = filters.gpu_architectures([{"bus": "b", "device": device}], TABLE)
    assert gpu["architecture"] == architecture


def test_flavour_follows_the_architecture_and_branch():
    assert _flavour(["2330"], branch="535")["flavour"] == "proprietary"
    assert _flavour(["2330"], branch="560")["flavour"] == "open"
    assert _flavour(["2901"], branch="550")["flavour"] == "open"       # Blackwell: open only
    assert _flavour(["1db1"], branch="570")["flavour"] == "proprietary"  # Volta: no GSP


def test_flavour_the_gpus_cannot_run_is_refused_naming_the_gpu():
    refused = _flavour(["1db1"], requested="open")
    assert refused["flavour"] == "" and "0000:00:00.0 (Volta)" in refused["error"]
    refused = _flavour(["2901"], requested="proprietary")
    assert "need the open kernel modules" in refused["error"] and "Blackwell" in refused["error"]
    mixed = _flavour(["2901", "1db1"])
    assert "mixes" in mixed["error"]
    assert "lock the flavour" in _flavour(["0fff"])["error"]
    assert "no NVIDIA GPU" in _flavour([])["error"]
    assert _flavour([], requested="open") == {"flavour": "open", "error": ""}


def test_driver_family_and_versions_off_the_lock():
    dpkg = ["nvidia-utils-535 535.161.08-0ubuntu1 hi", "nvidia-utils-580 580.95.05-0ubuntu1 ii",
            "libnvidia-container1 1.17.3-1 hi", "nvidia-container-toolkit 1.17.3-1 ii",
            "nvidia-dkms-570-server-open 580.95.05-0ubuntu0.22.04.1 ii",
            "nvidia-headless-535 535.161.08-0ubuntu1 rc", "cuda-drivers-535 535.183.06-1 ii",
            "cuda-toolkit-12-4 12.4.0-1 hi"]
    installed = filters.installed_family(dpkg, FAMILY)
    assert set(installed) == {"nvidia-utils-535", "nvidia-utils-580", "cuda-drivers-535",
                              "nvidia-dkms-570-server-open"}
    # the transitional 570-server-open package that installed 580 is caught, as is 580 itself
    assert filters.not_at_version(installed, "535.161.08") == [
        "cuda-drivers-535", "nvidia-dkms-570-server-open", "nvidia-utils-580"]


# `dkms status` as DKMS 3 (Ubuntu 24.04) and DKMS 2 (Ubuntu 20.04) print it; 6.8.0-51 is a
# kernel installed by an update and never booted, 6.8.0-31 one whose headers were removed.
DKMS3_STATUS = ["nvidia/550.90.07, 6.8.0-45-generic, x86_64: installed",
                "nvidia/550.90.07, 6.8.0-51-generic, x86_64: built"]
DKMS2_STATUS = ["nvidia, 550.90.07, 6.8.0-45-generic, x86_64: installed"]
KERNELS = filters.kernel_headers(["6.8.0-31-generic no-headers", "6.8.0-45-generic headers",
                                  "6.8.0-51-generic headers"])


def test_installed_kernels_and_their_headers():
    assert KERNELS == {"6.8.0-31-generic": False, "6.8.0-45-generic": True,
                       "6.8.0-51-generic": True}


@pytest.mark.parametrize("status", [DKMS3_STATUS, DKMS2_STATUS])
def test_kernels_dkms_did_not_build_the_driver_for(status):
    gaps = filters.dkms_gaps(status, KERNELS, "550.90.07")
    assert gaps == {"missing": ["6.8.0-31-generic", "6.8.0-51-generic"],
                    "buildable": ["6.8.0-51-generic"]}


def test_a_module_of_another_version_does_not_count():
    gaps = filters.dkms_gaps(DKMS3_STATUS, {"6.8.0-45-generic": True}, "550.127.08")
    assert gaps == {"missing": ["6.8.0-45-generic"], "buildable": ["6.8.0-45-generic"]}


def test_the_signer_is_the_certificates_issuer_in_der_and_pem(tmp_path):
    """kmod's signer is the issuer's CN (libkmod-signature.c): a self-signed key's own
    subject, a CA-issued key's CA (issue 66); the lab's modinfo reads the same."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    spec = importlib.util.spec_from_file_location(
        "module_signing_filters", collection.ROOT / "plugins" / "filter" / "module_signing.py")
    signing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(signing)
    der = site_certificate("Example Site MOK 2026")
    (tmp_path / "mok.der").write_bytes(der)
    (tmp_path / "mok.pem").write_bytes(
        x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM))
    for name in ("mok.der", "mok.pem"):
        assert signing.module_signer_name(str(tmp_path / name)) == "Example Site MOK 2026"
    with pytest.raises(Exception, match=r"absent\.der: No such file"):
        signing.module_signer_name(str(tmp_path / "absent.der"))
    from gpuprov.lab.sim.kmod import signer_name
    issued = site_key_pair("node07 module signing", issued_by="Example Site CA")[1]
    (tmp_path / "issued.der").write_bytes(issued)
    assert signing.module_signer_name(str(tmp_path / "issued.der")) == "Example Site CA"
    assert signer_name(issued) == "Example Site CA" and signer_name(der) == "Example Site MOK 2026"


def test_each_kernels_signer_from_modinfo():
    lines = ["nvidia/550.90.07, 6.8.0-45-generic, x86_64: installed",
             "module 6.8.0-45-generic 550.90.07|Example Site MOK 2026",
             "module 6.8.0-31-generic |"]
    assert filters.module_signers(lines) == {"6.8.0-45-generic": "Example Site MOK 2026",
                                             "6.8.0-31-generic": ""}


@pytest.mark.parametrize("version, driver_suffix, fabric_suffix", [
    ("570.211.01", "-570", "-570"),
    # R580: the driver's names keep the branch, fabric manager and NSCQ already lose it
    ("580.105.08", "-580", ""),
    ("590.48.01", "", ""),
])
def test_package_names_carry_the_branch_as_the_repository_names_them(version, driver_suffix,
                                                                     fabric_suffix):
    from tests.ansible_local import render_role_vars
    names = render_role_vars("nvidia_driver", {"nvidia_driver_version": version}, [
        "nvidia_driver_branch", "nvidia_driver_names_branch",
        "nvidia_driver_fabric_names_branch"])
    assert names["nvidia_driver_names_branch"] == driver_suffix
    assert names["nvidia_driver_fabric_names_branch"] == fabric_suffix
    # the lab's stand-ins name them the same way (gpuprov/lab/standins.py)
    from gpuprov.lab import standins
    debs = {d.name for d in standins.driver_packages(version.split(".")[0], version, "0ubuntu1")}
    assert f"nvidia-fabricmanager{fabric_suffix}" in debs
    assert f"libnvidia-nscq{fabric_suffix}" in debs and f"nvidia-dkms{driver_suffix}" in debs
