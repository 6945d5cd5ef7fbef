"""Every parser reads every real capture exactly as parsed-outputs.json says (see
parsed_outputs.py): a changed, lost or new value anywhere shows here with its path."""

import json

from tests.unit.parsers.parsed_outputs import OUTPUTS, parse_all


def _differences(path: str, expected: object, actual: object) -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{path}/{k}: gone" for k in expected.keys() - actual.keys()]
        out += [f"{path}/{k}: new" for k in actual.keys() - expected.keys()]
        for k in expected.keys() & actual.keys():
            out += _differences(f"{path}/{k}", expected[k], actual[k])
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for d in _differences(f"{path}[{i}]", e, a)]
    return [] if expected == actual else [f"{path}: {expected!r} != {actual!r}"[:300]]


def test_every_capture_parses_as_recorded():
    recorded = json.loads(OUTPUTS.read_text())
    now = parse_all()
    assert sorted(now) == sorted(recorded), (
        "captures added or gone: python -m tests.unit.parsers.parsed_outputs")
    differences = [d for key in recorded for d in _differences(key, recorded[key], now[key])]
    assert not differences, "\n".join(sorted(differences)[:15])
