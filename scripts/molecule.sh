#!/usr/bin/env bash
# Run molecule for one role on the running lab: scripts/molecule.sh ROLE [molecule args…]
# e.g. scripts/molecule.sh nvidia_driver test -s upgrade. `gpuprov lab up` first.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
role="${1:?usage: scripts/molecule.sh ROLE [molecule args…]}"
shift
roles="$repo/roles"
[ -d "$roles/$role" ] || { echo "scripts/molecule.sh: no role $role in $roles" >&2; exit 2; }
export PATH="$repo/.venv/bin:$PATH" NO_COLOR=1
GPUPROV_LAB_INVENTORY="$(gpuprov lab inventory)" || exit 2
GPUPROV_COLLECTIONS_PATH="$(python -c 'from gpuprov import collection
print(collection.collections_path())')" || exit 2
export GPUPROV_LAB_INVENTORY GPUPROV_COLLECTIONS_PATH
# Under the strategy `gpuprov provision` uses (the config file's ansible.strategy)
strategy_env="$(python -c 'import shlex
from gpuprov import settings
from gpuprov.provision.runner import strategy_settings
for key, value in strategy_settings(settings.ansible_strategy()).items():
    print(f"export {key}={shlex.quote(value)}")')" || exit 2
eval "$strategy_env"
# A fresh ephemeral directory, so molecule never skips prepare as "already prepared".
MOLECULE_EPHEMERAL_DIRECTORY="$(mktemp -d)"
export MOLECULE_EPHEMERAL_DIRECTORY
cd "$roles/$role"
molecule "${@:-test}"
rc=$?
rm -rf "$MOLECULE_EPHEMERAL_DIRECTORY"
exit $rc
