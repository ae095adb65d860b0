"""The Spark recipe on a real local cluster (`local-cluster[2,1,1024]`: a master and two
workers in the driver's JVM, each executor a JVM of its own, all on 127.0.0.1, stopped at the
end) ranks the causes of the lab's 55 captures, and of two made here, as the command line does
file by file: per cause, the captures, findings, connections and time lost summed from each
capture's JSON summary, and the worst servers from its JSON findings. The two made here hold
what the lab's do not: a capture-wide finding (a SYN flood: no connection, no server) and one
cause at two servers in one capture. Run: `python3 -m pytest examples/spark` (needs `pip install
pyspark`, Java 17 or later and the tcpwhy wheel; `.ci/run` installs them).
"""

import glob
import importlib.util
import json
import os
import pathlib
import struct
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_rank():
    """rank.py of this directory, as module `spark_rank` (examples/ray has a `rank` too)."""
    spec = importlib.util.spec_from_file_location("spark_rank",
                                                  pathlib.Path(__file__).with_name("rank.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cli():
    env = os.environ.get("TCPWHY_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "tcpwhy"
        if p.exists():
            return str(p)
    raise RuntimeError("no tcpwhy binary: cargo build, or set TCPWHY_BIN")


def flood(path):
    """A pcap of 300 SYNs from 300 addresses to 192.0.2.1:80, 5 ms apart, none answered, and
    a lone ACK at 6.5 s: one syn-flood finding, capture-wide (as crates/tcpwhy/tests/it/flood.rs
    builds it)."""
    t0 = 1_700_000_000_000_000
    packets = [(k * 5_000, bytes([10, 0, k // 250, k % 250 + 1]), bytes([192, 0, 2, 1]),
                1024 + 7 * k, 80, 1_000 + k * 100_000, 0, 0x02) for k in range(300)]
    packets.append((6_500_000, bytes([10, 9, 9, 9]), bytes([10, 9, 9, 10]), 50_000, 22, 5, 5,
                    0x10))
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, (us, src, dst, sport, dport, seq, ack, flags) in enumerate(packets):
            # Ethernet (IPv4), IPv4 (ID: the packet's number), TCP with no options.
            frame = (bytes(12) + b"\x08\x00"
                     + struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40, i + 1, 0, 64, 6, 0, src, dst)
                     + struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 512, 0,
                                   0))
            t = t0 + us
            f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, 54, 54) + frame)


def merged(path, first, second):
    """The pcap `first` then the pcap `second` (both nanosecond pcaps of one link type), its
    times moved to start 1 s after the first's last packet: one capture."""
    def records(name):
        with open(name, "rb") as f:
            data = f.read()
        out, at = [], 24
        while at < len(data):
            sec, ns, incl, orig = struct.unpack_from("<IIII", data, at)
            out.append((sec * 1_000_000_000 + ns, orig, data[at + 16:at + 16 + incl]))
            at += 16 + incl
        return data[:24], out

    header, a = records(first)
    _, b = records(second)
    shift = a[-1][0] + 1_000_000_000 - b[0][0]
    with open(path, "wb") as f:
        f.write(header[:16] + struct.pack("<I", 262144) + header[20:24])
        for t, orig, frame in a + [(t + shift, orig, frame) for t, orig, frame in b]:
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(frame),
                                orig) + frame)


def by_cli(files):
    """Per cause, from the command line's JSON file by file: [captures, findings, connections,
    time lost], and the time lost per server."""
    want = {}
    servers = {}
    for f in files:
        out = subprocess.run([cli(), "analyze", "-q", "--format", "json", f],
                             capture_output=True, text=True, timeout=120)
        recs = [json.loads(line) for line in out.stdout.splitlines()]
        assert recs and recs[-1]["type"] == "summary", (f, out.stderr)
        for c in recs[-1]["causes"]:
            w = want.setdefault(c["id"], [0, 0, 0, 0.0])
            w[0] += 1
            w[1] += c["findings"]
            w[2] += c["connections"]
            w[3] += c["cost_ms"]
        for x in recs:
            if x["type"] == "finding" and x["server"]:
                s = servers.setdefault(x["id"], {})
                s[x["server"]] = s.get(x["server"], 0.0) + x["cost_ms"]
    return want, servers


def test_spark_ranks_causes_as_the_command_line_does_file_by_file(tmp_path):
    rank = load_rank()
    files = sorted(glob.glob(str(ROOT / "fixtures/lab/*.pcap*"))
                   + glob.glob(str(ROOT / "fixtures/lab/vantage/*.pcap*")))
    assert len(files) >= 36
    flood(tmp_path / "flood.pcap")
    vantage = ROOT / "fixtures/lab/vantage"
    merged(tmp_path / "stale-syn-ip4-and-ip6.pcap",
           vantage / "stale-syn-timewait-client-on-ip4-broken.pcap",
           vantage / "stale-syn-timewait-client-on-ip6-broken.pcap")
    files += [str(tmp_path / "flood.pcap"), str(tmp_path / "stale-syn-ip4-and-ip6.pcap")]
    with rank.cluster() as spark:
        driver = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        ranked, executors = rank.rank(files, spark=spark, timeout=300)
    # Two executors analysed captures, each in a JVM of its own (not the driver's).
    assert len(executors) == 2, executors
    assert all(int(e.rsplit(":", 1)[1]) != driver for e in executors), (executors, driver)
    want, servers = by_cli(files)
    # The captures made here hold what they are for.
    assert want["syn-flood"][1:3] == [1, 0], "the flood: a finding on no connection"
    _, two = by_cli([files[-1]])
    assert len(two["syn-stale-state"]) == 2, "one cause at two servers in one capture"
    assert [c["id"] for c in ranked] == sorted(want, key=lambda i: (-round(want[i][3], 3), i))
    for c in ranked:
        captures, findings, connections, cost = want[c["id"]]
        tol = 0.001 * findings + 0.01  # each capture's cost is rounded to the microsecond
        assert (c["captures"], c["findings"], c["connections"]) == (captures, findings,
                                                                   connections), c["id"]
        assert abs(c["cost_ms"] - cost) < tol, c["id"]
        # The three servers that lost the most, costliest first (ties by name; a server whose
        # cost ties the expected one's within the rounding may stand in its place).
        lost = servers.get(c["id"], {})
        top = sorted(lost.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        assert len(c["worst_servers"]) == len(top), c["id"]
        for got, (server, ms) in zip(c["worst_servers"], top):
            assert abs(got["cost_ms"] - ms) < tol, (c["id"], got, server, ms)
            assert got["server"] == server or abs(lost.get(got["server"], -1) - ms) < tol, (
                c["id"], got, server)
