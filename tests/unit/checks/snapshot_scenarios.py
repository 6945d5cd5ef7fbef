"""What every check records today, over every evidence variation the suite has: the parity
scenarios plus every real capture of the kinds added since (kernel logs, ibstat, lspci,
fabric manager logs), judged under every shipped profile.

`judgement-snapshot/` holds the whole judgement of each (verdict, reason, every check's
status, summary, device, action and its measured values themselves), one file per scenario
and profile, for review: `PROFILE/healthy.json` is the healthy node's judgement in full, and
every other scenario's file holds only what differs from it (its verdict and reason, and
the checks that judged otherwise). A change to what a check records of a healthy node is
one file per profile in a diff; a change to how a fault is judged is that fault's files.
`test_judgement_snapshot` holds today's results equal to it. It is the regression net under
the targeted tests: a change to what a check measures or records shows here even where no
targeted test looks. `python -m tests.unit.checks.snapshot_scenarios` prints what changed
and writes nothing; with `--regenerate` it writes the new snapshot, only for a deliberate
change whose printed lines were read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from tests import evidence_builder
from tests.evidence_builder import FIXTURES, LOCK, healthy_h100, replace
from tests.unit.checks import parity_scenarios

SNAPSHOT = Path(__file__).parent / "judgement-snapshot"
BASELINE = "healthy"       # the scenario every other one is stored against

# Fixture folders added with #17 and the evidence file each capture stands in for.
NEW_CAPTURES = {
    "kernel-log": ("dmesg.txt",),
    "ibstat": ("ibstat.txt",),
    "lspci": ("lspci.txt",),
    "fabricmanager": ("fabricmanager.log",),
    "ib-counters": ("ib-counters-after.txt",),
}


def scenarios() -> Iterator[tuple[str, Callable[[Path], None]]]:
    yield from parity_scenarios.scenarios()
    for folder, targets in sorted(NEW_CAPTURES.items()):
        for capture in sorted((FIXTURES / folder).iterdir()):
            for target in targets:
                yield (f"{folder}/{capture.name} as {target}",
                       lambda n, c=capture, t=target: replace(
                           n, t, evidence_builder.capture(f"{c.parent.name}/{c.name}")))


def judge_one(node: Path, profile_name: str) -> dict:
    from gpuprov.checks.run import judge
    from gpuprov.evidence import Evidence
    from gpuprov.lock import Lock
    from gpuprov.parsers.errors import ParseError
    from gpuprov.profiles import load_profile

    lock = Lock.from_vars({f"gpuprov_{k}": v for k, v in LOCK.items()}, "test")
    try:
        judgement = judge(Evidence(node), load_profile(profile_name), lock)
    except ParseError as exc:
        return {"error": str(exc).replace(str(node), "<node>")}
    data = json.loads(json.dumps(judgement.as_dict(), default=str))
    data["reason"] = judgement.reason()
    # the measured values themselves, not a digest: a regeneration's diff shows what changed
    return data


def judge_all(workdir: Path) -> dict[str, dict]:
    out = {}
    for number, (name, apply) in enumerate(scenarios()):
        node = healthy_h100(workdir / f"s{number}" / "node07")
        apply(node)
        for profile in parity_scenarios.PROFILES:
            out[f"{name} | {profile}"] = judge_one(node, profile)
    return out


def changes(before: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """What a regeneration would change, one line per field."""
    out = [f"{key}: gone" for key in sorted(before.keys() - now.keys())]
    out += [f"{key}: new" for key in sorted(now.keys() - before.keys())]
    for key in sorted(before.keys() & now.keys()):
        was, is_ = before[key], now[key]
        if "checks" not in was or "checks" not in is_:
            if was != is_:
                out.append(f"{key}: {was} -> {is_}")
            continue
        out += [f"{key}: {field} {was[field]!r} -> {is_[field]!r}"
                for field in ("verdict", "reason") if was[field] != is_[field]]
        order = [c["id"] for c in was["checks"]], [c["id"] for c in is_["checks"]]
        if [i for i in order[0] if i in order[1]] != [i for i in order[1] if i in order[0]]:
            out.append(f"{key}: check order {order[0]} -> {order[1]}")
        old_checks = {c["id"]: c for c in was["checks"]}
        for check in is_["checks"]:
            prior = old_checks.pop(check["id"], None)
            if prior is None:
                out.append(f"{key}: {check['id']} new: {check['status']} {check['summary']!r}")
                continue
            out += [f"{key}: {check['id']}.{field} {prior.get(field)!r} -> {check.get(field)!r}"
                    for field in ("status", "summary", "action", "gpu", "values")
                    if prior.get(field) != check.get(field)]
        out += [f"{key}: {gone} gone" for gone in old_checks]
    return out


def _slug(scenario: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", scenario).strip("_")


def _delta(base: dict, judged: dict) -> dict:
    """What `judged` says beyond its profile's healthy judgement `base`."""
    if "checks" not in judged:           # evidence evaluate refuses: the error itself
        return judged
    base_checks = {c["id"]: c for c in base["checks"]}
    out = {k: judged[k] for k in ("verdict", "reason", "node", "profile")}
    ids = [c["id"] for c in judged["checks"]]
    if ids != [c["id"] for c in base["checks"]]:
        out["order"] = ids
    out["checks"] = {c["id"]: c for c in judged["checks"] if base_checks.get(c["id"]) != c}
    return out


def _whole(base: dict, delta: dict) -> dict:
    if "checks" not in delta:
        return delta
    base_checks = {c["id"]: c for c in base["checks"]}
    ids = delta.get("order") or list(base_checks)
    return {**{k: delta[k] for k in ("verdict", "reason", "node", "profile")},
            "checks": [delta["checks"].get(i) or base_checks[i] for i in ids]}


def to_files(judged: dict[str, dict]) -> dict[str, dict]:
    """The snapshot's files (path under SNAPSHOT -> content) of every judgement."""
    files: dict[str, dict] = {}
    for key, judgement in sorted(judged.items()):
        scenario, profile = key.rsplit(" | ", 1)
        base = judged[f"{BASELINE} | {profile}"]
        path = f"{profile}/{BASELINE if scenario == BASELINE else _slug(scenario)}.json"
        if path in files:
            raise ValueError(f"two scenarios share the file {path}")
        files[path] = ({"scenario": scenario, **judgement} if scenario == BASELINE
                       else {"scenario": scenario, **_delta(base, judgement)})
    return files


def load(directory: Path = SNAPSHOT) -> dict[str, dict]:
    """Every judgement the snapshot's files hold, whole again."""
    out = {}
    for profile_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
        base = json.loads((profile_dir / f"{BASELINE}.json").read_text())
        base.pop("scenario")
        for path in sorted(profile_dir.glob("*.json")):
            stored = json.loads(path.read_text())
            scenario = stored.pop("scenario")
            out[f"{scenario} | {profile_dir.name}"] = (
                stored if scenario == BASELINE else _whole(base, stored))
    return out


def write(judged: dict[str, dict], directory: Path = SNAPSHOT) -> None:
    files = to_files(judged)
    for stale in directory.glob("*/*.json"):
        if str(stale.relative_to(directory)) not in files:
            stale.unlink()
    for path, content in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        now = judge_all(Path(tmp))
    changed = changes(load(), now)
    print("\n".join(changed) or "no change")
    if "--regenerate" not in sys.argv[1:]:
        if changed:
            print(f"{len(changed)} change(s) not written: read them, then run again with "
                  "--regenerate", file=sys.stderr)
        sys.exit(1 if changed else 0)
    write(now)
    print(f"wrote {SNAPSHOT}/ ({len(changed)} change(s))")
