"""Roles refuse bad input on a real lab node, changing nothing there: a driver version the
repository does not carry (named, with what it does carry), a fabric manager at another
version than the driver (refused before even the repository is set up), a tampered
gpu-burn tarball (refused before anything is unpacked or built), a torch build the
driver cannot run."""

import os
import subprocess

import pytest

from gpuprov import collection
from tests.conftest import BIN, gpuprov

pytestmark = pytest.mark.lab

NODE = "node01"   # NVSwitch: fabric manager would be installed
STATE = ("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort; "
         "ls -l --time-style=+%s /etc/apt/sources.list.d /etc/apt/preferences.d "
         "/etc/apt/apt.conf.d; ls /run/reboot-required* 2>/dev/null; "
         "cat /run/gpuprov-lab/nvidia-module-version 2>/dev/null || true")

# packages, and every environment or smoke record (none may appear on a refusal)
PYTHON_STATE = ("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort; "
                "ls -A /opt /opt/pytorch-envs /var/lib/gpuprov 2>/dev/null || true")


def _converge(lab, tmp_path, role="nvidia_driver", node=NODE, **role_vars):
    playbook = tmp_path / "converge.yml"
    settings = "".join(f"        {k}: {v}\n" for k, v in role_vars.items())
    playbook.write_text(f"- hosts: {node}\n  gather_facts: true\n  roles:\n"
                        f"    - role: {collection.FQCN}.{role}\n      vars:\n{settings}")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collection.collections_path()),
           "NO_COLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "False"}
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(lab.inventory), str(playbook)],
                          capture_output=True, text=True, timeout=600, env=env, check=False)


@pytest.fixture
def bare_node(lab):
    """node01 reinstalled bare: no driver, no CUDA repository."""
    reset = gpuprov("lab", "reset", NODE)
    assert reset.returncode == 0, reset.stderr
    return lab


def test_version_absent_from_the_repository_is_named_and_nothing_installed(bare_node, tmp_path):
    before = bare_node.ssh(NODE, STATE).stdout
    result = _converge(bare_node, tmp_path, nvidia_driver_version="535.161.09")
    assert result.returncode == 2, result.stdout[-3000:]
    assert ("nvidia-headless-535 535.161.09 absent (the repositories have: 535.183.06-0ubuntu1, "
            "535.161.08-0ubuntu1)") in result.stdout
    assert "nvidia-fabricmanager-535 535.161.09 absent" in result.stdout
    after = bare_node.ssh(NODE, STATE).stdout
    # only the repository definition (and apt's lists) may have appeared; no package, pin or marker
    assert [line for line in after.splitlines() if line not in before.splitlines()
            and "cuda.sources" not in line] == []


def test_mismatched_fabric_manager_refused_before_anything_changes(bare_node, tmp_path):
    before = bare_node.ssh(NODE, STATE).stdout
    result = _converge(bare_node, tmp_path, nvidia_driver_version="535.161.08",
                       nvidia_driver_fabricmanager_version="535.183.06")
    assert result.returncode == 2
    assert ("fabric manager 535.183.06 requested with driver 535.161.08: fabric manager must be "
            "exactly the driver's version") in result.stdout
    assert bare_node.ssh(NODE, STATE).stdout == before


def test_tampered_gpu_burn_tarball_refused_naming_the_file(lab, tmp_path):
    """A copy of the mirror's tarball with one byte appended, under the mirror's sha256."""
    node = "node03"
    assert lab.ssh(node, "rm -rf /opt/gpu-burn /var/cache/gpuprov; cp /srv/gpuprov-mirror/files/"
                   "gpu-burn-2024.12.tar.gz /tmp/ && printf x >> /tmp/gpu-burn-2024.12.tar.gz"
                   ).returncode == 0
    sha256 = lab.ssh(node, "sha256sum /srv/gpuprov-mirror/files/gpu-burn-2024.12.tar.gz"
                     ).stdout.split()[0]
    result = _converge(lab, tmp_path, role="gpu_burn", node=node,
                       gpu_burn_url="file:///tmp/gpu-burn-2024.12.tar.gz",
                       gpu_burn_sha256=sha256, gpu_burn_compute='"9.0"')
    assert result.returncode == 2
    assert (f"file:///tmp/gpu-burn-2024.12.tar.gz: sha256 did not match {sha256}; it was"
            in result.stdout) and "nothing unpacked or built" in result.stdout
    # nothing kept, unpacked or built
    left = lab.ssh(node, "test ! -e /opt/gpu-burn && ls -A /var/cache/gpuprov")
    assert left.returncode == 0 and left.stdout == ""


