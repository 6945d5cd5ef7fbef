"""The soak's telemetry parser against real `nvidia-smi --query-gpu … --format=csv` captures."""

from __future__ import annotations

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.telemetry import FIELDS, REASONS, SAMPLER, parse_gpu_telemetry
from tests.evidence_builder import capture


def test_an_h100_under_gpu_burn_in_the_wide_capture():
    t = parse_gpu_telemetry(capture("query-gpu/h100-590.48.01-wide-csv-gpu-burn.txt"), "h100")
    (s,) = t.samples
    assert (s.index, s.bus_id, s.timestamp) == (0, "00000000:00:09.0", "2026/07/14 08:12:53.353")
    assert (s.utilization_pct, s.power_w, s.power_limit_w) == (100, 631.95, 700)
    assert (s.temp_c, s.memory_temp_c) == (59, 54)
    assert (s.sm_clock_mhz, s.max_sm_clock_mhz) == (1980, 1980)
    assert s.reasons == frozenset() and s.errors == ()
    assert s.serial == "0000000000000"   # the capture masks it; still a serial, not absent


def test_an_h200_under_gpu_burn():
    t = parse_gpu_telemetry(capture("query-gpu/h200-590.48.01-wide-csv-gpu-burn.txt"), "h200")
    (s,) = t.samples
    assert (s.power_w, s.power_limit_w, s.temp_c, s.memory_temp_c) == (627.40, 700, 52, 40)


def test_idle_reads_the_idle_reason_as_not_one_of_the_sampled_reasons():
    t = parse_gpu_telemetry(capture("query-gpu/h100-590.48.01-wide-csv-idle.txt"), "idle")
    (s,) = t.samples
    assert s.utilization_pct == 0 and s.power_w == 69.85 and s.reasons == frozenset()


def test_the_loop_form_one_header_then_a_row_per_gpu_per_interval():
    t = parse_gpu_telemetry(capture("query-gpu/gtx1650s-530.41.03-loop.txt"), "loop")
    assert [s.power_w for s in t.gpus()[0]] == [16.50, 16.52, 16.89, 16.28, 15.67]
    # the alias asked (clocks.sm) is printed under its full name
    assert [s.sm_clock_mhz for s in t.samples] == [660, 420, 720, 720, 480]
    # fields not asked for are absent, not errors
    assert t.samples[0].power_limit_w is None and t.samples[0].errors == ()


def _csv(*rows: str, header: str = "timestamp, index, power.draw [W], "
         "clocks_event_reasons.hw_slowdown") -> str:
    return "\n".join((header, *rows)) + "\n"


def test_active_reasons_and_older_drivers_names():
    t = parse_gpu_telemetry(_csv("t1, 0, 700.00 W, Active", "t1, 1, 690.00 W, Not Active"), "x")
    assert [s.reasons for s in t.samples] == [frozenset({"hw_slowdown"}), frozenset()]
    old = parse_gpu_telemetry(_csv("t1, 0, 700.00 W, Active", header="timestamp, index, "
                                   "power.draw [W], clocks_throttle_reasons.hw_slowdown"), "x")
    assert old.samples[0].reasons == frozenset({"hw_slowdown"})


def test_a_value_nvidia_smi_could_not_read_is_an_error_not_a_zero():
    t = parse_gpu_telemetry(_csv("t1, 3, [Unknown Error], Not Active"), "x")
    assert t.samples[0].power_w is None
    assert t.samples[0].errors == ("power.draw: [Unknown Error]",)


def test_the_last_line_cut_when_the_sampler_was_killed_is_dropped():
    t = parse_gpu_telemetry(_csv("t1, 0, 700.00 W, Not Active", "t2, 0, 70"), "x")
    assert len(t.samples) == 1
    with pytest.raises(ParseError, match="line 2: 3 values for 4 fields"):
        parse_gpu_telemetry(_csv("t1, 0, 70", "t2, 0, 700.00 W, Not Active"), "x")


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    # nvidia-smi's own words for a field this driver lacks (huggingface/candle#733)
    ('Field "compute_cap" is not a valid field to query.\n', "not nvidia-smi --query-gpu CSV"),
    ("timestamp, index, power.draw [W]\n", "header only"),
])
def test_what_is_not_telemetry_is_a_parse_error_naming_the_file(text, why):
    with pytest.raises(ParseError, match=why) as raised:
        parse_gpu_telemetry(text, "/ev/gpu-telemetry.csv")
    assert "/ev/gpu-telemetry.csv" in str(raised.value)


def test_the_sampler_asks_for_every_field_the_parser_reads():
    assert SAMPLER.startswith("nvidia-smi --query-gpu=" + ",".join(FIELDS))
    assert {f"clocks_event_reasons.{r}" for r in REASONS} <= set(FIELDS)


SAMPLED = "query-gpu/h200-580.159.04-sampler-tc-fp32-fp64.txt"


def _phase(samples, start: str, end: str):
    return [s for s in samples if start <= s.timestamp.split()[1][:8] <= end]


def test_the_soak_sampler_s_own_command_on_a_real_h200_through_three_loads():
    # the sampler's exact field list (plus ones the soak does not ask for) at -lms 500 on
    # driver 580: one header, then a row every ~500 ms, every field named as asked
    t = parse_gpu_telemetry(capture(SAMPLED), "h200")
    assert all(f in t.fields for f in FIELDS)
    assert len(t.samples) == 440 and {s.index for s in t.samples} == {0}
    assert {s.serial for s in t.samples} == {"1653724050015"}
    assert all(s.errors == () for s in t.samples)
    # phases from the capture's header: -tc, then FP32, then -d (doubles); busy samples only
    busy = {name: [s.power_w for s in _phase(t.samples, a, b) if s.utilization_pct == 100]
            for name, a, b in (("tc", "11:40:21", "11:41:41"), ("fp32", "11:41:46", "11:42:52"),
                               ("fp64", "11:42:57", "11:43:56"))}
    top = {name: max(watts) for name, watts in busy.items()}
    assert top == {"tc": 702.3, "fp32": 630.64, "fp64": 708.87}
    # FP32 stays near 90 % of the 700 W limit; tensor cores and doubles reach it
    assert top["fp32"] / 700 < 0.91 and min(top["tc"], top["fp64"]) / 700 > 1.0
    # at the limit the driver's software power cap engages: the reason the soak samples
    capped = [s for s in _phase(t.samples, "11:40:21", "11:41:41") if s.reasons]
    assert capped and all(s.reasons == frozenset({"sw_power_cap"}) for s in capped)
    assert max(s.temp_c for s in t.samples) == 64 and max(s.memory_temp_c
                                                          for s in t.samples) <= 64
    assert {s.power_limit_w for s in t.samples} == {700.0}
