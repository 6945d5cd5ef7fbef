"""The evidence table gathered from the parser modules' declarations (gpuprov/evidence.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuprov.lab
from gpuprov import evidence
from gpuprov.parsers.kind import NOT_IN_LAB, REAL_TOOL, EvidenceKind
from gpuprov.profiles import load_profile

LAB = Path(gpuprov.lab.__file__).parent


def test_every_file_is_declared_once_in_stage_order():
    files = [k.file for k in evidence.KINDS]
    assert len(files) == len(set(files))
    stages = [evidence.STAGES.index(k.stage) for k in evidence.KINDS]
    assert stages == sorted(stages)
    # what the reader, the collectors and the checks have always relied on
    assert {"nvidia-smi-q.xml", "ibstat.txt", "gpu-burn.log", "dmesg.txt"} <= set(files)


@pytest.mark.parametrize("kind", evidence.KINDS, ids=lambda k: k.file)
def test_the_lab_stand_in_each_kind_names_exists(kind):
    assert kind.lab in (REAL_TOOL, NOT_IN_LAB) or (LAB / kind.lab).is_file(), kind.lab


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="unknown stage 'burn'"):
        EvidenceKind("x.txt", "burn", None, None, "x", lab=REAL_TOOL)


def test_a_profile_key_decides_which_nodes_collect_a_kind():
    h100, l40s = load_profile("h100-sxm-8"), load_profile("l40s-pcie-4")
    identity = {k.file for k in evidence.collected("identity", h100)}
    assert {"fabricmanager.log", "packages.txt"} <= identity
    pcie = {k.file for k in evidence.collected("identity", l40s)}
    assert "fabricmanager.log" not in pcie and "packages.txt" in pcie
    # a kind without one command is its stage's own work, never collected generically
    assert "torch-env.json" not in identity


def test_after_the_soak_the_soak_s_kinds_and_the_snapshot_s_again():
    after = {k.file for k in evidence.collected("soak", load_profile("h100-sxm-8"),
                                                after_soak=True)}
    assert after == {"nvidia-smi-q-after.xml", "nvidia-smi-nvlink-errors-after.txt",
                     "ib-counters-after.txt", "kernel-taint.txt"}
