"""What a tool's failure calls for: a check whose evidence a tool failed to produce fails
(never a skip), and this decides its action from the tool's own words and exit status. A
GPU that nvidia-smi says is lost or faulty is the hardware's (reboot, then service); every
other failure is the node's setup."""

from __future__ import annotations

import re

from gpuprov.model import Action

# nvidia-smi's own signs that the hardware is at fault (so a reboot, then service): its exit
# statuses for external power cables not attached (8), a GPU interrupt issue (10), a
# corrupted infoROM (14) and a GPU fallen off the bus or otherwise inaccessible (15)
# (nvidia-smi(1) RETURN VALUE; NHC's csc_nvidia_smi.nhc maps the same codes), and
# its words for a lost GPU or one with no driver to answer for it (the real messages in
# tests/unit/checks/test_tool_failures.py). Every other tool failure is the node's setup: a
# tool absent (exit 127), broken, a driver/library mismatch after an upgrade.
HARDWARE_STATUSES = frozenset({8, 10, 14, 15})
HARDWARE_SIGNS = ("Unable to determine the device handle", "GPU is lost", "fallen off the bus",
                  "requires reset", "No devices were found",
                  "couldn't communicate with the NVIDIA driver")
_STATUS = re.compile(r"\(exit status (\d+)\)")


def tool_failure_action(failures: list[str]) -> Action:
    """A tool failure's action: reboot where nvidia-smi says the GPU is lost or faulty,
    else fix-setup."""
    for failure in failures:
        if not failure.startswith("nvidia-smi"):
            continue
        status = _STATUS.search(failure)
        if ((status and int(status.group(1)) in HARDWARE_STATUSES)
                or any(sign in failure for sign in HARDWARE_SIGNS)):
            return Action.REBOOT
    return Action.FIX_SETUP
