"""The check registry (issue #16) changed how checks are declared, not what they find:
every scenario judges as it did before, `action` being the only new field."""

import json

from tests.unit.checks.parity_scenarios import GOLDEN, judge_all, judge_one


def _named_files(summary: str) -> set[str]:
    return set(summary.removeprefix("no evidence: ").removesuffix(" not collected").split(", "))


def _same_missing(before: dict, after: dict) -> bool:
    """The one deliberate change: a `missing` result names only the files that are absent
    (fabric_manager and container_toolkit used to name every file they read)."""
    return (before["status"] == after["status"] == "missing"
            and {k: v for k, v in before.items() if k != "summary"}
            == {k: v for k, v in after.items() if k != "summary"}
            and 0 < len(_named_files(after["summary"])) <= len(_named_files(before["summary"]))
            and _named_files(after["summary"]) <= _named_files(before["summary"]))


def test_every_scenario_judges_as_before(tmp_path):
    golden = json.loads(GOLDEN.read_text())
    now = judge_all(tmp_path, judge_one)
    assert set(golden) <= set(now)   # captures added since bring scenarios of their own
    differences = []
    for key, before in golden.items():
        after = now[key]
        if "error" in before or "error" in after:
            if before != after:
                differences.append((key, before, after))
            continue
        assert after["verdict"] == before["verdict"], key
        was = {c["id"]: c for c in before["checks"]}
        for c in after["checks"]:
            if c["id"] not in was:
                continue   # a check added since the golden file: its own tests judge it
            expected = was.pop(c["id"])
            if c != expected and not _same_missing(expected, c):
                differences.append((key, expected, c))
        assert not was, f"{key}: checks gone: {sorted(was)}"
    assert not differences, differences[:3]
