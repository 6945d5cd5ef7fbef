"""The lab's stand-in tools print what the real ones print and parse like the captures."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from gpuprov.lab import kinds, standins
from gpuprov.lab.sim import gpu_burn, node, nvcc, nvidia_ctk
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.gpu_burn import parse_gpu_burn
from gpuprov.parsers.versions import parse_cudnn_header, parse_nvcc
from tests.evidence_builder import FIXTURES, capture, fixture

DRIVER = "550.90.07"


@pytest.fixture
def sim_node(tmp_path, monkeypatch):
    """A node's simulator state in tmp_path: description, loaded module, NVML, daemons."""
    hw = kinds.describe("node02", "a100-sxm-8")
    description = tmp_path / "hardware.yml"

    def save(data):
        description.write_text(yaml.safe_dump(data))

    save(hw)
    fm_pid = tmp_path / "fm.pid"
    fm_pid.write_text("1\n")  # pid 1 exists: fabric manager "runs"
    monkeypatch.setattr(node, "DESCRIPTION", str(description))
    monkeypatch.setattr(node, "description", lambda path=None: yaml.safe_load(
        description.read_text()))
    monkeypatch.setattr(node, "FABRICMANAGER_PID", str(fm_pid))
    monkeypatch.setattr(node, "BURN_STATE", str(tmp_path / "gpu-burn.json"))
    monkeypatch.setattr(node, "loaded_module_version", lambda: DRIVER)
    monkeypatch.setattr(node, "nvml_version", lambda: DRIVER)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compare.ptx").write_text(".version 8.4\n.target sm_80\n")
    return hw, save


def test_gpu_burn_output_parses_like_real_runs(sim_node, capsys):
    hw, save = sim_node
    hw["gpus"][2]["burn_errors"] = 100
    hw["gpus"][5]["gflops_factor"] = 0.85
    save(hw)
    assert gpu_burn.main(["-tc", "2"]) == 0  # exit 0 even with a FAULTY GPU, as the real one
    out = capsys.readouterr().out
    assert "\r" in out and "Summary at" not in out  # progress lines only, < 10 s
    run = parse_gpu_burn(out, "sim")
    assert run.finished and run.seconds == 2 and run.tested_count == 8
    assert {i: g.verdict for i, g in run.gpus.items() if g.verdict != "OK"} == {2: "FAULTY"}
    rates = {i: g.gflops for i, g in run.gpus.items()}
    others = [r for i, r in rates.items() if i != 5]
    assert rates[5] == pytest.approx(0.85 * sum(others) / len(others), rel=0.02)
    assert all(abs(r - hw["gflops"]) / hw["gflops"] < 0.01 for r in others)
    # the real output's line shapes (tests/fixtures/gpu-burn)
    real = (FIXTURES / "gpu-burn/ok-rtx-a2000-new-format-issue124.txt").read_text()
    for pattern in (r"^Burning for \d+ seconds\.$", r"^GPU \d+: .+ \(UUID: GPU-[0-9a-f-]+\)$",
                    r"^Initialized device \d+ with \d+ MB of memory \(\d+ MB available, using "
                    r"\d+ MB of it\), using FLOATS", r"^Results are \d+ bytes each, thus "
                    r"performing \d+ iterations$", r"^Killing processes with SIGTERM",
                    r"^Tested \d+ GPUs:$", r"^\s+GPU \d+: (OK|FAULTY)$"):
        assert re.search(pattern, out, re.M), pattern
        assert re.search(pattern, real, re.M), pattern


def test_a_gpu_lost_under_load_dies_in_gpu_burn_and_nvidia_smi_then_fails_on_it(
        sim_node, monkeypatch, tmp_path, capsys):
    """Issue 36: the lab's lost GPU fails as a real one does; nvidia-smi's message and exit
    status from real reports (open-gpu-kernel-modules#387, LLaVA#1466; nvidia-smi(1): 15)."""
    from gpuprov.lab import faults
    from gpuprov.lab.sim import nvidia_smi
    hw, save = sim_node
    kernel_log = tmp_path / "kern.log"
    monkeypatch.setattr(node, "KERNEL_LOG", str(kernel_log))
    _, undo = faults.gpu._gpu_lost_in_soak(None, hw, hw["gpus"][3])
    save(hw)
    assert nvidia_smi.main(["-q", "-x"]) == 0       # healthy until loaded
    capsys.readouterr()
    assert gpu_burn.main(["2"]) == 0
    run = parse_gpu_burn(capsys.readouterr().out, "sim")
    assert [i for i, g in run.gpus.items() if g.died] == [3]
    assert nvidia_smi.main(["-q", "-x"]) == nvidia_smi.RC_GPU_LOST == 15
    bus = hw["gpus"][3]["bus_id"][-12:]
    assert capsys.readouterr().out == (f"Unable to determine the device handle for GPU{bus}: "
                                       "Unknown Error\n")
    from gpuprov.parsers.kernel_log import parse_kernel_log
    [event] = parse_kernel_log(kernel_log.read_text(), "kern.log").events
    assert (event.kind, event.bus_id()) == ("fallen-off-bus", hw["gpus"][3]["bus_id"])
    assert undo["kernel_log_messages"] == [line.partition(" kernel: ")[2]
                                           for line in kernel_log.read_text().splitlines()]