def test_torch_build_the_driver_cannot_run_is_refused_naming_both(lab, tmp_path):
    before = lab.ssh("node02", PYTHON_STATE).stdout
    result = _converge(lab, tmp_path, role="pytorch_env", node="node02",
                       pytorch_env_torch_version="2.9.0", pytorch_env_cuda_build="cu130",
                       pytorch_env_driver_version="550.90.07")
    assert result.returncode == 2
    assert ("torch 2.9.0+cu130 needs an NVIDIA driver >= 580.65.06 (CUDA 13.x); the locked "
            "driver 550.90.07 cannot run it") in result.stdout
    assert lab.ssh("node02", PYTHON_STATE).stdout == before


def test_tampered_conda_installer_refused_naming_the_file(lab, tmp_path):
    """The mirror's installer with one byte appended, under the published sha256."""
    node, installer = "node03", "Miniforge3-25.3.0-3-Linux-x86_64.sh"
    assert lab.ssh(node, f"rm -rf /opt/miniforge3 /var/cache/gpuprov; cp /srv/gpuprov-mirror/"
                   f"files/{installer} /tmp/ && printf x >> /tmp/{installer}").returncode == 0
    sha256 = lab.ssh(node, f"sha256sum /srv/gpuprov-mirror/files/{installer}").stdout.split()[0]
    result = _converge(lab, tmp_path, role="pytorch_env", node=node,
                       pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cpu",
                       pytorch_env_driver_version="535.161.08",
                       pytorch_env_conda_installer_url=f"file:///tmp/{installer}",
                       pytorch_env_conda_installer_sha256=sha256,
                       pytorch_env_list="[{name: research, kind: conda}]")
    assert result.returncode == 2
    assert (f"file:///tmp/{installer}: sha256 did not match {sha256}; it was" in result.stdout
            and "nothing installed" in result.stdout), result.stdout[-3000:]
    left = lab.ssh(node, "test ! -e /opt/miniforge3 && test ! -e /opt/pytorch-envs/research "
                   "&& ls -A /var/cache/gpuprov")
    assert left.returncode == 0 and left.stdout == ""


def test_interpreter_other_than_the_locked_python_refused(lab, tmp_path):
    before = lab.ssh("node02", PYTHON_STATE).stdout
    result = _converge(lab, tmp_path, role="pytorch_env", node="node02",
                       pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cpu",
                       pytorch_env_driver_version="535.161.08", pytorch_env_python_version='"3.12"',
                       pytorch_env_list="[{name: train}]")
    assert result.returncode == 2
    assert "python3: Python 3.11; the lock says Python 3.12" in result.stdout
    assert lab.ssh("node02", PYTHON_STATE).stdout == before


def test_requirements_without_the_locked_torch_hashed_refused(lab, tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.12.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    before = lab.ssh("node02", PYTHON_STATE).stdout
    result = _converge(lab, tmp_path, role="pytorch_env", node="node02",
                       pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cpu",
                       pytorch_env_driver_version="535.161.08",
                       pytorch_env_list=f"[{{name: train, requirements: {requirements}}}]")
    assert result.returncode == 2
    assert (f"{requirements} (pytorch_env_list entry train): no line "
            "'torch==2.13.0 --hash=sha256:…'") in result.stdout
    assert lab.ssh("node02", PYTHON_STATE).stdout == before


@pytest.mark.parametrize("role,variable,value,expected", [
    ("docker", "docker_daemon_options", "5", "docker_daemon_options"),
    ("docker", "docker_source", "podman", "docker_source"),
    ("nvidia_container_toolkit", "nvidia_container_toolkit_cdi", "maybe",
     "nvidia_container_toolkit_cdi"),
])
def test_wrong_typed_variable_refused_by_the_argument_spec(lab, tmp_path, role, variable, value,
                                                           expected):
    """The role's meta/argument_specs.yml refuses the value before any task runs."""
    before = lab.ssh("node02", STATE).stdout
    result = _converge(lab, tmp_path, role=role, node="node02", **{variable: value})
    assert result.returncode == 2, result.stdout[-3000:]
    assert "Validation of arguments failed" in result.stdout and expected in result.stdout
    assert "changed=0" in result.stdout
    assert lab.ssh("node02", STATE).stdout == before


def test_a_node_prepared_by_cuda_keyring_converges_its_old_list_retired(bare_node, tmp_path):
    """Issue 37: cuda-keyring leaves /etc/apt/sources.list.d/cuda-<distro>-<arch>.list with
    the same URL under its own keyring; apt refuses two Signed-By values for one source
    ("Conflicting values set for option Signed-By", NVIDIA/cuda-repo-management#4). Here the
    keyring path is the role's own (the lab's keyring_src is installed where cuda-keyring
    puts its key), so apt would only warn ("Target Packages … is configured multiple
    times", issue 55): the role retires that file all the same (kept as .gpuprov.bak) and
    converges, `apt-get update` warns of nothing, and a second run changes nothing."""
    from gpuprov.lab.mirror import KEYRING_NAME
    from gpuprov.lab.paths import NODE_MIRROR_PATH
    prepared = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
    keyring = "/usr/share/keyrings/cuda-archive-keyring.gpg"
    line = f"deb [signed-by={keyring}] file://{NODE_MIRROR_PATH}/cuda/ /"
    setup = bare_node.ssh(NODE, f"cp {NODE_MIRROR_PATH}/keys/{KEYRING_NAME} {keyring} && "
                                f"echo '{line}' > {prepared} && apt-get update -qq")
    assert setup.returncode == 0, setup.stderr
    first = _converge(bare_node, tmp_path, role="cuda_repo")
    assert first.returncode == 0, first.stdout[-3000:]
    assert "Retire the other entries" in first.stdout and prepared in first.stdout
    state = bare_node.ssh(NODE, f"ls {prepared} {prepared}.gpuprov.bak; apt-get update 2>&1")
    assert f"{prepared}.gpuprov.bak" in state.stdout
    assert "No such file" in state.stdout + state.stderr            # the .list is gone
    assert "Conflicting values" not in state.stdout
    assert "configured multiple times" not in state.stdout and "W:" not in state.stdout, \
        state.stdout
    again = _converge(bare_node, tmp_path, role="cuda_repo")
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-2000:]


