#!/usr/bin/env bash
# Install everything gpuprov and its lab need, on a fresh Debian 12 or Ubuntu 22.04/24.04
# machine, as root or as a sudoer (it asks sudo): system packages, the Docker engine
# (started if it is not running), and a virtualenv in .venv with gpuprov and its
# development tools. Safe to re-run.
set -euo pipefail
. "$(dirname "$0")/lib/as-root.sh"
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
pkgs=(ca-certificates git python3 python3-venv python3-pip docker.io debootstrap
      debian-archive-keyring openssh-client gnupg apt-utils iproute2 procps netcat-openbsd
      # the fleet services the tests run for real: node_exporter, promtool, PostgreSQL
      prometheus-node-exporter prometheus postgresql
      # the emulated Slurm cluster of the campaign tests (gpuprov/lab/emulated_slurm.py)
      slurmctld slurmd slurm-client munge)

# gpuprov needs Python >= 3.11; Ubuntu 22.04's python3 is 3.10, so take its python3.11.
PY=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  pkgs+=(python3.11 python3.11-venv)
  PY=python3.11
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  apt-get update -q
  # The tests start the services they need on loopback; their packages must not start
  # them system-wide (node_exporter on :9100, Prometheus on :9090, PostgreSQL's cluster).
  # policy-rc.d is how Debian lets an installer say so; one already there is left as it is.
  policy=/usr/sbin/policy-rc.d own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [ -n "$own_policy" ]; then rm -f "$policy"; trap - EXIT; fi
fi

scripts/ensure-docker.sh

# Each lab node is a container whose systemd takes inotify instances; the kernel's default
# (128 for root, every container together) stops a lab at about 20 nodes
# (gpuprov/lab/host_limits.py). Raised for the 24-node lab, and kept across reboots.
inotify_limit=1024
if [ "$(cat /proc/sys/fs/inotify/max_user_instances)" -lt "$inotify_limit" ]; then
  echo "fs.inotify.max_user_instances = $inotify_limit" > /etc/sysctl.d/60-gpuprov-lab.conf
  sysctl -q -w fs.inotify.max_user_instances="$inotify_limit"
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# The oldest ansible-core the collection supports (meta/runtime.yml), for the test that runs
# the roles under it (tests/unit/test_oldest_ansible.py)
oldest="$(sed -n 's/^ANSIBLE_CORE_OLDEST = "\(.*\)"$/\1/p' gpuprov/collection.py)"
if [ ! -x .venv-ansible-oldest/bin/ansible-playbook ] ||
   ! .venv-ansible-oldest/bin/ansible --version | grep -q "core $oldest"; then
  "$PY" -m venv --clear .venv-ansible-oldest
  .venv-ansible-oldest/bin/python -m pip install -q "ansible-core==$oldest"
fi
echo "bootstrap: ready ($(.venv/bin/gpuprov --version | tr '\n' ' '))"
