"""`dcgmi diag -r LEVEL` as dcgmi prints it: its JSON (`-j`, what validation asks for) and
its table, every DCGM release from 2.x to 4.x; `parse_dcgm_diag` reads either.

The JSON document is DCGM 3's `"DCGM GPU Diagnostic"` (results by `gpu_ids`: a CSV string
on Deployment tests, a number on plugin tests; statuses in capitals; `null` entries between
tests) or DCGM 4's `"DCGM Diagnostic"` (results by `entity_group`/`entity_id`, a
`test_summary` per test, `metadata` beside it); both nest tests in `test_categories`. A
`warnings` entry of a failing result is DCGM's reason (an Error row in the table); a
`runtime_error` means the diagnostic did not run at all. dcgmi may print a line before the
document.

The table has sections (`Metadata`, `Deployment`, `Hardware`, `Integration`, `Stress`),
one row per test with its result, and continuation rows: per-GPU results (`GPU0: Pass`,
DCGM 4), GPU lists (`Fail - GPU: 0`, `Pass - GPUs: 1, 2`), and the text of `Error`,
`Warning` and `Info` rows, wrapped mid-word at the column's width (so continuation text is
joined as printed, not re-spaced).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members

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
    gpus: list[int] = field(default_factory=list)      # every GPU it gave a result for
    ran_on: list[int] = field(default_factory=list)    # those whose result is not a skip
    messages: list[tuple[str, str]] = field(default_factory=list)   # (Error|Warning, text)


# Figures DCGM's plugins print in their Info text (DCGM issue #215 shows both):
# "GPU 0 GPU to Host bandwidth:\t\t24.02 GB/s, GPU 0 Host to GPU bandwidth:\t\t25.93 GB/s, …"
# (pcie) and "GPU 0 calculated at approximately 859.08 gigaflops during this test"
# (diagnostic). The table wraps Info mid-word; its rows are joined as printed.
_PCIE_BW = re.compile(r"GPU (\d+) (?:GPU to Host|Host to GPU) bandwidth:\s*([\d.]+) GB/s")
_GFLOPS = re.compile(r"GPU (\d+) calculated at approximately ([\d.]+) gigaflops")


@dataclass(frozen=True)
class DcgmDiag:
    tests: tuple[DcgmTest, ...]
    metadata: dict[str, str]

    def figures(self) -> dict[str, dict[int, float]]:
        """Per GPU: `pcie_gbps`, the slower direction of DCGM's host/device copy bandwidth;
        `gflops`, the diagnostic (GEMM) test's rate. Only what the Info text carries."""
        out: dict[str, dict[int, float]] = {}
        for test in self.tests:
            for kind, text in test.messages:
                if kind != "Info":
                    continue
                for gpu, value in _PCIE_BW.findall(text):
                    pcie = out.setdefault("pcie_gbps", {})
                    pcie[int(gpu)] = min(pcie.get(int(gpu), float("inf")), float(value))
                for gpu, value in _GFLOPS.findall(text):
                    out.setdefault("gflops", {})[int(gpu)] = float(value)
        return out

    def gpus(self) -> list[int] | None:
        """Every GPU some test gave a result for; None where no result names a GPU (the
        older table forms' bare `Pass`): DCGM's coverage cannot be told from those."""
        found = sorted({g for t in self.tests for g in t.gpus})
        return found or None

    @property
    def failed(self) -> list[DcgmTest]:
        return [t for t in self.tests if t.status == "fail"
                or any(kind == "Error" for kind, _ in t.messages)]

    @property
    def skipped(self) -> list[DcgmTest]:
        """Tests of the asked level that did not run (DCGM's Info may say why)."""
        return [t for t in self.tests if t.status == "skip"
                and not any(kind in ("Error", "Warning") for kind, _ in t.messages)]


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
    test.gpus += [g for g in gpus if g not in test.gpus]
    if status != "skip":
        test.ran_on += [g for g in gpus if g not in test.ran_on]
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
    """The JSON document or the table, whichever dcgmi printed."""
    for line in text.splitlines():
        if line.strip().startswith("{"):
            return _parse_json(text[text.index("{"):], source)
        if line.strip().startswith(("+---", "|")):
            break
    return _parse_table(text, source)


# DCGM 3 prints PASS/FAIL/WARN/SKIP (older SKIPPED), DCGM 4 Pass/Fail/Warn/Skip
_JSON_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip",
                "skipped": "skip", "not run": "skip"}


