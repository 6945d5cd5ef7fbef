# Sourced by the capture scripts (scripts/capture-*.sh), after they set OUT:
# run STEP TIMEOUT CMD...: the command, the time, its output and then its exit status, in
# OUT/STEP.txt; one line per step on stdout.
run() {
  local step=$1 limit=$2 rc; shift 2
  { echo "# command: $*"; echo "# captured: $(date -u +%FT%TZ)"; echo
    timeout "$limit" "$@"; rc=$?; echo "# exit status: $rc"; } > "$OUT/$step.txt" 2>&1
  echo "$step: $(tail -1 "$OUT/$step.txt")"
}