@pytest.mark.usefixtures("sim_node")
def test_gpu_burn_built_for_a_newer_gpu_fails_to_start_yet_says_ok(capsys):
    """The real tool's false pass: the kernel cannot load, the verdict is still OK."""
    Path("compare.ptx").write_text(".version 8.4\n.target sm_90\n")
    assert gpu_burn.main(["1"]) == 0
    run = parse_gpu_burn(capsys.readouterr().out, "sim")
    assert len(run.init_failures) == 8
    assert all(g.verdict == "OK" and not g.gflops for g in run.gpus.values())


@pytest.mark.usefixtures("sim_node")
def test_gpu_burn_refuses_without_fabric_manager_on_nvswitch(monkeypatch, capsys):
    monkeypatch.setattr(node, "FABRICMANAGER_PID", "/nonexistent.pid")
    assert gpu_burn.main(["1"]) == 1
    assert "CUDA_ERROR_SYSTEM_NOT_READY" in capsys.readouterr().out


@pytest.mark.parametrize("cuda,rel", [(c, r) for c, rs in standins.recipe()["cuda_toolkits"]
                                      .items() for r in rs])
def test_nvcc_version_parses_and_has_the_real_shape(cuda, rel, capsys):
    assert nvcc.main(["--version"], **{k: rel[k] for k in ("nvcc", "built_on", "build")},
                     release=rel["release"]) == 0
    out = capsys.readouterr().out
    assert [(v.release, v.full) for v in parse_nvcc(out, "sim")] == [(cuda, rel["nvcc"])]
    real = [line for line in (FIXTURES / "nvcc/cuda-12.5.txt").read_text().splitlines()
            if line and not line.startswith("#") and "nvcc --version" not in line]
    shape = [re.sub(r"\d+", "N", re.sub(r"Built on \S+", "Built on X", line)) for line in real]
    ours = [re.sub(r"\d+", "N", re.sub(r"Built on \S+", "Built on X", line))
            for line in out.splitlines()]
    assert ours == shape


def test_nvcc_ptx_records_the_target(tmp_path):
    source = tmp_path / "compare.cu"
    source.write_text("// kernel\n")
    rel = standins.recipe()["cuda_toolkits"]["12.4"][1]
    assert nvcc.main(["-ptx", "-arch=compute_90", "-o", str(tmp_path / "c.ptx"), str(source)],
                     **rel) == 0
    assert ".target sm_90" in (tmp_path / "c.ptx").read_text()
    assert nvcc.main(["-ptx", "-arch=compute_90", str(tmp_path / "missing.cu")], **rel) == 1


@pytest.mark.parametrize("version,expected", [("8.9.7.29", "8.9.7"), ("9.1.0.70", "9.1.0")])
def test_cudnn_header_parses(version, expected):
    assert parse_cudnn_header(standins._cudnn_header(version), "sim") == expected


def test_nvidia_ctk_merges_daemon_json(tmp_path, capsys):
    config = tmp_path / "daemon.json"
    config.write_text(json.dumps({"log-driver": "json-file", "log-opts": {"max-size": "10m"},
                                  "runtimes": {"crun": {"path": "/usr/bin/crun"}}}))
    args = ["runtime", "configure", "--runtime=docker", f"--config={config}"]
    assert nvidia_ctk.main(args, version="1.17.3", commit="x") == 0
    merged = json.loads(config.read_text())
    assert merged["log-driver"] == "json-file" and merged["log-opts"] == {"max-size": "10m"}
    assert merged["runtimes"] == {"crun": {"path": "/usr/bin/crun"},
                                  "nvidia": {"args": [], "path": "nvidia-container-runtime"}}
    assert "default-runtime" not in merged
    first = config.read_text()
    assert nvidia_ctk.main([*args, "--set-as-default"], version="1.17.3", commit="x") == 0
    assert json.loads(config.read_text())["default-runtime"] == "nvidia"
    assert config.read_text() != first
    assert "Wrote updated config" in capsys.readouterr().err


def test_standin_repositories_carry_two_versions_and_real_dependencies():
    cuda = {(d.name, d.version): d for d in standins.cuda_repo_packages()}
    names = {name for name, _ in cuda}
    for branch in ("535", "550"):
        assert len([v for n, v in cuda if n == f"nvidia-headless-{branch}"]) == 2
    fm = cuda[("nvidia-fabricmanager-550", "550.90.07-1")]
    assert "libnvidia-compute-550 (= 550.90.07-0ubuntu1)" in fm.depends
    assert cuda[("libcudnn8", "8.9.7.29-1+cuda12.2")]
    assert {"cuda-toolkit-12-2", "cuda-toolkit-12-4", "cuda-toolkit-13-1", "libcudnn9-cuda-12",
            "libcudnn9-cuda-13"} <= names
    # cuDNN 9's CUDA 12 and 13 builds share their header names: one must go for the other
    assert set(cuda[("libcudnn9-dev-cuda-12", "9.1.0.70-1")].files) & set(
        cuda[("libcudnn9-dev-cuda-13", "9.17.1.4-1")].files)
    ctk = {(d.name, d.version): d for d in standins.container_repo_packages()}
    assert {n for n, _ in ctk} == {"nvidia-container-toolkit", "nvidia-container-toolkit-base",
                                   "libnvidia-container-tools", "libnvidia-container1"}
    top = ctk[("nvidia-container-toolkit", "1.16.2-1")]
    assert "libnvidia-container-tools (>= 1.16.2-1)" in top.depends  # floats unless pinned


