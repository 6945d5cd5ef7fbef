"""kernel_log on real captures: every fault kind fails naming the device and the action an
operator should take; notices and application faults from before the run warn; healthy
logs full of benign NVRM lines pass. Boots, resets and recurrence on minimal variations."""

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, replace

H100 = load_profile("h100-sxm-8")

# capture -> status, action, what the summary must name. The base node's run started
# 2026-11-21; these logs are older (same boot) or cannot be placed in time.
CAPTURES = [
    ("kernel-log/fallen-off-bus-multiline-570-nvsentinel155.txt", "fail", "reboot",
     "GPU has fallen off the bus (fallen-off-bus) on GPU 0000:b3:00.0"),
    ("kernel-log/rminit-failed-two-gpus-gpu-operator649.txt", "fail", "reboot",
     "(rm-init-failed) on GPU 0000:04:01.0"),
    ("kernel-log/rminit-gsp-firmware-550-ogkm789.txt", "fail", "reboot",
     "(rm-init-failed) on GPU 0000:98:00.0"),
    ("kernel-log/rminit-syslog-gpu-operator1146.txt", "fail", "reboot",
     "(rm-init-failed) on GPU 0000:0a:00.0"),
    ("kernel-log/probe-failed-unsupported-gpu-cosmic3411.txt", "fail", "reboot",
     "driver probe failed (probe-failed) on GPU 0000:2c:00.0"),
    ("kernel-log/gsp-heartbeat-timeout-595-ogkm1230.txt", "fail", "reset-gpu",
     "GSP firmware timeout (gsp-timeout) on GPU 6 (00000000:BA:00.0"),
    # issue 65: the GSP's core dump with no Xid line: its firmware crashed or hung
    ("kernel-log/gsp-core-dump-destructive-no-xid-595-ogkm1230.txt", "fail", "reset-gpu",
     "GSP firmware core dump (the GPU's GSP crashed or hung) (gsp-core-dump) on GPU 6 "
     "(00000000:BA:00.0"),
    ("kernel-log/gsp-core-dump-nondestructive-journalctl-ogkm-pr1031.txt", "fail", "reset-gpu",
     "(gsp-core-dump)"),
    ("kernel-log/nvlink-postrx-journalctl-gpud1271.txt", "fail", "reboot",
     "NVLink training or link discovery failed (nvlink-training)"),
    ("kernel-log/sxid-12028-fatal-iso-gpud338.txt", "fail", "reboot",
     "SXid 12028 (egress nonposted PRIV error) on NVSwitch nvidia-nvswitch1 (0000:84:00.0)"),
    ("kernel-log/aer-uncorrected-fatal-reltime-returnn1500.txt", "fail", "reseat-or-inspect",
     "(pcie-aer) on GPU 0000:03:00.0"),
    ("kernel-log/no-adapter-probe-not-called-bigdata133.txt", "fail", "reboot",
     "the NVIDIA driver probed no GPU (no-adapter) on the node"),
    ("kernel-log/gsp-heartbeat-no-gpu-prefix-ogkm1125.txt", "fail", "reset-gpu",
     "GSP firmware timeout (gsp-timeout)"),
    ("kernel-log/gsp-heartbeat-journalctl-no-hostname-bazzite4449.txt", "fail", "reset-gpu",
     "GSP firmware timeout (gsp-timeout) on GPU 0 (00000000:18:00.0"),
    ("kernel-log/host-memory-ue-dmesg-wH-ovro117.txt", "fail", "reseat-or-inspect",
     "host memory uncorrectable error (DIMM) (host-memory-ue) on the node"),
    ("kernel-log/nic-probe-failed-mlx5-tinycore9.txt", "fail", "reboot",
     "driver probe failed (probe-failed) on NIC 0000:03:00.0"),
    # issue 53: a ConnectX whose firmware stopped completing commands
    ("kernel-log/nic-command-timeout-create-dct-ucx7738.txt", "fail", "reboot",
     "NIC firmware did not complete a command (mlx5 command timeout) (nic-command-timeout) "
     "on NIC 0000:61:00.0"),
    ("kernel-log/peermem-kmsg-gpud-testdata.txt", "fail", "reboot",
     "nvidia-peermem error (peermem)"),
    ("kernel-log/peermem-invalid-context-dmesgT-gpud46.txt", "fail", "reboot",
     "nvidia-peermem error (peermem)"),
    ("kernel-log/soft-lockup-dmesgT-deepspeed925.txt", "fail", "reboot",
     "CPU soft lockup (soft-lockup)"),
    ("dmesg-xid/xid119-gsp-rpc-timeout-xe9680.txt", "fail", "reset-gpu",
     "Xid 119 (GSP RPC Timeout) on GPU 0000:9b:00.0"),
    # issue 53: GPUDirect pinning refused by the driver (both of gdrdrv's forms)
    ("kernel-log/gdrdrv-pin-failed-gh200-555-gdrcopy299.txt", "fail", "none",
     "GPUDirect could not pin GPU memory (nvidia_p2p_get_pages failed) (gpudirect-pin-failed)"),
    ("kernel-log/gdrdrv-pin-failed-old-form-gdrcopy1.txt", "fail", "none",
     "(gpudirect-pin-failed) on the node"),
    # issue 53: a DMA the IOMMU refused (its mode, or the driver: action none); the healthy
    # H100 node's lspci has its NVSwitch at 07:00.0, so the address is named as that
    ("kernel-log/iommu-io-page-fault-nvidia-syslog-cuda-samples48.txt", "fail", "none",
     "(iommu-fault) on NVSwitch (0000:07:00.0) in the current boot, class software"),
    # issue 53: the firmware left the GPU's BAR unassigned: the node's setup (BIOS, the
    # MMIO aperture, pci=realloc), and the probe failure after it is its consequence
    ("kernel-log/bar-unassigned-syslog-probe-failed-ubuntuforums.txt", "fail", "fix-setup",
     "(bar-unassigned) on GPU 0000:02:00.0 in the current boot, class setup"),
    ("kernel-log/bar-unassigned-b200-vm-printk-caller.txt", "fail", "fix-setup",
     "(bar-unassigned) on GPU 0000:01:00.0"),
    # notices and application-class faults from before the run: reported, not failed
    ("kernel-log/sxid-22013-nonfatal-boot-570-nvtrust124.txt", "warn", "none",
     "SXid 22013 (Minion Link DLREQ interrupt) on NVSwitch nvidia-nvswitch3 (0000:04:00.0)"),
    ("kernel-log/aer-corrected-syslog-pop3363.txt", "warn", "none",
     "PCIe AER error (pcie-aer) on PCI device 0000:00:03.1, class notice"),
    # a slot short of power is a warning to look at; the NIC's link is judged by `nics`
    ("kernel-log/nic-insufficient-slot-power-dmesgT-gpud348.txt", "warn", "none",
     "NIC on a slot with insufficient power (nic-slot-power) on NIC 0000:5c:00.0"),
    # corrected host memory errors: the machine-check summary line and EDAC's CE count
    ("kernel-log/host-memory-ce-journalctl-no-hostname-radiasoft134.txt", "warn", "none",
     "host machine check events logged (machine-check)"),
    ("kernel-log/nccl-segfault-iso-gpud-testdata.txt", "warn", "none",
     "NCCL segfault (nccl-segfault) on the node, before the run"),
    # healthy logs: module load, NVLink core init, persistenced, NIC bandwidth lines
    ("kernel-log/healthy-b200-590-nvlink-core-nvrc159.txt", "pass", "none", ""),
    ("kernel-log/healthy-nvlink-core-persistenced-syslog-ollama11932.txt", "pass", "none", ""),
    ("kernel-log/healthy-mlx5-slot-power-not-advertised-gpu-operator2511.txt", "pass", "none",
     ""),
    # another device's IOMMU faults (an NVMe drive's) are not the GPU system's
    ("kernel-log/iommu-io-page-fault-nvme-not-gpu-pop853.txt", "pass", "none", ""),
]


