"""nv-fabricmanager's log (/var/log/fabricmanager.log): its error lines.

Lines look like `[Feb 25 2025 13:59:45] [INFO] [tid 1803] message`, some followed by
continuation lines. `[ERROR]` and `[FATAL]` lines are errors, except the
`NV_WARN_NOTHING_TO_DO` report (fabric manager saying there is no NVSwitch to manage,
which is a configuration question the NVSwitch count answers, not a fabric fault); an
error line reporting a "non-fatal error" is kept apart. An empty log is a log with no
errors; text in no such form is a ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError

_LINE = re.compile(r"^\[(?P<ts>[^\]]+)\] \[(?P<level>[A-Z]+)\] \[tid \d+\] (?P<message>.*)$")
NOT_AN_ERROR = "NV_WARN_NOTHING_TO_DO"


@dataclass(frozen=True)
class FabricManagerLog:
    lines: int                  # log lines (continuations not counted)
    errors: list[str]           # `[time] message` of each error line, in order
    nonfatal: list[str]         # error lines that report a non-fatal error


def parse_fabric_manager_log(text: str, source: str) -> FabricManagerLog:
    lines, errors, nonfatal = 0, [], []
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        lines += 1
        message = m.group("message")
        if m.group("level") in ("ERROR", "FATAL") and NOT_AN_ERROR not in message:
            (nonfatal if "non-fatal" in message.lower() else errors).append(
                f"[{m.group('ts')}] {message}")
    if text.strip() and not lines:
        raise ParseError(source, "not a fabric manager log: no `[time] [LEVEL] [tid N]` line")
    return FabricManagerLog(lines, errors, nonfatal)
