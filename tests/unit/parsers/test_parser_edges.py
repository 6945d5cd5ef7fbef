"""Parser behaviour the fixture sweeps did not pin down (found by mutation testing, issue
#24): the plain table's header fields exactly, the XML reader's preambles, repeated and
empty elements, and each parser's error message in full."""

from __future__ import annotations

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.smi_table import SmiHeader, parse_smi_header
from gpuprov.parsers.smi_tree import parse_xml
from tests.evidence_builder import FIXTURES

HEADERS = {
    "a100-sxm4-x4-555.42.02.txt": ("555.42.02", "12.5"),
    "dgx-h100-x8-mig-535.104.12.txt": ("535.104.12", "12.2"),
    "h100-590.48.01-under-load-processes.txt": ("590.48.01", "13.1"),
    "h100-sxm-x8-565.57.01.txt": ("565.57.01", "12.7"),
    "h200-580.159.04-vm.txt": ("580.159.04", "13.0"),
    "p100-470.82.01-inforom-corrupted.txt": ("470.82.01", "11.4"),
    "quadro-rtx8000-x10-470.63.01.txt": ("470.63.01", "11.4"),
    "rtx3090-x2-560.35.03.txt": ("560.35.03", "12.6"),
}


def test_every_plain_table_capture_is_read_exactly():
    assert sorted(HEADERS) == sorted(p.name for p in (FIXTURES / "nvidia-smi").iterdir())
    for name, (driver, cuda) in HEADERS.items():
        header = parse_smi_header((FIXTURES / "nvidia-smi" / name).read_text(), name)
        assert header == SmiHeader(driver, cuda, driver, "driver"), name


def test_a_header_without_cuda_or_the_smi_version_reads_as_none():
    """The 565 capture's header line, CUDA shown as N/A (no libcuda) and the NVIDIA-SMI
    field cut away."""
    line = (FIXTURES / "nvidia-smi/h100-sxm-x8-565.57.01.txt").read_text().splitlines()
    header_line = next(x for x in line if "Driver Version" in x)
    edited = header_line.replace("CUDA Version: 12.7", "CUDA Version: N/A").replace(
        "NVIDIA-SMI 565.57.01", "")
    assert parse_smi_header(edited, "h") == SmiHeader("565.57.01", None, None, "driver")


@pytest.mark.parametrize("text, message", [
    ("", "/e/smi.txt: no `Driver Version … CUDA Version` header"),
    ("No devices were found\n", "/e/smi.txt: nvidia-smi failed: No devices were found"),
])
def test_header_errors_name_the_file_and_say_why(text, message):
    with pytest.raises(ParseError) as err:
        parse_smi_header(text, "/e/smi.txt")
    assert str(err.value) == message


XML = ("<nvidia_smi_log><driver_version>550.90.07</driver_version><cuda_version>12.4"
       "</cuda_version><attached_gpus>1</attached_gpus><gpu id=\"00000000:18:00.0\">"
       "<product_name>NVIDIA H100 80GB HBM3</product_name><serial></serial>"
       "<processes>{processes}</processes></gpu></nvidia_smi_log>")
PROCESS = "<process_info><pid>{pid}</pid><process_name>python3</process_name></process_info>"


@pytest.mark.parametrize("count", [1, 2, 3])
def test_repeated_elements_become_a_list_and_empty_ones_an_empty_string(count):
    processes = "".join(PROCESS.format(pid=100 + i) for i in range(count))
    # nvidia-smi's own banner before the document, as `2>&1` captures it
    parsed = parse_xml("WARNING: infoROM is corrupted at gpu 0000:18:00.0\n"
                       + XML.format(processes=processes), "q.xml")
    gpu = parsed["gpus"][0]
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["attached_gpus"]) == (
        "550.90.07", "12.4", "1")
    assert gpu["@id"] == "00000000:18:00.0" and gpu["serial"] == ""
    info = gpu["processes"]["process_info"]
    pids = [p["pid"] for p in info] if isinstance(info, list) else [info["pid"]]
    assert pids == [str(100 + i) for i in range(count)]
    assert isinstance(info, list) == (count > 1)


def test_the_first_of_two_documents_is_read_and_the_junk_after_it_refused():
    doc = '<?xml version="1.0" ?>\n' + XML.format(processes="")
    with pytest.raises(ParseError, match=r"^q\.xml: malformed or truncated XML"):
        parse_xml(doc + "\n" + doc.replace("550.90.07", "535.161.08"), "q.xml")


@pytest.mark.parametrize("text, message", [
    ("nvidia-smi: command not found\n",
     "q.xml: not `nvidia-smi -q -x` output (no <nvidia_smi_log>)"),
    ('<?xml version="1.0" ?>\n<other><a>1</a></other>',
     "q.xml: root element is <other>, not <nvidia_smi_log>"),
])
def test_xml_errors_name_the_file_and_say_why(text, message):
    with pytest.raises(ParseError) as err:
        parse_xml(text, "q.xml")
    assert str(err.value) == message


