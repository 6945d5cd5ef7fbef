"""The gdrcopy role's input check (tasks/validate.yml) under ansible-playbook on a local
connection: NVIDIA's three package files at the locked release pass; every problem is named
in one error."""

from gpuprov import collection
from tests.ansible_local import run_task_file

TASKS = collection.ROLES / "gdrcopy" / "tasks" / "validate.yml"
BASE = "https://developer.download.nvidia.com/compute/redist/gdrcopy/CUDA%2013.0/ubuntu24_04/x64"
SHA = "a" * 64
GOOD = {
    "gdrcopy_version": "2.5.1",
    "gdrcopy_debs": {
        "libgdrapi": {"url": f"{BASE}/libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb", "sha256": SHA},
        "gdrdrv-dkms": {"url": f"{BASE}/gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb",
                        "sha256": SHA},
        "gdrcopy-tests": {"url": f"{BASE}/gdrcopy-tests_2.5.1-1_amd64.Ubuntu24_04+cuda13.0.deb",
                          "sha256": SHA}},
    # the role's vars/main.yml
    "gdrcopy_packages": ["libgdrapi", "gdrdrv-dkms", "gdrcopy-tests"],
}


def _run(tmp_path, **overrides):
    return run_task_file(tmp_path, TASKS, {**GOOD, **overrides})


def test_nvidia_s_three_files_at_the_release_pass(tmp_path):
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout


def test_every_problem_is_named_in_one_error(tmp_path):
    debs = {**GOOD["gdrcopy_debs"],
            # another release's file, and a digest that is not one
            "libgdrapi": {"url": f"{BASE}/libgdrapi_2.5-1_amd64.Ubuntu24_04.deb",
                          "sha256": "deadbeef"},
            "gdrcopy": {"url": f"{BASE}/gdrcopy_2.5.1-1_amd64.Ubuntu24_04.deb", "sha256": SHA}}
    del debs["gdrcopy-tests"]
    result = _run(tmp_path, gdrcopy_debs=debs)
    assert result.returncode != 0
    out = result.stdout
    assert (f"gdrcopy_debs.libgdrapi.url '{BASE}/libgdrapi_2.5-1_amd64.Ubuntu24_04.deb': "
            "expected a file libgdrapi_2.5.1-<revision>_<arch>….deb") in out, out
    assert "gdrcopy_debs.libgdrapi.sha256 'deadbeef': expected 64 hex digits" in out
    assert "gdrcopy_debs.gdrcopy-tests.url '': expected a file gdrcopy-tests_2.5.1-" in out
    assert "gdrcopy_debs.gdrcopy: not one of GDRCopy's packages (libgdrapi, gdrdrv-dkms, " \
        "gdrcopy-tests)" in out


def test_a_version_that_is_not_a_release_is_named(tmp_path):
    result = _run(tmp_path, gdrcopy_version="latest")
    assert result.returncode != 0
    assert "gdrcopy_version 'latest': expected GDRCopy's release, e.g. 2.5.1" in result.stdout


SOURCES = collection.ROLES / "gdrcopy" / "tasks" / "sources.yml"


def _sources(tmp_path, *drivers: str):
    """tasks/sources.yml over a /usr/src with these drivers' sources (nv-p2p.c each)."""
    src = tmp_path / "usr-src"
    for version in drivers:
        (src / f"nvidia-{version}" / "nvidia").mkdir(parents=True)
        (src / f"nvidia-{version}" / "nvidia" / "nv-p2p.c").write_text("")
    src.mkdir(exist_ok=True)
    return run_task_file(tmp_path, SOURCES, {
        "gdrcopy_driver_version": "550.90.07", "gdrcopy_nvidia_source_file": "nv-p2p.c",
        "gdrcopy_nvidia_source_globs": [f"{src}/kernel-modules/nvidia-*", f"{src}/nvidia-*"]})


def test_the_locked_driver_s_sources_pass(tmp_path):
    result = _sources(tmp_path, "550.90.07")
    assert result.returncode == 0, result.stdout


def test_no_driver_sources_is_refused_saying_why(tmp_path):
    result = _sources(tmp_path)
    assert result.returncode != 0
    assert "this host has none (Canonical's precompiled modules ship none; nvidia-dkms does), " \
        "so GDRCopy cannot be built here" in result.stdout


def test_another_driver_s_sources_found_first_are_refused_naming_them(tmp_path):
    result = _sources(tmp_path, "535.161.08")
    assert result.returncode != 0
    assert "nvidia-535.161.08/nvidia/nv-p2p.c, not driver 550.90.07's: remove the other " \
        "driver's sources" in result.stdout
