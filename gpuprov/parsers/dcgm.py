"""`dcgmi diag -r LEVEL` in its table form, every DCGM release from 2.x to 4.x.

The table has sections (`Metadata`, `Deployment`, `Hardware`, `Integration`, `Stress`),
one row per test with its result, and continuation rows: per-GPU results (`GPU0: Pass`,
DCGM 4), GPU lists (`Fail - GPU: 0`, `Pass - GPUs: 1, 2`), and the text of `Error`,
`Warning` and `Info` rows, wrapped mid-word at the column's width (so continuation text is
joined as printed, not re-spaced).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError

_SECTION = re.compile(r"^[|+]-{3,}\s+(?P<name>[A-Za-z ]+?)\s+-+[+|]")
_RESULT = re.compile(r"^(?P<status>Pass|Fail|Skip|Warn)\b(?:\s*-\s*GPUs?:\s*(?P<gpus>[\d,\s]+))?",
                     re.IGNORECASE)
_GPU_RESULT = re.compile(r"^GPU\s*(?P<gpu>\d+):\s*(?P<status>Pass|Fail|Skip|Warn)\b",
                         re.IGNORECASE)
_GPU_IN_TEXT = re.compile(r"\bGPU\s?(\d+)\b")
MESSAGES = ("Error", "Warning", "Info")


@dataclass
class DcgmTest:
    name: str
    section: str
    status: str = "skip"                  # pass, fail, skip, warn (the worst seen)
    failed_gpus: list[int] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)   # (Error|Warning, text)


@dataclass(frozen=True)
class DcgmDiag:
    tests: tuple[DcgmTest, ...]
    metadata: dict[str, str]

    @property
    def failed(self) -> list[DcgmTest]:
        return [t for t in self.tests if t.status == "fail"
                or any(kind == "Error" for kind, _ in t.messages)]


_RANK = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


def _apply(test: DcgmTest, value: str) -> None:
    if m := _GPU_RESULT.match(value):
        status, gpus = m.group("status").lower(), [int(m.group("gpu"))]
    elif m := _RESULT.match(value):
        status = m.group("status").lower()
        gpus = [int(g) for g in re.findall(r"\d+", m.group("gpus") or "")]
    else:
        return
    if _RANK[status] > _RANK[test.status]:
        test.status = status
    if status == "fail":
        test.failed_gpus += [g for g in gpus if g not in test.failed_gpus]


def _cells(line: str) -> tuple[str, str] | None:
    """(name, value) of a `| name | value |` row; the value as printed, padding removed."""
    parts = line.rstrip().split("|")
    if len(parts) < 4 or parts[0].strip():
        return None
    value = parts[2][1:] if parts[2].startswith(" ") else parts[2]
    return parts[1].strip(), value.rstrip()


def parse_dcgm_diag(text: str, source: str) -> DcgmDiag:
    if "Diagnostic" not in text or "Result" not in text:
        raise ParseError(source, "not `dcgmi diag` output (no Diagnostic | Result table)")
    tests: list[DcgmTest] = []
    metadata: dict[str, str] = {}
    section, current, message = "", None, None
    for line in text.splitlines():
        if m := _SECTION.match(line.strip()):
            section, current, message = m.group("name").strip(), None, None
            continue
        cells = _cells(line.strip())
        if cells is None:
            continue
        name, value = cells
        if (name, value.strip()) == ("Diagnostic", "Result"):
            continue
        if name in MESSAGES:
            if current is None:   # a message of the section itself (before any test row)
                current = DcgmTest(section or "diagnostic", section)
                tests.append(current)
            owner = current
            message = [name, value.strip()]
            owner.messages.append(message)  # type: ignore[arg-type]
        elif name and section == "Metadata":
            metadata[name] = value.strip()
        elif name:
            current, message = DcgmTest(name, section), None
            tests.append(current)
            _apply(current, value.strip())
        elif message is not None:
            message[1] += value      # wrapped text, joined as printed
        elif current is not None:
            _apply(current, value.strip())
    for test in tests:
        test.messages = [tuple(m) for m in test.messages]  # type: ignore[misc]
        for kind, message in test.messages:
            if kind == "Error":   # DCGM's error text names the GPU ("GPU 3 has …")
                test.failed_gpus += [int(g) for g in _GPU_IN_TEXT.findall(message)
                                     if int(g) not in test.failed_gpus]
    if not tests:
        raise ParseError(source, "a `dcgmi diag` table with no test rows")
    return DcgmDiag(tuple(tests), metadata)
