"""Verify (testinfra): GDRCopy's packages at the lab lock's version and held, gdrdrv built
by DKMS and loaded by its service, which made /dev/gdrdrv, and gdrcopy_sanity passing."""

from gpuprov.lab import gdrcopy as lab_gdrcopy
from gpuprov.lab import kernel_view
from gpuprov.parsers.gdrcopy import parse_gdrcopy_sanity

PACKAGES = ["libgdrapi", "gdrdrv-dkms", "gdrcopy-tests"]


def test_packages_at_the_version_and_held(host):
    for name in PACKAGES:
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        version, state = status.split()
        assert version.startswith(f"{lab_gdrcopy.VERSION}-") and state == "hi", (name, status)


def test_the_module_is_built_loaded_and_its_device_made_by_the_service(host):
    assert "gdrdrv/" in host.check_output("dkms status -m gdrdrv")
    assert "gdrdrv" in host.check_output(kernel_view.LSMOD)
    service = host.service("gdrdrv")
    assert service.is_running and service.is_enabled
    assert host.file(lab_gdrcopy.DEVICE).exists


def test_gdrcopy_sanity_passes(host):
    run = host.run("gdrcopy_sanity")
    assert run.rc == 0, run.stdout + run.stderr
    report = parse_gdrcopy_sanity(run.stdout, "gdrcopy_sanity")
    assert report.ok and report.total == report.passed
