"""NVLink-C2C (issue 72): `nvidia-smi c2c -s` parsed from real captures (a GH200's ten
links; a system without C2C), the lab's stand-in read back by the same parser, and the
`c2c_links` check on a GB200 tray: every GPU's links as many and as fast as its siblings',
a missing or slow link named with its GPU, the driver's "No Devices support C2C" the
setup's, an unreadable link line never a pass."""

import pytest

from gpuprov.checks.catalog import all_checks
from gpuprov.checks.context import Context
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lab import kinds
from gpuprov.lab.sim import nvidia_smi, render
from gpuprov.model import HARDWARE_ACTIONS, Action, Status
from gpuprov.parsers.c2c import C2C_STATUS, parse_c2c_status
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture

GH200 = "nvidia-smi-c2c/gh200-c2c-s.txt"
TRAY = load_profile("gb200-nvl72-tray")
[C2C_LINKS] = [c for c in all_checks() if c.id == "c2c_links"]


def test_a_gh200_s_ten_links_parse_as_printed():
    status = parse_c2c_status(capture(GH200), "gh200")
    [gpu] = status.gpus
    assert (gpu.index, gpu.name, gpu.uuid) == (
        0, "NVIDIA GH200 480GB", "GPU-8d852f73-f973-0769-9c78-5e52c7b36f16")
    assert gpu.speeds == dict.fromkeys(range(10), 44.712) and not status.unsupported


def test_no_c2c_is_the_driver_s_word_and_the_stand_in_says_it_alike():
    assert parse_c2c_status(capture("nvidia-smi-c2c/no-c2c.txt"), "none").unsupported
    assert parse_c2c_status(nvidia_smi.NO_C2C, "lab").unsupported


@pytest.mark.parametrize("line", ["         C2C Link 3: <inactive>", "         C2C Link 3: N/A",
                                  "C2C: unknown error"])
def test_a_link_line_no_capture_shows_is_unreadable(line):
    text = capture(GH200).replace("         C2C Link 3: 44.712 GB/s", line)
    with pytest.raises(ParseError, match="unrecognised line"):
        parse_c2c_status(text, "x")


def test_the_lab_tray_prints_the_capture_s_form():
    hw = kinds.describe("node01", "gb200-nvl72-tray")
    text = render.c2c_status(hw)
    lines = capture(GH200).splitlines()
    # line for line the capture's layout: the GPU line, then links nine spaces in
    assert text.splitlines()[1] == lines[1]
    status = parse_c2c_status(text, "lab")
    assert [g.index for g in status.gpus] == [0, 1, 2, 3]
    assert all(g.name == "NVIDIA GB200" and len(g.speeds) == 10 for g in status.gpus)


def _judge(tmp_path, text: str | None):
    evidence = tmp_path / "node"
    evidence.mkdir(parents=True)
    if text is not None:
        (evidence / C2C_STATUS.file).write_text(text)
    return C2C_LINKS.run(Context(Evidence(evidence), TRAY, None))


def _tray(speeds: dict[int, list[float]]) -> str:
    hw = kinds.describe("node01", "gb200-nvl72-tray")
    out = []
    for g in hw["gpus"]:
        out.append(f"GPU {g['index']}: NVIDIA GB200 (UUID: {g['uuid']})")
        out += [f"         C2C Link {k}: {v:g} GB/s"
                for k, v in enumerate(speeds.get(g["index"], [44.712] * 10))]
    return "\n".join(out) + "\n"


def test_a_healthy_tray_passes(tmp_path):
    result = _judge(tmp_path, _tray({}))
    assert result.status == Status.PASS, result.summary
    assert result.summary == "4 GPUs x 10 C2C links at 44.712 GB/s"


def test_a_gpu_with_a_link_fewer_or_slower_is_named(tmp_path):
    fewer = _judge(tmp_path / "a", _tray({2: [44.712] * 9}))
    assert (fewer.status, fewer.action) == (Status.FAIL, Action.RESEAT_OR_INSPECT)
    assert fewer.gpu.index == 2 and "9 C2C links, its siblings 10" in fewer.summary
    slow = _judge(tmp_path / "b", _tray({1: [44.712] * 9 + [22.356]}))
    assert slow.gpu.index == 1 and "C2C link(s) 9 below 44.712 GB/s" in slow.summary


def test_what_the_tray_cannot_show_is_the_setup_s(tmp_path):
    unsupported = _judge(tmp_path / "a", nvidia_smi.NO_C2C)
    assert (unsupported.status, unsupported.action) == (Status.FAIL, Action.FIX_SETUP)
    assert unsupported.gpu is None and "No Devices support C2C" in unsupported.summary
    absent = _judge(tmp_path / "b", None)
    assert absent.status == Status.MISSING and absent.action == Action.FIX_SETUP, absent
    # a link line no capture shows: unreadable, as a live run judges it (never a pass, no
    # part named, no hardware action)
    unreadable = tmp_path / "c"
    unreadable.mkdir()
    (unreadable / C2C_STATUS.file).write_text(capture(GH200).replace("44.712 GB/s",
                                                                     "<inactive>"))
    [result] = judge(Evidence(unreadable), TRAY, None, strict=False, only=["c2c_links"]).checks
    assert result.status == Status.FAIL and result.summary.startswith("unreadable evidence")
    assert result.gpu is None and result.action not in HARDWARE_ACTIONS
