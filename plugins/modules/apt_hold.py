#!/usr/bin/python
# Copyright: gpuprov contributors
# Apache-2.0
"""Hold packages with one dpkg run. The builtin dpkg_selections takes one package per module
run, and its loop (with the role that wrapped it) was the largest share of a no-op
provisioning run (bench/provision.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_hold
short_description: Hold installed packages in one run and report their versions
description:
  - Marks every listed package that is installed and not held yet as C(hold) with a single
    C(dpkg --set-selections), so no C(apt-get upgrade) moves it until a role installs another
    exact version (with C(allow_change_held_packages)).
  - Returns the installed version of each listed package, for the caller's assertions.
  - A listed package that is not installed is reported in RV(absent) and not held; under
    check mode that is what a package the caller would install looks like.
options:
  packages:
    description: Packages to hold.
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author: gpuprov contributors
"""

EXAMPLES = r"""
- name: Hold the toolkit so upgrades leave it alone
  gpuprov.gpu.apt_hold:
    packages: [cuda-toolkit-12-4]
  register: toolkit_hold

- name: Assert it is the locked version
  ansible.builtin.assert:
    that: toolkit_hold.versions['cuda-toolkit-12-4'] is match('12.4.1-')
"""

RETURN = r"""
versions:
  description: Installed version of each listed package that is installed.
  returned: always
  type: dict
  sample: {"cuda-toolkit-12-4": "12.4.1-1"}
held:
  description: Packages this run held (or would hold, under check mode).
  returned: always
  type: list
  elements: str
absent:
  description: Listed packages that are not installed, left unheld.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def installed(dpkg_lines: list[str]) -> tuple[dict, set]:
    """`PACKAGE VERSION STATUS` lines -> ({package: version} of the installed ones, the held
    ones). Status is dpkg's abbreviation: desired (`h` hold) then state (`i` installed)."""
    versions, held = {}, set()
    for line in dpkg_lines:
        parts = line.split()
        if len(parts) == 3 and parts[2][1:2] == "i":
            versions[parts[0]] = parts[1]
            if parts[2][0] == "h":
                held.add(parts[0])
    return versions, held


def main() -> None:
    module = AnsibleModule(
        argument_spec={"packages": {"type": "list", "elements": "str", "required": True}},
        supports_check_mode=True)
    packages = list(dict.fromkeys(module.params["packages"]))
    if not packages:
        module.exit_json(changed=False, versions={}, held=[], absent=[])
    # rc 1 only says some package is unknown to dpkg; it is listed in `absent`.
    rc, out, err = module.run_command(
        [module.get_bin_path("dpkg-query", required=True), "-W",
         "-f=${Package} ${Version} ${db:Status-Abbrev}\n", *packages])
    if rc not in (0, 1):
        module.fail_json(msg=f"dpkg-query failed: {err.strip()}", rc=rc)
    versions, held = installed(out.splitlines())
    to_hold = [p for p in packages if p in versions and p not in held]
    if to_hold and not module.check_mode:
        rc, _, err = module.run_command(
            [module.get_bin_path("dpkg", required=True), "--set-selections"],
            data="".join(f"{p} hold\n" for p in to_hold), binary_data=True)
        if rc != 0:
            module.fail_json(msg=f"dpkg --set-selections failed: {err.strip()}", rc=rc)
    module.exit_json(changed=bool(to_hold), versions=versions, held=to_hold,
                     absent=[p for p in packages if p not in versions])


if __name__ == "__main__":
    main()
