"""The lab's `ib_write_bw` and `ib_write_lat`: perftest's server and client over the lab
fabric, with the described NIC ports' rates.

A container has no RDMA device, so Debian's real perftest (which the gpudirect role
installs) finds none. This stand-in keeps the real tool's protocol shape and words
(linux-rdma/perftest@00b55b6): the server waits on its TCP port (18515 unless -p), the
client connects to it over the fabric address, both print the header block and the
`#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]` table (REPORT_FMT), a
timed run (-D) warns that the peak is not measured; a client that cannot reach its server
says "Couldn't connect to <server>:<port>" and " Unable to init the socket connection", a
device that is not there " Unable to find the Infiniband/RoCE device", a port not Active
" Port number 1 state is Down" and " Couldn't get context for the device", exit status 1.

The bandwidth is the lower of the two ports' rates times WRITE_EFFICIENCY and each port's
`write_bw_factor` (the rail-slow fault, the adapter's own: a loopback, server and client on
one HCA, shows it too); no data crosses the lab fabric, only the two ends' few bytes of port
rates, and the client waits out -D seconds as the real run would.

Called as `…-lat` (the same script under LATENCY_STANDIN), it prints perftest's latency
table instead (RESULT_FMT_LAT and REPORT_FMT_LAT at 00b55b6; one row at -s, default 2 bytes,
and -n iterations): its t_avg is the mean of the two ports' `write_lat_usec` (the rail-lag
fault), else WRITE_LATENCY_USEC; its other columns are in the capture's proportions.
"""

from __future__ import annotations

from gpuprov.lab.paths import NODE_LAB_DIR

STANDIN = "/usr/local/sbin/gpuprov-lab-ib-write-bw"
LATENCY_STANDIN = "/usr/local/sbin/gpuprov-lab-ib-write-lat"
# A healthy port's ib_write_lat average at 2 bytes: a real InfiniBand capture's figure
# (tests/fixtures/perftest/ib-mlx4-write-lat-sweep-stmatengss.txt, t_avg 1.03)
WRITE_LATENCY_USEC = 1.03
# A healthy NDR 400 port's ib_write_bw average, about 390 Gb/s (issue 40): 0.975 of its rate
WRITE_EFFICIENCY = 0.975

