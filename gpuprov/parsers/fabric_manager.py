"""nv-fabricmanager's log (/var/log/fabricmanager.log): its error lines.

Lines look like `[Feb 25 2025 13:59:45] [INFO] [tid 1803] message`, some followed by
continuation lines. `[ERROR]` and `[FATAL]` lines are errors, except the
`NV_WARN_NOTHING_TO_DO` report (fabric manager saying there is no NVSwitch to manage,
which is a configuration question the NVSwitch count answers, not a fabric fault); an
error line reporting a "non-fatal error" is kept apart. The log is appended across starts
(LOG_APPEND_TO_LOG): only what fabric manager logged since its last start counts, each
start opening with "Fabric Manager version V is running with the following configuration
options" (NVIDIA's fabric manager source logs it at every start); a log without such a
line counts whole. An empty log is a log with no errors; text in no such form is a
ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_LINE = re.compile(r"^\[(?P<ts>[^\]]+)\] \[(?P<level>[A-Z]+)\] \[tid \d+\] (?P<message>.*)$")
NOT_AN_ERROR = "NV_WARN_NOTHING_TO_DO"
STARTED = re.compile(r"^Fabric Manager version \S+ is running with the following configuration "
                     r"options")


@dataclass(frozen=True)
class FabricManagerLog:
    lines: int                  # log lines (continuations not counted)
    errors: list[str]           # `[time] message` of each error line since the last start
    nonfatal: list[str]         # error lines since then that report a non-fatal error
    earlier_errors: int = 0     # error lines before the last start (an earlier boot's)


def parse_fabric_manager_log(text: str, source: str) -> FabricManagerLog:
    lines, errors, nonfatal, earlier = 0, [], [], 0
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        lines += 1
        message = m.group("message")
        if STARTED.match(message):
            earlier += len(errors) + len(nonfatal)
            errors, nonfatal = [], []
        elif m.group("level") in ("ERROR", "FATAL") and NOT_AN_ERROR not in message:
            (nonfatal if "non-fatal" in message.lower() else errors).append(
                f"[{m.group('ts')}] {message}")
    if not text.strip():   # fabric manager logs its start: an empty log is no evidence
        raise ParseError(source, "empty: fabric manager wrote nothing to its log")
    if not lines:
        raise ParseError(source, "not a fabric manager log: no `[time] [LEVEL] [tid N]` line")
    return FabricManagerLog(lines, errors, nonfatal, earlier)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

FABRIC_MANAGER_LOG = EvidenceKind(
    "fabricmanager.log", "identity", parse_fabric_manager_log,
    "tail -n 5000 {fabric_manager_log}",
    "the last 5,000 lines of nv-fabricmanager's log (NVSwitch systems; absent elsewhere)",
    lab="sim/daemons.py", when="nvswitch")