@pytest.mark.parametrize(("build", "driver", "libs"), [
    (standins.gpu_burn_tarball, "gpu_burn-drv.cpp", ["libcuda.so.1"]),
    (standins.nccl_tests_tarball, "src/all_reduce_perf.cpp", ["libcuda.so.1", "libnccl.so.2"]),
    (standins.nvbandwidth_tarball, "nvbandwidth-drv.cpp", ["libcuda.so.1",
                                                            "libnvidia-ml.so.1"])])
def test_source_tarballs_are_reproducible_with_their_tool_s_driver(tmp_path, build, driver,
                                                                    libs):
    import tarfile
    first = build(tmp_path).read_bytes()
    assert build(tmp_path).read_bytes() == first
    with tarfile.open(build(tmp_path)) as tar:
        [member] = [m for m in tar.getmembers() if m.name.endswith(f"/{driver}")]
        source = tar.extractfile(member).read().decode()
    # the simulator module it hands over to, and the libraries it needs first, as the real one
    assert re.findall(r'"/usr/lib/x86_64-linux-gnu/([^"]+)"', source) == libs
    assert "@" not in source


def test_nccl_and_dcgm_standins_carry_two_versions_under_the_real_names():
    """Two per CUDA build: NCCL for 12.4 and 13.0; DCGM's diagnostics for CUDA 12 in both
    releases, for CUDA 13 only from 4.4.1 (NVIDIA/DCGM's first Cuda13 build tree)."""
    cuda = {(d.name, d.version): d for d in standins.cuda_repo_packages()}
    for name in ("libnccl2", "libnccl-dev"):
        assert {v for n, v in cuda if n == name} == {"2.20.5-1+cuda12.4", "2.21.5-1+cuda12.4",
                                                     "2.27.7-1+cuda13.0", "2.28.9-1+cuda13.0"}
    assert "libnccl2 (= 2.21.5-1+cuda12.4)" in cuda[("libnccl-dev", "2.21.5-1+cuda12.4")].depends
    for name in ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-proprietary",
                 "datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-proprietary-cuda12"):
        assert {v for n, v in cuda if n == name} == {"1:4.2.3-1", "1:4.4.1-1"}
    for name in ("datacenter-gpu-manager-4-cuda13", "datacenter-gpu-manager-4-proprietary-cuda13"):
        assert {v for n, v in cuda if n == name} == {"1:4.4.1-1"}
    assert "datacenter-gpu-manager-4-core (= 1:4.2.3-1)" in cuda[
        ("datacenter-gpu-manager-4-cuda12", "1:4.2.3-1")].depends
    core = cuda[("datacenter-gpu-manager-4-core", "1:4.4.1-1")]
    assert "main(sys.argv[1:], version='4.4.1')" in core.files["/usr/bin/dcgmi"][0]
    # DCGM's own unit: the host engine in the foreground under its service account, which
    # the postinst creates (tolerating exit 9, an account that exists)
    unit = core.files["/usr/lib/systemd/system/nvidia-dcgm.service"][0]
    assert "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm" in unit
    assert "Type=" not in unit and "Alias=dcgm.service" in unit
    assert "useradd -Urs /usr/sbin/nologin nvidia-dcgm" in core.scripts["postinst"]


@pytest.mark.parametrize("kind,floor", [("h100-sxm-8", 350), ("a100-sxm-8", 228),
                                        ("l40s-pcie-4", 10)])
