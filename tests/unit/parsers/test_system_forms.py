"""The plain system evidence readers on the forms real nodes print beside the healthy
builder's: multi-arch package names, known-but-absent packages, blank lines, a GPU that
enumerates as a VGA controller, `systemctl show` values holding `=`, journald's boot
separators."""

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.system import parse_lspci, parse_packages, parse_systemctl


def test_dpkg_query_lines_drop_the_architecture_skip_absent_and_blank_lines():
    text = ("libnvidia-compute-550:amd64\t550.90.07-0ubuntu1\n\n"
            "nvidia-dkms-550\t\n"          # known to dpkg, not installed
            "\n"
            "cuda-toolkit-12-4\t12.4.1-1\n")
    assert parse_packages(text, "p") == {"libnvidia-compute-550": "550.90.07-0ubuntu1",
                                         "cuda-toolkit-12-4": "12.4.1-1"}


def test_a_workstation_gpu_enumerating_as_vga_is_a_gpu():
    """RTX and Quadro boards with a display engine enumerate as VGA controllers (class 0300)."""
    text = ("01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX "
            "3090] [10de:2204] (rev a1)\n"
            "01:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio "
            "Controller [10de:1aef] (rev a1)\n")
    functions = parse_lspci(text, "l")
    assert [line.split()[0] for line in functions.gpus] == ["01:00.0"]
    assert functions.nvswitches == []


def test_systemctl_values_keep_their_own_equals_signs():
    text = ("Id=nvidia-dcgm.service\nActiveState=active\n"
            "ExecStart={ path=/usr/bin/nv-hostengine ; argv[]=/usr/bin/nv-hostengine -n }\n")
    unit = parse_systemctl(text, "s")["nvidia-dcgm.service"]
    assert unit["ExecStart"] == "{ path=/usr/bin/nv-hostengine ; argv[]=/usr/bin/nv-hostengine -n }"


def test_a_systemctl_line_without_a_key_is_refused_naming_the_file():
    with pytest.raises(ParseError) as err:
        parse_systemctl("Id=a.service\ngarbage\n", "/ev/node07/systemctl.txt")
    assert str(err.value) == "/ev/node07/systemctl.txt: not a `systemctl show` line: 'garbage'"


def test_journald_boot_separators_start_a_new_boot():
    """`journalctl -k -b -2..` separates boots with `-- Boot <id> --` (older journald:
    `-- Reboot --`); an event after one belongs to the later boot."""
    xid = ("Nov 23 10:0{m}:00 node01 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', "
           "name=<unknown>, GPU has fallen off the bus.\n")
    text = (xid.format(m=1) + "-- Boot 0f3c5a7e9b1d4e2f8a6c0b9d7e5f3a1c --\n" + xid.format(m=2)
            + "-- Reboot --\n" + xid.format(m=3))
    assert [e.boot for e in parse_kernel_log(text, "j").events] == [0, 1, 2]
    # a separator right after another starts no empty boot
    doubled = text.replace("-- Reboot --\n", "-- Reboot --\n-- Reboot --\n")
    assert [e.boot for e in parse_kernel_log(doubled, "j").events] == [0, 1, 2]


FALLEN = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
          "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
          "               NVRM: fallen off the bus and is not responding to commands.\n")


def test_a_multi_line_message_takes_its_device_from_the_3_lines_before_only():
    """NVSentinel#155's three-line message names the GPU two lines up; a GPU named further
    back belongs to another message and is not borrowed."""
    assert [e.bus_id() for e in parse_kernel_log(FALLEN, "k").events] == ["00000000:B3:00.0"]
    far = FALLEN.replace("               NVRM: (PCI ID",
                         "[ 1843.30815] x\n[ 1843.30816] y\n               NVRM: (PCI ID")
    [event] = parse_kernel_log(far, "k").events
    assert event.bus_id() is None


def test_binary_data_is_looked_for_in_the_first_64_kib_exactly():
    line = "[    0.000000] Linux version 6.8.0-45-generic\n"
    text = (line * (65536 // len(line) + 2))
    at_limit = text[:65536] + "\x00" + text[65537:]       # the first byte past 64 KiB
    assert parse_kernel_log(at_limit, "k").events == []
    with pytest.raises(ParseError, match="binary data"):
        parse_kernel_log(text[:65535] + "\x00" + text[65536:], "k")


def test_nvswitch_ids_from_a_real_lspci_with_pci_domains_and_from_one_without():
    from gpuprov.parsers.nvswitch_info import nvswitch_ids
    from tests.evidence_builder import capture
    # Azure ND A100 v4: six NVSwitches as 10de:1af1 bridges, each in its own PCI domain
    real = parse_lspci(capture("lspci/a100-sxm4-x8-6-nvswitch-azure-gpud.txt"), "l")
    assert nvswitch_ids(real.nvswitches) == [(f"000{d}:00:00.0", "10de:1af1") for d in "56789a"]
    # one domain only: lspci leaves it out, procfs names it (0000) and writes hex lowercase
    assert nvswitch_ids(["C4:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22A3] "
                         "(rev a1)"]) == [("0000:c4:00.0", "10de:22a3")]


def test_nvswitch_information_gives_each_switch_s_bios_n_a_as_none_and_junk_fails():
    from gpuprov.parsers.nvswitch_info import parse_nvswitch_info
    # procfs_nvswitch.c's one line per switch, through grep's `file:line`
    listing = ("/proc/driver/nvidia-nvswitch/devices/0000:05:00.0/information:"
               "BIOS Version: 96.10.3f.00.01\n"
               "/proc/driver/nvidia-nvswitch/devices/0000:06:00.0/information:BIOS Version: N/A\n"
               # a later driver's further line is read past
               "/proc/driver/nvidia-nvswitch/devices/0000:06:00.0/information:Other: 1\n")
    assert parse_nvswitch_info(listing, "x") == {"0000:05:00.0": "96.10.3f.00.01",
                                                 "0000:06:00.0": None}
    assert parse_nvswitch_info("", "x") == {}
    with pytest.raises(ParseError):
        parse_nvswitch_info("sh: 1: grep: not found\n", "x")