def test_a_node_with_nvidia_s_arch_toolkit_list_provisions_the_toolkit(bare_node, tmp_path):
    """Issue 55: NVIDIA's install guide lists the toolkit as `stable/deb/$(ARCH)`, which apt
    reads as this node's architecture (the lab's repository has NVIDIA's layout). The
    role finds that entry, retires it and installs the toolkit; apt-get update is then
    clean, and a second run changes nothing. Added again beside gpuprov's entry (apt then
    stops), another repository's role retires it (issue 66)."""
    from gpuprov.lab.mirror import KEYRING_NAME
    from gpuprov.lab.paths import NODE_MIRROR_PATH
    prepared = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
    keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    line = (f"deb [signed-by={keyring}] file://{NODE_MIRROR_PATH}/libnvidia-container/"
            "stable/deb/$(ARCH) /")
    setup = bare_node.ssh(NODE, f"cp {NODE_MIRROR_PATH}/keys/{KEYRING_NAME} {keyring} && "
                                f"echo '{line}' > {prepared} && apt-get update -qq")
    assert setup.returncode == 0, setup.stderr       # the list works as NVIDIA writes it
    settings = {"nvidia_container_toolkit_configure_docker": "false"}   # no Docker here
    first = _converge(bare_node, tmp_path, role="nvidia_container_toolkit", **settings)
    assert first.returncode == 0, first.stdout[-3000:]
    assert "Retire the other entries" in first.stdout and prepared in first.stdout
    state = bare_node.ssh(NODE, f"ls {prepared}.gpuprov.bak && apt-get update 2>&1 && "
                                "dpkg-query -W -f='${Version}' nvidia-container-toolkit")
    assert state.returncode == 0, state.stdout + state.stderr
    assert "Conflicting values" not in state.stdout and "W:" not in state.stdout, state.stdout
    again = _converge(bare_node, tmp_path, role="nvidia_container_toolkit", **settings)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-2000:]
    # Issue 66: the guide followed again after gpuprov's entry is in place stops apt; the
    # first role to configure any repository (here CUDA's) retires it before it needs apt
    broken = bare_node.ssh(NODE, f"echo '{line}' > {prepared}; apt-get update 2>&1")
    assert "E: Conflicting values set for option Signed-By" in broken.stdout, broken.stdout
    healed = _converge(bare_node, tmp_path, role="cuda_repo")
    assert healed.returncode == 0, healed.stdout[-3000:]
    assert "Retire the entries that conflict with gpuprov's" in healed.stdout
    state = bare_node.ssh(NODE, f"test ! -e {prepared} && apt-get update 2>&1")
    assert state.returncode == 0 and "E:" not in state.stdout, state.stdout + state.stderr


def test_a_driver_whose_module_fails_to_build_fails_the_host_with_dkms_s_error(bare_node,
                                                                              tmp_path):
    """Issue 37: real dkms exits 10 and dpkg fails the package with it; the lab's stand-in
    does too (fault dkms-build-fails), so the role fails the host with dkms's own words
    instead of reaching its DKMS assertion on a package apt reported installed."""
    assert gpuprov("lab", "fault", NODE, "dkms-build-fails").returncode == 0
    try:
        result = _converge(bare_node, tmp_path, nvidia_driver_version="535.161.08")
    finally:
        assert gpuprov("lab", "fault", NODE, "--clear").returncode == 0
        assert gpuprov("lab", "reset", NODE).returncode == 0
    assert result.returncode != 0, result.stdout[-3000:]
    assert "Bad return status for module build on kernel" in result.stdout
    assert "returned error exit status 10" in result.stdout
