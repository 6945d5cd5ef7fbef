"""Which apt source entries name a repository, as apt itself reads them.

apt substitutes `$(ARCH)` in every source's URI with the node's package architecture
(APT::Architecture) before it compares sources (apt-pkg/sourcelist.cc,
`pkgSourceList::Type::FixupURI`), and NVIDIA's container toolkit install guide writes its
list that way:

    deb [signed-by=…] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /

An entry found by the literal URL alone misses it, and apt then stops on two keyrings for
one source (role apt_source).

Where two entries for one source name two keyrings, every apt command stops before it reads
anything, in apt's words (apt-pkg/deb/debmetaindex.cc, `debReleaseIndex::SetSignedBy`):

    E: Conflicting values set for option Signed-By regarding source URI SUITE: A != B

`apt_signed_by_conflicts` reads the sources so named from apt's error output.
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


_CONFLICT = re.compile(r"^E: Conflicting values set for option Signed-By regarding source "
                       r"(?P<uri>\S+) (?P<suite>\S+): ")


def apt_signed_by_conflicts(stderr: str) -> list[str]:
    """The source URIs (as apt prints them: `$(ARCH)` substituted) apt found under two
    keyrings, in the order it named them, once each."""
    uris = [m.group("uri") for line in stderr.splitlines()
            if (m := _CONFLICT.match(line.strip()))]
    return list(dict.fromkeys(uris))


def apt_uri_entry_regex(uri: str, arch: str = "") -> str:
    """`apt_source_entry_regex` for a URI as apt prints it, which is normalised (`file:///x`
    as `file:/x`): matched from its path on, whatever scheme form the entry was written in."""
    return apt_source_entry_regex(uri.split(":", 1)[-1], arch)


class FilterModule:
    def filters(self) -> dict:
        return {"apt_source_entry_regex": apt_source_entry_regex,
                "apt_signed_by_conflicts": apt_signed_by_conflicts,
                "apt_uri_entry_regex": apt_uri_entry_regex}
