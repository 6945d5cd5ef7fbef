"""Evidence collection from one live node through testinfra's host API.

A `Collector` fills one node's evidence directory (docs/evidence.md) stage by stage: it runs each
command on the node with a hard timeout (coreutils `timeout` on the node, so a hung tool
is killed there), keeps stdout under the contract's file name when the command worked,
and logs every command (exit status, seconds, file) in meta.json. A tool that fails leaves
its file absent and what it printed in `<file>.error` (the command, exit status, output):
its checks fail with the tool's own message ("Unable to determine the device handle for
GPU…" after the soak is a GPU lost under load), never `pass`, never a silent skip. SSH
failing (exit 255, nothing printed) raises `Unreachable`.
"""

from __future__ import annotations

import base64
import json
import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from testinfra.host import Host

from gpuprov import __version__, evidence
from gpuprov.evidence import EvidenceKind
from gpuprov.files import write_atomic
from gpuprov.lock import Lock
from gpuprov.parsers.dcgm import DCGM_DIAG
from gpuprov.parsers.dcgm_health import DCGM_HEALTH
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fingerprint import FINGERPRINT
from gpuprov.parsers.gdrcopy import GDRCOPY_SANITY
from gpuprov.parsers.gpu_burn import GPU_BURN
from gpuprov.parsers.ibstat import BOARD_ID_COMMAND, IBSTAT_COMMAND
from gpuprov.parsers.kernel_log import KERNEL_LOG
from gpuprov.parsers.nccl_tests import NCCL_TESTS
from gpuprov.parsers.nvbandwidth import NVBANDWIDTH
from gpuprov.parsers.nvbandwidth import TESTS as NVBANDWIDTH_TESTS
from gpuprov.parsers.nvswitch_info import NVSWITCH_INFO_COMMAND
from gpuprov.parsers.probes import DDP_JSON, DDP_LOG, TORCH_ENV
from gpuprov.parsers.smi_gpu import SMI_BEFORE, GpuSnapshot
from gpuprov.parsers.system import LSPCI_COMMAND
from gpuprov.parsers.telemetry import SAMPLER, TELEMETRY
from gpuprov.parsers.versions import CUDNN
from gpuprov.profiles import Profile
from gpuprov.validation import soak_unit

# what a stage tells the progress view: an event (a sub-step: "after-soak"; the soak with
# its length and start) and its details
Step = Callable[..., None]

CUDNN_HEADERS = ("/usr/include/cudnn_version.h", "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
                 "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
                 "/usr/local/cuda/include/cudnn_version.h", "/usr/include/cudnn.h")
TORCH_RECORDS = "/var/lib/gpuprov/pytorch-envs"
SSH_FAILED = 255


class Unreachable(Exception):
    """The node did not answer over SSH."""


