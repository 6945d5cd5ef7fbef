"""Every scenario judges exactly as the snapshot says (see snapshot_scenarios.py)."""


from tests.unit.checks.snapshot_scenarios import judge_all, load, to_files


def _differences(key: str, expected: dict, actual: dict) -> list[str]:
    if "checks" not in expected or "checks" not in actual:   # evidence evaluate refuses
        return [] if expected == actual else [f"{key}: {expected} != {actual}"]
    out = [f"{key}: {field} {expected[field]!r} != {actual[field]!r}"
           for field in ("verdict", "reason", "node", "profile")
           if expected[field] != actual[field]]
    before = {c["id"]: c for c in expected["checks"]}
    after = {c["id"]: c for c in actual["checks"]}
    if list(before) != list(after):
        out.append(f"{key}: check ids/order {list(before)} != {list(after)}")
    for check_id in before.keys() & after.keys():
        for field, value in before[check_id].items():
            if after[check_id].get(field) != value:
                out.append(f"{key}: {check_id}.{field} {value!r} != {after[check_id].get(field)!r}")
    return out


def test_every_scenario_judges_as_the_snapshot(tmp_path):
    snapshot = load()
    now = judge_all(tmp_path)
    assert sorted(now) == sorted(snapshot), "scenarios added or gone: regenerate the snapshot"
    differences = [d for key in snapshot for d in _differences(key, snapshot[key], now[key])]
    assert not differences, "\n".join(differences[:10])


def test_the_files_give_back_every_judgement_whole(tmp_path):
    """Stored against the healthy baseline and read back, a judgement is what it was: the
    review form loses nothing (here on the stored judgements themselves)."""
    from tests.unit.checks.snapshot_scenarios import write
    judged = load()
    write(judged, tmp_path)
    assert load(tmp_path) == judged
    files = to_files(judged)
    # a scenario's file holds only the checks that judged otherwise than on a healthy node
    burn = files["h100-sxm-8/burn-errors.json"]
    assert burn["verdict"] == "rejected" and "gpu_burn" in burn["checks"]
    assert "driver_version" not in burn["checks"]
