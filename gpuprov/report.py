"""Validation reports from the ledger: a verdict table, JSON (schema in
data/schemas/validation-report.schema.json), JUnit XML (one testsuite per node, one testcase
per check), and an RMA-ready markdown summary of a rejected node with its evidence bundled
as one archive."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuprov.console import text_table
from gpuprov.holds import Hold
from gpuprov.ledger import RunRecord
from gpuprov.model import CheckResult, NodeResult, Status

SCHEMA = "gpuprov.validation-report/2"
CHECKS_FILE = "checks.json"   # in the evidence bundle: every check's full measured values



def _iso(timestamp: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(timestamp)) if timestamp else None


def verdict_of(result: NodeResult) -> str:
    """The recorded verdict; a node of an unfinished run has none ("interrupted")."""
    return result.verdict or "interrupted"


def as_json(run: RunRecord, results: list[NodeResult], holds: dict[str, list[Hold]],
            racks: list | None = None) -> dict:
    """The run's report; `holds`: each node's open holds now (holds.holds_of); `racks`:
    the NVL72 racks the run judged (validation/rack.py RackOutcome), when it judged any."""
    report = {
        "schema": SCHEMA,
        "run": {"id": run.id, "status": run.status, "started_at": _iso(run.started_at),
                "finished_at": _iso(run.finished_at), "inventory": run.inventory,
                "nodes": run.hosts, "options": run.options},
        "nodes": [{
            "node": r.node, "verdict": verdict_of(r), "judged": r.judged, "profile": r.profile,
            "scope": r.scope, "open_holds": [h.as_dict() for h in holds.get(r.node, [])],
            "reason": r.reason, "evidence_dir": r.evidence_dir,
            "started_at": _iso(r.started_at), "judged_at": _iso(r.judged_at),
            "gpus": [vars(g) for g in r.gpus],
            "nics": [vars(p) for p in r.nics],
            "nvswitches": [vars(s) for s in r.nvswitches],
            "checks": [c.as_dict() for c in r.checks],
        } for r in results],
    }
    if racks:
        report["racks"] = [{"rack": k.rack, "profile": k.profile, "imex": k.imex,
                            "verdict": str(k.verdict), "summary": k.summary,
                            "trays": {t: v and str(v) for t, v in k.trays.items()}}
                           for k in racks]
    return report


def as_table(run: RunRecord, results: list[NodeResult]) -> str:
    rows = []
    for r in results:
        bad = r.failing
        first = (f"{bad[0].id}: {bad[0].summary}" if bad else
                 r.reason if r.judged != "accepted" else "-")
        rows.append((r.node, verdict_of(r).upper(), bad[0].action if bad else "-", first))
        rows += [("", "", c.action, f"{c.id}: {c.summary}") for c in bad[1:]]
    lines = [f"run {run.id} ({run.status}, started {_iso(run.started_at)})", "",
             text_table(("NODE", "VERDICT", "ACTION", "FAILING CHECKS"), rows), ""]
    lines += [f"evidence {r.node}: {r.evidence_dir}" for r in results]
    return "\n".join(lines)


def as_junit(run: RunRecord, results: list[NodeResult]) -> str:
    suites = ET.Element("testsuites", name=f"gpuprov validate {run.id}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for r in results:
        suite = ET.SubElement(suites, "testsuite", name=r.node,
                              timestamp=_iso(r.started_at) or "",
                              time=f"{r.judged_at - r.started_at:.1f}")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        props = ET.SubElement(suite, "properties")
        for key, value in (("verdict", verdict_of(r)), ("profile", r.profile),
                           ("evidence_dir", r.evidence_dir), ("run_id", run.id)):
            ET.SubElement(props, "property", name=key, value=value)
        cases = r.checks or []
        if r.judged == "unreachable" or not cases:
            case = ET.SubElement(suite, "testcase", classname=f"gpuprov.{r.node}",
                                 name="reachable")
            ET.SubElement(case, "error", message=r.reason, type=r.judged).text = r.reason
            counts["tests"] += 1
            counts["errors"] += 1
        for c in cases:
            case = ET.SubElement(suite, "testcase", classname=f"gpuprov.{r.node}", name=c.id)
            counts["tests"] += 1
            values = json.dumps(c.values, sort_keys=True, default=str)
            if c.blocking:
                failure = ET.SubElement(case, "failure", message=c.summary, type=c.status)
                failure.text = values
                # the recommended action, where CI dashboards show a case's properties
                ET.SubElement(ET.SubElement(case, "properties"), "property", name="action",
                              value=str(c.action))
                counts["failures"] += 1
            elif c.status == Status.SKIP:
                ET.SubElement(case, "skipped", message=c.summary)
                counts["skipped"] += 1
            else:
                ET.SubElement(case, "system-out").text = f"{c.status}: {c.summary}"
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def archive(result: NodeResult, out_dir: Path) -> tuple[Path, str]:
    """The node's evidence directory as one .tar.gz; its path and sha256."""
    source = Path(result.evidence_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"gpuprov-evidence-{result.node}-{result.run_id}.tar.gz"
    tmp = target.with_suffix(".tmp")
    top = f"{result.node}-{result.run_id}"
    checks = json.dumps([c.as_dict() for c in result.checks], indent=2, sort_keys=True,
                        default=str).encode()
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(source, arcname=top)
        # every check's full measured values, beside the raw evidence they came from
        info = tarfile.TarInfo(f"{top}/{CHECKS_FILE}")
        info.size, info.mtime, info.mode = len(checks), int(result.judged_at), 0o644
        tar.addfile(info, io.BytesIO(checks))
    tmp.replace(target)
    return target, hashlib.sha256(target.read_bytes()).hexdigest()


def _scalar(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return "-" if value is None else str(value)


def measured(check: CheckResult) -> str:
    """What an RMA reader needs of a check's values: the failing GPU's figures as
    `key: value` pairs when one GPU is at fault, else the check's own scalar values.
    The full values are in the bundle's checks.json."""
    values = check.values
    per_gpu = values.get("gpus") if isinstance(values.get("gpus"), dict) else None
    if per_gpu is not None and check.gpu is not None and check.gpu.index is not None:
        own = per_gpu.get(check.gpu.index, per_gpu.get(str(check.gpu.index)))
        if isinstance(own, dict):
            pairs = _pairs(own)
            return f"GPU {check.gpu.index}: {pairs}" if pairs else "-"
    return _pairs({k: v for k, v in values.items() if k != "gpus"}) or "-"


def _pairs(values: dict) -> str:
    flat = []
    for key, value in values.items():
        if isinstance(value, dict):
            flat += [(f"{key}.{k}", v) for k, v in value.items() if not isinstance(v, dict | list)]
        elif not (isinstance(value, list) and value and isinstance(value[0], dict)):
            flat.append((key, value))
    return ", ".join(f"{k}: {_scalar(v)}" for k, v in flat[:12]) + (
        f" (+{len(flat) - 12} more in {CHECKS_FILE})" if len(flat) > 12 else "")


# each GPU's figures from the soak, by the check that measured them: (check, value, column)
SOAK_FIGURES = (("gpu_burn", "gflops", "Gflop/s"), ("load_power", "peak_power_w", "peak W"),
                ("load_power", "enforced_limit_w", "limit W"),
                ("load_thermal", "peak_temp_c", "peak °C"),
                ("load_clocks", "median_sm_mhz", "SM MHz"))


def _under_load(result: NodeResult) -> list[str]:
    """Every GPU's soak figures side by side (the weak one stands out), where measured."""
    checks = {c.id: c.values.get("gpus") for c in result.checks}
    columns = [(check, key, title) for check, key, title in SOAK_FIGURES
               if isinstance(checks.get(check), dict)]
    if not columns:
        return []
    indices = sorted({int(i) for check, _, _ in columns for i in checks[check]})

    def figure(check: str, key: str, index: int) -> str:
        gpu = checks[check].get(index, checks[check].get(str(index))) or {}
        value = gpu.get(key) if isinstance(gpu, dict) else None
        return "-" if value is None else f"{value:.0f}" if isinstance(value, float) else str(
            value)

    slow = checks.get("load_throttle") or {}
    lines = ["", "## Under load (the soak)", "",
             "| GPU | " + " | ".join(t for _, _, t in columns) + " | slowdowns |",
             "|---|" + "---|" * (len(columns) + 1)]
    for i in indices:
        active = slow.get(i, slow.get(str(i))) or {}
        lines.append(f"| {i} | " + " | ".join(figure(c, k, i) for c, k, _ in columns)
                     + f" | {', '.join(active) or '-'} |")
    return lines


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def as_markdown(run: RunRecord, result: NodeResult, system: str, bundle: tuple[Path, str]
                ) -> str:
    """An RMA-ready summary of one node: system, failing GPU(s), failed checks with their
    measured values, and the evidence archive."""
    bad = result.failing
    gpus = {g.index: g for g in result.gpus}
    # a GPU is at fault only where a check found its hardware so: one that gpuprov could not
    # see, or a setup failure naming it, is no case for a GPU's RMA (issue 53)
    at_fault: dict[tuple, tuple] = {}   # (index, bus id) -> the row, from its first check
    for c in result.hardware_failing:
        if c.gpu is None:
            continue
        g = gpus.get(c.gpu.index) if c.gpu.index is not None else None
        at_fault.setdefault((c.gpu.index, c.gpu.bus_id), (
            c.gpu.index, c.gpu.bus_id, c.gpu.serial or (g.serial if g else None),
            g.uuid if g else None, g.name if g else None, c.id))
    lines = [f"# RMA evidence: {result.node} — {verdict_of(result).upper()}", "",
             "| | |", "|---|---|",
             f"| Node | {result.node} |",
             f"| System | {_cell(system)} (profile `{result.profile}`) |",
             f"| Validation run | `{run.id}` ({run.status}), judged {_iso(result.judged_at)} |",
             f"| Reason | {_cell(result.reason)} |", ""]
    lines += ["## Failing GPU" + ("s" if len(at_fault) != 1 else ""), ""]
    if at_fault:
        lines += ["| index | bus id | serial | UUID | name | check |", "|---|---|---|---|---|---|"]
        lines += [f"| {i if i is not None else '-'} | {b or '-'} | {s or '-'} | {u or '-'} | "
                  f"{n or '-'} | {check} |" for i, b, s, u, n, check in at_fault.values()]
    elif bad and not result.hardware_failing:
        lines.append("No hardware fault: every failed check below is the node's setup or "
                     "evidence gpuprov could not read (action fix-setup or none), no case "
                     "for an RMA.")
    else:
        lines.append("No single GPU is at fault: the failures below are node-wide.")
    lines += ["", "## Failed checks", "", "| check | status | action | summary | measured |",
              "|---|---|---|---|---|"]
    for c in bad:
        lines.append(f"| `{c.id}` | {c.status} | `{c.action}` | {_cell(c.summary)} | "
                     f"{_cell(measured(c))} |")
    if not bad:
        lines.append("| - | - | - | none failed | - |")
    lines += ["", "## All GPUs", "", "| index | bus id | serial | UUID | name | VBIOS |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {g.index} | {g.bus_id} | {g.serial} | {g.uuid} | {g.name} | "
              f"{g.vbios or '-'} |"
              for g in result.gpus] or ["| - | - | - | - | no GPU listed | - |"]
    if result.nics:
        lines += ["", "## NIC ports", "", "| port | GUID | PSID | firmware |", "|---|---|---|---|"]
        lines += [f"| {p.port} | {p.guid or '-'} | {p.psid or '-'} | {p.firmware or '-'} |"
                  for p in result.nics]
    if result.nvswitches:
        lines += ["", "## NVSwitches", "", "| bus id | serial | firmware |", "|---|---|---|"]
        lines += [f"| {s.bus_id} | {s.serial or '-'} | {s.firmware or '-'} |"
                  for s in result.nvswitches]
    lines += _under_load(result)
    path, digest = bundle
    files = sorted(p.name for p in Path(result.evidence_dir).iterdir()) if Path(
        result.evidence_dir).is_dir() else []
    lines += ["", "## Evidence", "",
              f"- archive: `{path}`", f"- sha256: `{digest}`",
              f"- files: {', '.join(f'`{f}`' for f in files)}",
              f"- re-judge offline: `gpuprov evaluate <unpacked dir> --profile {result.profile}`",
              ""]
    return "\n".join(lines)
