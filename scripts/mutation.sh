#!/usr/bin/env bash
# Mutation testing of the judging code (gpuprov/checks, gpuprov/parsers, escalation,
# lifecycle, provision/insync, security: issues #24, #52) with mutmut, judged by
# the unit suite (configuration: [tool.mutmut] in pyproject.toml). Not part of
# scripts/test.sh: a full run takes about an hour on two cores. Prints the score per
# package and every surviving function with its recorded reason; exits 1 under the target.
#   scripts/mutation.sh            a fresh run, then the report
#   scripts/mutation.sh --resume   finish an interrupted run (judged mutants keep their
#                                  result), then the report
#   scripts/mutation.sh --survivors  judge the last run's survivors again (after new tests:
#                                  mutmut keeps a judged mutant's result while its function
#                                  is unchanged), then the report
#   scripts/mutation.sh --sample N [--seed S]
#                                  judge N mutants of each package drawn at random (seed S,
#                                  default bench/mutation.py's SEED; the list and its seed kept
#                                  in mutants/sample.txt) where a full run is more than the
#                                  machine can give: the report then gives the score's 95 %
#                                  interval, and meets the target only when the interval's low
#                                  end does. Quote a draw's first report, before tests are
#                                  written from its survivors (docs/benchmarks.md)
#   scripts/mutation.sh --report   the report of the last run only
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# Tests that run the CLI as a subprocess import gpuprov from the mutated copy too (and see
# the mutant under test), not from the checkout.
export PYTHONPATH="$PWD/mutants${PYTHONPATH:+:$PYTHONPATH}"
mode="${1:-fresh}"
case "$mode" in fresh|--resume|--survivors|--report) ;;
  --sample)
    [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || {
      echo "scripts/mutation.sh: --sample takes a count of mutants per package, got '${2:-}'" >&2
      exit 2; }
    seed_args=()
    if [ -n "${3:-}" ]; then
      [ "$3" = --seed ] && [[ "${4:-}" =~ ^[0-9]+$ ]] || {
        echo "scripts/mutation.sh: --sample N takes --seed S after it, got '${*:3}'" >&2
        exit 2; }
      seed_args=(--seed "$4")
    fi ;;
  *)
  echo "scripts/mutation.sh: unknown option $mode (--resume, --survivors, --sample N, --report)" >&2
  exit 2 ;; esac
if [ "$mode" = "--survivors" ]; then
  [ -d mutants ] || { echo "scripts/mutation.sh: no earlier run in mutants/" >&2; exit 2; }
  # the copy's data files and test-to-function map are refreshed; survivors' results cleared
  cp -r gpuprov/data/. mutants/gpuprov/data/
  rm -f mutants/mutmut-stats.json
  python - <<'PY'
import glob, json
for path in glob.glob("mutants/gpuprov/**/*.meta", recursive=True):
    with open(path) as fh:
        meta = json.load(fh)
    codes = meta["exit_code_by_key"]
    codes.update({key: None for key, code in codes.items() if code == 0})
    with open(path, "w") as fh:
        json.dump(meta, fh, indent=4)
PY
  mode=--resume
fi
# the mutated copy's folder, with what its tests need beside mutmut's own files
prepare() {
  mkdir -p mutants
  # the oldest-Ansible test runs the venv bootstrap made beside the checkout
  [ -e mutants/.venv-ansible-oldest ] || ln -s ../.venv-ansible-oldest mutants/.venv-ansible-oldest
}
if [ "$mode" = "--sample" ]; then
  prepare
  # a run naming no mutant: mutmut generates the mutants and maps the tests, then stops
  # ("nothing matches"), judging none
  if [ ! -f mutants/mutmut-stats.json ]; then
    mutmut run "gpuprov.security.x_no_such*" >>mutants/run.log 2>&1 || true
    [ -f mutants/mutmut-stats.json ] || { tail -n 20 mutants/run.log >&2; exit 2; }
  fi
  python bench/mutation.py --draw "$2" "${seed_args[@]}" > mutants/sample.txt
  python bench/mutation.py --to-judge > mutants/to-judge.txt
  echo "mutmut: judging $(wc -l < mutants/to-judge.txt) of $(wc -l < mutants/sample.txt)" \
    "mutants drawn at random (the rest judged before)…"
  if [ -s mutants/to-judge.txt ]; then
    xargs -a mutants/to-judge.txt mutmut run --max-children "$(nproc)" >>mutants/run.log 2>&1 ||
      { tail -n 20 mutants/run.log >&2; exit 2; }
  fi
  exec python bench/mutation.py
fi
if [ "$mode" != "--report" ]; then
  [ "$mode" = "--resume" ] || rm -rf mutants
  echo "mutmut: running (progress in mutants/run.log)…"
  prepare
  # mutmut's spinner redraws one line; the log keeps it out of the terminal.
  # fresh: the checks first (their score is the one the target is held to), then the rest;
  # resume: every mutant not yet judged (named mutants would all be judged again)
  patterns=("gpuprov.checks.*" "")
  [ "$mode" = "--resume" ] && patterns=("")
  for pattern in "${patterns[@]}"; do
    # an empty pattern: every mutant not yet run
    mutmut run --max-children "$(nproc)" ${pattern:+"$pattern"} >>mutants/run.log 2>&1 || {
      tail -n 20 mutants/run.log >&2; exit 2; }
  done
fi
exec python bench/mutation.py
