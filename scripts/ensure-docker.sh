#!/usr/bin/env bash
# Start the Docker engine when it is not running: through systemd where systemd runs,
# else as a background dockerd (containers, CI runners). Waits until it answers.
set -euo pipefail
docker info >/dev/null 2>&1 && exit 0
if [ -d /run/systemd/system ]; then
  systemctl enable --now docker
else
  setsid nohup dockerd >/var/log/gpuprov-dockerd.log 2>&1 </dev/null &
fi
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "ensure-docker: dockerd did not come up; see /var/log/gpuprov-dockerd.log" >&2
exit 1