def test_all_reduce_perf_parses_and_meets_its_profile_s_floor_only_when_healthy(
        monkeypatch, capsys, kind, floor):
    from gpuprov.lab.sim import nccl_tests
    from gpuprov.parsers.nccl_tests import parse_nccl_tests
    from gpuprov.profiles import load_profile
    assert load_profile(kind)["ddp"]["busbw_min_gbps"] == floor
    hw = kinds.describe("node01", kind)
    monkeypatch.setattr(node, "description", lambda path=None: hw)
    monkeypatch.setattr(node, "loaded_module_version", lambda: DRIVER)
    monkeypatch.setattr(nccl_tests.time, "sleep", lambda s: None)

    def peak(gpus: int = hw["count"]) -> float:
        assert nccl_tests.main(["-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus)]) == 0
        run = parse_nccl_tests(capsys.readouterr().out, kind)
        assert (run.ranks, len(run.rows), run.out_of_bounds) == (gpus, 8, 0)
        return run.peak_busbw_gbps

    healthy = peak()
    assert healthy >= floor
    hw["gpus"][2]["gflops_factor"] = 0.85                       # slow-gpu
    assert peak() == pytest.approx(healthy * 0.95, rel=0.01)
    if hw.get("nvlink"):                                        # nvlink-down
        hw["gpus"][2]["gflops_factor"] = 1.0
        hw["gpus"][2]["nvlink_inactive"] = [0]
        links = hw["nvlink"]["links_per_gpu"]
        assert peak() == pytest.approx(healthy * (links - 1) / links, rel=0.01)
    assert nccl_tests.main(["-g", str(hw["count"] + 1)]) == 2   # more GPUs than the node has
    assert "invalid device ordinal" in capsys.readouterr().err


@pytest.mark.parametrize("form", [[], ["-j"]], ids=["table", "json"])
def test_dcgmi_diag_parses_as_dcgm_4_and_runs_the_level_s_tests(sim_node, monkeypatch, capsys,
                                                                form):
    from gpuprov.lab.sim import daemons, dcgmi
    from gpuprov.parsers.dcgm import parse_dcgm_diag
    hw, save = sim_node
    monkeypatch.setattr(daemons, "HOSTENGINE_PID", node.FABRICMANAGER_PID)  # pid 1: running
    monkeypatch.setattr(dcgmi.time, "sleep", lambda s: None)
    ran = {}
    for level in (1, 2, 3, 4):
        assert dcgmi.main(["diag", "-r", str(level), *form]) == 0
        out = capsys.readouterr().out
        assert out.lstrip().startswith("{" if form else "Successfully ran diagnostic")
        diag = parse_dcgm_diag(out, f"r{level}")
        assert all(t.status == "pass" for t in diag.tests)
        assert diag.metadata["DCGM Version"] == dcgmi.VERSION
        assert diag.metadata["GPU Device IDs Detected"] == ", ".join(["20b2"] * 8)  # A100
        ran[level] = [t.name for t in diag.tests]
    assert ran[1] == ["software"]
    assert ran[2] == ["software", "memory", "pcie"]
    if form:   # DCGM's figures (Info): copy bandwidth from the trained link, GEMM from gpu-burn
        hw["gpus"][1]["pcie"] = {"gen": 4, "width": 8}             # pcie-degraded
        hw["gpus"][2]["gflops_factor"] = 0.85                      # slow-gpu
        save(hw)
        assert dcgmi.main(["diag", "-r", "3", "-j"]) == 0
        figures = parse_dcgm_diag(capsys.readouterr().out, "r3").figures()
        assert figures["pcie_gbps"][0] == round(1.969 * 16 * 0.76, 2)   # A100: gen 4 x16
        assert figures["pcie_gbps"][1] == round(1.969 * 8 * 0.76, 2)
        assert figures["gflops"][0] == hw["gflops"]
        assert figures["gflops"][2] == pytest.approx(hw["gflops"] * 0.85)
        hw["gpus"][1].pop("pcie")
        hw["gpus"][2].pop("gflops_factor")
    # DCGM 4.2.3's order (NvidiaValidationSuite.cpp FillTestVectors), shown under each
    # plugin's category (PluginStrings.h: memtest runs with the hardware class, is Stress)
    sections = {t.name: t.section for t in diag.tests}
    assert ran[3] == ["software", "memory", "diagnostic", "nvbandwidth", "pcie",
                      "memory_bandwidth", "targeted_stress", "targeted_power"]
    assert ran[4] == ["software", "memory", "diagnostic", "nvbandwidth", "pulse_test", "pcie",
                      "memtest", "memory_bandwidth", "targeted_stress", "targeted_power"]
    assert (sections["diagnostic"], sections["nvbandwidth"], sections["pulse_test"],
            sections["memtest"], sections["targeted_power"]) == (
        "Hardware", "Hardware", "Hardware", "Stress", "Stress")
    assert dcgmi.main(["diag", "-r", "1", *form], version="4.4.1") == 0   # the package's
    assert parse_dcgm_diag(capsys.readouterr().out, "v").metadata["DCGM Version"] == "4.4.1"
    hw["gpus"][5]["dcgm_fail"] = "memory"
    save(hw)
    assert dcgmi.main(["diag", "-r", "2", *form]) == 1
    [failed] = parse_dcgm_diag(capsys.readouterr().out, "fail").failed
    assert (failed.name, failed.section, failed.failed_gpus) == ("memory", "Hardware", [5])
    assert failed.messages == [("Error", "A memory mismatch was detected on GPU 5, but no "
                                         "error was reported by CUDA or NVML.")]


def test_dcgmi_needs_its_host_engine(sim_node, monkeypatch, tmp_path, capsys):
    from gpuprov.lab.sim import daemons, dcgmi
    monkeypatch.setattr(daemons, "HOSTENGINE_PID", str(tmp_path / "absent.pid"))
    assert dcgmi.main(["diag", "-r", "1"]) == 255
    assert "Unable to connect to host engine" in capsys.readouterr().err
    assert dcgmi.main(["health", "-c", "-j"]) == 255
    assert "Unable to connect to host engine" in capsys.readouterr().err


def test_dcgmi_health_reports_what_the_armed_watches_see(sim_node, monkeypatch, tmp_path,
                                                         capsys):
    from gpuprov.lab.sim import daemons, dcgmi
    from gpuprov.parsers.dcgm_health import parse_dcgm_health
    hw, save = sim_node
    monkeypatch.setattr(daemons, "HOSTENGINE_PID", node.FABRICMANAGER_PID)  # pid 1: running
    monkeypatch.setattr(dcgmi, "HEALTH_WATCHES", str(tmp_path / "watches"))
    # not armed: dcgmi refuses, as the real one does, and the parser names what it printed
    assert dcgmi.main(["health", "-c", "-j"]) == dcgmi.DCGM_ST_GENERIC_ERROR_EXIT
    refusal = capsys.readouterr().out
    with pytest.raises(ParseError, match="Health watches not enabled"):
        parse_dcgm_health(refusal, "h")
    assert dcgmi.main(["health", "-s", "a"]) == 0
    assert capsys.readouterr().out == "Health monitor systems set successfully.\n"
    assert dcgmi.main(["health", "-c", "-j"]) == 0
    assert parse_dcgm_health(capsys.readouterr().out, "h").overall == "pass"
    hw["gpus"][3]["ecc"] = {"volatile": {"dram_uncorrectable": 2}}   # ecc-uncorrectable
    hw["gpus"][6]["nvlink_inactive"] = [11, 2]                         # nvlink-down, twice
    save(hw)
    assert dcgmi.main(["health", "-c", "-j"]) == 0
    health = parse_dcgm_health(capsys.readouterr().out, "h")
    assert health.overall == "fail"
    assert [(i.entity_id, i.system, i.health, i.message) for i in health.incidents] == [
        (3, "Memory system", "fail", "Detected 2 volatile double-bit ECC error(s) in GPU 3."),
        (6, "NVLINK system", "fail", "GPU 6's NvLink link 2 is currently down, GPU 6's NvLink "
                                     "link 11 is currently down")]
    # a restarted host engine has forgotten the watches
    (tmp_path / "watches").write_text("99999999")
    assert dcgmi.main(["health", "-c", "-j"]) == dcgmi.DCGM_ST_GENERIC_ERROR_EXIT


def test_the_packaged_persistence_unit_turns_persistence_mode_off_as_the_real_one(
        sim_node, monkeypatch, tmp_path, capsys):
    """Issue 37: NVIDIA's and Ubuntu's unit is static and runs --no-persistence-mode; the
    lab's does too, and nvidia-smi reports what the running daemon set."""
    from gpuprov.lab.sim import daemons, nvidia_smi
    debs = {d.name: d for d in standins.driver_packages("550", "550.90.07", "0ubuntu1")}
    unit = debs["nvidia-compute-utils-550"].files[
        "/usr/lib/systemd/system/nvidia-persistenced.service"][0]
    assert "--no-persistence-mode" in unit and "[Install]" not in unit
    monkeypatch.setattr(node, "PERSISTENCE_MODE", str(tmp_path / "mode"))
    monkeypatch.setattr(node, "running", lambda pid_file: True)
    monkeypatch.setattr(daemons, "daemonize", lambda pid_file: None)
    for argv, shown in ((["--user", "nvidia-persistenced", "--no-persistence-mode"], "Disabled"),
                        (["--user", "nvidia-persistenced", "--persistence-mode"], "Enabled")):
        assert daemons.persistenced(argv) == 0
        capsys.readouterr()
        assert nvidia_smi.main(["--query-gpu=persistence_mode", "--format=csv,noheader"]) == 0
        assert set(capsys.readouterr().out.split()) == {shown}


def _sampled(capsys, interval_ms: int = 1000, rounds: int = 3) -> str:
    """The lab's nvidia-smi looping the soak's sampler for `rounds` intervals."""
    from gpuprov.lab.sim import nvidia_smi
    from gpuprov.parsers.telemetry import SAMPLER

    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == rounds:
            raise KeyboardInterrupt   # what stops the real loop is a signal
    args = SAMPLER.format(interval_ms=interval_ms).split()[1:]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nvidia_smi.time, "sleep", sleep)
        with pytest.raises(KeyboardInterrupt):
            nvidia_smi.main(args)
    assert sleeps == [interval_ms / 1000] * rounds
    return capsys.readouterr().out


def test_the_soak_sampler_under_the_lab_s_gpu_burn_load_shows_each_weak_gpu(
        sim_node, tmp_path, monkeypatch, capsys):
    from gpuprov.parsers.telemetry import parse_gpu_telemetry

    hw, save = sim_node
    hw["gpus"][1]["load_temp_offset_c"] = 12
    hw["gpus"][3]["power_limit_w"] = 228
    hw["gpus"][6]["clock_throttle"] = True
    save(hw)
    idle = parse_gpu_telemetry(_sampled(capsys, rounds=1), "idle")
    assert {s.utilization_pct for s in idle.samples} == {0}
    with node.burning([g["index"] for g in hw["gpus"]]):
        assert node.burn_load()[1] == set(range(8))
        monkeypatch.setattr(node, "burn_load", lambda: (20.0, set(range(8))))
        out = _sampled(capsys, 500, rounds=3)
    assert out.count("timestamp, index") == 1   # the header once
    loaded = parse_gpu_telemetry(out, "load").gpus()
    assert all(len(samples) == 3 for samples in loaded.values())
    first = {i: samples[0] for i, samples in loaded.items()}
    assert first[0].utilization_pct == 100 and first[0].power_w == 0.9 * 400
    assert first[1].temp_c - first[0].temp_c == 12
    assert (first[3].power_w, first[3].power_limit_w) == (228, 228)
    assert first[3].reasons == {"sw_power_cap"}
    assert first[6].reasons == {"hw_slowdown"} and first[6].sm_clock_mhz == 1410 // 2
    assert not (tmp_path / "gpu-burn.json").exists()   # gone when gpu-burn ends


def test_the_lab_s_sampler_ends_on_sigterm_and_refuses_a_zero_interval_as_the_real_one(
        sim_node, capsys):
    import os
    import signal

    from gpuprov.lab.sim import nvidia_smi

    real = capture("query-gpu/h200-580.159.04-loop-zero.txt")
    assert nvidia_smi.main(["--query-gpu=index,power.draw", "--format=csv", "-lms", "0"]) == 2
    assert capsys.readouterr().out == real   # the real 580's words, exit status 2
    # the real loop exits 0 on SIGTERM (the capture's header says so), not 143
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(nvidia_smi.time, "sleep", lambda s: os.kill(os.getpid(), signal.SIGTERM))
            with pytest.raises(SystemExit) as ended:
                nvidia_smi.main(["--query-gpu=index", "--format=csv", "-lms", "500"])
        assert ended.value.code == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    assert "exited 0 on SIGTERM" in fixture("query-gpu/h200-580.159.04-sampler-tc-fp32-fp64.txt")


def test_the_lab_s_nvbandwidth_prints_what_the_real_v0_8_prints_and_the_parser_reads(
        sim_node, capsys):
    from gpuprov.lab.sim import nvbandwidth
    from gpuprov.parsers.nvbandwidth import TESTS, parse_nvbandwidth

    hw, save = sim_node
    hw["gpus"][6]["d2d_factor"] = 0.5      # slow-d2d
    save(hw)
    assert nvbandwidth.main(["-t", *TESTS]) == 0
    out = capsys.readouterr().out
    run = parse_nvbandwidth(out, "sim")
    assert run.version == "v0.8" and sorted(run.tests) == sorted(TESTS)
    h2d = run.tests["host_to_device_memcpy_ce"].per_gpu()   # A100: PCIe Gen4 x16
    assert len(h2d) == 8 and all(26.2 < v <= 26.3 for v in h2d.values())
    d2d = run.tests["device_to_device_memcpy_read_ce"].per_gpu()
    assert all(270 < v < 280 for i, v in d2d.items() if i != 6) and 130 < d2d[6] < 140
    # the real report's lines, in the real one's order (the H200 capture)
    real = capture("nvbandwidth/h200-x1-v0.8-all-tests-d2d-waived.txt")
    shapes = (r"^nvbandwidth Version: v0\.8\nBuilt from Git version: \n\n",
              r"^CUDA Runtime Version: \d+\nCUDA Driver Version: \d+\nDriver Version: [\d.]+\n\n"
              r"\S+\n(Device \d+: .+ \([0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\)\n)+\n",
              r"^Running host_to_device_memcpy_ce\.\nmemcpy CE CPU\(row\) -> GPU\(column\) "
              r"bandwidth \(GB/s\)\n {11}0",
              r"\n\nSUM host_to_device_memcpy_ce [\d.]+\n\n",
              r"NOTE: The reported results may not reflect the full capabilities of the platform\."
              r"\nPerformance can vary with software drivers, hardware clocks, and system "
              r"topology\.\n")
    for shape in shapes:
        assert re.search(shape, out, re.M | re.I), shape
        assert re.search(shape, real, re.M | re.I), shape


def test_the_lab_s_nvbandwidth_waives_refuses_and_fails_as_the_real_one(sim_node, capsys):
    from gpuprov.lab.sim import nvbandwidth

    hw, save = sim_node
    assert nvbandwidth.main(["-t", "no_such_test"]) == 0      # exit 0, as the real one
    captured = capsys.readouterr()
    assert captured.err == "ERROR: Testcase no_such_test not found!\n"
    assert "ERROR: Testcase no_such_test not found!" in capture(
        "nvbandwidth/h200-x1-v0.8-testcase-not-found.txt")
    assert nvbandwidth.main(["--bogus"]) == 1
    assert capsys.readouterr().out == capture("nvbandwidth/h200-x1-v0.8-invalid-argument.txt")
    hw["gpus"] = hw["gpus"][:1]
    save(hw)
    assert nvbandwidth.main(["-t", "device_to_device_memcpy_read_ce"]) == 0
    out = capsys.readouterr().out
    assert "Waived: \nNOTE:" in out and "Waived: \nNOTE:" in capture(
        "nvbandwidth/h200-x1-v0.8-d2d-read-waived.txt")
    # the real test list by index (`nvbandwidth -l`), and what the lab does not simulate
    listed = re.findall(r"^(\d+), (\w+):$", capture("nvbandwidth/h200-x1-v0.8-list.txt"), re.M)
    assert [name for _, name in listed] == list(nvbandwidth.KNOWN)
    assert nvbandwidth.main(["-t", "34"]) == 3 and "not simulated" in capsys.readouterr().err


def test_a_flapping_link_s_counters_grow_over_the_lab_s_soak_as_sysfs_shows_them(
        sim_node, tmp_path, capsys):
    import subprocess

    from gpuprov.lab import faults, kernel_view
    from gpuprov.lab.paths import NODE_LAB_DIR
    from gpuprov.parsers.ib_counters import parse_ib_counters

    hw, save = sim_node
    faults.network._ib_link_flap(None, hw, None)
    save(hw)
    script = tmp_path / "ib-counters"
    script.write_text(kernel_view._IB_COUNTERS_SCRIPT.replace(NODE_LAB_DIR, str(tmp_path)))

    def counters():
        done = subprocess.run(["python3", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return parse_ib_counters(done.stdout, "lab")

    before = counters()
    assert len(before) == 8 and before["mlx5_0 port 1"].values["link_downed"] == 0
    assert gpu_burn.main(["1"]) == 0
    capsys.readouterr()
    after = counters()
    assert after["mlx5_0 port 1"].values["link_downed"] == 1
    assert after["mlx5_0 port 1"].values["link_error_recovery"] == 1
    assert after["mlx5_1 port 1"].values == before["mlx5_1 port 1"].values
    # a node without RDMA ports: nothing printed and grep's exit status 2 (no file matched)
    hw = yaml.safe_load((tmp_path / "hardware.yml").read_text())
    save({**hw, "nic_ports": []})
    done = subprocess.run(["python3", str(script)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")


def test_the_lab_s_switch_ports_acs_through_setpci_and_lspci_vvv(tmp_path):
    """The firmware's ACS on at every switch port above the GPUs and NICs, read and cleared
    with setpci's words, shown by lspci -vvv as the real capture's lines parse."""
    import subprocess

    from gpuprov.lab import kernel_view
    from gpuprov.parsers.pci_tree import parse_lspci_vvv
    from tests.evidence_builder import lab_sysfs, lab_tool

    devices = lab_sysfs(kinds.describe("node01", "h100-sxm-8"), tmp_path / "devices")
    tools = {name: lab_tool(text, devices, tmp_path / name)
             for name, text in (("lspci-vvv", kernel_view._LSPCI_VVV_SCRIPT),
                                ("setpci", kernel_view._SETPCI_SCRIPT))}

    def run(*argv):
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True)

    tree = parse_lspci_vvv(run(tools["lspci-vvv"]).stdout, "lab")
    assert len(tree.gpus()) == 8 and len(tree.rdma_nics()) == 8
    # the four NVSwitches, each with its Device Serial Number in the real capture's form
    serials = kinds.describe("node01", "h100-sxm-8")["nvswitch_serials"]
    assert {f.bdf: f.serial for f in tree.nvswitches()} == {
        f"0000:{bus.lower()}:00.0": serial for bus, serial in serials.items()}
    assert all(s.endswith("-2d-b0-48") and len(s.split("-")) == 8 for s in serials.values())
    # and the driver role's sysfs listing still tells the 8 GPUs and 4 NVSwitches apart
    lines = [" ".join([d.name, *((d / f).read_text().strip() for f in ("vendor", "device",
                                                                       "class"))])
             for d in sorted(devices.iterdir())]
    from tests.unit.test_nvidia_driver_decisions import filters as driver_filters
    found = driver_filters.pci_inventory(lines)
    assert (len(found["gpus"]), len(found["nvswitches"])) == (8, 4), found
    gpu = tree.functions["0000:18:00.0"]
    (port,) = tree.bridges_above(gpu)
    assert port.bdf == "0000:16:01.0" and port.redirects() == ["ReqRedir", "CmpltRedir"]
    assert tree.bridges_above(tree.functions["0000:19:00.0"])[0].bdf == "0000:16:02.0"
    read = run(tools["setpci"], "-v", "-s", "16:01.0", "ECAP_ACS+0x6.w")
    assert (read.returncode, read.stdout) == (0, "0000:16:01.0 (ecap 000d @170) @176 = 001d\n")
    write = run(tools["setpci"], "-v", "-s", "0000:16:01.0", "ECAP_ACS+0x6.w=0000")
    assert (write.returncode, write.stdout) == (0, "0000:16:01.0 (ecap 000d @170) @176 0000\n")
    tree = parse_lspci_vvv(run(tools["lspci-vvv"]).stdout, "lab")
    assert tree.functions["0000:16:01.0"].redirects() == []
    assert tree.functions["0000:16:02.0"].redirects() == ["ReqRedir", "CmpltRedir"]
    # a GPU has no ACS capability: setpci dies with pciutils' words
    gpu_read = run(tools["setpci"], "-s", "18:00.0", "ECAP_ACS+0x6.w")
    assert gpu_read.returncode == 1
    assert gpu_read.stderr == ("setpci: 0000:18:00.0: Instance #0 of Extended capability 000d "
                               "not found - there are no capabilities with that id.\n")


def test_the_lab_topo_puts_each_gpu_s_nic_behind_its_switch_and_nic_far_moves_one():
    from gpuprov.lab.sim import render
    from gpuprov.parsers.topo import parse_topo

    hw = kinds.describe("node01", "h100-sxm-8")
    topo = parse_topo(render.topo(hw), "lab")
    assert [topo.link(f"GPU{i}", f"mlx5_{i}") for i in range(8)] == ["PXB"] * 8
    hw["topo_far_nics"] = [5]
    moved = parse_topo(render.topo(hw), "lab")
    assert moved.link("GPU5", "mlx5_5") == "SYS" and moved.link("GPU1", "mlx5_5") == "NODE"
    assert {moved.link("GPU5", nic) for nic in moved.nics} <= {"NODE", "SYS"}


def test_fabric_manager_s_start_script_starts_the_subnet_manager_on_nvlink5_only(
        sim_node, monkeypatch, tmp_path, capsys):
    """Pre-NVL5 (an A100 board): "Detected Pre-NVL5 system", then fabric manager. On an
    NVLink5 board (the B200 kind's bridges) without mlx5_ib the bridges are no InfiniBand
    device: "Pre-NVL5" too, and fabric manager finds nothing to do (issue 66). With it:
    no ibstat, no nvlsm (the script's real words), or no ib_umad fails the start before
    fabric manager; fabric manager alone refuses to train without the subnet manager
    (NV_WARN_NOTHING_TO_DO); with all of them, both run."""
    from gpuprov.lab.sim import daemons
    _, save = sim_node
    started = []
    monkeypatch.setattr(daemons, "daemonize", lambda pid_file: (
        started.append(Path(pid_file).name), Path(pid_file).write_text(f"{os.getpid()}\n")))
    monkeypatch.setattr(daemons, "FM_LOG", str(tmp_path / "fabricmanager.log"))
    monkeypatch.setattr(daemons, "LOADED_MODULES", str(tmp_path / "modules"))
    monkeypatch.setattr(node, "FABRICMANAGER_PID", str(tmp_path / "fm.pid.new"))
    nvlsm, pid = tmp_path / "nvlsm", str(tmp_path / "nvlsm.pid")

    def start() -> int:
        return daemons.fabricmanager_start(["--mode", "start"], version=DRIVER,
                                           config="fm.cfg", nvlsm_binary=str(nvlsm),
                                           nvlsm_pid=pid)

    assert daemons.fabricmanager_start(["--mode", "precheck"], DRIVER, "c", "n", pid) == 0
    assert start() == 0 and started == ["fm.pid.new"]
    assert capsys.readouterr().out == "Detected Pre-NVL5 system\n"

    save({**kinds.describe("node01", "b200-sxm-8"), "nvswitch": True})
    started.clear()
    (tmp_path / "modules").mkdir()
    assert start() == 1 and started == []                      # mlx5_ib not loaded
    said = capsys.readouterr()
    assert said.out == "Detected Pre-NVL5 system\n" and "NV_WARN_NOTHING_TO_DO" in said.err
    (tmp_path / "modules" / "mlx5_ib").touch()
    monkeypatch.setattr(daemons.shutil, "which", lambda tool: None)
    assert start() == 1 and "ibstat not found" in capsys.readouterr().err
    monkeypatch.setattr(daemons.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    said = capsys.readouterr() if start() == 1 else None
    assert said and said.out == "Detected NVL5+ system\n"
    assert said.err == (f'{nvlsm} does not exist. Please install "Nvidia NVLink Subnet '
                        'Manager" (nvlsm) package\n')
    nvlsm.write_text("")
    assert start() == 1 and "ib_umad is not loaded" in capsys.readouterr().err
    assert started == []
    # fabric manager started by hand, without the subnet manager: nothing to train
    assert daemons.fabricmanager([], DRIVER, pid) == 1
    assert "NV_WARN_NOTHING_TO_DO" in capsys.readouterr().err
    (tmp_path / "modules" / "ib_umad").touch()
    assert start() == 0 and started == ["nvlsm.pid", "fm.pid.new"]
    assert capsys.readouterr().out == ('Detected NVL5+ system\nStarted "Nvidia NVLink Subnet '
                                       'Manager"\n')


def test_every_fault_s_expectation_names_a_check_and_an_action_that_exist():
    """The lab tests hold each fault to its declared expectation (gpuprov/lab/faults): a
    check id or action mistyped there would only show in a lab run; here it shows at once."""
    from gpuprov.checks.catalog import check_ids
    from gpuprov.doctor.findings import DOCTOR
    from gpuprov.lab.faults import FAULTS
    from gpuprov.model import Action

    checks = {"validate": set(check_ids()),
              "doctor": {i for c in DOCTOR.checks for i in (c.id, *c.also)}}
    declared = {name: f.expect for name, f in FAULTS.items() if f.expect is not None}
    assert len(declared) >= 40
    for name, expect in declared.items():
        assert expect.check in checks[expect.by], (name, expect)
        assert expect.action is None or expect.action in {str(a) for a in Action}, (name, expect)
    # a GPU's words name the GPU the fault was put on
    assert FAULTS["dcgm-fail"].expect.words(4) == ["memory (Hardware) on GPU 4",
                                                   "A memory mismatch was detected on GPU 4"]