@dataclass(frozen=True)
class NodeSettings:
    """How one node is validated: its profile and lock, and where its tools are."""
    node: str
    profile: Profile
    lock: Lock | None
    run_id: str
    soak_seconds: int
    lsmod_command: str = "lsmod"
    kernel_release_command: str = "uname -r"
    modinfo_command: str = "modinfo"
    module_version_file: str = "/sys/module/nvidia/version"
    lspci_command: str = LSPCI_COMMAND
    lspci_vvv_command: str = "lspci -vvv"   # as root: the ACS capability needs it
    pci_devices_dir: str = "/sys/bus/pci/devices"   # where each function's iommu_group is
    cpu_sysfs_dir: str = "/sys/devices/system/cpu"  # the online CPUs and their cpufreq
    kernel_log: str = "dmesg"          # or a log file on the node (rsyslog's kern.log)
    taint_file: str = "/proc/sys/kernel/tainted"
    fabric_manager_log: str = "/var/log/fabricmanager.log"
    ibstat_command: str = IBSTAT_COMMAND
    # every RDMA port's counters (parsers/ib_counters.py). grep exits 2 where one file cannot
    # be read, as where none exists: the listing is read either way (a counter it lacks
    # fails ib_counters, an empty listing is unreadable evidence)
    ib_counters_command: str = "grep -sH . /sys/class/infiniband/*/ports/*/counters/* || true"
    # every RDMA adapter's PSID (parsers/ibstat.py BOARD_IDS); no adapter: an empty listing
    ib_board_id_command: str = BOARD_ID_COMMAND
    # the RDMA adapters that are NVLink5 bridges (parsers/nvlink5.py IB_BRIDGES); grep -l's
    # status 1 where none matches: an empty listing
    ib_bridges_command: str = "grep -ls SW_MNG /sys/class/infiniband/*/device/vpd || true"
    # every NVSwitch's firmware version (parsers/nvswitch_info.py); none: an empty listing
    nvswitch_info_command: str = NVSWITCH_INFO_COMMAND
    gpu_burn_dir: str = "/opt/gpu-burn"
    pytorch_env: str = "default"       # the pytorch_env role's smoke record to validate with
    nccl_tests_dir: str = "/opt/nccl-tests/build"
    nvbandwidth_command: str = "nvbandwidth"
    gdrcopy_sanity_command: str = "gdrcopy_sanity"
    dcgmi_command: str = "dcgmi"
    dcgm_level: int = 2
    ddp_timeout_s: int = 120
    telemetry_interval_ms: int = 1000   # the soak's sampling interval (gpu-telemetry.csv)
    soak_after_identity_failure: bool = False
    # the inventory has the roles install DCGM (gpuprov_dcgm_version) and nccl-tests
    # (nccl_tests_url): their absence on the node is then a failure, not a skip
    expects_dcgm: bool = False
    expects_nccl_tests: bool = False
    expects_nvbandwidth: bool = False   # the inventory sets nvbandwidth_url
    expects_gdrcopy: bool = False       # the lock sets gpuprov_gdrcopy_version
    # a recheck (validate --recheck): only these stages, for these held checks, and the
    # fabric left this long after boot to train before its checks are collected
    stages: tuple[str, ...] | None = None
    recheck_holds: tuple[str, ...] = ()
    settle_s: float = 0
    # evidence the inventory asks of this node beyond its profile's (EvidenceKind.when):
    # "imex" on a tray of a rack that runs an IMEX domain
    collects: frozenset[str] = frozenset()

    @classmethod
    def from_vars(cls, node: str, variables: dict, **fixed) -> NodeSettings:
        """Inventory variables `gpuprov_validate_<field>` override the defaults."""
        own = {name: variables[f"gpuprov_validate_{name}"]
               for name in ("lsmod_command", "kernel_release_command", "modinfo_command",
                            "module_version_file", "lspci_command", "kernel_log", "gpu_burn_dir",
                            "pytorch_env", "fabric_manager_log", "ibstat_command",
                            "nccl_tests_dir", "dcgmi_command", "taint_file",
                            "nvbandwidth_command", "ib_counters_command", "ib_board_id_command",
                            "ib_bridges_command",
                            "lspci_vvv_command", "pci_devices_dir", "cpu_sysfs_dir",
                            "gdrcopy_sanity_command", "nvswitch_info_command")
               if variables.get(f"gpuprov_validate_{name}")}
        expected = {"expects_dcgm": bool(variables.get("gpuprov_dcgm_version")),
                    "expects_nccl_tests": bool(variables.get("nccl_tests_url")),
                    "expects_nvbandwidth": bool(variables.get("nvbandwidth_url")),
                    "expects_gdrcopy": bool(variables.get("gpuprov_gdrcopy_version"))}
        if variables.get("gpuprov_validate_telemetry_interval_ms"):
            expected["telemetry_interval_ms"] = int(
                variables["gpuprov_validate_telemetry_interval_ms"])
        return cls(node=node, **{**expected, **fixed}, **{k: str(v) for k, v in own.items()})


