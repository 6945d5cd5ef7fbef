"""The roles agree with the packaging facts (gpuprov/data/packaging.yml) that the lab's
stand-ins are built from, so the lab cannot agree with a role by accident: each fact is
written once, with its source, and a role that names or expects something else fails
here (issue 37)."""

from __future__ import annotations

import re

import jinja2
import pytest
import yaml

from gpuprov import collection, packaging_facts
from gpuprov.lab.sim import kmod
from tests.ansible_local import render_role_vars

FACTS = packaging_facts.facts()
ROLES = collection.ROLES


def _defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def test_every_fact_names_its_source_and_whether_it_was_read_there():
    def sources(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("source", "sources"):
                    yield from (value.values() if key == "sources" else [value])
                else:
                    yield from sources(value)
    found = list(sources(FACTS))
    assert len(found) >= 8
    for source in found:
        assert set(source) <= {"verified", "unverified"} and len(source) == 1, source
        assert all(len(text) > 20 for text in source.values()), source


@pytest.mark.parametrize("branch", ["570", "580", "590", "595"])
def test_the_driver_role_names_packages_as_the_facts_say(branch):
    rendered = render_role_vars("nvidia_driver", {"nvidia_driver_version": f"{branch}.1.2"}, [
        "nvidia_driver_branch", "nvidia_driver_names_branch",
        "nvidia_driver_fabric_names_branch"])
    assert rendered["nvidia_driver_names_branch"] == packaging_facts.driver_names_branch(branch)
    assert (rendered["nvidia_driver_fabric_names_branch"]
            == packaging_facts.fabric_names_branch(branch))


@pytest.mark.parametrize("branch", ["570", "580", "590"])
def test_the_driver_role_names_imex_as_the_facts_say_and_the_imex_role_its_files(branch):
    rendered = render_role_vars("nvidia_driver", {"nvidia_driver_version": f"{branch}.1.2"}, [
        "nvidia_driver_branch", "nvidia_driver_fabric_names_branch"])
    packages = [jinja2.Template(name).render(rendered)
                for name in _defaults("nvidia_driver")["nvidia_driver_imex_packages"]]
    assert packages == [packaging_facts.imex_package(branch)]
    imex = _defaults("nvidia_imex")
    assert imex["nvidia_imex_unit"] == FACTS["imex"]["unit"]
    assert imex["nvidia_imex_nodes_config"] == FACTS["imex"]["nodes_config"]
    assert "nvidia-imex" in _defaults("nvidia_driver")["nvidia_driver_stop_before_replace"]


def test_the_persistence_drop_in_runs_the_packaged_command_with_persistence_mode_on():
    unit = FACTS["persistenced_unit"]["text"]
    packaged = re.search(r"^ExecStart=(.+)$", unit, re.M).group(1)
    assert "--no-persistence-mode" in packaged and "[Install]" not in unit
    drop_in = (ROLES / "nvidia_driver/templates/persistenced-override.conf.j2").read_text()
    assert re.findall(r"^ExecStart=(.*)$", drop_in, re.M) == [
        "", packaged.replace("--no-persistence-mode", "--persistence-mode")]
    assert "StopWhenUnneeded=false" in drop_in
    services = (ROLES / "nvidia_driver/tasks/services.yml").read_text()
    assert f"src: {FACTS['persistenced_unit']['path']}" in services


def test_dcgm_installs_the_plugins_its_cuda_package_only_recommends():
    rendered = render_role_vars("dcgm", {"dcgm_cuda_version": "13.1"}, ["dcgm_cuda_major"])
    role_vars = yaml.safe_load((ROLES / "dcgm/vars/main.yml").read_text())
    import jinja2
    packages = [jinja2.Template(p).render(rendered) for p in role_vars["dcgm_packages"]]
    assert f"{FACTS['dcgm']['plugins_package']}13" in packages
    assert FACTS["dcgm"]["proprietary_package"] in packages
    # what drift expects held is what the role installs
    from gpuprov.packages import dcgm_packages
    assert tuple(packages) == dcgm_packages("13")


def test_the_precompiled_signer_and_dkms_s_failure_are_the_facts():
    assert (_defaults("nvidia_driver")["nvidia_driver_precompiled_signers"]
            == FACTS["canonical_precompiled"]["module_signers"])
    # the lab's dkms (it runs on the node, apart from the package data) says the same
    assert FACTS["dkms"]["build_failed_status"] == kmod.BUILD_FAILED


def test_the_docker_role_installs_docker_s_packages_from_docker_s_component():
    """The docker-ce path installs exactly what Docker's repository publishes (the lab's
    stand-ins are built from the same list) from its `stable` component, and pins the two
    packages that carry the engine's own version."""
    docker = FACTS["docker_repository"]
    role_vars = yaml.safe_load((ROLES / "docker/vars/main.yml").read_text())
    assert role_vars["docker_packages_by_source"]["docker-ce"] == list(docker["packages"])
    assert set(role_vars["docker_versioned_packages"]) == {"docker-ce", "docker-ce-cli"}
    install = (ROLES / "docker/tasks/install.yml").read_text()
    assert f"apt_source_components: {docker['component']}" in install
    # the unit the role starts and restarts is the one docker-ce ships
    assert "docker.service" in docker["packages"]["docker-ce"]["units"]
    assert "name: docker\n" in (ROLES / "docker/tasks/main.yml").read_text()


def test_docker_s_units_run_the_packaged_binaries():
    docker = FACTS["docker_repository"]
    shipped = {path for spec in docker["packages"].values() for path in spec["files"]}
    for unit in ("docker.service", "containerd.service"):
        start = re.search(r"^ExecStart=(\S+)", docker["units"][unit], re.M).group(1)
        assert start in shipped, unit
    assert "SocketGroup=docker" in docker["units"]["docker.socket"]
    assert docker["packages"]["docker-ce"]["creates_group"] == "docker"


def test_the_kernel_cmdline_role_writes_where_grub_mkconfig_reads_and_runs_update_grub():
    grub, defaults = FACTS["grub"], _defaults("kernel_cmdline")
    assert defaults["kernel_cmdline_grub_dir"] == grub["drop_in_dir"]
    assert defaults["kernel_cmdline_update_command"] == grub["update_command"]
    assert defaults["kernel_cmdline_drop_in"].endswith(".cfg")    # only *.cfg is sourced


def test_the_gdrcopy_role_installs_starts_and_builds_against_what_the_facts_say():
    gdrcopy = FACTS["gdrcopy"]
    role_vars = yaml.safe_load((ROLES / "gdrcopy" / "vars" / "main.yml").read_text())
    assert role_vars["gdrcopy_packages"] == gdrcopy["packages"]        # in install order
    assert role_vars["gdrcopy_service"] == gdrcopy["service"]
    assert (role_vars["gdrcopy_module"], role_vars["gdrcopy_device"]) == (gdrcopy["module"],
                                                                        gdrcopy["device"])
    assert role_vars["gdrcopy_nvidia_source_globs"] == gdrcopy["nvidia_source_globs"]
    assert role_vars["gdrcopy_nvidia_source_file"] == gdrcopy["nvidia_source_file"]
    # the validator runs the packaged tool by name
    from gpuprov.validation.collect import NodeSettings
    assert gdrcopy["sanity_command"].rsplit("/", 1)[1] == NodeSettings.gdrcopy_sanity_command


@pytest.mark.parametrize("branch, nvsdm", [("570", "libnvsdm-570"), ("580", "libnvsdm"),
                                           ("590", "libnvsdm")])
def test_the_driver_role_s_nvlink5_stack_is_the_facts(branch, nvsdm):
    """NVLink5 (HGX B200): the packages, modules, first branch and libnvsdm's name the role
    uses are data/packaging.yml `nvlink5`'s (gpu-driver-container, nvrc), written once."""
    facts = FACTS["nvlink5"]
    defaults = _defaults("nvidia_driver")
    assert defaults["nvidia_driver_nvlink5_packages"] == facts["packages"]
    assert defaults["nvidia_driver_nvlink5_modules"] == facts["modules"]
    rendered = render_role_vars("nvidia_driver", {"nvidia_driver_version": f"{branch}.1.2"}, [
        "nvidia_driver_branch", "nvidia_driver_fabric_names_branch",
        "nvidia_driver_nvsdm_package"])
    role_vars = yaml.safe_load((ROLES / "nvidia_driver/vars/main.yml").read_text())
    assert role_vars["nvidia_driver_nvlink5_min_branch"] == facts["nvlsm_from_branch"]
    assert rendered["nvidia_driver_nvsdm_package"] == nvsdm
    unsuffixed = int(branch) >= facts["nvsdm_names_unsuffixed_from"]
    assert nvsdm == facts["nvsdm_package"] + ("" if unsuffixed else f"-{branch}")
