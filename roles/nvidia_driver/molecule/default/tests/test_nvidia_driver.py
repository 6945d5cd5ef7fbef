"""Verify (testinfra) on node01 (HGX H100, NVSwitch) and node03 (L40S PCIe, open modules):
the locked 535.161.08 although the mirror has newer drivers, pinned, held, reported by
nvidia-smi, and fabric manager exactly where NVSwitch is."""

import re

LOCKED = "535.161.08"
FAMILY = re.compile(r"^((lib)?nvidia-.+-[0-9]{3}(-server)?(-open)?|cuda-drivers(-[0-9]{3})?)$")


def _nvswitch(host):
    return host.backend.get_hostname() == "node01"


def _driver_packages(host):
    out = host.check_output("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'")
    rows = (line.split() for line in out.splitlines())
    return {name: (version, status) for name, version, status in rows if FAMILY.match(name)}


def test_every_driver_package_at_the_locked_version_and_held(host):
    packages = _driver_packages(host)
    dkms = "nvidia-dkms-535" if _nvswitch(host) else "nvidia-dkms-535-open"
    expected = {"nvidia-headless-535" + dkms[len("nvidia-dkms-535"):], dkms,
                "nvidia-kernel-common-535", "libnvidia-compute-535", "nvidia-compute-utils-535",
                "nvidia-utils-535"}
    if _nvswitch(host):
        expected |= {"nvidia-fabricmanager-535", "libnvidia-nscq-535"}
    assert set(packages) == expected
    for name, (version, status) in packages.items():
        assert version.startswith(LOCKED + "-"), (name, version)
        assert status == "hi", (name, status)


def test_nvidia_smi_reports_the_locked_driver(host):
    assert host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader") \
        .splitlines()[0] == LOCKED


def test_apt_upgrade_leaves_the_driver_alone(host):
    host.run_expect([0], "DEBIAN_FRONTEND=noninteractive apt-get -qy upgrade")
    assert all(v.startswith(LOCKED + "-") for v, _ in _driver_packages(host).values())
    # the newer 535.183.06 is there, and apt would not take it even when asked for the package
    assert "535.183.06-0ubuntu1" in host.check_output("apt-cache madison libnvidia-compute-535")
    assert host.check_output("apt-cache policy libnvidia-compute-535").count("1001") >= 1


def test_metapackages_that_follow_the_newest_driver_cannot_be_installed(host):
    result = host.run("apt-get -s install cuda-drivers-535")
    assert result.rc != 0 and "cuda-drivers-535" in result.stderr + result.stdout


def test_pins_and_unattended_upgrades_blacklist(host):
    prefs = host.file("/etc/apt/preferences.d/gpuprov-nvidia-driver").content_string
    assert f"Pin: version {LOCKED}-*" in prefs and "Pin-Priority: 1001" in prefs
    blacklist = host.file("/etc/apt/apt.conf.d/51gpuprov-nvidia-driver").content_string
    for pattern in ("nvidia-", "libnvidia-", "cuda-", "linux-"):
        assert f'"{pattern}";' in blacklist
    config = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"nvidia-"' in config


def test_repository_trusted_only_through_signed_by(host):
    source = host.file("/etc/apt/sources.list.d/cuda.sources").content_string
    assert "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg" in source


def test_persistence_daemon_enabled_and_running(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled and service.is_running
    modes = host.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
    assert set(modes.splitlines()) == {"Enabled"}


def test_fabric_manager_only_on_nvswitch(host):
    service = host.service("nvidia-fabricmanager")
    if _nvswitch(host):
        assert service.is_enabled and service.is_running
        assert host.package("nvidia-fabricmanager-535").version == LOCKED + "-1"
        assert "Completed" in host.check_output("nvidia-smi -q")
    else:
        assert not host.package("nvidia-fabricmanager-535").is_installed
        assert not host.file("/usr/bin/nv-fabricmanager").exists


def test_no_reboot_pending(host):
    assert not host.file("/run/reboot-required").exists


def test_dkms_built_the_driver_for_the_running_kernel_against_its_headers(host):
    kernel = host.check_output("/usr/local/sbin/gpuprov-lab-uname-r")   # the lab's kernel
    assert host.package(f"linux-headers-{kernel}").is_installed
    assert host.check_output("dkms status") == f"nvidia/{LOCKED}, {kernel}, x86_64: installed"


def test_the_installed_kernel_meta_package_is_held_and_nothing_else(host):
    held = host.check_output("apt-mark showhold").split()
    kernel = [p for p in held if p.startswith("linux-")]
    assert kernel == (["linux-headers-generic"] if host.backend.get_hostname() == "node03"
                      else [])