@dataclass
class Collector:
    host: Host
    directory: Path
    settings: NodeSettings
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        s = self.settings
        self.workdir = f"/var/tmp/gpuprov-validate/{s.run_id}"
        self.meta = {"node": s.node, "profile": s.profile.name, "run_id": s.run_id,
                     "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                     "gpuprov_version": __version__,
                     "lock": s.lock.as_dict() if s.lock else None,
                     "soak_seconds": s.soak_seconds, "stages": {}, "skipped": {},
                     "commands": []}
        if s.stages is not None:    # what a recheck was for and what it ran
            self.meta["recheck"] = {"holds": list(s.recheck_holds), "stages": list(s.stages)}
        self.save_meta()

    # -- files -------------------------------------------------------------------------
    def write(self, name: str | EvidenceKind, text: str) -> None:
        """An evidence file, atomically; a failure record of it from before is dropped (a
        stage that wrote its own file after its command failed: DDP's no-result JSON)."""
        name = str(name)
        write_atomic(self.directory / name, text)
        if not name.endswith(".error"):
            (self.directory / evidence.error_file(name)).unlink(missing_ok=True)

    def save_meta(self) -> None:
        self.write(evidence.META.file, json.dumps(self.meta, indent=2, default=str) + "\n")

    # -- commands ----------------------------------------------------------------------
    def run(self, command: str, timeout: int = 60, file: str | EvidenceKind | None = None,
            label: str | None = None, logged: bool = True):
        """`command` under `timeout` on the node; its stdout kept as `file` if it worked.
        meta.json logs it as `label` when given (a probe upload, not its payload), and not
        at all unless `logged` (a long soak's polls)."""
        started = time.monotonic()
        result = self.host.run(f"timeout -k 5 {timeout} sh -c {shlex.quote(command)}")
        seconds = round(time.monotonic() - started, 2)
        if result.rc == SSH_FAILED and not result.stdout:
            raise Unreachable((result.stderr.strip().splitlines() or ["ssh failed"])[-1])
        kept = str(file) if file and result.rc == 0 else None
        if kept:
            self.write(kept, result.stdout)
        elif file:   # the tool's own complaint is the evidence: never a silent absence
            self.record_failure(file, label or command, result.rc,
                                result.stdout + result.stderr)
        if logged:
            self.meta["commands"].append({"command": label or command, "rc": result.rc,
                                          "seconds": seconds, "file": kept})
        return result

    def wrote(self, kind: EvidenceKind) -> None:
        """The last command's record names the file its output was kept as: a file the run
        wrote and the evidence lacks is lost evidence, never a tool not installed."""
        if self.meta["commands"]:
            self.meta["commands"][-1]["file"] = str(kind)

    def record_failure(self, file: str | EvidenceKind, command: str, status: int,
                       output: str) -> None:
        """Why `file` was not written: the command, its exit status and what it printed,
        as `<file>.error` (its checks then fail with the tool's words)."""
        self.write(evidence.error_file(file), evidence.error_record(command, status, output))

    def keep_output(self, kind: EvidenceKind, command: str, timeout: int = 600) -> None:
        """A benchmark's output as `kind`'s file whatever its exit status (one that finds a
        wrong result exits non-zero too); nothing printed at all is its failure record."""
        result = self.run(command, timeout)
        if result.stdout.strip():
            self.write(kind, result.stdout)
            self.wrote(kind)
        else:
            self.record_failure(kind, command, result.rc, result.stderr or "no output\n")

    def upload(self, name: str, text: str) -> str:
        """A probe script into the node's work directory (testinfra has no copy: base64)."""
        path = f"{self.workdir}/{name}"
        payload = base64.b64encode(text.encode()).decode()
        self.run(f"mkdir -p {self.workdir} && echo {payload} | base64 -d > {path}",
                 label=f"upload {path}")
        return path

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times a stage into meta.json, however it ends."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.meta["stages"][name] = round(time.monotonic() - started, 2)
            self.save_meta()

    def skip(self, stage: str, why: str) -> None:
        self.meta["skipped"][stage] = why
        self.save_meta()

    def collect(self, kind: EvidenceKind, timeout: int = 60):
        """Run `kind`'s command (its `{field}`s from the node's settings) into its file."""
        if kind.command is None:
            raise ValueError(f"{kind.file} has no single command: its stage collects it")
        return self.run(kind.command.format(**vars(self.settings)), timeout, file=kind)

    def finish(self) -> None:
        try:
            self.host.run(f"rm -rf {self.workdir}")
        finally:
            self.meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
            self.save_meta()


