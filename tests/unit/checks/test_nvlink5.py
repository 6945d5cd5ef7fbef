"""HGX B200 (NVLink5): the switches are off the PCI bus; the ConnectX-7 bridges whose VPD
carries SW_MNG stand for them, counted from `grep -ls SW_MNG <pci>/*/vpd` as the collector
runs it (the real grep, over a sysfs-shaped tree)."""

import subprocess

import pytest
import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.nvlink5 import NVLINK5_BRIDGES, parse_nvlink5_bridges
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import LOCK, healthy_h100, replace
from tests.unit.checks.test_evaluators import LOCKED

H100 = load_profile("h100-sxm-8")


def _listing(tmp_path, marked: int, unmarked: int = 1) -> str:
    """The collector's own command over PCI functions: `marked` with SW_MNG in their vpd."""
    devices = tmp_path / "devices"
    for i in range(marked + unmarked):
        function = devices / f"0000:{0x0c + i:02x}:00.0"
        function.mkdir(parents=True)
        vpd = function / "vpd"
        vpd.write_bytes(b"\x82\x10ConnectX-7 bridge" + (b"SW_MNG" if i < marked else b"V0"))
    command = NVLINK5_BRIDGES.command.format(pci_devices_dir=devices)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout


def _nvl5_profile(tmp_path):
    """The H100 evidence judged as an NVLink5 board's: four bridges expected."""
    data = dict(H100.data, name="hgx-nvl5-like", nvlink5_bridges=4)
    return parse_profile(yaml.safe_dump(data), str(tmp_path / "nvl5.yml"))


@pytest.fixture
def node(tmp_path):
    directory = healthy_h100(tmp_path / "node07")
    # no NVSwitch on the PCI bus: an NVLink5 board's switches are behind the bridges
    lspci = (directory / "lspci.txt").read_text().splitlines(keepends=True)
    replace(directory, "lspci.txt", "".join(line for line in lspci if "[0680]" not in line))
    return directory


def _judged(directory, profile):
    return {c.id: c for c in judge(Evidence(directory), profile, LOCKED).checks}


def test_the_grep_listing_parses_to_the_bridges_it_names(tmp_path):
    listing = _listing(tmp_path, marked=4, unmarked=2)
    assert parse_nvlink5_bridges(listing, "l") == [f"0000:{b:02x}:00.0"
                                                   for b in range(0x0c, 0x10)]
    assert parse_nvlink5_bridges("", "l") == []
    with pytest.raises(ParseError, match="not a vpd listing line: grep: oops"):
        parse_nvlink5_bridges("grep: oops\n", "l")


def test_four_bridges_pass_without_a_switch_on_the_pci_bus(node, tmp_path):
    replace(node, NVLINK5_BRIDGES.file, _listing(tmp_path, marked=4))
    checks = _judged(node, _nvl5_profile(tmp_path))
    assert checks["nvlink5_bridges"].status == "pass"
    assert checks["nvswitch"].status == "pass", checks["nvswitch"].summary
    assert checks["nvswitch"].summary.startswith("NVLink5 switches, fabric Completed/Success")
    # the same PCI bus judged as an HGX H100's: its four NVSwitches are missing
    assert _judged(node, H100)["nvswitch"].status == "fail"


def test_a_bridge_missing_names_what_is_seen_and_none_seen_is_setup(node, tmp_path):
    profile = _nvl5_profile(tmp_path)
    replace(node, NVLINK5_BRIDGES.file, _listing(tmp_path / "three", marked=3))
    short = _judged(node, profile)["nvlink5_bridges"]
    assert (short.status, short.action) == ("fail", "reseat-or-inspect")
    assert "3 NVLink5 switch bridge(s) with SW_MNG" in short.summary
    assert "profile expects 4" in short.summary
    # nothing listed (a vpd grep could not read lists nothing too): setup first, never a part
    replace(node, NVLINK5_BRIDGES.file, _listing(tmp_path / "none", marked=0, unmarked=4))
    none = _judged(node, profile)["nvlink5_bridges"]
    assert (none.status, none.action) == ("fail", "fix-setup")
    replace(node, NVLINK5_BRIDGES.file, None)
    assert _judged(node, profile)["nvlink5_bridges"].status == "missing"
    # an HGX H100's profile has no bridges to count
    assert _judged(node, H100)["nvlink5_bridges"].status == "skip"


