"""`grep -sH . <glob>` listings: one `<path>:<value>` line per line of each file found.

GNU grep prints the file name before a match only when it searches more than one file,
unless `-H` asks for it always (GNU grep manual, "General Output Control": "-H
--with-filename Print the file name for each match. This is the default when there is more
than one file to search."). So `grep -s .` over a glob that matches one file (a node with a
single RDMA adapter, or one NVSwitch) prints the value alone, without the device's path.
gpuprov's commands pass `-H`. Evidence captured without it, from a host with one such file,
holds one line without a path: it is read as the one device's value (UNNAMED), and given to
that device where the rest of the evidence names exactly one (`attribute`).
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")

UNNAMED = ""     # the key of a value grep printed without its file: the only file's


def attribute(found: dict[str, V], names: list[str]) -> dict[str, V]:
    """`found` with an unnamed value given to the one device `names` holds; where there is
    not exactly one (or a named value beside it), the unnamed value is nobody's, and the
    devices read as unlisted."""
    if UNNAMED not in found:
        return found
    named = {k: v for k, v in found.items() if k != UNNAMED}
    if len(set(names)) == 1 and not named:
        return {names[0]: found[UNNAMED]}
    return named
