"""An emulated node's campaign job: `gpuprov collect`'s interface, replaying stored evidence.

`python -m gpuprov.lab.emulated_node PLAN collect --request FILE --request-sha256 HEX --out DIR`,
as the job
script runs the collector. PLAN (emulated_slurm.plan_file) says, for each node: the evidence
directory to replay (real captures), how long the job takes, the verdict the node claims,
its host key, and optionally a fault in what it hands back:

- `no-result`: evidence, no result.json;  `unsigned`: result.json, no signature;
- `foreign-key`: signed with another node's key (`foreign_key`);
- `old-run`: the result names another run;  `digest`: a file changed after signing;
- `symlink`: the evidence holds a link to a file of the machine it is read on;
- `request-rewritten`: the node's request changed before the collector reads it (the
  collector refuses it).

A node planned with `collect: true` runs the real `gpuprov collect` instead, on this
machine, signing with the node's key: the whole chain of a real job, on a machine that
has no GPU (its evidence says so, and it is judged so).

The node's request is checked as `gpuprov collect` checks it: a request whose bytes are not
the ones the job pins, for another node or by another gpuprov version is refused the same
way.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from gpuprov import __version__
from gpuprov.errors import InputError
from gpuprov.files import manifest
from gpuprov.slurm import results
from gpuprov.validation import node_request

JOBS = "jobs.txt"


def main(argv: list[str]) -> int:
    plan_path, command, *rest = argv
    args = dict(zip(rest[::2], rest[1::2], strict=True))
    if command != "collect":
        print(f"emulated node: unknown command {command}", file=sys.stderr)
        return 2
    node = os.environ["SLURMD_NODENAME"]
    plan = json.loads(Path(plan_path).read_text())[node]
    out = Path(args["--out"])
    with (out / JOBS).open("a") as fh:      # every job that ran on the node: duplicates show
        fh.write(f"{os.environ.get('SLURM_JOB_ID', '?')}\n")
    if plan.get("fault") == "request-rewritten":
        with Path(args["--request"]).open("a") as fh:
            fh.write(" ")
    # the request's header only: the collector's own imports are too slow for a thousand
    # emulated nodes on two cores
    try:
        request = node_request.header(Path(args["--request"]), args["--request-sha256"])
    except InputError as exc:
        print(f"gpuprov: error: {exc}", file=sys.stderr)
        return 2
    host, run_id = request["settings"]["node"], request["settings"]["run_id"]
    if node != request["slurm_node"]:
        print(f"gpuprov: error: {args['--request']}: asks for node {request['slurm_node']}, "
              f"this is {node}", file=sys.stderr)
        return 2
    if plan.get("collect"):
        gpuprov = str(Path(sys.executable).parent / "gpuprov")
        os.execv(gpuprov, [gpuprov, "collect", "--request", args["--request"],
                           "--request-sha256", args["--request-sha256"], "--out",
                           args["--out"], "--host-key", plan["key"]])
    evidence = out / results.EVIDENCE
    shutil.copytree(plan["evidence"], evidence, dirs_exist_ok=True)
    meta = json.loads((evidence / "meta.json").read_text())
    meta |= {"node": host, "run_id": run_id}
    (evidence / "meta.json").write_text(json.dumps(meta, indent=2))
    time.sleep(plan.get("seconds", 0))
    fault = plan.get("fault")
    if fault == "no-result":
        return 0
    if fault == "symlink":
        (evidence / "dmesg.txt").unlink(missing_ok=True)
        (evidence / "dmesg.txt").symlink_to("/etc/hostname")
    run = "v19700101-000000-000000" if fault == "old-run" else run_id
    claim = results.Claim(run, node, os.environ.get("SLURM_JOB_ID", ""), __version__,
                          plan["claims"], results.evidence_digest(manifest(evidence)))
    if fault == "unsigned":
        (out / results.RESULT).write_text(claim.as_json())
        return 0
    results.sign(out, claim, plan["foreign_key"] if fault == "foreign-key" else plan["key"])
    if fault == "digest":
        with (evidence / "dmesg.txt").open("a") as fh:
            fh.write("appended after signing\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
