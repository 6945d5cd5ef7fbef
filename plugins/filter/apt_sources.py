"""Which apt source entries name a repository, as apt itself reads them.

apt substitutes `$(ARCH)` in every source's URI with the node's package architecture
(APT::Architecture) before it compares sources (apt-pkg/sourcelist.cc,
`pkgSourceList::Type::FixupURI`), and NVIDIA's container toolkit install guide writes its
list that way:

    deb [signed-by=…] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /

An entry found by the literal URL alone misses it, and apt then stops on two keyrings for
one source (role apt_source).
"""

from __future__ import annotations

import re


def apt_source_entry_regex(url: str, arch: str = "") -> str:
    """A regular expression for a source line (not a comment) that names `url`, with or
    without trailing slashes; a path segment equal to `arch` (`dpkg --print-architecture`)
    may also be written `$(ARCH)`."""
    segments = url.rstrip("/").split("/")
    body = "/".join(rf"(?:{re.escape(s)}|\$\(ARCH\))" if arch and s == arch else re.escape(s)
                    for s in segments)
    return rf"^\s*[^#\s].*{body}/*(\s|$)"


class FilterModule:
    def filters(self) -> dict:
        return {"apt_source_entry_regex": apt_source_entry_regex}