def probe_source(name: str) -> str:
    return resources.files("gpuprov.validation.probes").joinpath(f"{name}.py").read_text()


# -- stages ------------------------------------------------------------------------------

def identity(c: Collector) -> None:
    """Cheap identity and version evidence: packages, modules, PCI, units, toolkit, cuDNN,
    nvidia-smi -q -x (the before-soak GPU state), torch."""
    with c.stage("identity"):
        uptime = c.run("cat /proc/uptime")
        if uptime.rc == 0:
            c.meta["uptime_at_start_s"] = float(uptime.stdout.split()[0])
        for kind in evidence.collected("identity", c.settings.profile,
                                       asked=c.settings.collects):
            c.collect(kind)
        header = next((p for p in CUDNN_HEADERS if c.host.file(p).exists), None)
        if header:
            c.write(CUDNN, c.host.file(header).content_string)
            c.meta["cudnn_header"] = header
        python = torch_python(c)
        if python:
            probe = c.upload("torch_env.py", probe_source("torch_env"))
            c.run(f"{python} {probe}", timeout=120, file=TORCH_ENV)


def torch_python(c: Collector) -> str | None:
    """The interpreter of the environment the pytorch_env role recorded, if any."""
    record = c.host.file(f"{TORCH_RECORDS}/{c.settings.pytorch_env}.json")
    if not record.exists:
        c.skip("torch", f"no PyTorch environment {c.settings.pytorch_env!r} "
                        f"({record.path} absent)")
        return None
    try:
        env = json.loads(record.content_string)["env"]
    except (ValueError, KeyError):
        c.skip("torch", f"{record.path}: not a pytorch_env smoke record")
        return None
    c.meta["pytorch_env"] = env
    return f"{env}/bin/python"


def snapshot(c: Collector, after: bool) -> None:
    """Interconnect and health counters: before the soak (topology, links, NVLink errors,
    kernel log and taint) and after it (nvidia-smi -q -x and NVLink errors again, the kernel
    log and taint)."""
    with c.stage("after-soak" if after else "snapshot"):
        for kind in evidence.collected("soak" if after else "snapshot", c.settings.profile,
                                       after_soak=after, asked=c.settings.collects):
            c.collect(kind)
        if not after:
            arm_dcgm_health(c)
        kernel_log(c)


def kernel_log(c: Collector) -> None:
    """The kernel log with timestamps: dmesg, or the node's configured log file."""
    log = c.settings.kernel_log
    c.run("dmesg --time-format iso" if log == "dmesg" else f"cat {shlex.quote(log)}",
          file=KERNEL_LOG)


# the load gpu-burn puts on the GPUs, as the profile's gpu_burn.mode names it (wilicc/gpu-burn
# README: `-tc` tensor cores, `-d` doubles; plain FP32 leaves an H100 short of its power)
GPU_BURN_MODES = {"fp32": "", "tensor": "-tc ", "fp64": "-d "}


