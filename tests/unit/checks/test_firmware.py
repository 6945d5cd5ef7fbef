"""firmware: the VBIOS of a real H100 report and ibstat's ConnectX firmware against the lock's
minimums; the lock refuses a malformed minimum naming the key."""

from __future__ import annotations

import pytest

from gpuprov.checks.run import judge
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.model import Status
from gpuprov.profiles import load_profile
from tests.evidence_builder import (
    H100_NVSWITCH_BIOS,
    LOCK,
    healthy_h100,
    ibstat,
    nvswitch_info,
    replace,
)

H100 = load_profile("h100-sxm-8")


def _lock(minimums=None) -> Lock:
    values = {f"gpuprov_{k}": v for k, v in LOCK.items()}
    if minimums is not None:
        values["gpuprov_firmware_min"] = minimums
    return Lock.from_vars(values, "versions.yml")


def _check(node, lock):
    return judge(Evidence(node), H100, lock, only=("firmware",)).checks[0]


def test_no_minimum_in_the_lock_skips(tmp_path):
    assert _check(healthy_h100(tmp_path), _lock()).status == Status.SKIP


def test_the_real_report_s_vbios_and_ibstat_s_firmware_meet_their_minimums(tmp_path):
    lock = _lock({"vbios": {"H100 80GB HBM3": "96.00.74.00.01"},
                  "connectx": {"MT4129": "28.39.1002"}})
    result = _check(healthy_h100(tmp_path), lock)
    assert result.status == Status.PASS, result.summary
    assert "8 GPU(s), 8 NIC port(s)" in result.summary


def test_a_vbios_below_the_minimum_fails_naming_each_gpu_by_index_and_serial(tmp_path):
    # hex fields: 0x0E > 0x01, so 96.00.74.00.0E is newer than the report's 96.00.74.00.01
    lock = _lock({"vbios": {"H100 80GB HBM3": "96.00.74.00.0E"}})
    result = _check(healthy_h100(tmp_path), lock)
    assert result.status == Status.FAIL and result.action == "none"
    assert "GPU 0 (00000000:18:00.0, serial" in result.summary
    assert "VBIOS 96.00.74.00.01 below the locked minimum 96.00.74.00.0E" in result.summary


def test_old_connectx_firmware_fails_naming_the_port(tmp_path):
    node = replace(healthy_h100(tmp_path), "ibstat.txt",
                   ibstat().replace("28.39.1002", "28.35.1002", 1))
    result = _check(node, _lock({"connectx": {"MT4129": "28.39.1002"}}))
    assert result.status == Status.FAIL
    assert result.summary == ("NIC mlx5_0 port 1 (MT4129): firmware 28.35.1002 below the "
                              "locked minimum 28.39.1002")


def test_unreadable_firmware_where_a_minimum_applies_fails(tmp_path):
    node = replace(healthy_h100(tmp_path), "ibstat.txt",
                   ibstat().replace("\tFirmware version: 28.39.1002\n", "", 1))
    result = _check(node, _lock({"connectx": {"MT4129": "28.39.1002"}}))
    assert result.status == Status.FAIL and "firmware unreadable" in result.summary


def test_a_lock_for_other_models_only_warns(tmp_path):
    result = _check(healthy_h100(tmp_path), _lock({"vbios": {"A100-SXM4-80GB": "92.00.9E.00.02"}}))
    assert result.status == Status.WARN and "A100-SXM4-80GB" in result.summary


@pytest.mark.parametrize("minimums,says", [
    ({"vbios": {"H100": "96.0.74"}}, "gpuprov_firmware_min.vbios.H100: '96.0.74' is not a vbios"),
    ({"bmc": {"x": "1.0"}}, "gpuprov_firmware_min.bmc: unknown firmware kind"),
    (["28.39.1002"], "gpuprov_firmware_min: must be a mapping"),
    ({"connectx": {}}, "gpuprov_firmware_min.connectx: must map a device model"),
])
def test_a_malformed_minimum_is_refused_naming_the_key(minimums, says):
    with pytest.raises(InputError, match="versions.yml: " + says.replace(".", r"\.")
                       .replace("(", r"\(")):
        _lock(minimums)


