"""Which action a tool's failure carries (issue 53): hardware only where nvidia-smi itself
says the GPU is lost or faulty, by its exit status or its words; every other tool's
failure, or nvidia-smi's setup errors, is the node's setup."""

from gpuprov.checks.tool_failures import tool_failure_action
from gpuprov.model import Action


def test_a_setup_failure_before_a_lost_gpu_does_not_hide_it():
    # the first failure is another tool's: the loop goes on to nvidia-smi's
    assert tool_failure_action([
        "dcgmi diag -r 2 (exit status 255): Unable to connect to host engine",
        "nvidia-smi -q -x (exit status 15): Unable to determine the device handle for GPU "
        "0000:9B:00.0: GPU is lost"]) == Action.REBOOT


def test_nvidia_smi_without_an_exit_status_or_a_hardware_word_is_setup():
    assert tool_failure_action(["nvidia-smi -q -x: command not found"]) == Action.FIX_SETUP
    assert tool_failure_action(["nvidia-smi -q -x (exit status 127): not found"]) \
        == Action.FIX_SETUP
    assert tool_failure_action(["nvidia-smi -q -x (exit status 9): NVIDIA-SMI has failed "
                                "because it couldn't communicate with the NVIDIA driver"]) \
        == Action.REBOOT