def soak(c: Collector, step: Step = lambda event, detail=None: None) -> None:
    """gpu-burn under the telemetry sampler, as a transient unit on the node
    (soak_unit.py): a burn-in this run would start that is already running there (its
    controller died) is adopted instead. `step` hears the soak's start and its progress."""
    s = c.settings
    mode = s.profile["gpu_burn"].get("mode", "fp32")
    c.meta["gpu_burn_mode"] = mode
    with c.stage("soak"):
        binary = f"{s.gpu_burn_dir}/gpu_burn"
        if not c.host.file(binary).exists:
            c.skip("soak", f"{binary} absent: gpu-burn is not installed")
            return
        wanted = soak_unit.Plan(s.run_id, s.soak_seconds, GPU_BURN_MODES[mode],
                                SAMPLER.format(interval_ms=s.telemetry_interval_ms))
        plan = soak_unit.find_adoptable(c.run, wanted)
        if plan is not None:
            c.meta["burn_in"] = {"adopted_from": plan.run_id, "unit": plan.unit,
                                 "supervisor": plan.supervisor}
        else:
            try:
                plan = soak_unit.start(c.run, wanted, s.gpu_burn_dir)
            except RuntimeError as exc:   # could not start it: never a silent pass
                c.record_failure(GPU_BURN, f"start burn-in {wanted.unit} …", 1, f"{exc}\n")
                return
            c.meta["burn_in"] = {"unit": plan.unit, "supervisor": plan.supervisor}
        c.save_meta()
        seconds = plan.seconds

        def report(elapsed: float) -> None:
            step("soak", {"seconds": seconds, "started": time.monotonic() - elapsed,
                          "adopted_from": c.meta["burn_in"].get("adopted_from")})
        report(soak_unit.elapsed(c.run, plan))
        state = soak_unit.wait(c.run, plan, report)
        collect_soak(c, plan, state)


def collect_soak(c: Collector, plan: soak_unit.Plan, state: str) -> None:
    """What the unit left on the node, as evidence; then its directory is removed. gpu-burn
    exits 0 even when a GPU is FAULTY: its log is the evidence, whatever its status."""
    d = plan.directory
    log = c.run(f"cat {d}/gpu-burn.log", label=f"cat {d}/gpu-burn.log")
    if state == "finished" and log.rc == 0:
        c.write(GPU_BURN, log.stdout)
    else:
        c.record_failure(GPU_BURN, f"./gpu_burn {plan.flags}{plan.seconds} (unit {plan.unit})",
                         -1, f"the burn-in unit ended without finishing ({state}: killed, "
                         f"timed out or the node rebooted)\n{log.stdout}")
    telemetry(c, plan.sampler, f"{d}/gpu-telemetry.csv", f"{d}/gpu-telemetry.status")
    c.run(f"rm -rf {d}")


def telemetry(c: Collector, sampler: str, samples: str, status: str) -> None:
    """The sampler's CSV as evidence; what it printed as its failure record when it ended
    before we stopped it (a GPU lost, a field this driver lacks) or printed nothing."""
    # through the collector: SSH failing here is Unreachable, never an empty sampler
    rc = c.run(f"cat {status}", logged=False).stdout.strip()
    text = c.run(f"cat {samples}", logged=False).stdout
    if rc in ("143", "0") and text.strip():
        c.write(TELEMETRY, text)
    else:
        c.record_failure(TELEMETRY, sampler, int(rc) if rc.lstrip("-").isdigit() else -1,
                         text or "no output\n")


# Where torch sees no CUDA GPU the probe runs on gloo between CPU processes: its ranks test
# the collective path and their agreement, not the GPUs (ddp_smoke judges a gloo run's
# ranks by its own world size), and two show that as well as eight. Each rank imports
# torch: eight of them cost a CPU-only node (and the lab) seconds a rank for nothing.
GLOO_RANKS = 2


def ddp_ranks(gpus_listed: int, torch_cuda_gpus: int | None) -> int:
    """One rank per GPU nvidia-smi listed (one without any); at most GLOO_RANKS where torch
    saw no CUDA GPU. Unknown (no readable torch record): one per GPU listed."""
    ranks = max(gpus_listed, 1)
    return min(ranks, GLOO_RANKS) if torch_cuda_gpus == 0 else ranks


def torch_cuda_gpus(before: evidence.Evidence) -> int | None:
    """How many CUDA GPUs the identity stage's torch probe saw; None where unknown."""
    try:
        env = before.read(TORCH_ENV)
    except ParseError:
        return None
    return env.get("device_count") if env else None


