"""nvswitch on real captures: the switches lspci lists, the fabric each GPU registered
with, SXids in the kernel log, fabric manager's log."""

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_manager import parse_fabric_manager_log
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, fixture, healthy_h100, replace

H100, A100, L40S = (load_profile(n) for n in ("h100-sxm-8", "a100-sxm-8", "l40s-pcie-4"))


def _nvswitch(node, profile=H100):
    return judge(Evidence(node), profile, None, only=("nvswitch",)).checks[0]


def test_healthy_board_passes_and_pcie_systems_skip(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    result = _nvswitch(node)
    assert (result.status, result.summary) == (
        "pass", "4 NVSwitches, fabric Completed/Success on 8 GPUs, no SXid")
    assert result.values["fabric_manager_log"] == {"lines": 53, "errors": [], "nonfatal": [],
                                                   "before_last_start": 0}
    assert _nvswitch(node, L40S).status == "skip"


def test_real_a100_board_lists_six_switches_a_missing_one_fails(tmp_path):
    listing = capture("lspci/a100-sxm4-x8-6-nvswitch-azure-gpud.txt")
    node = replace(healthy_h100(tmp_path / "node07"), "lspci.txt", listing)
    assert _nvswitch(node, A100).values["nvswitches"][0] == "0005:00:00.0"
    five = "\n".join(line for line in listing.splitlines() if not line.startswith("000a:"))
    result = _nvswitch(replace(node, "lspci.txt", five), A100)
    assert (result.status, result.action) == ("fail", "reseat-or-inspect")
    assert result.summary == "5 NVSwitch(es) on the PCI bus, profile expects 6"


def test_a_gpu_not_registered_with_the_fabric_fails_naming_it(tmp_path):
    text = fixture("nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu0-fabric-in-progress.txt")
    node = replace(healthy_h100(tmp_path / "node07"), "nvidia-smi-q.txt", text)
    result = _nvswitch(node)
    assert (result.status, result.action, result.gpu.index) == ("fail", "reboot", 0)
    assert "fabric In Progress/None" in result.summary


def test_fatal_sxid_fails_naming_the_switch_non_fatal_warns(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt",
                   capture("kernel-log/sxid-12028-fatal-iso-gpud338.txt"))
    result = _nvswitch(node)
    assert (result.status, result.action) == ("fail", "reboot")
    assert result.summary == ("SXid 12028 (egress nonposted PRIV error) on NVSwitch "
                              "nvidia-nvswitch1 (0000:84:00.0)")
    # the evidence JSON's record of it, whole
    assert result.values["sxid"] == [{
        "code": 12028, "name": "egress nonposted PRIV error", "class": "reboot",
        "nvswitch": "NVSwitch nvidia-nvswitch1 (0000:84:00.0)",
        "text": "Data {0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, "
                "0x40008000, 0x5a001100, 0x00000000, 0x00000000}"}]
    replace(node, "dmesg.txt", capture("kernel-log/sxid-22013-nonfatal-boot-570-nvtrust124.txt"))
    assert _nvswitch(node).status == "warn"


def test_fabric_manager_log_non_fatal_error_warns_an_error_fails(tmp_path):
    real = capture("fabricmanager/nonfatal-nvswitch-error-multicast-gpud.log")
    node = replace(healthy_h100(tmp_path / "node07"), "fabricmanager.log", real)
    result = _nvswitch(node)
    assert result.status == "warn" and "detected NVSwitch non-fatal error 12028" in result.summary
    # a constructed error line in the log's real form (no real capture of one at hand)
    error = "[Feb 27 2025 15:12:00] [ERROR] [tid 1808] failed to train NVLink trunk port 61\n"
    result = _nvswitch(replace(node, "fabricmanager.log", real + error))
    assert (result.status, result.action) == ("fail", "reboot")
    assert "failed to train NVLink trunk port 61" in result.summary


def test_nothing_to_do_is_not_an_error_and_junk_is_refused():
    text = ("[Nov 15 2023 14:15:47] [ERROR] [tid 4177] request to query NVSwitch device "
            "information from NVSwitch driver failed with error:WARNING Nothing to do "
            "[NV_WARN_NOTHING_TO_DO]\n")
    assert parse_fabric_manager_log(text, "fm").errors == []
    try:
        parse_fabric_manager_log("GPU 0: NVIDIA H100\n", "/ev/fabricmanager.log")
    except ParseError as exc:
        assert "fabricmanager.log: not a fabric manager log" in str(exc)
    else:
        raise AssertionError("junk parsed as a fabric manager log")


def test_an_unreadable_or_absent_kernel_log_leaves_the_switch_judgement_to_the_rest(tmp_path):
    """kernel_log reports an unreadable log; nvswitch neither fails nor notes it."""
    node = replace(healthy_h100(tmp_path / "node07"), "dmesg.txt", "\x00\x01\x02 binary\n")
    result = _nvswitch(node)
    assert (result.status, result.summary) == (
        "pass", "4 NVSwitches, fabric Completed/Success on 8 GPUs, no SXid")
    absent = _nvswitch(replace(healthy_h100(tmp_path / "b"), "dmesg.txt", None))
    assert absent.status == "pass" and absent.values["sxid"] == "kernel log not collected"


def test_a_fatal_fabric_manager_line_fails_like_an_error(tmp_path):
    real = capture("fabricmanager/nonfatal-nvswitch-error-multicast-gpud.log")
    # constructed in the log's real form: no real capture of a FATAL line at hand
    fatal = "[Feb 27 2025 15:12:00] [FATAL] [tid 1808] NVSwitch fabric is not operational\n"
    node = replace(healthy_h100(tmp_path / "node07"), "fabricmanager.log", real + fatal)
    result = _nvswitch(node)
    assert result.status == "fail" and "NVSwitch fabric is not operational" in result.summary


def test_only_errors_since_fabric_manager_last_started_count(tmp_path):
    """The log is appended across boots: an earlier boot's error (the driver refused at
    that boot) does not fail a node whose fabric manager started cleanly since."""
    started = ("[Nov 24 2026 18:02:40] [INFO] [tid 912] Fabric Manager version 550.90.07 is "
               "running with the following configuration options\n")
    refused = ("[Nov 24 2026 18:02:03] [ERROR] [tid 77] request to query NVIDIA GPU driver "
               "information failed with error: NVIDIA driver is not loaded\n")
    log = parse_fabric_manager_log(started + refused + started, "fm")
    assert (log.errors, log.earlier_errors) == ([], 1)
    node = replace(healthy_h100(tmp_path / "node07"), "fabricmanager.log",
                   started + refused + started)
    assert _nvswitch(node).status == "pass"
    result = _nvswitch(replace(node, "fabricmanager.log", started + refused))
    assert result.status == "fail" and "NVIDIA driver is not loaded" in result.summary


def test_no_gpu_s_fabric_training_started_is_the_setup_not_a_part(tmp_path):
    """Fabric manager never ran (not installed, failed, NVLink5 without its subnet manager):
    every GPU reads Not Started. That is the node's setup, never a reboot or an RMA."""
    node = healthy_h100(tmp_path / "node07")
    text = (node / "nvidia-smi-q.txt").read_text()
    assert text.count(": Completed") == 8
    replace(node, "nvidia-smi-q.txt", text.replace(": Completed", ": Not Started"))
    result = _nvswitch(node)
    assert (result.status, result.action, result.gpu) == ("fail", "fix-setup", None)
    assert result.summary.startswith("fabric training not started on any of the 8 GPUs")


def _fabric_na(node, gpus) -> None:
    from tests.evidence_builder import smi_edit
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        text = (node / name).read_text()
        for gpu in gpus:
            for field in ("State", "Status"):
                text = smi_edit(text, gpu, ("Fabric", field), "N/A")
        replace(node, name, text)


def test_a_fabric_state_nvidia_smi_could_not_read_is_never_a_gpu_s_fault(tmp_path):
    """N/A (not seen) on Hopper, where NVML reports registration: fix-setup, no GPU blamed,
    for one GPU or all of them."""
    node = healthy_h100(tmp_path / "node07")
    _fabric_na(node, [7])
    one = _nvswitch(node)
    assert (one.status, one.action) == ("fail", "fix-setup")
    assert one.summary.startswith("fabric state not reported for 1 of the 8 GPUs (GPU 7 ")
    _fabric_na(node, range(8))
    every = _nvswitch(node)
    assert (every.status, every.action) == ("fail", "fix-setup")
    assert every.summary.startswith("fabric state not reported for 8 of the 8 GPUs")


def test_before_hopper_the_fabric_state_is_not_reported_and_warns(tmp_path):
    """An A100's nvidia-smi prints fabric State N/A (NVML reports it from Hopper): a DGX
    A100 is judged by fabric manager's log and the SXids, and warns; never a reboot."""
    a100 = load_profile("a100-sxm-8")
    node = healthy_h100(tmp_path / "node07")
    lspci = (node / "lspci.txt").read_text()
    replace(node, "lspci.txt", lspci + "".join(
        f"{b}:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:1af1] (rev a1)\n"
        for b in ("09", "0a")))          # six NVSwitches, as the A100 profile expects
    _fabric_na(node, range(8))
    result = _nvswitch(node, a100)
    assert (result.status, result.action) == ("warn", "none"), result.summary
    assert result.summary == ("fabric registration not reported before Hopper (NVML; Ampere): "
                              "judged by fabric manager's log and the SXids")
