"""The same fault on the same GPU after the recommended reset or reboot escalates to rma;
a different GPU, a different check, or a first occurrence does not. A repeat offender's
hardware actions escalate to rma; its configuration faults do not, nor does a rejection
counted before a recorded repair."""

from dataclasses import replace

from gpuprov.escalation import escalate, escalate_offender
from gpuprov.hardware_history import offenders
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


def _kernel(run_id: str, events: list[dict], verdict: Verdict | None = Verdict.REJECTED):
    """A kernel_log failure naming several GPUs (so the check itself names none)."""
    check = CheckResult("kernel_log", Status.FAIL, "fallen off the bus on GPU 0000:9a:00.0",
                        None, {"events": events}, Action.REBOOT)
    return NodeResult(run_id, "node07", Verdict.REJECTED, verdict, "h100-sxm-8", "", "/ev",
                      1.0, 2.0, [check], [])


FELL = {"kind": "fallen-off-bus", "code": None, "pci": "0000:9a:00.0", "action": "reboot",
        "phase": "during", "cleared_by_reset": False, "time": None, "uptime_s": 812.5}
XID = {"kind": "xid", "code": 79, "pci": "0000:1b:00.0", "action": "reboot",
       "phase": "during", "cleared_by_reset": False, "time": None, "uptime_s": 90.25}


def test_a_kernel_fault_after_the_recommended_reboot_escalates_from_the_ledger_alone():
    """Issue 36: the current boot's dmesg holds only this boot; the ledger holds the last
    run's events, so the same event on the same device after the reboot needs service."""
    after_reboot = {**FELL, "uptime_s": 301.0}          # the new boot's line
    now = escalate(_kernel("v2", [after_reboot, XID], verdict=None), [_kernel("v1", [FELL])])
    assert now.checks[0].action == "rma"
    assert now.checks[0].summary.endswith("(the same fault, fallen-off-bus on 0000:9a:00.0, "
                                          "in run v1, after its reboot: escalated to rma)")


def test_another_device_or_event_or_the_same_line_read_again_is_no_recurrence():
    now = _kernel("v2", [XID], verdict=None)
    assert escalate(now, [_kernel("v1", [FELL])]) is now
    assert escalate(now, [_kernel("v1", [{**XID, "code": 48}])]) is now
    assert escalate(now, [_kernel("v1", [{**XID, "cleared_by_reset": True}])]) is now
    # validated again without the reboot: the same line of the same boot, not a recurrence
    assert escalate(now, [_kernel("v1", [XID])]) is now


DAY = 86400.0


def _rejection(run_id: str, at: float, action: Action, serial: str = "1654423001592",
               verdict: Verdict | None = Verdict.REJECTED) -> NodeResult:
    return replace(_result(run_id, action, serial=serial, verdict=verdict), judged_at=at)


def test_the_third_rejection_in_the_window_escalates_hardware_actions_to_rma():
    history = [_rejection("v1", DAY, Action.REBOOT), _rejection("v2", 2 * DAY, Action.REBOOT)]
    third = replace(_rejection("v3", 3 * DAY, Action.REBOOT, verdict=None),
                    checks=[*_rejection("v3", 0, Action.REBOOT).checks,
                            CheckResult("driver_version", Status.FAIL, "580.95.05 != lock",
                                        None, {}, Action.NONE)])
    now = escalate_offender(third, history, 3, 30 * DAY)
    assert [c.action for c in now.checks] == ["rma", "none"]   # config stays config
    assert now.checks[0].summary.endswith("(node07 GPU 1654423001592 rejected 3 times in 30 "
                                          "day(s): a repeat offender, escalated to rma)")
    # the second: not yet; a window that leaves the first out: not yet
    assert escalate_offender(history[1], history[:1], 3, 30 * DAY) == history[1]
    assert escalate_offender(third, history, 3, 1.5 * DAY) == third
    # a repair recorded after v2: the count starts afresh
    assert escalate_offender(third, history, 3, 30 * DAY, repaired_at=2.5 * DAY) == third


def test_a_node_rejected_three_times_on_different_gpus_escalates_as_a_node():
    history = [_rejection("v1", DAY, Action.RESET_GPU, serial="A"),
               _rejection("v2", 2 * DAY, Action.RESET_GPU, serial="B")]
    third = _rejection("v3", 3 * DAY, Action.RESEAT_OR_INSPECT, serial="C", verdict=None)
    now = escalate_offender(third, history, 3, 30 * DAY)
    assert now.checks[0].action == "rma"
    assert "(node07 rejected 3 times in 30 day(s): a repeat offender" in now.checks[0].summary


