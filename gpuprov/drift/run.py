"""Every host at once: the probe over SSH (the validator's hardened connection, host keys
checked), its state judged against the host's effective lock. Nothing on a host changes."""

from __future__ import annotations

from pathlib import Path

from gpuprov.drift import expected, probe
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory
from gpuprov.ledger import DriftReport
from gpuprov.lock import Lock
from gpuprov.remote import probing

# the roles' variables that say where a host keeps what the probe reads
ROLE_VARIABLES = ("nvidia_driver_module_version_file", "pytorch_env_smoke_dir",
                  "docker_source", "nvidia_driver_kernel_release_command",
                  "gpudirect_sys_module_dir", "gpuprov_validate_ibstat_command",
                  "gpuprov_validate_ib_board_id_command", "gpuprov_validate_lspci_command",
                  "gpuprov_validate_nvswitch_info_command")


def where_of(variables: dict) -> probe.Where:
    """Where the host keeps what the probe reads (its role variables, else a server's)."""
    return probe.Where(
        module_file=str(variables.get("nvidia_driver_module_version_file") or
                        probe.MODULE_FILE),
        smoke_dir=str(variables.get("pytorch_env_smoke_dir") or probe.SMOKE_DIR),
        ibstat_command=str(variables.get("gpuprov_validate_ibstat_command") or
                           probe.IBSTAT_COMMAND),
        board_id_command=str(variables.get("gpuprov_validate_ib_board_id_command") or
                             probe.BOARD_ID_COMMAND),
        lspci_command=str(variables.get("gpuprov_validate_lspci_command") or
                          probe.LSPCI_COMMAND),
        nvswitch_info_command=str(variables.get("gpuprov_validate_nvswitch_info_command") or
                                  probe.NVSWITCH_INFO_COMMAND))


def host_plans(inventory: Inventory, hosts: list[str]) -> dict[str, tuple[Lock, dict]]:
    """Each host's lock and variables; InputError, before any connection, on a host
    without a lock or with a broken one."""
    plans = {}
    for host in hosts:
        variables = inventory.variables(host, also=ROLE_VARIABLES)
        lock = Lock.of_inventory_host(variables, host, inventory.path)
        plans[host] = (lock, variables)
    return plans


def _check(host: str, lock: Lock, variables: dict, inventory: Path,
           control_dir: Path) -> DriftReport:
    try:
        script = probe.script(where_of(variables), lock.firmware_min)
        output = probing.run_script(host, inventory, control_dir, script, probe.MARK)
        state = probe.parse(output, f"host {host}")
    except (probing.ProbeFailed, InputError) as exc:
        return DriftReport(host, "unreachable", [str(exc)])
    found = expected.differences(state, lock, variables)
    return DriftReport(host, "drifted" if found else "in-sync",
                       [expected.as_record(d) for d in found])


def check_hosts(inventory: Inventory, hosts: list[str], parallel: int = 32
                ) -> list[DriftReport]:
    plans = host_plans(inventory, hosts)
    path = inventory.path.resolve()
    return probing.on_hosts(list(plans), lambda host, control: _check(
        host, *plans[host], path, control), parallel)
