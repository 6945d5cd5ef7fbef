"""cpu_governor: every online CPU at the profile's governor, judged from the cpufreq listing;
a CPU on another governor, or without cpufreq beside CPUs with it, is named, never passed;
no cpufreq at all (the firmware's) warns."""

from __future__ import annotations

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Status
from gpuprov.parsers.cpufreq import cpu_list, parse_cpu_list, parse_cpufreq
from gpuprov.parsers.errors import ParseError
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, cpufreq_listing, healthy_h100, replace

H100 = load_profile("h100-sxm-8")
OWN_VM = "cpufreq/amd-epyc-vm-no-cpufreq-own.txt"


def _check(node):
    # as a validation judges: unreadable evidence fails the check instead of raising
    return judge(Evidence(node), H100, None, strict=False, only=("cpu_governor",)).checks[0]


def test_the_controller_s_real_listing_has_online_cpus_and_no_cpufreq():
    state = parse_cpufreq(capture(OWN_VM), OWN_VM)
    assert (state.online, state.governors, state.drivers) == ([0, 1], {}, {})


def test_a_real_h100_guest_without_cpufreq_warns_naming_its_sixteen_cpus(tmp_path):
    listing = capture("cpufreq/h100-firecracker-vm-no-cpufreq-own.txt")
    assert parse_cpufreq(listing, "x").online == list(range(16))
    result = _check(replace(healthy_h100(tmp_path), "cpufreq.txt", listing))
    assert result.status == Status.WARN and result.summary.startswith("CPUs 0-15: no cpufreq")


def test_a_real_machine_without_cpufreq_warns_the_firmware_owns_its_frequency(tmp_path):
    """Issue 55: servers whose firmware owns the P-states, and VMs, have no policy at all:
    nothing for the OS to set, so a warning naming the BIOS profile, not a rejection."""
    result = _check(replace(healthy_h100(tmp_path), "cpufreq.txt", capture(OWN_VM)))
    assert result.status == Status.WARN and str(result.action) == "none"
    assert result.summary == ("CPUs 0-1: no cpufreq policy: frequency under firmware control "
                              "(or no cpufreq driver loaded): check the BIOS power profile")


def test_one_cpu_without_a_policy_among_others_with_one_fails(tmp_path):
    """A policy on some CPUs and none on another is no firmware profile: it fails."""
    listing = capture(OWN_VM) + (
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor:performance\n"
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver:intel_pstate\n")
    result = _check(replace(healthy_h100(tmp_path), "cpufreq.txt", listing))
    assert result.status == Status.FAIL
    assert result.summary.startswith("CPU 1: no cpufreq policy (the firmware controls "
                                     "their frequency, or no cpufreq driver is loaded), not "
                                     "performance"), result.summary


def test_every_cpu_at_performance_passes(tmp_path):
    result = _check(healthy_h100(tmp_path))
    assert result.status == Status.PASS, result.summary
    assert result.summary == "8 CPU(s) at governor performance (intel_pstate)"


def test_ubuntu_s_ondemand_on_acpi_cpufreq_fails_naming_the_cpus_and_the_fix(tmp_path):
    listing = cpufreq_listing({"ondemand": range(6), "performance": range(6, 8)},
                              driver="acpi-cpufreq")
    result = _check(replace(healthy_h100(tmp_path), "cpufreq.txt", listing))
    assert result.status == Status.FAIL
    assert result.summary.startswith("CPUs 0-5: governor ondemand, not performance: "
                                     "provision role cpu_governor"), result.summary
    assert result.values["governors"] == {"ondemand": "0-5", "performance": "6-7"}


def test_a_cpu_missing_from_the_policies_fails_with_the_others_fine(tmp_path):
    listing = cpufreq_listing({"performance": [0, 1, 2, 3, 5, 6, 7]})
    result = _check(replace(healthy_h100(tmp_path), "cpufreq.txt", listing))
    assert result.status == Status.FAIL and result.summary.startswith("CPU 4: no cpufreq")


@pytest.mark.parametrize("text, why", [
    ("", "no online CPU list"),
    ("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor:performance\n",
     "no online CPU list"),
    ("/sys/devices/system/cpu/online:0-1\ngrep: /sys/x: Permission denied\n", "line 2"),
])
def test_an_unreadable_listing_is_a_parse_error(text, why):
    with pytest.raises(ParseError, match=why):
        parse_cpufreq(text, "cpufreq.txt")


def test_an_empty_or_absent_listing_never_passes(tmp_path):
    assert _check(replace(healthy_h100(tmp_path), "cpufreq.txt", "")).status == Status.FAIL
    absent = _check(replace(healthy_h100(tmp_path / "b"), "cpufreq.txt", None))
    assert absent.status == Status.MISSING


def test_the_kernel_s_cpu_list_form_reads_and_writes_back():
    assert parse_cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpu_list([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"


def test_a_profile_without_cpu_governor_skips_it(tmp_path):
    bare = load_profile("h100-sxm-8")
    bare.data.pop("cpu_governor")
    [result] = judge(Evidence(healthy_h100(tmp_path)), bare, None,
                     only=("cpu_governor",)).checks
    assert result.status == Status.SKIP and "sets no cpu_governor" in result.summary
