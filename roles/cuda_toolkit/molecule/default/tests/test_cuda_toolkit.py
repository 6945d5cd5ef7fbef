"""Verify (testinfra): the locked toolkit, held, as the default, from a signed-by source."""


def test_locked_toolkit_installed_and_held(host):
    pkg = host.package("cuda-toolkit-12-4")
    assert pkg.is_installed and pkg.version == "12.4.0-1"
    status = host.check_output("dpkg-query -W -f='${Status}' cuda-toolkit-12-4")
    assert status.startswith("hold ")
    upgrade = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert "cuda-toolkit" not in upgrade.split("The following packages have been kept back")[0]


def test_nvcc_reports_the_locked_toolkit(host):
    out = host.check_output("/usr/local/cuda/bin/nvcc --version")
    assert "Cuda compilation tools, release 12.4, V12.4.99" in out
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.4"


def test_paths_use_lib64(host):
    assert host.file("/etc/ld.so.conf.d/cuda.conf").content_string.strip().endswith(
        "/usr/local/cuda/lib64")
    assert "/usr/local/cuda/bin" in host.file("/etc/profile.d/cuda.sh").content_string


def test_repository_is_trusted_only_through_signed_by(host):
    source = host.file("/etc/apt/sources.list.d/cuda.sources").content_string
    assert "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg" in source
    assert "URIs: file:///srv/gpuprov-mirror/cuda/" in source
