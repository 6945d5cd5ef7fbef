"""The collection's apt_source_entry_regex filter (role apt_source's search for other entries
of its repository): NVIDIA's container toolkit list, written with apt's `$(ARCH)`, is an
entry of the toolkit's URL on an amd64 node; comments, other repositories and another
architecture's are not (issue 55)."""

import importlib.util
import re

from gpuprov import collection

_spec = importlib.util.spec_from_file_location(
    "apt_sources_filter", collection.ROOT / "plugins" / "filter" / "apt_sources.py")
filters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filters)

URL = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"   # the role's default
# the list NVIDIA's install guide writes (its sed adds the signed-by option)
NVIDIA_LIST = ("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
               "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /")


def _matches(line: str, url: str = URL, arch: str = "amd64") -> bool:
    # ansible's find `contains` matches each line from its start (re.match)
    return re.match(filters.apt_source_entry_regex(url, arch), line) is not None


def test_nvidia_s_arch_list_names_the_toolkit_url():
    assert _matches(NVIDIA_LIST)
    assert _matches("deb https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /")
    assert _matches("URIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64/")


def test_comments_other_repositories_and_other_architectures_do_not():
    assert not _matches("# " + NVIDIA_LIST)
    assert not _matches("deb https://nvidia.github.io/libnvidia-container/experimental/deb/"
                        "$(ARCH) /")
    assert not _matches(NVIDIA_LIST, url=URL.replace("amd64", "arm64"))   # an amd64 node
    assert not _matches(NVIDIA_LIST, arch="")     # the architecture unknown: the literal URL


def test_without_an_architecture_segment_the_literal_url_is_searched():
    cuda = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    assert _matches(f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {cuda} /",
                    url=cuda)
    assert not _matches("deb https://developer.download.nvidia.com/compute/cuda/repos/"
                        "ubuntu2204/$(ARCH)/ /", url=cuda)


def test_apt_s_signed_by_conflict_names_the_source_and_finds_both_entries():
    """Issue 66, apt 2.6.2's own words (a capture): the source named once, as apt prints it
    (`file:/`, `$(ARCH)` substituted); an entry written either way is found from it."""
    from tests.evidence_builder import capture
    said = capture("apt/signed-by-conflict-arch-list-apt-2.6.2.txt")
    [uri] = filters.apt_signed_by_conflicts(said + said)
    assert uri == "file:/srv/gpuprov-mirror/libnvidia-container/stable/deb/amd64/"
    regex = filters.apt_uri_entry_regex(uri, "amd64")
    guide = ("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
             "file:///srv/gpuprov-mirror/libnvidia-container/stable/deb/$(ARCH) /")
    ours = "URIs: file:///srv/gpuprov-mirror/libnvidia-container/stable/deb/amd64/"
    assert re.match(regex, guide) and re.match(regex, ours)
    assert not re.match(regex, "URIs: file:///srv/gpuprov-mirror/cuda/")
    assert filters.apt_signed_by_conflicts("E: The list of sources could not be read.\n") == []
