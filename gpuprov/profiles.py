"""Hardware profiles: what an accepted node of a given system looks like.

Shipped profiles live in gpuprov/data/profiles/; a profile is named by file stem, or
given as a path to the user's own YAML. Every profile is validated on load, and an
error names the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from gpuprov.errors import InputError
from gpuprov.racks import rack_profile
from gpuprov.resources import yaml_files

_NUM = {"type": "number", "exclusiveMinimum": 0}
# A numeric fingerprint's golden (docs/fingerprint.md): the hashes per mode of the probe's
# workload, for one key; a different value of any key field may change the hashes
FINGERPRINT_MODES = ("fp32", "tf32", "bf16", "fp16", "train")
FINGERPRINT_KEY = ("device", "driver", "cuda", "cublas", "torch", "workload")
_GOLDEN = {
    "type": "object", "required": ["key", "hashes"], "additionalProperties": False,
    "properties": {
        "key": {"type": "object", "required": list(FINGERPRINT_KEY),
                "additionalProperties": False,
                "properties": {f: {"type": ["string", "null"]} for f in FINGERPRINT_KEY}},
        "hashes": {"type": "object", "required": list(FINGERPRINT_MODES),
                   "additionalProperties": False,
                   "properties": {m: {"oneOf": [{"type": "null"}, {
                       "type": "string", "pattern": "^[0-9a-f]{16}$"}]}
                       for m in FINGERPRINT_MODES}},
        "nodes": {"type": "array", "items": {"type": "string"}},
    },
}
SCHEMA = {
    "type": "object",
    "required": ["name", "gpu", "pcie", "nvlink", "nvswitch", "ecc_required", "max_temp_c",
                 "gpu_burn", "ddp"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "gpu": {
            "type": "object",
            "required": ["name_pattern", "count", "memory_mib_min"],
            "additionalProperties": False,
            "properties": {
                "name_pattern": {"type": "string", "minLength": 1},
                "count": {"type": "integer", "minimum": 1},
                "memory_mib_min": {"type": "integer", "minimum": 1},
                "architecture": {"type": "string"},
                "compute_capability": {"type": "string", "pattern": r"^\d+\.\d+$"},
            },
        },
        "pcie": {
            "type": "object", "required": ["gen", "width"], "additionalProperties": False,
            "properties": {"gen": {"type": "integer", "minimum": 1, "maximum": 7},
                           "width": {"enum": [1, 2, 4, 8, 16, 32]}},
        },
        "nvlink": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["links_per_gpu", "link_speed_gbps"],
                    "additionalProperties": False,
                    "properties": {
                        "all_pairs": {"type": "string", "pattern": r"^NV\d+$"},
                        "matrix": {"type": "array", "items": {
                            "type": "array", "items": {"type": "string"}}},
                        "links_per_gpu": {"type": "integer", "minimum": 1},
                        "link_speed_gbps": _NUM,
                    },
                    "oneOf": [{"required": ["all_pairs"]}, {"required": ["matrix"]}],
                },
            ]
        },
        "nvswitch": {"type": "boolean"},
        # every GPU reaches its Grace CPU over NVLink-C2C (a Grace superchip: check c2c_links)
        "c2c": {"type": "boolean"},
        # an NVL72 compute tray: judged with its rack, this rack profile (racks.py)
        "rack_profile": {"type": "string", "minLength": 1},
        "nvswitch_count": {"type": "integer", "minimum": 1},
        # NVLink5 (HGX B200): the switches are off the PCI bus, managed through this many
        # ConnectX-7 bridge functions whose VPD carries SW_MNG (data/packaging.yml nvlink5)
        "nvlink5_bridges": {"type": "integer", "minimum": 1},
        "nics": {
            "type": "object", "required": ["count", "link_layer", "rate_gbps"],
            "additionalProperties": False,
            "properties": {"count": {"type": "integer", "minimum": 1},
                           "link_layer": {"enum": ["InfiniBand", "Ethernet"]},
                           "rate_gbps": _NUM,
                           "name_prefix": {"type": "string"},
                           # how much an error counter may grow over the soak (ib_counters)
                           "error_growth_max": {"type": "integer", "minimum": 0},
                           # one rail's ib_write_bw average between two nodes (fabric --rails)
                           "write_bw_min_gbps": _NUM,
                           # and its ib_write_lat average, at 2 bytes
                           "write_lat_max_usec": _NUM,
                           # the farthest GPU-to-NIC path (topo -m) NCCL still uses
                           # GPUDirect RDMA over: NCCL_NET_GDR_LEVEL (check gpu_nic_affinity)
                           "gdr_path_max": {"enum": ["PIX", "PXB", "PHB", "NODE", "SYS"]}},
        },
        "ecc_required": {"type": "boolean"},
        # the cpufreq governor every online CPU runs (check cpu_governor, role cpu_governor)
        "cpu_governor": {"enum": ["performance", "powersave", "ondemand", "schedutil",
                                  "conservative", "userspace"]},
        "max_temp_c": {"type": "integer", "minimum": 30, "maximum": 120},
        "gpu_burn": {
            "type": "object", "required": ["gflops_min", "max_spread_pct", "soak_seconds"],
            "additionalProperties": False,
            "properties": {"gflops_min": _NUM,
                           "max_spread_pct": {"type": "number", "minimum": 0, "maximum": 100},
                           "soak_seconds": {"type": "integer", "minimum": 1},
                           # the load: FP32 (gpu-burn's default), tensor cores, or doubles
                           "mode": {"enum": ["fp32", "tensor", "fp64"]}},
        },
        "under_load": {   # what every GPU shows under the soak's load (gpu-telemetry.csv)
            "type": "object", "additionalProperties": False,
            "required": ["power_limit_w", "power_fraction_min", "temp_spread_max_c",
                         "clock_spread_max_pct"],
            "properties": {"power_limit_w": _NUM,
                           "power_fraction_min": {"type": "number", "exclusiveMinimum": 0,
                                                  "maximum": 1},
                           "temp_spread_max_c": _NUM,
                           "clock_spread_max_pct": {"type": "number", "exclusiveMinimum": 0,
                                                    "maximum": 100}},
        },
        "nvbandwidth": {   # copy bandwidth per GPU (nvbandwidth.txt); floors learnable
            "type": "object", "required": ["spread_pct"], "additionalProperties": False,
            "properties": {"spread_pct": {"type": "number", "exclusiveMinimum": 0,
                                          "maximum": 100},
                           "h2d_min_gbps": _NUM, "d2h_min_gbps": _NUM, "d2d_min_gbps": _NUM},
        },
        "ddp": {
            "type": "object", "required": ["busbw_min_gbps"], "additionalProperties": False,
            "properties": {"busbw_min_gbps": {"type": "number", "minimum": 0}},
        },
        "dcgm": {
            "type": "object", "additionalProperties": False,
            # floors for the figures dcgmi prints (`gpuprov baseline` learns them)
            "properties": {"level": {"enum": [1, 2, 3, 4]}, "pcie_min_gbps": _NUM,
                           "gflops_min": _NUM},
        },
        "nccl_tests": {   # all_reduce_perf's own floor; without it, ddp.busbw_min_gbps
            "type": "object", "required": ["busbw_min_gbps"], "additionalProperties": False,
            "properties": {"busbw_min_gbps": {"type": "number", "minimum": 0}},
        },
        "fabric": {
            "type": "object", "required": ["busbw_min_gbps"], "additionalProperties": False,
            "properties": {"busbw_min_gbps": {"type": "number", "minimum": 0}},
        },
        "fingerprint": {   # the goldens `gpuprov baseline` learns (numeric_fingerprint)
            "type": "object", "additionalProperties": False,
            "properties": {"golden": {"type": "array", "items": _GOLDEN}},
        },
        "sources": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    data: dict

    @property
    def gpu_count(self) -> int:
        return self.data["gpu"]["count"]

    @property
    def nvlink(self) -> dict | None:
        return self.data["nvlink"]

    def expected_link(self, a: int, b: int) -> str:
        """The topo -m code expected between GPU a and GPU b."""
        nvlink = self.nvlink
        if nvlink is None:
            return "PCIe"  # any non-NV code
        if "matrix" in nvlink:
            return nvlink["matrix"][a][b]
        return nvlink["all_pairs"]

    @property
    def rack_profile(self) -> str | None:
        """The rack profile of an NVL72 compute tray's profile, else None."""
        return self.data.get("rack_profile")

    def name_matches(self, gpu_name: str | None) -> bool:
        return bool(gpu_name and re.search(self.data["gpu"]["name_pattern"], gpu_name))

    def __getitem__(self, key: str):
        return self.data[key]