def test_topo_before_numa_columns_reads_the_cpu_affinity_alone():
    """Drivers before R450 print `CPU Affinity` without a NUMA column (the form in
    kubernetes/kubernetes#53497's DGX-1 capture): no NUMA node is made up."""
    from gpuprov.parsers.topo import parse_topo
    text = ("\tGPU0\tGPU1\tmlx4_0\tCPU Affinity\n"
            "GPU0\t X \tPIX\tPHB\t0-9,20-29\n"
            "GPU1\tPIX\t X \tPHB\t0-9,20-29\n"
            "mlx4_0\tPHB\tPHB\t X \t\n")
    topo = parse_topo(text, "t")
    assert topo.cpu_affinity == {"GPU0": "0-9,20-29", "GPU1": "0-9,20-29"}
    assert topo.numa_affinity == {}
    assert topo.matrix["mlx4_0"] == {"GPU0": "PHB", "GPU1": "PHB", "mlx4_0": "X"}


def test_gpu_burn_errors_are_the_worst_of_each_interval_summed_over_intervals():
    """gpu-burn's error counters restart after each `Summary at:`; within an interval a later
    progress line repeats the running count. The RTX 4090 run of wilicc/gpu-burn#96 with its
    error counts set: GPU 0 reads 3, then 2 (a repaint), then 5 after the summary: 8."""
    from gpuprov.parsers.gpu_burn import parse_gpu_burn
    log = ("Burning for 10 seconds.\n"
           "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0a1ac16e-d52a-607f-2a7e-d42cdeeb833f)\n"
           "GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-ef3a2d12-f399-d913-4c15-65015ff34fc2)\n"
           "20.0%  proc'd: 81 (47174 Gflop/s) - 0 (0 Gflop/s)   errors: 3 - 0   "
           "temps: 50 C - 45 C \n"
           "20.0%  proc'd: 81 (47174 Gflop/s) - 0 (0 Gflop/s)   errors: 2 - 0   "
           "temps: 50 C - 45 C \n"
           "\tSummary at:   Mon Jan 15 07:36:03 AM CET 2024\n\n"
           "30.0%  proc'd: 162 (52502 Gflop/s) - 81 (46929 Gflop/s)   errors: 5 - 0   "
           "temps: 50 C - 45 C \n"
           "\tSummary at:   Mon Jan 15 07:36:04 AM CET 2024\n\n"
           "50.0%  proc'd: 162 (52502 Gflop/s) - 162 (51733 Gflop/s)   errors: 0 - 4   "
           "temps: 69 C - 67 C \n")
    run = parse_gpu_burn(log, "burn")
    assert (run.gpus[0].errors, run.gpus[1].errors) == (8, 4)   # GPU 1's last, unbanked
    assert (run.gpus[0].warning, run.gpus[1].warning) == (True, True)
    assert (run.gpus[0].max_temp_c, run.gpus[1].max_temp_c) == (69, 67)
    assert not run.aborted and not run.finished and run.progress_lines == 4


def test_a_board_id_listing_gives_each_adapter_s_psid_and_junk_is_a_parse_error():
    from gpuprov.parsers.ibstat import parse_board_ids
    # the PSIDs of a real H200 node's ConnectX-7s (deepseek-ai/DeepEP#355), as grep lists them
    listing = ("/sys/class/infiniband/mlx5_0/board_id:MT_0000000838\n"
               "/sys/class/infiniband/mlx5_10/board_id:MT_0000001045\n")
    assert parse_board_ids(listing, "x") == {"mlx5_0": "MT_0000000838",
                                             "mlx5_10": "MT_0000001045"}
    assert parse_board_ids("", "x") == {}
    with pytest.raises(ParseError):
        parse_board_ids("grep: /sys/class/infiniband/mlx5_0/board_id: Permission denied\n", "x")
    with pytest.raises(ParseError):
        parse_board_ids("/sys/class/infiniband/mlx5_0/board_id:\n", "x")


def test_one_adapter_listed_without_h_is_its_psid_unnamed_and_two_bare_lines_are_junk():
    """Issue 55: `grep -s .` over a glob that matches one file prints no file name (GNU
    grep's -H default), so a single-adapter node's listing is the PSID alone."""
    from gpuprov.parsers.grep_listing import UNNAMED
    from gpuprov.parsers.ibstat import BOARD_ID_COMMAND, parse_board_ids
    assert BOARD_ID_COMMAND.startswith("grep -sH . ")
    assert parse_board_ids("MT_0000000838\n", "x") == {UNNAMED: "MT_0000000838"}
    with pytest.raises(ParseError):      # two files always carry their names
        parse_board_ids("MT_0000000838\nMT_0000001045\n", "x")


def test_one_nvswitch_listed_without_h_is_its_version_unnamed():
    from gpuprov.parsers.grep_listing import UNNAMED
    from gpuprov.parsers.nvswitch_info import NVSWITCH_INFO_COMMAND, parse_nvswitch_info
    assert NVSWITCH_INFO_COMMAND.startswith("grep -sH . ")
    assert parse_nvswitch_info("BIOS Version: 96.10.3f.00.01\n", "x") == {
        UNNAMED: "96.10.3f.00.01"}
    assert parse_nvswitch_info("BIOS Version: N/A\n", "x") == {UNNAMED: None}
    with pytest.raises(ParseError):
        parse_nvswitch_info("BIOS Version: 96.10.3f.00.01\nBIOS Version: 96.10.3f.00.01\n",
                            "x")
