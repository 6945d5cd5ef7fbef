"""Verify (testinfra): every CPU at performance, Ubuntu's ondemand.service masked so a boot
cannot set it back, the boot unit enabled and its script finding nothing to change."""

from gpuprov.lab import cpufreq


def test_every_cpu_runs_performance(host):
    assert [host.file(f).content_string.strip() for f in cpufreq.governor_files()] == \
        ["performance"] * cpufreq.CPUS


def test_ondemand_service_is_masked_and_cannot_run_at_boot(host):
    assert host.run("systemctl is-enabled ondemand.service").stdout.strip() == "masked"
    assert host.run("systemctl start ondemand.service").rc != 0
    assert host.file(cpufreq.governor_files()[0]).content_string.strip() == "performance"


def test_the_boot_unit_runs_the_script_and_the_script_finds_nothing_to_change(host):
    assert host.service("gpuprov-cpu-governor.service").is_enabled
    check = host.run("/usr/local/sbin/gpuprov-cpu-governor --check")
    assert (check.rc, check.stdout) == (0, "")
