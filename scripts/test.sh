#!/usr/bin/env bash
# The whole test suite: lint (ruff, yamllint, ansible-lint production profile), then
# pytest, unit and lab tests. The lab is brought up once and shared by every test.
# pytest's "no tests collected" (exit 5) fails this script like any other failure.
# Arguments are pytest options for both runs below (e.g. --durations=60), not test paths.
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

scripts/ensure-docker.sh

# each stage prints its time when it ends (the suite's budget is watched stage by stage),
# and records it with the pytest stages' per-test times in $GPUPROV_TEST_TIMES (default
# .test-times/): bench/test_time.py prints them per stage and per test file
times=${GPUPROV_TEST_TIMES:-.test-times}
rm -rf "$times" && mkdir -p "$times"
stage() {
  local name=$1 started=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  echo "== $name: $((SECONDS - started)) s"
  # recorded whether it passed or not (a failing run's time counts too), then its status
  printf '%s\t%s\n' "$name" "$((SECONDS - started))" >> "$times/stages.tsv"
  return "$status"
}
stage ruff ruff check .
stage yamllint yamllint --strict .
# the roles call each other by their full names: ansible-lint finds them in the collection
stage ansible-lint env ANSIBLE_COLLECTIONS_PATH="$(python -c 'from gpuprov import collection
print(collection.collections_path())')" \
  ansible-lint --offline --profile production
# the import layers (pyproject.toml [tool.importlinter]): imports only go down, no cycle
stage import-layers lint-imports --no-cache
# the documentation site: a broken link or a page missing from the nav fails it
site=$(mktemp -d)
stage docs env NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
# The lab tests run in three pytest processes side by side, each file whole and in order
# in one, each on labs of its own (GPUPROV_LAB_INSTANCE, docs/lab.md): the validation tests,
# which provision a rack of their own (lab 2); the racks that need a lab to themselves, the
# HGX B200 (lab 3) and the NVL72 rack (lab 4); the rest (the lab itself, provisioning, every
# role's molecule scenario, the role refusals, the simulated GPUs) on lab 1. A lab test
# waits about a sixth of its time (a soak, a reboot, Slurm's interval), so a third process
# keeps both cores busy where two leave them idle (docs/install.md). The other processes'
# output follows lab 1's. (pytest-xdist's loadgroup did not keep a group on one worker
# here: tried, it spread one file's tests over both workers.)
#
# The unit tests share nothing with the labs: they run in the third process once its racks
# are done (about ten minutes in, when the labs' provisioning is over). That process runs
# at a lower CPU priority (nice 10) throughout, and the unit tests in one worker: measured
# with two, the two cores stayed saturated until the unit tests ended (the 20th minute) and
# were a fifth idle after; one worker spreads the same CPU into the minutes labs 1 and 2
# leave idle (the unit tests took 597 s so, 556 with two; labs 1 and 2 ended sooner).
LAB2_FILES=(tests/lab/test_provision_validate.py)
LAB3_FILES=(tests/lab/test_b200.py tests/lab/test_rack.py)
third_process() {
  local status=0
  # the whole process at a lower CPU priority: it has minutes to spare where labs 1 and 2
  # have none (its controllers yield to theirs; its nodes' own work cannot be niced)
  renice -n 10 -p "$BASHPID" > /dev/null
  # each file brings up and takes down the lab it names itself (instances 3 and 4)
  env -u GPUPROV_LAB_DIR GPUPROV_LAB_INSTANCE=3 pytest "${LAB3_FILES[@]}" -p no:cacheprovider \
    --junitxml="$times/pytest-lab-3.xml" "$@" > "$times/pytest-lab-3.log" 2>&1 || status=$?
  stage pytest-unit pytest -n 1 tests/unit --junitxml="$times/pytest-unit.xml" "$@" \
    > "$times/pytest-unit.log" 2>&1 || status=$?
  return "$status"
}
lab_tests() {
  local status=0 second third
  env -u GPUPROV_LAB_DIR GPUPROV_LAB_INSTANCE=2 pytest "${LAB2_FILES[@]}" -p no:cacheprovider \
    --junitxml="$times/pytest-lab-2.xml" "$@" > "$times/pytest-lab-2.log" 2>&1 &
  second=$!
  third_process "$@" &
  third=$!
  GPUPROV_LAB_INSTANCE=1 pytest --ignore=tests/unit "${LAB2_FILES[@]/#/--ignore=}" \
    "${LAB3_FILES[@]/#/--ignore=}" --junitxml="$times/pytest-lab.xml" "$@" || status=$?
  wait "$second" || status=$?
  wait "$third" || status=$?
  echo "== lab 2: ${LAB2_FILES[*]}"
  cat "$times/pytest-lab-2.log"
  echo "== labs 3 and 4: ${LAB3_FILES[*]}"
  cat "$times/pytest-lab-3.log"
  echo "== unit tests"
  cat "$times/pytest-unit.log"
  return "$status"
}
status=0
stage pytest-lab lab_tests "$@" || status=$?
# the stages overlap: the command's own time is the one held to the budget
printf 'wall\t%s\n' "$SECONDS" >> "$times/stages.tsv"
echo "== the test command: $SECONDS s"
exit "$status"
