#!/usr/bin/env bash
# Run molecule for one role on the running lab: scripts/molecule.sh ROLE [molecule args…]
# e.g. scripts/molecule.sh nvidia_driver test -s upgrade. `gpuprov lab up` first.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
role="${1:?usage: scripts/molecule.sh ROLE [molecule args…]}"
shift
[ -d "$repo/roles/$role" ] || { echo "scripts/molecule.sh: no role $role in $repo/roles" >&2; exit 2; }
export PATH="$repo/.venv/bin:$PATH" NO_COLOR=1
GPUPROV_LAB_INVENTORY="$(gpuprov lab inventory)"
export GPUPROV_LAB_INVENTORY
cd "$repo/roles/$role"
exec molecule "${@:-test}"