# the board_id listing of the healthy node's eight ConnectX-7: the PSID of a real H200 node's
# ConnectX-7 (deepseek-ai/DeepEP#355: ibv_devinfo's board_id, which is the sysfs file)
BOARD_IDS = "".join(f"/sys/class/infiniband/mlx5_{i}/board_id:MT_0000000838\n"
                    for i in range(8))


def test_a_minimum_locked_by_psid_is_taken_before_the_ca_type_s(tmp_path):
    node = replace(healthy_h100(tmp_path), "ib-board-id.txt", BOARD_IDS)
    lock = _lock({"connectx": {"MT4129": "28.35.1002", "MT_0000000838": "28.40.1000"}})
    result = _check(node, lock)
    assert result.status == Status.FAIL
    assert result.summary.startswith("NIC mlx5_0 port 1 (MT_0000000838): firmware 28.39.1002 "
                                     "below the locked minimum 28.40.1000")
    judged = result.values["judged"]["nics"]["mlx5_0 port 1"]
    assert judged == {"firmware": "28.39.1002", "ca_type": "MT4129", "psid": "MT_0000000838",
                      "minimum": "28.40.1000"}
    # another card's PSID: the CA type's minimum applies, which the port meets
    other = replace(node, "ib-board-id.txt", BOARD_IDS.replace("0838", "1045"))
    assert _check(other, lock).status == Status.PASS


def test_a_psid_unreadable_where_only_psids_are_locked_fails_never_passes(tmp_path):
    lock = _lock({"connectx": {"MT_0000000838": "28.39.1002"}})
    result = _check(healthy_h100(tmp_path), lock)          # no board_id listing collected
    assert result.status == Status.FAIL
    assert "PSID unreadable (board_id), and minimums are locked by PSID (MT_0000000838)" \
        in result.summary
    node = replace(tmp_path, "ib-board-id.txt", BOARD_IDS)
    assert _check(node, lock).status == Status.PASS


def test_a_single_adapter_s_psid_listed_without_its_file_name_is_its_own(tmp_path):
    """Issue 55: a node with one ConnectX lists its board_id without a path under `grep -s .`
    (no -H): the PSID is the one adapter's, judged by its minimum, never a parse failure.
    Beside eight adapters the same bare PSID is nobody's: unreadable, a failure."""
    one = replace(replace(healthy_h100(tmp_path), "ibstat.txt", ibstat(ports=1)),
                  "ib-board-id.txt", "MT_0000000838\n")
    assert _check(one, _lock({"connectx": {"MT_0000000838": "28.39.1002"}})).status == \
        Status.PASS
    low = _check(one, _lock({"connectx": {"MT_0000000838": "28.40.1000"}}))
    assert low.status == Status.FAIL and low.summary.startswith(
        "NIC mlx5_0 port 1 (MT_0000000838): firmware 28.39.1002 below the locked minimum "
        "28.40.1000"), low.summary
    eight = replace(healthy_h100(tmp_path / "eight"), "ib-board-id.txt", "MT_0000000838\n")
    unread = _check(eight, _lock({"connectx": {"MT_0000000838": "28.39.1002"}}))
    assert unread.status == Status.FAIL and "PSID unreadable (board_id)" in unread.summary


# -- NVSwitches: by PCI id, their firmware from the driver's procfs -------------------------
SWITCHES = {"nvswitch": {"10de:22a3": H100_NVSWITCH_BIOS}}


