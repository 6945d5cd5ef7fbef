"""The under-load checks (gpu-telemetry.csv): each weak-GPU fault named by the right check."""

from __future__ import annotations

import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import (
    capture,
    gpu_burn_log,
    healthy_h100,
    one_gpu,
    replace,
    telemetry,
)

H100 = load_profile("h100-sxm-8")
IDS = ("load_power", "load_thermal", "load_throttle", "load_clocks")


def _judge(node, profile=H100) -> dict:
    return {c.id: c for c in judge(Evidence(node), profile, None, only=IDS).checks}


def _node(tmp_path, text: str | None):
    return replace(healthy_h100(tmp_path / "node07"), "gpu-telemetry.csv", text)


def test_a_healthy_node_at_the_real_h100_s_load_figures_passes(tmp_path):
    results = _judge(healthy_h100(tmp_path / "node07"))
    assert {i: r.status for i, r in results.items()} == dict.fromkeys(IDS, "pass")
    assert results["load_power"].summary == ("8 GPUs reached at least 525 W under load at a "
                                             "700 W limit")
    assert results["load_power"].values["gpus"][0] == {"peak_power_w": 631.95,
                                                       "enforced_limit_w": 700.0}


def test_a_gpu_12_c_above_its_siblings_is_named_by_the_thermal_check(tmp_path):
    results = _judge(_node(tmp_path, telemetry(hotter={3: 12})))
    thermal = results["load_thermal"]
    assert (thermal.status, thermal.gpu.index, thermal.action) == ("fail", 3,
                                                                   "reseat-or-inspect")
    assert "GPU 3 (00000000:5D:00.0" in thermal.summary
    assert "72 C under load, 12 C above the node median 60 C (spread limit 5 C)" in \
        thermal.summary
    assert {results[i].status for i in IDS if i != "load_thermal"} == {"pass"}


def test_a_gpu_over_the_profile_s_temperature_limit_fails(tmp_path):
    thermal = _judge(_node(tmp_path, telemetry(hotter=dict.fromkeys(range(8), 30))))[
        "load_thermal"]
    assert thermal.status == "fail" and "reached 89 C under load (limit 85 C)" in \
        thermal.summary


def test_a_power_capped_gpu_is_named_with_its_limit_and_its_draw(tmp_path):
    results = _judge(_node(tmp_path, telemetry(limit={5: 400.0}, clock={5: 1290})))
    power = results["load_power"]
    assert (power.status, power.gpu.index) == ("fail", 5)
    assert "GPU 5 (00000000:AB:00.0" in power.summary
    assert "enforced power limit 400 W, profile 700 W" in power.summary
    assert "drew at most 400 W under load, below 0.75 x 700 W" in power.summary
    # SW power cap is the cap doing its job: not a slowdown; the clock it costs is
    assert results["load_throttle"].status == "pass"
    assert results["load_clocks"].status == "fail" and results["load_clocks"].gpu.index == 5


def test_hw_slowdown_under_load_is_named(tmp_path):
    results = _judge(_node(tmp_path, telemetry(slowdown={6: "hw_slowdown"}, clock={6: 990})))
    throttle = results["load_throttle"]
    assert (throttle.status, throttle.gpu.index) == ("fail", 6)
    assert "HW Slowdown active in 4 of 4 samples under load" in throttle.summary
    assert "SM clock 990 MHz under load, 50% below the node median 1980 MHz" in \
        results["load_clocks"].summary


def test_a_gpu_never_under_load_fails_every_check(tmp_path):
    text = telemetry()
    idle_gpu_2 = "\n".join(line.replace(", 100 %, ", ", 0 %, ") if ", 2, 1652" in line
                           else line for line in text.splitlines()) + "\n"
    results = _judge(_node(tmp_path, idle_gpu_2))
    for check_id in IDS:
        assert results[check_id].status == "fail", check_id
        assert "GPU 2 (" in results[check_id].summary and "never under load" in \
            results[check_id].summary


