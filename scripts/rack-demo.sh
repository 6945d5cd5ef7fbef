#!/usr/bin/env bash
# Issue 72's whole-rack acceptance on the lab: a GB200 NVL72 rack's 18 compute trays
# (`gpuprov lab up --rack gb200-nvl72`, lab 4 unless GPUPROV_LAB_INSTANCE says otherwise)
# provisioned with the whole stack, one rack at a time, then `validate --all --fabric`: every
# tray and the rack accepted, the rack's all-reduce over its 18 trays (gloo on the lab: no
# NVLink, no floor); the rack's judgement and its Slurm topology block last. The
# ledger lives in a throw-away state directory. Not part of scripts/test.sh: the whole
# stack on 18 trays takes about 20 minutes on a 2-core machine, so the test command's
# rack (tests/lab/test_rack.py) provisions only the driver and IMEX (docs/rack.md).
#   scripts/rack-demo.sh [--soak SECONDS]   (default 10)
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
soak=10
if [ "${1:-}" = "--soak" ]; then soak="${2:?--soak takes seconds}"; fi
export GPUPROV_LAB_INSTANCE="${GPUPROV_LAB_INSTANCE:-4}"
unset GPUPROV_LAB_DIR
# a short path: the SSH control sockets live under it
GPUPROV_STATE_DIR="$(mktemp -d /tmp/gpuprov-rack-demo.XXXXXX)"
export GPUPROV_STATE_DIR
echo "state (ledger, evidence): $GPUPROV_STATE_DIR"

gpuprov lab up --rack gb200-nvl72
inventory=$(gpuprov lab inventory)
gpuprov lock check --inventory "$inventory"
SECONDS=0
gpuprov provision --inventory "$inventory" --allow-reboot
echo "provisioned in ${SECONDS} s"
SECONDS=0
status=0
gpuprov validate --inventory "$inventory" --all --fabric --soak "$soak" || status=$?
echo "validated in ${SECONDS} s (exit ${status})"
gpuprov rack --inventory "$inventory"
gpuprov rack --inventory "$inventory" --topology
gpuprov nodes
exit "$status"
