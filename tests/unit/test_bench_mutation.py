"""bench/mutation.py's sampled score (issue 52): the interval it holds a drawn package to,
and the draw itself."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_mutation", REPO / "bench/mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


def _score_test_bounds(killed: int, judged: int) -> tuple[float, float]:
    """The Wilson interval by its definition, not its closed form: the proportions p the
    score test does not reject, |k/n - p| <= z * sqrt(p (1 - p) / n), found by bisection."""
    phat = killed / judged

    def accepted(p: float) -> bool:
        return abs(phat - p) <= mutation.Z95 * math.sqrt(p * (1 - p) / judged)

    def edge(inside: float, outside: float) -> float:
        for _ in range(100):
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if accepted(middle) else (inside, middle)
        return inside
    return edge(phat, 0.0), edge(phat, 1.0)


@pytest.mark.parametrize(("killed", "judged"), [(290, 300), (380, 400), (7, 10), (1, 3)])
def test_the_interval_is_the_score_test_s(killed, judged):
    low, high = mutation.wilson(killed, judged)
    want = _score_test_bounds(killed, judged)
    assert low == pytest.approx(want[0], abs=1e-9) and high == pytest.approx(want[1], abs=1e-9)
    # 96.7 % of 300 killed cannot show 95 %: the low end is under it
    assert mutation.wilson(290, 300)[0] < mutation.TARGET < mutation.wilson(296, 300)[0]


def test_every_mutant_killed_still_has_an_interval_and_none_judged_says_nothing():
    assert mutation.wilson(300, 300)[1] == 1.0 and mutation.wilson(300, 300)[0] < 1.0
    assert mutation.wilson(0, 0) == (0.0, 1.0)


def test_the_draw_is_seeded_per_package_and_skips_fully_judged_ones():
    results = ([(f"gpuprov.parsers.a.x_f__mutmut_{n}", "gpuprov.parsers.a.f", "not checked")
                for n in range(50)] +
               [(f"gpuprov.security.x_g__mutmut_{n}", "gpuprov.security.g", "killed")
                for n in range(50)])
    first = mutation.draw(results, 10, 67)
    assert first == mutation.draw(list(reversed(results)), 10, 67)  # the order read: no matter
    assert len(first) == 10 and all(m.startswith("gpuprov.parsers.a.") for m in first)
    assert len(set(first)) == 10
    assert mutation.draw(results, 10, 52) != first                  # a fresh seed, a fresh draw
    assert sorted(mutation.draw(results, 80, 67)) == sorted(m for m, f, _ in results[:50])


def test_the_kept_draw_names_its_seed_and_reasons_are_the_mutant_s_own(
        tmp_path, monkeypatch, capsys):
    """Issue 67: the seed is written with the draw and printed with its interval; a
    survivor's reason is looked up by mutant, so a second survivor in the same function is
    flagged, not covered by the first one's reason."""
    results = ([(f"gpuprov.parsers.a.x_f__mutmut_{n}", "gpuprov.parsers.a.f",
                 "survived" if n < 2 else "killed") for n in range(20)] +
               [(f"gpuprov.parsers.b.x_g__mutmut_{n}", "gpuprov.parsers.b.g", "not checked")
                for n in range(20)])
    monkeypatch.setattr(mutation, "read_results", lambda: results)
    assert mutation.main(["--draw", "20", "--seed", "7"]) == 0
    drawn = capsys.readouterr().out.splitlines()
    assert drawn[0] == "# seed 7" and len(drawn) == 21
    sample = tmp_path / "sample.txt"
    sample.write_text("# seed 7\n" + "\n".join(m for m, _, _ in results[:20]) + "\n")
    monkeypatch.setattr(mutation, "SAMPLE", sample)
    monkeypatch.setattr(mutation, "REASONS", tmp_path / "reasons.yml")
    (tmp_path / "reasons.yml").write_text(
        "gpuprov.parsers.a.x_f__mutmut_0: equivalent, because\n"
        "gpuprov.parsers.a.f: a function's reason covers no mutant\n")
    mutation.main([])
    out = capsys.readouterr().out
    assert "(seed 7): 95 % interval" in out
    assert "mutmut_0 (survived): equivalent, because" in out
    assert "mutmut_1 (survived): NO REASON RECORDED" in out
    assert mutation.main(["--draw", "5", "--seed", "x"]) == 2


def test_a_drawn_package_is_scored_on_its_draw_alone(tmp_path, monkeypatch, capsys):
    """Mutants judged before the draw (outside it) do not count; 296 of 300 drawn killed
    meets the target on the interval's low end, 290 of 300 does not."""
    def results(killed_in_draw: int):
        drawn = [(f"gpuprov.parsers.a.x_f__mutmut_{n}", "gpuprov.parsers.a.f",
                  "killed" if n < killed_in_draw else "survived") for n in range(300)]
        earlier = [(f"gpuprov.parsers.b.x_g__mutmut_{n}", "gpuprov.parsers.b.g", "survived")
                   for n in range(100)]
        pending = [(f"gpuprov.parsers.c.x_h__mutmut_{n}", "gpuprov.parsers.c.h", "not checked")
                   for n in range(1000)]
        others = [(f"gpuprov.{p}.x_k__mutmut_1", f"gpuprov.{p}.k", "killed")
                  for p in ("checks", "escalation", "lifecycle", "provision.insync", "security")]
        return drawn + earlier + pending + others
    sample = tmp_path / "sample.txt"
    sample.write_text("\n".join(f"gpuprov.parsers.a.x_f__mutmut_{n}" for n in range(300)))
    monkeypatch.setattr(mutation, "SAMPLE", sample)
    monkeypatch.setattr(mutation, "REASONS", tmp_path / "reasons.yml")
    (tmp_path / "reasons.yml").write_text("{}\n")
    monkeypatch.setattr(mutation, "read_results", lambda: results(296))
    assert mutation.main([]) == 0
    out = capsys.readouterr().out
    assert "gpuprov/parsers" in out and "a random draw of 300 of its 1400 mutants" in out
    row = next(line for line in out.splitlines() if line.startswith("gpuprov/parsers "))
    assert row.split()[1:5] == ["300", "296", "4", "0"] and row.endswith("met"), row
    monkeypatch.setattr(mutation, "read_results", lambda: results(290))
    assert mutation.main([]) == 1
    assert "NOT MET" in capsys.readouterr().out
