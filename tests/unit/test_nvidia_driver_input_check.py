"""The driver role's input check (tasks/validate.yml) under ansible-playbook on a local
connection: every problem of the lock named in its one error, a good lock passing."""

from gpuprov import collection
from tests.ansible_local import run_task_file

TASKS = collection.ROLES / "nvidia_driver" / "tasks" / "validate.yml"
GOOD = {"nvidia_driver_version": "550.90.07", "nvidia_driver_fabricmanager_version": "550.90.07",
        "nvidia_driver_module_signing": "none", "nvidia_driver_mok_signing_key_file": "",
        "nvidia_driver_mok_certificate_file": "", "nvidia_driver_mok_enrollment_password_hash": "",
        # the role's vars/main.yml derives these
        "nvidia_driver_branch": "550", "nvidia_driver_precompiled": False}


def _run(tmp_path, **overrides):
    return run_task_file(tmp_path, TASKS, {**GOOD, **overrides})


def test_a_good_lock_passes(tmp_path):
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout


def test_every_problem_is_named_in_one_error(tmp_path):
    result = _run(tmp_path, nvidia_driver_version="550",
                  nvidia_driver_fabricmanager_version="550.90.07",
                  nvidia_driver_module_signing="site-mok",
                  nvidia_driver_mok_signing_key_file="key.pem")
    assert result.returncode != 0
    assert "nvidia_driver_version '550': expected an exact version, e.g. 535.161.08" \
        in result.stdout
    assert ("fabric manager 550.90.07 requested with driver 550: fabric manager must be exactly "
            "the driver's version") in result.stdout
    assert "site-mok needs gpuprov_mok_signing_key_file and gpuprov_mok_certificate_file" \
        in result.stdout


def test_site_mok_with_its_files_passes(tmp_path):
    result = _run(tmp_path, nvidia_driver_module_signing="site-mok",
                  nvidia_driver_mok_signing_key_file="/etc/gpuprov/mok.key",
                  nvidia_driver_mok_certificate_file="/etc/gpuprov/mok.der",
                  nvidia_driver_mok_enrollment_password_hash="$6$abc")
    assert result.returncode == 0, result.stdout


def test_canonical_precompiled_is_refused_from_r590(tmp_path):
    assert _run(tmp_path, nvidia_driver_precompiled=True).returncode == 0
    result = _run(tmp_path, nvidia_driver_precompiled=True, nvidia_driver_version="590.48.01",
                  nvidia_driver_fabricmanager_version="590.48.01", nvidia_driver_branch="590")
    assert result.returncode == 2, result.stdout
    assert ("gpuprov_module_signing: canonical-precompiled with driver 590.48.01: Canonical's "
            "packaging of branch 590 and later is not known to gpuprov yet") in result.stdout
