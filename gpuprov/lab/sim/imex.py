"""`nvidia-imex` and `nvidia-imex-ctl` as a lab rack's trays run them (issue 72).

The daemon reads its config file (`-c`, as the unit's ExecStart passes it) for the peer
port (SERVER_PORT, default 50000), the command port nvidia-imex-ctl asks (IMEX_CMD_PORT,
50005 in AWS ParallelCluster's config) and the peer list (IMEX_NODE_CONFIG_FILE, default
/etc/nvidia-imex/nodes_config.cfg): the option names and defaults of the config file
aws/aws-parallelcluster-cookbook ships (templates/nvidia-imex/nvidia-imex-config.erb). At
start it checks the loaded driver, as NVIDIA's IMEX guide says the real one does ("if the
loaded driver stack version is not compatible, aborts"), forks (the unit is Type=forking,
the cookbook's nvidia-imex.service.erb) and serves its peers over the lab fabric.

`nvidia-imex-ctl -N` prints the domain as the tray's daemon sees it, in the form of the real
captures (tests/fixtures/imex/: the legend, a timestamp, `Nodes:`, the connectivity table,
`Domain State:`): the daemon asks every member of its peer list, in the list's order, for
its IMEX version and its peer list's digest. The lab's model, where no capture shows it:
a member whose daemon does not answer is UNAVAILABLE and Never connected (N) to every
other; two members at other IMEX versions are `!V!`, at other peer lists `!M!` (the
markers AWS's P6e-GB200 page documents); any cell not C, or a member not READY, leaves the
domain DEGRADED; "compatible" is the driver's branch; the words of a daemon that refuses to
start or a ctl that finds no daemon are the lab's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import subprocess
import sys
import threading
import time

from . import daemons, node

LOG = "/var/log/nvidia-imex.log"
PID_FILE = "/run/nvidia-imex/nvidia-imex.pid"
PROBE_TIMEOUT_S = 1.0
# the legend as IMEX 570 prints it, word for word (tests/fixtures/imex/gh200-570.00-…)
LEGEND = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
C - Connected - Ready for operation
"""


def read_config(path: str) -> dict[str, str]:
    """KEY=VALUE lines; `#` comments and blank lines skipped."""
    values = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                values[key.strip()] = value.strip()
    return values


def _port(config: dict[str, str], key: str, default: int) -> int:
    return int(config.get(key) or default)


def _log(message: str, level: str = "INFO") -> None:
    stamp = time.strftime("%b %d %Y %H:%M:%S")
    with open(LOG, "a") as fh:
        fh.write(f"[{stamp}] [{level}] [tid {threading.get_native_id()}] {message}\n")


def _local_addresses() -> set[str]:
    out = subprocess.run(["ip", "-o", "-4", "address", "show"], capture_output=True,
                         text=True).stdout
    return {line.split()[3].split("/")[0] for line in out.splitlines() if len(line.split()) > 3}


def daemon(argv: list[str], version: str, config: str, nodes: str, server_port: int,
           cmd_port: int) -> int:
    """The package passes the paths and ports of data/packaging.yml `imex`."""
    path = argv[argv.index("-c") + 1] if "-c" in argv else config
    try:
        settings = read_config(path)
    except OSError as exc:
        sys.stderr.write(f"nvidia-imex: cannot read the config file {path}: {exc.strerror}\n")
        return 1
    port = _port(settings, "SERVER_PORT", server_port)
    _log(f"IMEX version {version} is running with the following configuration options:")
    _log(f"IMEX library communication bind port = {port}")
    loaded = node.loaded_module_version()
    if loaded is None or loaded.split(".")[0] != version.split(".")[0]:
        _log(f"the loaded NVIDIA driver ({loaded or 'none'}) is not compatible with IMEX "
             f"{version}: aborting", "ERROR")
        sys.stderr.write(f"nvidia-imex: loaded driver {loaded or 'none'} is not compatible "
                         f"with IMEX {version}\n")
        return 1
    nodes_file = settings.get("IMEX_NODE_CONFIG_FILE") or nodes
    try:
        with open(nodes_file, "rb") as fh:
            listed = fh.read()
    except OSError as exc:
        _log(f"cannot open the node config file {nodes_file}: {exc.strerror}", "ERROR")
        return 1
    members = [line.strip() for line in listed.decode().splitlines()
               if line.strip() and not line.strip().startswith("#")]
    own = settings.get("BIND_INTERFACE_IP") or next(
        (a for a in members if a in _local_addresses()), None)
    if own is None:
        _log(f"no address of {nodes_file} is this node's", "ERROR")
        sys.stderr.write(f"nvidia-imex: no address of {nodes_file} is this node's\n")
        return 1
    me = {"version": version, "nodes_sha256": hashlib.sha256(listed).hexdigest()}
    cmd = _port(settings, "IMEX_CMD_PORT", cmd_port)
    # Type=forking: back once the child serves
    daemons.daemonize(PID_FILE, lambda: _listen(me, members, own, port, cmd))
    return 0


