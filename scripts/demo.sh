#!/usr/bin/env bash
# Set everything up on a fresh machine, then show the lab: three bare servers reached
# over SSH with host keys checked, installing from the lab's signed offline mirror.
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

gpuprov lab up
inventory=$(gpuprov lab inventory)
ansible -i "$inventory" all -m ansible.builtin.ping
gpuprov lab status
# the versions lock against the compatibility matrix, then the whole stack on the rack
gpuprov lock check --inventory "$inventory"
# what would make provisioning fail (provision asks the same first): Secure Boot on
# node01 without an enrolled key is a blocker, and provision refuses with nothing changed
gpuprov lab fault node01 secure-boot
gpuprov doctor --inventory "$inventory" || true
gpuprov provision --inventory "$inventory" || true
gpuprov lab fault node01 --clear
gpuprov provision --inventory "$inventory"
gpuprov nodes
# validate the rack (short soak) and its fabric, then a fault: rejected naming the GPU,
# with an RMA report; then a slow fabric link, named by the pairwise runs
gpuprov validate --inventory "$inventory" --all --soak 10 --fabric
gpuprov lab fault node02 burn-errors --gpu 3
gpuprov validate --inventory "$inventory" node02 --soak 10 || true
gpuprov report node02 --format markdown --output "${TMPDIR:-/tmp}"
gpuprov lab fault node02 --clear
gpuprov lab fault node03 fabric-slow
gpuprov fabric --inventory "$inventory" --all || true
gpuprov lab fault node03 --clear
gpuprov nodes
# the verdicts as Prometheus metrics (node_exporter's textfile format)
gpuprov metrics | grep '^gpuprov_node_state.* 1.0$\|^gpuprov_node_check_failing'
# every host against its lock, read-only, in one SSH round trip each
gpuprov drift --inventory "$inventory"