def ddp_smoke(c: Collector, ranks: int) -> None:
    """The DDP probe under torchrun with `ranks` ranks (ddp_ranks)."""
    with c.stage("ddp"):
        python = c.meta.get("pytorch_env") and f"{c.meta['pytorch_env']}/bin/python"
        if not python:
            c.skip("ddp", "no PyTorch environment to run the DDP probe in")
            return
        probe = c.upload("ddp_smoke.py", probe_source("ddp_smoke"))
        out = f"{c.workdir}/ddp-smoke.json"
        limit = c.settings.ddp_timeout_s
        started = time.monotonic()
        result = c.run(
            f"cd {c.workdir} && rm -f {out} && {python} -m torch.distributed.run --standalone "
            f"--nnodes=1 --nproc-per-node={ranks} --max-restarts=0 --tee=3 {probe} "
            f"--out {out} --timeout {max(limit // 2, 10)} 2>&1", timeout=limit)
        seconds = round(time.monotonic() - started, 1)
        c.write(DDP_LOG, result.stdout)
        written = c.run(f"cat {out}", file=DDP_JSON)
        if written.rc != 0:
            c.write(DDP_JSON, json.dumps(_no_result(result, ranks, limit, seconds),
                                                  indent=2) + "\n")


# the fingerprint probe's own limit for every GPU's process together, and the hard one on
# the node: a GPU's fingerprint takes seconds (docs/fingerprint.md)
FINGERPRINT_TIMEOUT_S = 150


def fingerprint(c: Collector, listed: list[GpuSnapshot]) -> None:
    """The numeric fingerprint of every GPU the before-soak nvidia-smi listed, in the node's
    PyTorch environment: one process per GPU, each seeing that GPU alone (its UUID)."""
    with c.stage("fingerprint"):
        python = c.meta.get("pytorch_env") and f"{c.meta['pytorch_env']}/bin/python"
        if not python:
            c.skip("fingerprint", "no PyTorch environment to run the fingerprint probe in")
            return
        gpus = [g for g in listed if g.uuid]
        if not gpus:
            c.skip("fingerprint", "nvidia-smi listed no GPU with a UUID before the soak")
            return
        probe = c.upload("fingerprint.py", probe_source("fingerprint"))
        listed = " ".join(f"--gpu {g.index}={shlex.quote(g.uuid)}" for g in gpus)
        c.run(f"cd {c.workdir} && {python} {probe} {listed} --timeout {FINGERPRINT_TIMEOUT_S}",
              timeout=FINGERPRINT_TIMEOUT_S + 30, file=FINGERPRINT)


def nccl_tests(c: Collector, gpus: int) -> None:
    """nccl-tests' all-reduce across the node's GPUs, where it is installed."""
    binary = f"{c.settings.nccl_tests_dir}/all_reduce_perf"
    with c.stage("nccl-tests"):
        if gpus >= 1 and c.settings.expects_nccl_tests and not c.host.file(binary).exists:
            c.record_failure(NCCL_TESTS, f"{binary} -b 8M -e 1G -f 2 -g {gpus}", 127,
                             f"{binary} absent, though the inventory sets nccl_tests_url "
                             "(role nccl_tests did not install it)\n")
            return
        if gpus < 1 or not c.host.file(binary).exists:
            c.skip("nccl-tests", f"{binary} absent" if gpus else "no GPU listed")
            return
        c.keep_output(NCCL_TESTS, f"{shlex.quote(binary)} -b 8M -e 1G -f 2 -g {gpus} 2>&1")


def nvbandwidth(c: Collector) -> None:
    """Host-to-device, device-to-host and GPU-to-GPU copy bandwidth, where nvbandwidth is
    installed."""
    tool = c.settings.nvbandwidth_command
    _tool_output(c, "nvbandwidth", NVBANDWIDTH, tool,
                 f"{shlex.quote(tool)} -t {' '.join(NVBANDWIDTH_TESTS)} 2>&1", "nvbandwidth",
                 "the inventory sets nvbandwidth_url (role nvbandwidth did not install it)"
                 if c.settings.expects_nvbandwidth else None)


def gdrcopy(c: Collector) -> None:
    """GDRCopy's functional tests (`gdrcopy_sanity`), where the lock has the gdrcopy role
    install it: its report with what it said on stderr (gdr_open's errors name a missing
    gdrdrv), kept whatever its exit status."""
    tool = c.settings.gdrcopy_sanity_command
    _tool_output(c, "gdrcopy", GDRCOPY_SANITY, tool, f"{shlex.quote(tool)} 2>&1", "GDRCopy",
                 "the lock sets gpuprov_gdrcopy_version (role gdrcopy did not install it)"
                 if c.settings.expects_gdrcopy else None, timeout=300)