_SCRIPT = f'''#!/usr/bin/python3
# gpuprov lab: perftest's ib_write_bw over the lab fabric (see gpuprov/lab/perftest.py)
import argparse, json, socket, sys, time
import yaml
LINE = "-" * 87
p = argparse.ArgumentParser(add_help=False)
LATENCY = sys.argv[0].endswith("-lat")
p.add_argument("-d", dest="device"); p.add_argument("-p", dest="port", type=int, default=18515)
p.add_argument("-D", dest="duration", type=int, default=0 if LATENCY else 5)
p.add_argument("-n", dest="iterations", type=int, default=1000)
p.add_argument("-s", dest="size", type=int, default=2 if LATENCY else 65536)
p.add_argument("-q", dest="qps", type=int, default=1)
p.add_argument("-F", action="store_true"); p.add_argument("--report_gbits", action="store_true")
p.add_argument("server", nargs="?")
a = p.parse_args()
with open("{NODE_LAB_DIR}/hardware.yml") as fh:
    hw = yaml.safe_load(fh)
port = next((x for x in hw.get("nic_ports") or [] if x["ca"] == a.device), None)
if port is None:
    print(" Unable to find the Infiniband/RoCE device", file=sys.stderr); sys.exit(1)
if port["state"] != "Active":
    print(f" Port number 1 state is {{port['state']}}", file=sys.stderr)
    print(" Couldn't get context for the device", file=sys.stderr); sys.exit(1)
rate = port["rate_gbps"] * {WRITE_EFFICIENCY} * port.get("write_bw_factor", 1.0)
lat = port.get("write_lat_usec", {WRITE_LATENCY_USEC})
link = "IB" if port["link_layer"] == "InfiniBand" else "Ethernet"
if a.server is None:
    listener = socket.socket(); listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", a.port)); listener.listen(1)
    print("\\n************************************")
    print("* Waiting for client to connect... *")
    print("************************************", flush=True)
    conn, _ = listener.accept()
else:
    try:
        conn = socket.create_connection((a.server, a.port), timeout=10)
    except OSError:
        print(f"Couldn't connect to {{a.server}}:{{a.port}}", file=sys.stderr)
        print(" Unable to init the socket connection", file=sys.stderr); sys.exit(1)
conn.sendall(json.dumps({{"rate": rate, "lat": lat}}).encode() + b"\\n")
peer = json.loads(conn.makefile().readline())
bw = min(rate, peer["rate"])
if LATENCY:
    t = (lat + peer["lat"]) / 2
    print(LINE)
    print("                    RDMA_Write Latency Test")
    print(f" Dual-port       : OFF\\t\\tDevice         : {{a.device}}")
    print(" Number of qps   : 1\\t\\tTransport type : IB")
    print(" Connection type : RC\\t\\tUsing SRQ      : OFF")
    print(" PCIe relax order: ON\\n ibv_wr* API     : ON\\n TX depth        : 1")
    print(f" Mtu             : 4096[B]\\n Link type       : {{link}}")
    print(" Max inline data : 220[B]\\n rdma_cm QPs\\t : OFF\\n Data ex. method : Ethernet")
    print(LINE)
    # both ends print the table (write_lat.c at 00b55b6: a ping-pong, each side reports)
    print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
          "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
    print(" %-7lu %d          %-7.2f        %-7.2f      %-7.2f  \\t       %-7.2f     \\t"
          "%-7.2f\\t\\t%-7.2f \\t\\t%-7.2f"
          % (a.size, a.iterations, t * 0.85, t * 6.6, t * 0.95, t, 0.2, t * 1.17, t * 5.3))
    print(LINE)
    conn.close(); sys.exit(0)
if a.duration:
    print(" WARNING: BW peak won't be measured in this run.")
print(LINE)
print("                    RDMA_Write BW Test")
print(f" Dual-port       : OFF\\t\\tDevice         : {{a.device}}")
print(f" Number of qps   : {{a.qps}}\\t\\tTransport type : IB")
print(" Connection type : RC\\t\\tUsing SRQ      : OFF")
print(" PCIe relax order: ON\\n ibv_wr* API     : ON\\n TX depth        : 128")
print(" CQ Moderation   : 1\\n Mtu             : 4096[B]")
print(f" Link type       : {{link}}\\n Max inline data : 0[B]\\n rdma_cm QPs\\t : OFF")
print(" Data ex. method : Ethernet")
print(LINE)
if a.server is not None:
    time.sleep(a.duration)
unit = "Gb/sec" if a.report_gbits else "MB/sec"
print(f" #bytes     #iterations    BW peak[{{unit}}]    BW average[{{unit}}]   MsgRate[Mpps]")
rate_mpps = bw * 1e9 / 8 / a.size / 1e6
shown = bw if a.report_gbits else bw * 1000 / 8
print(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\\t\\t     %-7.6lf"
      % (a.size, int(rate_mpps * 1e6 * a.duration), 0.0, shown, rate_mpps))
print(LINE)
conn.close()
'''


def files() -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for the node's configuration tar."""
    return [(STANDIN.lstrip("/"), _SCRIPT.encode(), 0o755),
            (LATENCY_STANDIN.lstrip("/"), _SCRIPT.encode(), 0o755)]


def inventory_vars() -> str:
    """The lab's group_vars lines pointing the per-rail test at the stand-ins."""
    return (f"gpuprov_fabric_ib_write_bw_command: {STANDIN}\n"
            f"gpuprov_fabric_ib_write_lat_command: {LATENCY_STANDIN}\n"
            "# one second per timed bandwidth run: the stand-in's figure does not depend on\n"
            "# it, and every second is the suite's\n"
            "gpuprov_fabric_ib_write_bw_seconds: 1\n")