def _listener(address: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(32)
    return sock


def _accept_forever(sock: socket.socket, answer) -> None:
    while True:
        conn, _ = sock.accept()
        with conn, contextlib.suppress(OSError):
            conn.sendall(answer(conn).encode())


def _listen(me: dict, members: list[str], own: str, port: int, cmd_port: int) -> None:
    """The daemon's two services, each a thread: its peers' (what it is) and nvidia-imex-ctl's
    (the domain as it sees it now)."""
    peers = _listener(own, port)
    commands = _listener("127.0.0.1", cmd_port)
    threading.Thread(target=_accept_forever, args=(peers, lambda c: json.dumps(me) + "\n"),
                     daemon=True).start()

    def domain(conn: socket.socket) -> str:
        conn.recv(64)
        return render(members, {a: probe(a, port) for a in members})

    threading.Thread(target=_accept_forever, args=(commands, domain), daemon=True).start()


def probe(address: str, port: int) -> dict | None:
    """What a member's daemon says of itself; None where none answers."""
    try:
        with socket.create_connection((address, port), timeout=PROBE_TIMEOUT_S) as conn:
            conn.settimeout(PROBE_TIMEOUT_S)
            return json.loads(conn.makefile().readline())
    except (OSError, ValueError):
        return None


def _cell(a: dict | None, b: dict | None) -> str:
    if a is None or b is None:
        return "N"
    if a["version"] != b["version"]:
        return "!V!"
    if a["nodes_sha256"] != b["nodes_sha256"]:
        return "!M!"
    return "C"


def render(members: list[str], seen: dict[str, dict | None], now: float | None = None) -> str:
    """`nvidia-imex-ctl -N`'s text for these members and what each said (None: nothing)."""
    stamp = time.localtime(now)
    millis = int(((now or time.time()) % 1) * 1000)
    lines = ["", LEGEND, f"{stamp.tm_mon}/{stamp.tm_mday}/{stamp.tm_year} "
             f"{time.strftime('%H:%M:%S', stamp)}.{millis:03d}", "Nodes:"]
    lines += [f"Node #{i:<3} - {a:<15} - {'READY' if seen[a] else 'UNAVAILABLE'}"
              for i, a in enumerate(members)]
    lines += ["", " Nodes From\\To  " + "  ".join(str(i) for i in range(len(members)))]
    cells = [[_cell(seen[a], seen[b]) for b in members] for a in members]
    lines += [f"{i:>8}        " + "  ".join(row) for i, row in enumerate(cells)]
    up = all(seen.values()) and all(c == "C" for row in cells for c in row)
    lines.append(f"Domain State: {'UP' if up else 'DEGRADED'}")
    return "\n".join(lines) + "\n"


def ctl(argv: list[str], config: str, cmd_port: int) -> int:
    if "-N" not in argv:
        sys.stderr.write("nvidia-imex-ctl (gpuprov lab): only -N is simulated\n")
        return 1
    path = argv[argv.index("-c") + 1] if "-c" in argv else config
    try:
        settings = read_config(path)
    except OSError:
        settings = {}
    try:
        with socket.create_connection(("127.0.0.1", _port(settings, "IMEX_CMD_PORT", cmd_port)),
                                      timeout=5) as conn:
            conn.settimeout(30)
            conn.sendall(b"N\n")
            text = conn.makefile().read()
    except OSError as exc:
        sys.stderr.write(f"nvidia-imex-ctl: cannot reach the IMEX daemon's command service: "
                         f"{exc.strerror or exc}\n")
        return 1
    sys.stdout.write(text)
    return 0
