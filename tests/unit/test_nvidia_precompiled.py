"""Canonical's prebuilt, signed modules (gpuprov_module_signing: canonical-precompiled): the
driver role's choice of each kernel's module package and its after-install check.

The dependency lines are Ubuntu's own, as apt quoted them for 5.15.0-106 on jammy
(Ubuntu forums, 2024): the open flavour bounds nvidia-kernel-common both ways, the
proprietary one from below only."""

import importlib.util

import yaml

from gpuprov import collection, packaging_facts
from tests.ansible_local import run_task_file

_spec = importlib.util.spec_from_file_location(
    "nvidia_driver_filters", collection.ROOT / "plugins" / "filter" / "nvidia_driver.py")
filters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filters)

OPEN = "linux-modules-nvidia-550-server-open-5.15.0-106-generic"
PROPRIETARY = "linux-modules-nvidia-550-server-5.15.0-106-generic"
SIGNER = "Canonical Ltd. Kernel Module Signing"


def _stanza(package, version, depends):
    return [f"Package: {package}", "Architecture: amd64", f"Version: {version}",
            "Priority: optional", "Section: restricted/kernel", "Source: linux-restricted-modules",
            f"Depends: {depends}", "Description: Linux kernel nvidia modules for version "
            "5.15.0-106", " This package pulls together the Linux kernel nvidia modules.", ""]


SHOW = (_stanza(OPEN, "5.15.0-106.116+1",
                "linux-image-5.15.0-106-generic | linux-image-unsigned-5.15.0-106-generic, "
                "nvidia-kernel-common-550-server (<= 550.54.15-1), "
                "nvidia-kernel-common-550-server (>= 550.54.15)")
        + _stanza(OPEN, "5.15.0-106.116+2",
                  "linux-image-5.15.0-106-generic | linux-image-unsigned-5.15.0-106-generic, "
                  "nvidia-kernel-common-550-server (<= 550.90.07-1), "
                  "nvidia-kernel-common-550-server (>= 550.90.07)")
        + _stanza(PROPRIETARY, "5.15.0-106.116+1",
                  "linux-image-5.15.0-106-generic | linux-image-unsigned-5.15.0-106-generic, "
                  "nvidia-kernel-common-550-server (>= 550.54.15)"))


def test_the_module_built_for_the_locked_driver_is_chosen_among_rebuilds():
    chosen = filters.precompiled_modules(SHOW, [OPEN], "550.54.15")
    assert chosen["specs"] == [f"{OPEN}=5.15.0-106.116+1"]
    assert chosen["missing"] == []
    assert filters.precompiled_modules(SHOW, [OPEN], "550.90.07")["specs"] == [
        f"{OPEN}=5.15.0-106.116+2"]


def test_a_kernel_without_a_module_for_the_driver_is_named_with_what_there_is():
    other_kernel = "linux-modules-nvidia-550-server-open-5.15.0-107-generic"
    chosen = filters.precompiled_modules(SHOW, [PROPRIETARY, other_kernel], "550.90.07")
    assert chosen["specs"] == []
    assert chosen["missing"] == [PROPRIETARY, other_kernel]
    assert chosen["why_missing"] == (f"{PROPRIETARY} carries modules for driver 550.54.15; "
                                     f"{other_kernel} is in no configured repository")


def test_every_installed_kernel_needs_the_locked_module_signed_by_the_kernels_key():
    lines = [f"module 5.15.0-106-generic 550.90.07|{SIGNER}",
             "module 5.15.0-107-generic |",
             f"module 5.15.0-105-generic 550.54.15|{SIGNER}",
             "module 5.15.0-104-generic 550.90.07|Example Site MOK",
             "module 5.15.0-103-generic 550.90.07|"]
    assert filters.precompiled_gaps(lines, "550.90.07", SIGNER) == {
        "5.15.0-107-generic": "has no nvidia module",
        "5.15.0-105-generic": "has nvidia 550.54.15, not 550.90.07",
        "5.15.0-104-generic": "has a module signed by 'Example Site MOK', not "
                              f"'{SIGNER}'",
        "5.15.0-103-generic": f"has a module signed by 'nobody', not '{SIGNER}'"}
    assert filters.precompiled_gaps(lines[:1], "550.90.07", SIGNER) == {}
    # newer kernels trust Canonical's 2025 key as well: a module it signed is no gap
    newer = ["module 6.8.0-90-generic 580.95.05|Canonical Ltd. Kernel Module Signing 2025 Kmod",
             "module 6.8.0-85-generic 580.95.05|Example Site MOK"]
    signers = packaging_facts.facts()["canonical_precompiled"]["module_signers"]
    assert filters.precompiled_gaps(newer, "580.95.05", signers) == {
        "6.8.0-85-generic": "has a module signed by 'Example Site MOK', not 'Canonical Ltd. "
                            "Kernel Module Signing' or 'Canonical Ltd. Kernel Module Signing "
                            "2025 Kmod'"}


def _after_install(tmp_path, modules: dict[str, str]):
    """The role's after-install check (tasks/precompiled.yml) on this machine, its modinfo
    a script answering for each kernel's module as `VERSION|SIGNER`, with the role's own
    read command (vars/main.yml)."""
    modinfo = tmp_path / "modinfo"
    cases = "".join(f'  {kernel}) v="{spec.split("|")[0]}"; s="{spec.split("|")[1]}";;\n'
                    for kernel, spec in modules.items())
    modinfo.write_text('#!/bin/sh\nk=$2; f=$4\ncase "$k" in\n' + cases
                       + '  *) exit 1;;\nesac\n[ -n "$v" ] || exit 1\n'
                       'if [ "$f" = version ]; then echo "$v"; else echo "$s"; fi\n')
    modinfo.chmod(0o755)
    role_vars = yaml.safe_load((collection.ROLES / "nvidia_driver" / "vars" / "main.yml")
                               .read_text())
    return run_task_file(tmp_path, collection.ROLES / "nvidia_driver" / "tasks" / "precompiled.yml",
                         {"nvidia_driver_version": "550.90.07",
                          "nvidia_driver_precompiled_signers": [SIGNER],
                          "nvidia_driver_modinfo_command": str(modinfo),
                          "nvidia_driver_kernels": {k: False for k in modules},
                          **{name: role_vars[name] for name in (
                              "nvidia_driver_module_read", "nvidia_driver_precompiled_read")}})


def test_the_after_install_check_passes_a_signed_module_per_kernel_and_names_the_rest(tmp_path):
    good = {kernel: f"550.90.07|{SIGNER}" for kernel in ("5.15.0-106-generic",
                                                          "5.15.0-107-generic")}
    passed = _after_install(tmp_path, good)
    assert passed.returncode == 0, passed.stdout
    failed = _after_install(tmp_path, {**good, "5.15.0-107-generic": "|",
                                       "5.15.0-108-generic": "550.90.07|Example Site MOK"})
    assert failed.returncode == 2, failed.stdout
    assert "kernel 5.15.0-107-generic has no nvidia module" in failed.stdout
    assert ("kernel 5.15.0-108-generic has a module signed by 'Example Site MOK', not "
            f"'{SIGNER}'") in failed.stdout
    assert "purge nvidia-dkms-*" in failed.stdout
    older = _after_install(tmp_path, {**good, "5.15.0-107-generic": f"550.54.15|{SIGNER}"})
    assert older.returncode == 2, older.stdout
    assert "kernel 5.15.0-107-generic has nvidia 550.54.15, not 550.90.07" in older.stdout
    assert "dpkg -l 'linux-modules-nvidia-*'" in older.stdout