def test_nvswitch_firmware_at_the_minimum_passes_and_counts_the_switches(tmp_path):
    result = _check(healthy_h100(tmp_path), _lock(SWITCHES))
    assert result.status == Status.PASS, result.summary
    assert result.summary.endswith("0 GPU(s), 0 NIC port(s), 4 NVSwitch(es)")
    assert result.values["judged"]["nvswitches"]["0000:05:00.0"] == {
        "firmware": "96.10.3f.00.01", "pci_id": "10de:22a3", "minimum": "96.10.3f.00.01"}


def test_an_nvswitch_below_the_minimum_fails_naming_its_address_compared_in_hex(tmp_path):
    # 0x40 > 0x3f: a decimal reading of "3f" could not order them
    node = replace(healthy_h100(tmp_path), "nvswitch-info.txt",
                   nvswitch_info({"05": "96.10.3b.00.01", "06": "96.10.40.00.01",
                                  "07": H100_NVSWITCH_BIOS, "08": H100_NVSWITCH_BIOS}))
    result = _check(node, _lock({"nvswitch": {"10de:22a3": "96.10.3F.00.01"}}))
    assert result.status == Status.FAIL and result.action == "none"
    assert result.summary == ("NVSwitch 0000:05:00.0 (10de:22a3): firmware 96.10.3b.00.01 "
                              "below the locked minimum 96.10.3F.00.01")


@pytest.mark.parametrize("listing,says", [
    # the driver read no version: its own N/A
    (nvswitch_info({"05": "N/A", "06": H100_NVSWITCH_BIOS, "07": H100_NVSWITCH_BIOS,
                    "08": H100_NVSWITCH_BIOS}),
     "NVSwitch 0000:05:00.0 (10de:22a3): firmware unreadable, minimum 96.10.3f.00.01"),
    # the driver claimed none of the switches lspci lists (grep's empty listing)
    ("", "NVSwitch 0000:05:00.0 (10de:22a3): firmware unreadable"),
    # not collected at all (an older run's evidence)
    (None, "NVSwitch 0000:07:00.0 (10de:22a3): firmware unreadable, minimum 96.10.3f.00.01 "
           "(+1 more)"),
])
def test_nvswitch_firmware_unreadable_where_a_minimum_applies_fails(tmp_path, listing, says):
    node = replace(healthy_h100(tmp_path), "nvswitch-info.txt", listing)
    result = _check(node, _lock(SWITCHES))
    assert result.status == Status.FAIL and says in result.summary, result.summary


def test_no_nvswitch_on_the_bus_where_the_profile_has_them_fails(tmp_path):
    node = healthy_h100(tmp_path)
    gpus_only = "".join(line + "\n" for line in (node / "lspci.txt").read_text().splitlines()
                        if "[0680]" not in line)
    result = _check(replace(node, "lspci.txt", gpus_only), _lock(SWITCHES))
    assert result.status == Status.FAIL
    assert "no NVSwitch on the PCI bus (lspci), and the profile has them" in result.summary


def test_another_nvswitch_model_locked_only_warns(tmp_path):
    # an HGX A100's second-generation switch (10de:1af1): nothing here matches it
    result = _check(healthy_h100(tmp_path), _lock({"nvswitch": {"10de:1af1": "92.10.14.00.01"}}))
    assert result.status == Status.WARN and "10de:1af1" in result.summary


@pytest.mark.parametrize("minimums,says", [
    ({"nvswitch": {"22a3": "96.10.3f.00.01"}}, "gpuprov_firmware_min.nvswitch.22a3: not a PCI "
                                               "id as lspci -nn prints it"),
    ({"nvswitch": {"10de:22a3": "96.10.3f"}}, "gpuprov_firmware_min.nvswitch.10de:22a3: "
                                              "'96.10.3f' is not a nvswitch version"),
])
def test_a_malformed_nvswitch_minimum_is_refused_naming_the_key(minimums, says):
    with pytest.raises(InputError, match="versions.yml: " + says.replace(".", r"\.")):
        _lock(minimums)