def test_nvswitch_firmware_minimums_are_not_looked_for_on_nvlink5_s_pci_bus(node, tmp_path):
    """The lock's NVSwitch minimums are by PCI id: an NVLink5 board has none on the bus. On
    its profile that is no failure (the trays' firmware is not read, docs/limits.md); on an
    HGX H100's profile the same bus fails as switches missing."""
    values = {f"gpuprov_{k}": v for k, v in LOCK.items()}
    values["gpuprov_firmware_min"] = {"nvswitch": {"10de:22a3": "96.10.3F.00.01"},
                                      "vbios": {"H100 80GB HBM3": "96.00.00.00.00"}}
    lock = Lock.from_vars(values, "versions.yml")
    replace(node, NVLINK5_BRIDGES.file, _listing(tmp_path, marked=4))
    nvl5 = judge(Evidence(node), _nvl5_profile(tmp_path), lock, only=("firmware",)).checks[0]
    assert nvl5.status == "pass", nvl5.summary
    assert "NVSwitch" not in nvl5.summary
    h100 = judge(Evidence(node), H100, lock, only=("firmware",)).checks[0]
    assert h100.status == "fail" and "no NVSwitch on the PCI bus" in h100.summary


def test_nvswitch_minimums_apply_only_where_the_profile_has_switches_and_lspci_was_read(
        node, tmp_path):
    values = {f"gpuprov_{k}": v for k, v in LOCK.items()}
    values["gpuprov_firmware_min"] = {"nvswitch": {"10de:22a3": "96.10.3F.00.01"}}
    lock = Lock.from_vars(values, "versions.yml")
    pcie = parse_profile(yaml.safe_dump(dict(H100.data, name="no-switch", nvswitch=False)),
                         str(tmp_path / "pcie.yml"))
    alone = judge(Evidence(node), pcie, lock, only=("firmware",)).checks[0]
    assert alone.status == "warn" and "no GPU, NIC or NVSwitch on this node matches" in \
        alone.summary
    replace(node, "lspci.txt", None)
    unread = judge(Evidence(node), H100, lock, only=("firmware",)).checks[0]
    assert unread.status in ("fail", "missing"), unread.summary


def _bridge_ports(ports: int = 8, bridges: int = 4) -> str:
    """ibstat of the compute NICs (mlx5_0..7, Active) and, after them, the bridges as
    mlx5_ib lists them (mlx5_8..11, as on a real B200, siderolabs/extensions#893), in the
    lab's model of their state: link up, no subnet manager (Initializing)."""
    from tests.evidence_builder import ibstat
    blocks = ibstat(ports + bridges).split("CA '")
    head, cas = blocks[0], blocks[1:]
    cas[ports:] = [ca.replace("State: Active", "State: Initializing") for ca in cas[ports:]]
    return head + "".join("CA '" + ca for ca in cas)


def _ib_bridges(tmp_path, cas: list[str]) -> str:
    """The collector's own command over an InfiniBand sysfs tree whose bridge adapters'
    device vpd carries SW_MNG (the real grep)."""
    from gpuprov.validation.collect import NodeSettings
    root = tmp_path / "infiniband"
    for i in range(12):
        device = root / f"mlx5_{i}" / "device"
        device.mkdir(parents=True)
        (device / "vpd").write_bytes(b"\x82\x10ConnectX-7" + (
            b"SW_MNG" if f"mlx5_{i}" in cas else b"V0"))
    command = NodeSettings.ib_bridges_command.replace("/sys/class/infiniband", str(root))
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout


def test_nvlink5_bridge_adapters_are_not_judged_as_compute_nics(node, tmp_path):
    """Issue 66: with mlx5_ib loaded, ibstat and sysfs list the bridges beside the compute
    NICs. Listed by their SW_MNG VPD, they are left out of nics (not Active at the rail
    rate: no rejection), ib_counters and the NICs' firmware minimums; a compute NIC down is
    still rejected and named; without the bridges' listing the NICs cannot be judged, for
    the setup."""
    from gpuprov.parsers.nvlink5 import IB_BRIDGES, parse_ib_bridges
    from tests.evidence_builder import ib_counters
    profile = _nvl5_profile(tmp_path)
    bridges = [f"mlx5_{i}" for i in range(8, 12)]
    listing = _ib_bridges(tmp_path, bridges)
    assert sorted(parse_ib_bridges(listing, "l")) == sorted(bridges)   # grep's glob order
    replace(node, NVLINK5_BRIDGES.file, _listing(tmp_path, marked=4))
    replace(node, IB_BRIDGES.file, listing)
    replace(node, "ibstat.txt", _bridge_ports())
    # a bridge's counter grew: not the rail fabric's
    replace(node, "ib-counters-before.txt", ib_counters(12))
    replace(node, "ib-counters-after.txt", ib_counters(12, grown={9: {"symbol_error": 40}}))
    values = {f"gpuprov_{k}": v for k, v in LOCK.items()}
    values["gpuprov_firmware_min"] = {"connectx": {"MT4129": "28.39.1002"}}
    lock = Lock.from_vars(values, "versions.yml")

    def checks():
        return {c.id: c for c in judge(Evidence(node), profile, lock,
                                       only=("nics", "ib_counters", "firmware")).checks}
    judged = checks()
    assert judged["nics"].status == "pass", judged["nics"].summary
    assert judged["nics"].summary.startswith("8 x InfiniBand ports Active/LinkUp")
    assert judged["nics"].values["nvlink5_bridges"] == sorted(bridges)
    assert judged["ib_counters"].status == "pass", judged["ib_counters"].summary
    assert judged["firmware"].status == "pass" and "8 NIC port(s)" in judged["firmware"].summary
    # the same ports on an HGX H100's profile: 12 ports, four not Active, rejected
    h100 = judge(Evidence(node), H100, lock, only=("nics",)).checks[0]
    assert h100.status == "fail" and "mlx5_8 port 1: Initializing/LinkUp" in h100.summary
    # a compute NIC down: still rejected, named, its action the hardware's
    text = _bridge_ports().split("CA 'mlx5_3'")
    replace(node, "ibstat.txt", text[0] + "CA 'mlx5_3'" + text[1].replace(
        "State: Active", "State: Down", 1).replace("Physical state: LinkUp",
                                                   "Physical state: Polling", 1))
    down = checks()["nics"]
    assert (down.status, down.action) == ("fail", "reseat-or-inspect"), down.summary
    assert down.summary == "NIC mlx5_3 port 1: Down/Polling"
    # a listing that names no bridge while ibstat has 12 adapters (a vpd grep that could not
    # read lists nothing): the setup's, never the bridges judged as compute NICs
    replace(node, IB_BRIDGES.file, "")
    empty = checks()["nics"]
    assert (empty.status, empty.action) == ("fail", "fix-setup"), empty.summary
    assert "ib-bridges.txt names no bridge while ibstat lists 12 adapters" in empty.summary
    # the bridges' listing not collected: nothing guessed, the setup's
    replace(node, IB_BRIDGES.file, None)
    unknown = checks()
    for check in ("nics", "ib_counters"):
        assert (unknown[check].status, unknown[check].action) == ("fail", "fix-setup")
        assert "ib-bridges.txt not collected" in unknown[check].summary
    assert unknown["firmware"].status == "fail"
