#!/usr/bin/env bash
# Issue 20's baseline on the lab, end to end: three nodes of one kind validated healthy, a
# profile learned from them (`gpuprov baseline`), then one node slowed (`slow-node`: every
# GPU 15 % below its kind, as a power cap or poor cooling does). The shipped profile
# accepts it (its datasheet floor and the within-node spread cannot see it); the learned
# profile rejects it. Replaces the running lab with a 3 x KIND lab (default a100-sxm-8)
# and keeps its ledger in a throw-away state directory. Not part of scripts/test.sh. (On
# l40s-pcie-4 the lab kind runs near its datasheet floor: slow-node falls below both.)
#   scripts/baseline-demo.sh [KIND]
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
kind="${1:-a100-sxm-8}"
GPUPROV_STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-baseline-demo.XXXXXX")"
export GPUPROV_STATE_DIR
# NODE's verdict and failing checks, from a `validate --json` report on stdin
verdict() {
  python3 -c '
import json, sys
node = sys.argv[1]
result = next(n for n in json.load(sys.stdin)["nodes"] if n["node"] == node)
print(result["verdict"])
for check in result["checks"]:
    if check["status"] in ("fail", "missing"):
        print("  " + check["id"] + ": " + check["summary"])
' "$1"
}

gpuprov lab down
gpuprov lab up --kind "$kind"
inventory=$(gpuprov lab inventory)
gpuprov provision --inventory "$inventory"
run=$(gpuprov validate --inventory "$inventory" --all --soak 10 --json | python3 -c \
  'import json, sys; r = json.load(sys.stdin); assert all(n["verdict"] == "accepted" for n in r["nodes"]), r; print(r["run"]["id"])')
echo "== healthy peers accepted in run $run; learning from them"
gpuprov baseline --from "$run" --base "$kind" -o "$GPUPROV_STATE_DIR/$kind-peers.yml"
gpuprov lab fault node03 slow-node
trap 'gpuprov lab fault node03 --clear >/dev/null' EXIT
echo "== node03 under slow-node, judged by the shipped profile $kind:"
gpuprov validate --inventory "$inventory" node03 --soak 10 --json | verdict node03 || true
echo "== node03 under slow-node, judged by the profile learned from its peers:"
gpuprov validate --inventory "$inventory" node03 --soak 10 --json \
  --profile "$GPUPROV_STATE_DIR/$kind-peers.yml" | verdict node03 || true