def _status(value: object, where: str, source: str) -> str:
    status = _JSON_STATUS.get(str(value).strip().lower())
    if status is None:      # an unknown word is no evidence of a pass
        raise ParseError(source, f"{where}: unknown dcgmi status {value!r}")
    return status


def _gpus(result: dict) -> list[int]:
    if "entity_id" in result:      # DCGM 4: GPUs and other entities (NVSwitches, CPUs)
        return [int(result["entity_id"])] if result.get("entity_group", "GPU") == "GPU" else []
    ids = result.get("gpu_ids", result.get("gpu_id", ""))
    return [int(g) for g in re.findall(r"\d+", str(ids))]


def _texts(value: object) -> list[str]:
    """`warnings`/`info`: a list of strings or of {"warning": …} objects, or one string."""
    items = value if isinstance(value, list) else [value] if value else []
    return [str(i.get("warning", "")) if isinstance(i, dict) else str(i)
            for i in items if i is not None]


def _json_test(raw: dict, section: str, source: str) -> DcgmTest:
    test = DcgmTest(str(raw.get("name", "?")), section)
    where = f"test {test.name!r}"
    results = [r for r in raw.get("results") or [] if isinstance(r, dict)]
    summary = raw.get("test_summary") if isinstance(raw.get("test_summary"), dict) else {}
    statuses = [_status(r.get("status"), where, source) for r in results]
    for result, status in zip(results, statuses, strict=True):
        test.gpus += [g for g in _gpus(result) if g not in test.gpus]
        if status != "skip":
            test.ran_on += [g for g in _gpus(result) if g not in test.ran_on]
        if status == "fail":
            test.failed_gpus += [g for g in _gpus(result) if g not in test.failed_gpus]
        kind = "Error" if status == "fail" else "Warning"
        test.messages += [(kind, text) for text in _texts(result.get("warnings"))]
        test.messages += [("Info", text) for text in _texts(result.get("info"))]
    test.messages += [("Info", text) for text in _texts(summary.get("info"))]
    if "status" in summary:      # DCGM 4's verdict over the results
        statuses.append(_status(summary["status"], where, source))
    test.status = max(statuses, key=_RANK.__getitem__, default="skip")
    return test


def _parse_json(text: str, source: str) -> DcgmDiag:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"malformed `dcgmi diag -j` JSON: {exc.msg} "
                                 f"(line {exc.lineno})") from exc
    root = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic")) \
        if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise ParseError(source, 'not `dcgmi diag -j` output (no "DCGM Diagnostic" or '
                                 '"DCGM GPU Diagnostic" object)')
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    metadata = {name: str(value) for name, value in (
        ("DCGM Version", meta.get("version", root.get("version"))),
        ("Driver Version Detected", meta.get("Driver Version Detected",
                                              root.get("Driver Version Detected"))))
        if value is not None}
    devices = [str(entity.get("device_id")) for group in doc.get("entity_groups") or []
               if isinstance(group, dict) and group.get("entity_group") == "GPU"
               for entity in group.get("entities") or [] if isinstance(entity, dict)]
    if devices:     # the table's Metadata row, from DCGM 4's entity list
        metadata["GPU Device IDs Detected"] = ", ".join(devices)
    tests = [_json_test(raw, str(category.get("category", "")), source)
             for category in root.get("test_categories") or [] if isinstance(category, dict)
             for raw in category.get("tests") or [] if isinstance(raw, dict)]
    if root.get("runtime_error"):   # the diagnostic did not run: nothing was judged
        tests.append(DcgmTest("runtime", "Runtime", "fail",
                              messages=[("Error", str(root["runtime_error"]))]))
    if not tests:
        raise ParseError(source, "a `dcgmi diag -j` document with no test results")
    return DcgmDiag(tuple(tests), metadata)


def _parse_table(text: str, source: str) -> DcgmDiag:
    if "Diagnostic" not in text or "Result" not in text:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
        raise ParseError(source, f"not `dcgmi diag` output (no JSON document or Diagnostic | "
                                 f"Result table): {first[:160]}")
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


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

DCGM_DIAG = EvidenceKind("dcgmi-diag.json", "dcgm", parse_dcgm_diag, None,
                         "`dcgmi diag -r LEVEL -j` (the profile's dcgm.level, or "
                         "--dcgm-level; default 2) where DCGM is installed (absent "
                         "elsewhere); what dcgmi printed, an error included",
                         lab="sim/dcgmi.py",
                         fallback="dcgmi-diag.txt",   # the table form earlier runs kept
                         members=Members(GPU, lambda diag: diag.gpus()))
