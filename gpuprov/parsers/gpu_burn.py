"""gpu-burn logs, including the ways gpu-burn reports success when it should not.

gpu-burn exits 0 when GPUs are FAULTY, prints `OK` after `Couldn't init a GPU test`,
overflows error counts into negative numbers and can finish with no progress line at
all (wilicc/gpu-burn issues #12, #14 and #124). The parser keeps all of that visible;
the evaluator decides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, REAL_TOOL, EvidenceKind, Members

_PROGRESS = re.compile(r"^\s*(?P<pct>\d+(?:\.\d+)?)%\s+proc'd:(?P<procd>.*?)errors:"
                       r"(?P<errors>.*?)(?:temps:(?P<temps>.*))?$")
_PROCD = re.compile(r"(?P<ops>-?\d+) \((?P<gflops>-?\d+(?:\.\d+)?) Gflop/s\)")
_ERROR = re.compile(r"(?P<count>-?\d+)\s*(?P<mark>\(WARNING!\)|\(DIED!\))?")
_TEMP = re.compile(r"(\d+) C|--")
_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$")
_VERDICT = re.compile(r"^\s*GPU (?P<index>\d+): (?P<verdict>OK|FAULTY)\s*$")
_TESTED = re.compile(r"^\s*Tested (?P<count>\d+) GPUs:")
_BURNING = re.compile(r"Burning for (?P<seconds>\d+) seconds")


@dataclass
class BurnGpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    ops: int | None = None
    gflops: float | None = None
    errors: int = 0  # sum of |errors| over reporting intervals (counts reset each summary)
    warning: bool = False
    died: bool = False
    max_temp_c: int | None = None
    verdict: str | None = None  # OK / FAULTY from the final list


@dataclass
class GpuBurnRun:
    seconds: int | None
    gpus: dict[int, BurnGpu]
    progress_lines: int
    init_failures: list[str] = field(default_factory=list)
    tested_count: int | None = None
    aborted: bool = False

    @property
    def finished(self) -> bool:
        return self.tested_count is not None


def _split_entries(section: str) -> list[str]:
    """'0 - -524288000  (WARNING!)- 0' -> ['0', '-524288000  (WARNING!)', '0']."""
    return [e.strip() for e in re.split(r"(?:(?<=\s)|(?<=\)))- ", section) if e.strip()]


def parse_gpu_burn(text: str, source: str) -> GpuBurnRun:
    lines = re.split(r"\r\n|\r|\n", text)
    run = GpuBurnRun(seconds=None, gpus={}, progress_lines=0)

    def gpu(index: int) -> BurnGpu:
        return run.gpus.setdefault(index, BurnGpu(index))

    interval_errors: dict[int, int] = {}
    for line in lines:
        if m := _BURNING.search(line):
            run.seconds = int(m.group("seconds"))
        elif m := _GPU_LINE.match(line.strip()):
            g = gpu(int(m.group("index")))
            g.name, g.uuid = m.group("name"), m.group("uuid")
        elif line.strip().startswith("Couldn't init a GPU test"):
            run.init_failures.append(line.strip())
        elif "No clients are alive" in line:
            run.aborted = True
        elif "Summary at" in line:
            # error counters reset after a summary: bank this interval's worst values
            for index, count in interval_errors.items():
                gpu(index).errors += count
            interval_errors = {}
        elif m := _PROGRESS.match(line):
            run.progress_lines += 1
            for i, p in enumerate(_PROCD.finditer(m.group("procd"))):
                g = gpu(i)
                g.ops, g.gflops = int(p.group("ops")), float(p.group("gflops"))
                if g.ops == -1:
                    g.died = True
            for i, entry in enumerate(_split_entries(m.group("errors"))):
                e = _ERROR.match(entry)
                if not e:
                    raise ParseError(source, f"unreadable error count {entry!r}")
                count = abs(int(e.group("count")))
                interval_errors[i] = max(interval_errors.get(i, 0), count)
                if e.group("mark") == "(WARNING!)" or count:
                    gpu(i).warning = True
                if e.group("mark") == "(DIED!)":
                    gpu(i).died = True
            for i, t in enumerate(_TEMP.finditer(m.group("temps") or "")):
                if t.group(1):
                    g = gpu(i)
                    g.max_temp_c = max(g.max_temp_c or 0, int(t.group(1)))
        elif m := _TESTED.match(line):
            run.tested_count = int(m.group("count"))
        elif m := _VERDICT.match(line):
            gpu(int(m.group("index"))).verdict = m.group("verdict")
    for index, count in interval_errors.items():
        gpu(index).errors += count
    if not run.gpus and run.tested_count is None:
        raise ParseError(source, "not a gpu-burn log (no GPU lines, no `Tested N GPUs`)")
    return run


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

def _burned(run: GpuBurnRun) -> list[int]:
    """The GPUs with a whole record: a progress column (its work) and a final verdict."""
    return [g.index for g in run.gpus.values() if g.gflops is not None and g.verdict]


GPU_BURN = EvidenceKind("gpu-burn.log", "soak", parse_gpu_burn, None,
                        "full gpu-burn output (progress lines use `\\r`)",
                        lab="sim/gpu_burn.py", members=Members(GPU, _burned))


def parse_gpu_burn_build(text: str, source: str) -> dict:
    """The gpu_burn role's record of what it built (roles/gpu_burn/tasks/build.yml: `url`,
    `sha256`, `compute` as `<major>.<minor>`, `compare_kernel`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"malformed JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(data, dict) or not re.match(r"^\d+\.\d+$", str(data.get("compute", ""))):
        raise ParseError(source, "not the gpu_burn role's BUILD.json (no `compute` "
                                 "capability as <major>.<minor>)")
    return data


GPU_BURN_BUILD = EvidenceKind("gpu-burn-build.json", "identity", parse_gpu_burn_build,
                              "cat {gpu_burn_dir}/BUILD.json",
                              "the gpu_burn role's record of the gpu-burn it built: source URL, "
                              "sha256, the compute capability its kernels were compiled for",
                              lab=REAL_TOOL)
