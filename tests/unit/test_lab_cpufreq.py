"""The lab's CPUs: the cpufreq kind's own command over the simulated sysfs parses as a real
listing, and the stand-in of Ubuntu's set-cpufreq sets what Ubuntu's sets."""

from __future__ import annotations

import subprocess

from gpuprov.lab import cpufreq
from gpuprov.parsers.cpufreq import CPUFREQ, parse_cpufreq


def _tree(tmp_path, driver: str = cpufreq.DRIVER):
    """The lab's CPU files under tmp_path, the scripts pointed there; (cpu dir, set-cpufreq)."""
    root = tmp_path / "root"
    for path, data, _ in cpufreq.files():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = data.decode().replace(cpufreq.CPU_DIR, str(root / cpufreq.CPU_DIR.lstrip("/")))
        if path.endswith("scaling_driver"):
            text = f"{driver}\n"
        target.write_text(text)
    script = root / f"usr{cpufreq.SET_CPUFREQ}"
    script.chmod(0o755)
    return root / cpufreq.CPU_DIR.lstrip("/"), script


def _listing(cpu_dir) -> str:
    command = CPUFREQ.command.format(cpu_sysfs_dir=cpu_dir)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          check=True).stdout


def test_the_kind_s_command_over_the_lab_cpus_parses_every_cpu(tmp_path):
    cpu_dir, _ = _tree(tmp_path)
    state = parse_cpufreq(_listing(cpu_dir), "lab")
    assert state.online == list(range(cpufreq.CPUS))
    assert set(state.governors.values()) == {cpufreq.BOOT_GOVERNOR}
    assert set(state.drivers.values()) == {"acpi-cpufreq"}


def test_ubuntu_s_set_cpufreq_sets_ondemand_on_acpi_cpufreq_and_keeps_intel_pstate(tmp_path):
    cpu_dir, script = _tree(tmp_path)
    said = subprocess.run([str(script)], capture_output=True, text=True, check=True)
    assert said.stdout == "Setting ondemand scheduler for all CPUs\n"
    assert set(parse_cpufreq(_listing(cpu_dir), "lab").governors.values()) == {"ondemand"}
    intel_dir, intel_script = _tree(tmp_path / "intel", driver="intel_pstate")
    said = subprocess.run([str(intel_script)], capture_output=True, text=True, check=True)
    assert said.stdout == 'CPU supports intel_pstate, keeping "performance"\n'
    assert set(parse_cpufreq(_listing(intel_dir), "lab").governors.values()) == {"performance"}
