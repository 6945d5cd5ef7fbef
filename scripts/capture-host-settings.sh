#!/bin/bash
# Capture a real GPU server's host settings, in the exact forms the validator collects, as
# fixture material (tests/fixtures/README.md): the CPUs' cpufreq governors, the kernel
# command line and each PCI function's IOMMU domain, the RDMA adapters (ibstat,
# ibv_devinfo, sysfs board_id) and, where perftest and an adapter are there, one
# ib_write_lat loopback on the first adapter; GRUB's drop-ins and Ubuntu's ondemand.service.
# Read-only: nothing is installed or set.
#
#   scripts/capture-host-settings.sh OUT_DIR
#
# Each output goes to OUT_DIR/<step>.txt with the command, the time and its exit status.
set -u
OUT=${1:?usage: $0 OUT_DIR}
mkdir -p "$OUT"
. "$(dirname "$0")/lib/capture-run.sh"
run system 20 bash -c 'uname -a; cat /etc/os-release; nvidia-smi -L; nproc'
run cpufreq 20 bash -c 'grep -H . /sys/devices/system/cpu/online /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_driver'
run iommu 20 bash -c 'grep -H . /proc/cmdline /sys/bus/pci/devices/*/iommu_group/type'
run board-id 20 bash -c 'grep -s . /sys/class/infiniband/*/board_id'
run ib-sysfs 20 bash -c 'ls -l /sys/class/infiniband/ /dev/infiniband/'
run ibstat 20 ibstat
run ibv-devinfo 20 ibv_devinfo
run vbios 20 nvidia-smi --query-gpu=index,name,vbios_version --format=csv,noheader
run grub-d 20 bash -c 'ls -l /etc/default/grub.d/ && head -50 /etc/default/grub.d/*.cfg'
run ondemand 20 systemctl list-unit-files --no-legend -- ondemand.service
run perftest 20 bash -c 'command -v ib_write_lat ib_write_bw'
hca=$(ls /sys/class/infiniband 2>/dev/null | head -1)
if command -v ib_write_lat >/dev/null && [ -n "$hca" ]; then
  timeout 40 ib_write_lat -d "$hca" -n 1000 -F > "$OUT/write-lat-server.txt" 2>&1 &
  sleep 2
  run write-lat-client 30 ib_write_lat -d "$hca" -n 1000 -F localhost
  wait
fi