def _kernel_log(tmp_path, text: str, meta: str | None = None):
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt", text)
    if meta is not None:
        replace(node, "meta.json", meta)
    return judge(Evidence(node), H100, None, only=("kernel_log",)).checks[0]


@pytest.mark.parametrize(("capture_path", "status", "action", "named"), CAPTURES,
                         ids=[c[0].split("/")[1] for c in CAPTURES])
def test_real_captures(tmp_path, capture_path, status, action, named):
    result = _kernel_log(tmp_path, capture(capture_path))
    assert (result.status, result.action) == (status, action), result.summary
    assert named in result.summary


def test_a_gpu_of_this_node_is_named_with_its_serial(tmp_path):
    result = _kernel_log(tmp_path, capture("kernel-log/gsp-heartbeat-timeout-595-ogkm1230.txt"))
    assert (result.gpu.index, result.gpu.serial) == (6, "1654423003872")


BOOT = "2026-11-21T08:00:00.000000+00:00 node07 kernel: Linux version 6.8.0-45-generic\n"
XID_119 = ("2026-11-21T{t}.000000+00:00 node07 kernel: NVRM: Xid (PCI:0000:5d:00): 119, "
           "pid=1, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU3 GSP!\n")


def test_an_event_from_an_earlier_boot_is_reported_and_the_node_accepted(tmp_path):
    result = _kernel_log(tmp_path, BOOT + XID_119.format(t="08:30:00") + BOOT)
    assert result.status == "warn" and "1 event(s) from earlier boots" in result.summary
    assert result.values["boots"] == 2 and result.values["earlier_boots"][0]["code"] == 119


