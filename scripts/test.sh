#!/usr/bin/env bash
# The whole test suite: lint (ruff, yamllint, ansible-lint production profile), then
# pytest, unit and lab tests. The lab is brought up once and shared by every test.
# pytest's "no tests collected" (exit 5) fails this script like any other failure.
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

scripts/ensure-docker.sh

echo "== ruff";         ruff check .
echo "== yamllint";     yamllint --strict .
echo "== ansible-lint"; ansible-lint --offline --profile production
echo "== pytest";       pytest "$@"
