"""Verify (testinfra): the locked cuDNN build for the CUDA major, held and pinned, and the
header the alternatives point at reporting it."""

LOCK = {  # host -> (packages, exact Debian version, major.minor.patch)
    "node02": (["libcudnn8", "libcudnn8-dev"], "8.9.6.50-1+cuda12.2", ("8", "9", "6")),
    "node03": (["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"], "9.1.0.70-1", ("9", "1", "0")),
}


def _lock(host):
    return LOCK[host.backend.get_hostname()]


def test_locked_build_installed_and_held(host):
    packages, version, _ = _lock(host)
    for name in packages:
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        assert status.split() == [version, "hi"], name
    pins = host.file("/etc/apt/preferences.d/gpuprov-cudnn").content_string
    assert f"Pin: version {version}" in pins


def test_upgrade_would_not_move_it(host):
    packages, _, _ = _lock(host)
    simulated = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert not any(f"Inst {name} " in simulated for name in packages)


def test_cudnn_version_header_reports_the_lock(host):
    _, _, (major, minor, patch) = _lock(host)
    header = host.file("/usr/include/cudnn_version.h").content_string
    assert f"#define CUDNN_MAJOR {major}\n" in header
    assert f"#define CUDNN_MINOR {minor}\n" in header
    assert f"#define CUDNN_PATCHLEVEL {patch}\n" in header