def _tool_output(c: Collector, stage: str, kind: EvidenceKind, tool: str, command: str,
                 product: str, expected: str | None, timeout: int = 600) -> None:
    """`command`'s output as `kind` where `tool` is on the node. Absent, a finding where
    `expected` says why it should be there (a role the inventory has install it), else a
    skip."""
    with c.stage(stage):
        if c.run(f"command -v {shlex.quote(tool)}").rc != 0:
            if expected:
                c.record_failure(kind, command, 127, f"{tool} not found, though {expected}\n")
            else:
                c.skip(stage, f"{tool} not found: {product} is not installed")
            return
        c.keep_output(kind, command, timeout)


# `dcgmi diag` run lengths per level (NVIDIA's dcgmi-diag reference: r1 seconds, r2 about 2
# minutes, r3 about 15, r4 "extended, longer-running": hours), with room: the hard timeout
DCGM_TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 3 * 3600}


def arm_dcgm_health(c: Collector) -> None:
    """DCGM's background health watches on every system, set before the soak so that the
    check after the diagnostic covers the soak, DDP and the diagnostic (DCGM only)."""
    command = shlex.quote(c.settings.dcgmi_command)
    c.run(f"command -v {command} >/dev/null || exit 0; {command} health -s a 2>&1")


def dcgm(c: Collector) -> None:
    """NVIDIA's diagnostics at the asked level and the health watches' findings, where DCGM
    is installed. What dcgmi prints is kept whatever its exit status: a failing test exits
    non-zero, and a diagnostic that could not run is itself a finding, never a skip."""
    level, command = c.settings.dcgm_level, shlex.quote(c.settings.dcgmi_command)
    with c.stage("dcgm"):
        if c.run(f"command -v {command}").rc != 0:
            if c.settings.expects_dcgm:   # the lock installs DCGM: its absence is a finding
                for kind in (DCGM_DIAG, DCGM_HEALTH):
                    c.record_failure(kind, f"{c.settings.dcgmi_command} diag -r {level} -j",
                                     127, f"{c.settings.dcgmi_command} not found, though the "
                                     "lock sets gpuprov_dcgm_version (role dcgm did not "
                                     "install it)\n")
                return
            c.skip("dcgm", f"{c.settings.dcgmi_command} not found: DCGM is not installed")
            return
        c.meta["dcgm_level"] = level
        diag = c.run(f"{command} diag -r {level} -j 2>&1", timeout=DCGM_TIMEOUT_S[level])
        c.write(DCGM_DIAG, diag.stdout or f"no output (exit status {diag.rc})\n")
        c.wrote(DCGM_DIAG)
        health = c.run(f"{command} health -c -j 2>&1")
        c.write(DCGM_HEALTH, health.stdout or f"no output (exit status {health.rc})\n")
        c.wrote(DCGM_HEALTH)


def gpus_listed(before: evidence.Evidence) -> list[GpuSnapshot]:
    """The GPUs the before-soak nvidia-smi listed (the DDP run's ranks, the fingerprint's
    GPUs); none where it failed or is unreadable (judged as a failed check)."""
    try:
        smi = before.read(SMI_BEFORE)
    except ParseError:
        return []
    return smi.gpus if smi else []


def _no_result(result, ranks: int, limit: int, seconds: float) -> dict:
    """torchrun ended without the probe's JSON: why, from its exit and last error line."""
    if result.rc in (124, 137):
        why = (f"torchrun killed after the {limit}s hard timeout: a rank never joined or "
               "hung")
    else:
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line]
        last = (errors or lines or ["no output"])[-1].strip()
        why = f"torchrun exited {result.rc} after {seconds}s without a result: {last[:200]}"
    return {"ok": False, "world_size": ranks, "backend": "unknown", "error": why}
