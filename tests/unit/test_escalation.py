"""The same fault on the same GPU after the recommended reset or reboot escalates to rma;
a different GPU, a different check, or a first occurrence does not."""

from gpuprov.escalation import escalate
from gpuprov.model import Action, CheckResult, GpuRef, NodeResult, Status, Verdict


def _result(run_id: str, action: Action, serial: str = "1654423001592",
            check_id: str = "kernel_log", verdict: Verdict | None = Verdict.REJECTED):
    check = CheckResult(check_id, Status.FAIL, "Xid 119 (GSP RPC Timeout) on GPU 4",
                        GpuRef(4, "00000000:9A:00.0", serial), {}, action)
    return NodeResult(run_id, "node07", Verdict.REJECTED, verdict, "h100-sxm-8", "", "/ev",
                      1.0, 2.0, [check], [])


def test_the_same_fault_on_the_same_gpu_after_a_reset_escalates_to_rma():
    now = escalate(_result("v2", Action.RESET_GPU, verdict=None),
                   [_result("v1", Action.RESET_GPU)])
    assert now.checks[0].action == "rma"
    assert now.checks[0].summary.endswith(
        "(the same fault on this GPU in run v1, after its reset-gpu: escalated to rma)")


def test_other_gpus_checks_and_first_occurrences_are_left_alone():
    first = _result("v2", Action.RESET_GPU, verdict=None)
    assert escalate(first, []) is first
    assert escalate(first, [_result("v1", Action.RESET_GPU, serial="1654423009999")]) is first
    assert escalate(first, [_result("v1", Action.RESET_GPU, check_id="ecc")]) is first
    assert escalate(first, [_result("v1", Action.RESTART_WORKLOAD)]) is first
    # an interrupted earlier run recommended nothing
    assert escalate(first, [_result("v1", Action.RESET_GPU, verdict=None)]) is first
