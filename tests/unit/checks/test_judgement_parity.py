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


def _tool_failure(before: dict, after: dict) -> bool:
    """#17: evidence absent because nvidia-smi failed is a finding, not a gap: the check
    that read it fails with nvidia-smi's own message instead of reading `missing`."""
    return (before["status"] == "missing" and after["status"] == "fail"
            and after["summary"].startswith("nvidia-smi failed"))


def _gone_after_soak(check: dict) -> bool:
    """A deliberate change since: gpu_inventory fails a GPU that the snapshot after the soak
    no longer lists. The scenarios that swap another machine's capture in as that snapshot
    were judged as if no GPU had gone; their own test is in test_fail_branches.py."""
    return check["id"] == "gpu_inventory" and "gone from nvidia-smi after" in check["summary"]


# Checks a later issue replaced on purpose: old id -> its successor, judged by its own tests
# (#17: kernel_log reads every kernel fault, not only Xid lines, over the current boot).
SUPERSEDED = {"xid": "kernel_log"}


def _verdict_without(checks: list[dict], ids: set[str]) -> str:
    blocking = any(c["status"] in ("fail", "missing") for c in checks if c["id"] not in ids)
    return "rejected" if blocking else "accepted"


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
        added = {c["id"] for c in after["checks"]} - {c["id"] for c in before["checks"]}
        replaced = set(SUPERSEDED) | added | {c["id"] for c in after["checks"]
                                              if _gone_after_soak(c)}
        assert (_verdict_without(after["checks"], replaced)
                == _verdict_without(before["checks"], replaced)), key
        was = {c["id"]: c for c in before["checks"] if c["id"] not in SUPERSEDED}
        for c in after["checks"]:
            if c["id"] not in was:
                continue   # a check added or replaced since the golden file: own tests
            expected = was.pop(c["id"])
            if _gone_after_soak(c):
                continue
            if c != expected and not _same_missing(expected, c) and not _tool_failure(expected, c):
                differences.append((key, expected, c))
        assert not was, f"{key}: checks gone: {sorted(was)}"
    assert not differences, differences[:3]