def test_escalation_never_steps_down():
    """Issue 52: the third occurrence of a reset-class fault on one GPU stays rma (the
    second's escalation is the last run's action, not a step back to reset-gpu)."""
    first = _result("v1", Action.RESET_GPU)
    second = escalate(_result("v2", Action.RESET_GPU), [first])
    assert second.checks[0].action == "rma"
    third = escalate(_result("v3", Action.RESET_GPU, verdict=None), [first, second])
    assert third.checks[0].action == "rma"
    assert third.checks[0].summary.endswith(
        "(the same fault on this GPU in run v2, already escalated to rma)")


def test_rejections_for_the_setup_are_no_offence():
    """Issue 53: a node rejected three times in minutes for its setup (a tool absent:
    fix-setup; a configuration: none) is no repeat offender; its third rejection keeps its
    actions, and a hardware rejection beside two setup ones is a first offence."""
    setup = [_rejection(f"v{i}", i * 60.0, Action.FIX_SETUP) for i in (1, 2)]
    third = _rejection("v3", 180.0, Action.FIX_SETUP, verdict=None)
    assert escalate_offender(third, setup, 3, 30 * DAY) == third
    config = [_rejection(f"v{i}", i * 60.0, Action.NONE) for i in (1, 2)]
    assert escalate_offender(third, config, 3, 30 * DAY) == third
    hardware = _rejection("v3", 180.0, Action.RESEAT_OR_INSPECT, verdict=None)
    assert escalate_offender(hardware, setup, 3, 30 * DAY) == hardware
    # three hardware rejections still make an offender
    found = offenders([_rejection(f"v{i}", i * 60.0, Action.REBOOT) for i in (1, 2, 3)], 3,
                      30 * DAY, 200.0)
    assert [o.name for o in found] == ["node07", "node07 GPU 1654423001592"]
    assert offenders([*setup, replace(third, verdict=Verdict.REJECTED)], 3, 30 * DAY,
                     200.0) == []


def test_only_kernel_log_s_own_device_events_that_no_reset_cleared_are_faults():
    """Issue 52 (mutation survivors): which events the ledger keeps for recurrence."""
    after_reboot = {**FELL, "uptime_s": 301.0}
    now = _kernel("v2", [after_reboot], verdict=None)
    # another check carrying the same events is no kernel fault
    other = replace(_kernel("v1", [FELL]), checks=[replace(_kernel("v1", [FELL]).checks[0],
                                                            id="ecc")])
    assert escalate(now, [other]) is now
    # an event that names no device, or that a GPU reset cleared now, is no recurrence
    unplaced = _kernel("v2", [{**after_reboot, "pci": None}], verdict=None)
    assert escalate(unplaced, [_kernel("v1", [{**FELL, "pci": None}])]) is unplaced
    cleared = _kernel("v2", [{**after_reboot, "cleared_by_reset": True}], verdict=None)
    assert escalate(cleared, [_kernel("v1", [FELL])]) is cleared


def test_a_fault_is_its_kind_code_and_device_and_its_lines_by_time_and_uptime():
    # another code on the same device, on another line: not the same fault
    now = _kernel("v2", [XID], verdict=None)
    assert escalate(now, [_kernel("v1", [{**XID, "code": 48, "uptime_s": 500.0}])]) is now
    # the same uptime stamp in another boot (its wall time differs): a new line, so a recurrence
    stamped = {**FELL, "time": "2026-11-21T10:00:00"}
    again = _kernel("v2", [{**stamped, "time": "2026-11-22T10:00:00"}], verdict=None)
    assert escalate(again, [_kernel("v1", [stamped])]).checks[0].action == "rma"


def test_gpus_known_only_by_index_are_each_their_own_gpu():
    """Without a serial or a bus id (nvidia-smi could not say), a GPU is its index: GPU 5's
    fault after GPU 4's is a first occurrence, not the same fault again."""
    def on(run_id: str, index: int, verdict: Verdict | None) -> NodeResult:
        check = CheckResult("ecc", Status.FAIL, f"uncorrectable ECC on GPU {index}",
                            GpuRef(index, None, None), {}, Action.RESET_GPU)
        return NodeResult(run_id, "node07", Verdict.REJECTED, verdict, "h100-sxm-8", "",
                          "/ev", 1.0, 2.0, [check], [])
    first = on("v2", 5, None)
    assert escalate(first, [on("v1", 4, Verdict.REJECTED)]) is first
    assert escalate(first, [on("v1", 5, Verdict.REJECTED)]).checks[0].action == "rma"


def test_a_recurring_xid_is_named_with_its_code():
    after_reboot = {**XID, "uptime_s": 31.0}
    now = escalate(_kernel("v2", [after_reboot], verdict=None), [_kernel("v1", [XID])])
    assert "(the same fault, xid 79 on 0000:1b:00.0, in run v1," in now.checks[0].summary