def test_the_same_fault_after_a_reboot_escalates_to_rma(tmp_path):
    log = BOOT + XID_119.format(t="08:30:00") + BOOT + XID_119.format(t="09:30:00")
    result = _kernel_log(tmp_path, log)
    assert (result.status, result.action) == ("fail", "rma")
    assert "recurs after a reboot" in result.summary and result.gpu.index == 3


def test_a_gpu_reset_after_a_reset_class_event_clears_it(tmp_path):
    reinit = ("2026-11-21T09:40:00.000000+00:00 node07 kernel: NVRM: GPU at PCI:0000:5d:00: "
              "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b3\n")
    result = _kernel_log(tmp_path, BOOT + XID_119.format(t="09:30:00") + reinit)
    assert result.status == "warn" and "cleared by a GPU reset" in result.summary


def test_an_application_fault_during_the_run_fails(tmp_path):
    line = ("2026-11-21T10:05:00.000000+00:00 node07 kernel: NVRM: Xid (PCI:0000:5d:00): 13, "
            "pid=1, name=python3, Graphics Exception\n")
    result = _kernel_log(tmp_path, BOOT + line)
    assert (result.status, result.action) == ("fail", "restart-workload")


def test_nvlink5_xids_are_decoded_fatal_or_not(tmp_path):
    base = "[  100.000000] NVRM: Xid (PCI:0000:5d:00): {code}, {text}\n"
    fatal = base.format(code=149, text="NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 "
                                        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
    result = _kernel_log(tmp_path, fatal, meta='{"node": "node07"}')
    assert (result.status, result.action) == ("fail", "reset-gpu")
    event = result.values["events"][0]
    assert (event["unit"], event["fatal"], event["link"]) == ("NETIR_LINK_EVT", True, 0)
    nonfatal = base.format(code=144, text="SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 "
                                           "0x00000000 0x00000000 0x00000000 0x00000000)")
    assert _kernel_log(tmp_path / "b", nonfatal, meta='{"node": "node07"}').status == "warn"


def test_a_gsp_core_dump_is_one_event_however_many_lines_it_prints(tmp_path):
    result = _kernel_log(tmp_path, capture(
        "kernel-log/gsp-core-dump-destructive-no-xid-595-ogkm1230.txt"))
    dumps = [e for e in result.values["events"] if e["kind"] == "gsp-core-dump"]
    assert len(dumps) == 1, dumps
    assert (result.gpu.index, result.gpu.serial) == (6, "1654423003872")


def test_the_pci_io_region_message_s_first_line_alone_fails_for_the_setup(tmp_path):
    """Issue 65: the first line of the BAR message, where the log is cut after it (or quoted
    alone), fails as the whole message does: the node's firmware or kernel, no GPU named."""
    whole = capture("kernel-log/bar-unassigned-b200-vm-printk-caller.txt").splitlines()
    first = [line for line in whole if "This PCI I/O region" in line]
    assert len(first) == 1 and len(whole) > 1
    result = _kernel_log(tmp_path, first[0] + "\n")
    assert (result.status, result.action, result.gpu) == ("fail", "fix-setup", None)
    assert "(bar-unassigned) on the node in the current boot, class setup" in result.summary
    # with the line that names the GPU after it: one event, the GPU named
    result = _kernel_log(tmp_path, "\n".join(whole) + "\n")
    events = [e for e in result.values["events"] if e["kind"] == "bar-unassigned"]
    assert len(events) == 1 and "0000:01:00.0" in result.summary, result.summary


def test_a_gpu_s_unassigned_bar_excuses_only_the_probe_failures_of_the_devices_it_kept_off(
        tmp_path):
    """Issue 67 (an audit survivor): the BAR left unassigned on GPU 0000:02:00.0 explains
    that GPU's probe failure, never a NIC's: the NIC's probe failure (its line from the real
    ConnectX capture, in the same kern.log form) still fails with its own action, named."""
    gpu = capture("kernel-log/bar-unassigned-syslog-probe-failed-ubuntuforums.txt")
    nic = [line for line in capture("kernel-log/nic-probe-failed-mlx5-tinycore9.txt")
           .splitlines() if "mlx5_core: probe of" in line]
    assert len(nic) == 1
    stamp = "Sep 21 10:24:31 infin-MCP61M-M3 kernel: "
    result = _kernel_log(tmp_path, gpu.rstrip("\n") + "\n" + stamp + nic[0].strip() + "\n")
    probes = {e["pci"]: e["consequence_of_setup"] for e in result.values["events"]
              if e["kind"] == "probe-failed" and e["pci"]}
    assert probes.get("0000:03:00.0") is False, probes
    assert (result.status, result.action) == ("fail", "reboot"), result.summary
    assert "(probe-failed) on NIC 0000:03:00.0" in result.summary
    # the GPU's own probe failure stays the setup's consequence
    alone = _kernel_log(tmp_path, gpu)
    assert alone.action == "fix-setup", alone.summary