def shipped_names() -> list[str]:
    return sorted(yaml_files("profiles"))


def load_profile(name_or_path: str) -> Profile:
    shipped = yaml_files("profiles")
    if name_or_path in shipped:
        text, source = shipped[name_or_path].read_text(), f"profile {name_or_path}"
    else:
        path = Path(name_or_path)
        if not (path.suffix in (".yml", ".yaml") and path.is_file()):
            raise InputError(f"unknown profile {name_or_path!r} "
                             f"(shipped: {', '.join(shipped_names())}; or a path to a .yml)")
        text, source = path.read_text(), str(path)
    return parse_profile(text, source)


def parse_profile(text: str, source: str) -> Profile:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{source}:{where} not valid YAML") from exc
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data),
                    key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        field = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise InputError(f"{source}: {field}: {err.message}")
    nvlink = data["nvlink"]
    if nvlink and "matrix" in nvlink:
        count = data["gpu"]["count"]
        if len(nvlink["matrix"]) != count or any(len(r) != count for r in nvlink["matrix"]):
            raise InputError(f"{source}: nvlink.matrix: must be {count}x{count} (gpu.count)")
    if data.get("rack_profile"):
        rack = rack_profile(data["rack_profile"], f"{source}: rack_profile")
        if rack.gpus_per_tray != data["gpu"]["count"]:
            raise InputError(f"{source}: gpu.count: {data['gpu']['count']}, a {rack.name} tray "
                             f"has {rack.gpus_per_tray}")
    return Profile(data["name"], source, data)