def test_a_value_nvidia_smi_could_not_read_fails_never_reads_as_zero(tmp_path):
    text = telemetry().replace("630.95 W", "[Unknown Error]")
    power = _judge(_node(tmp_path, text))["load_power"]
    assert power.status == "fail" and power.gpu.index == 1
    assert "nvidia-smi could not read power.draw: [Unknown Error]" in power.summary


def test_absent_telemetry_is_missing_and_a_failed_sampler_fails_with_its_words(tmp_path):
    node = _node(tmp_path, None)
    assert {r.status for r in _judge(node).values()} == {"missing"}
    (node / "gpu-telemetry.csv.error").write_text(
        "$ nvidia-smi --query-gpu=timestamp,index --format=csv -lms 1000\nexit status 15\n"
        "Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error\n")
    results = _judge(node)
    assert {r.status for r in results.values()} == {"fail"}
    assert results["load_power"].summary == (
        "nvidia-smi failed (exit status 15): Unable to determine the device handle for "
        "GPU0000:5D:00.0: Unknown Error")


def test_a_real_single_gpu_capture_judged_against_a_one_gpu_profile(tmp_path):
    data = dict(H100.data, name="h100-x1", gpu=dict(H100.data["gpu"], count=1))
    one = parse_profile(yaml.safe_dump(data), str(tmp_path / "h100-x1.yml"))
    node = one_gpu(_node(tmp_path, capture("query-gpu/h100-590.48.01-wide-csv-gpu-burn.txt")))
    # the capture is one sample under load: held to the builder's 30 s gpu-burn run, it is
    # a telemetry file cut short (issue 52)
    results = _judge(node, one)
    assert results["load_power"].status == "fail"
    assert "sampled under load for 0 s of a 30 s soak: the telemetry is cut short" in \
        results["load_power"].summary
    # judged as what it is, one sample with no soak length to hold it to: its figures pass
    results = _judge(replace(node, "gpu-burn.log", None), one)
    assert results["load_power"].status == "pass"
    assert results["load_throttle"].status == "pass"


def test_a_profile_without_under_load_figures_skips_with_the_reason(tmp_path):
    data = {k: v for k, v in H100.data.items() if k != "under_load"}
    bare = parse_profile(yaml.safe_dump(dict(data, name="bare")), str(tmp_path / "bare.yml"))
    results = _judge(healthy_h100(tmp_path / "node07"), bare)
    assert {r.status for r in results.values()} == {"skip"}
    assert results["load_power"].summary == "the profile sets no under_load figures"


def test_loaded_samples_whose_timestamps_cannot_be_read_count_no_time_under_load(tmp_path):
    """Issue 52: a sampler whose timestamps do not parse proves no time under load: 0 s of
    the soak, the telemetry cut short, never a pass."""
    text = "\n".join(line if line.startswith("timestamp") or " 0 %" in line
                     else "[N/A]" + line[line.index(","):]
                     for line in telemetry().splitlines()) + "\n"
    power = _judge(_node(tmp_path, text))["load_power"]
    assert power.status == "fail"
    assert "sampled under load for 0 s of a 30 s soak: the telemetry is cut short" in \
        power.summary, power.summary


def test_telemetry_under_load_for_half_the_soak_exactly_is_enough(tmp_path):
    """Issue 67's surviving mutant: a GPU must be sampled under load for at least half of
    gpu-burn's length. Two loaded samples a minute apart are 60 s under load: enough for a
    120 s soak, cut short for a 121 s one (fix-setup: the telemetry, not a GPU)."""
    node = replace(healthy_h100(tmp_path / "node07"), "gpu-telemetry.csv", telemetry(2))
    for seconds, status in ((120, "pass"), (121, "fail")):
        replace(node, "gpu-burn.log", gpu_burn_log([358000] * 8, seconds=seconds))
        result = _judge(node)["load_power"]
        assert result.status == status, (seconds, result.summary)
    assert result.action == "fix-setup"
    assert "sampled under load for 60 s of a 121 s soak: the telemetry is cut short" in \
        result.summary
