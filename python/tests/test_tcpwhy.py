"""The Python package gives what the command line gives, with the same engine.

Run after installing the wheel (python/README.md): `python3 -m pytest python/tests`. The
command line to compare with is $TCPWHY_BIN, else the repository's target/debug or
target/release build.
"""

import json
import os
import pathlib
import struct
import subprocess

import pyarrow as pa
import pytest
import tcpwhy

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAB = sorted(p for p in (ROOT / "fixtures" / "lab").iterdir() if ".pcap" in p.name)


def cli():
    env = os.environ.get("TCPWHY_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "tcpwhy"
        if p.exists():
            return str(p)
    raise RuntimeError("no tcpwhy binary: cargo build, or set TCPWHY_BIN")


def records(*args):
    out = subprocess.run([cli(), "analyze", "-q", "--format", "json", "--exchanges", *args],
                         capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines()], out


@pytest.mark.parametrize("capture", LAB, ids=lambda p: p.name)
def test_the_tables_hold_what_the_command_line_reports(capture):
    r = tcpwhy.analyze(capture)
    recs, _ = records(str(capture))
    of = lambda t: [x for x in recs if x["type"] == t]
    # The same findings, in the same order, with the same costs, frames and texts.
    f = r.findings.select(["id", "cost_ms", "frames", "explanation"]).to_pylist()
    want = of("finding")
    # Times as nanosecond timestamps: the JSON's *_ns.
    starts = r.findings.column("start").cast(pa.int64()).to_pylist()
    assert starts == [x["start_ns"] for x in want]
    assert [x["id"] for x in f] == [x["id"] for x in want]
    assert [x["cost_ms"] for x in f] == [x["cost_ms"] for x in want]
    assert [x["frames"] for x in f] == [x["frames"] for x in want]
    assert [x["explanation"] for x in f] == [x["explanation"] for x in want]
    # Every connection, exchange and stall.
    assert r.connections.column("id").to_pylist() == [x["id"] for x in of("connection")]
    assert r.connections.column("packets").to_pylist() == [x["packets"] for x in of("connection")]
    assert r.exchanges.num_rows == len(of("exchange"))
    assert r.stalls.num_rows == len(of("stall"))
    # The summary is the command line's, its causes the causes table.
    summary = of("summary")[0]
    assert r.summary == summary
    causes = [{k: v for k, v in c.items() if k != "source"} for c in r.causes.to_pylist()]
    assert causes == summary["causes"]
    # Typed columns: times are timestamps, ports 16-bit.
    assert str(r.findings.schema.field("start").type) == "timestamp[ns, tz=UTC]"
    assert str(r.connections.schema.field("server_port").type) == "uint16"


def test_several_captures_and_a_filter_as_on_the_command_line():
    a = ROOT / "fixtures" / "captures" / "rotated-1.pcap"
    b = ROOT / "fixtures" / "captures" / "rotated-2.pcap"
    r = tcpwhy.analyze([a, b], filter="tcp port 80")
    recs, _ = records(str(a), str(b), "--filter", "tcp port 80")
    summary = [x for x in recs if x["type"] == "summary"][0]
    assert r.summary["packets"] == summary["packets"]
    assert r.summary["filtered_out"] == summary["filtered_out"]
    assert r.summary["filter"] == "tcp port 80"
    assert r.connections.num_rows == summary["connections"]


def test_errors_are_exceptions_with_the_command_lines_message():
    bad = ROOT / "fixtures" / "captures" / "not-a-capture.txt"
    _, out = records(str(bad))
    assert out.returncode == 2
    with pytest.raises(ValueError) as e:
        tcpwhy.analyze(bad)
    assert "tcpwhy: " + str(e.value) == out.stderr.strip()
    with pytest.raises(OSError) as e:
        tcpwhy.analyze("/nonexistent/x.pcap")
    assert "cannot open" in str(e.value)
    with pytest.raises(ValueError, match="capture filter"):
        tcpwhy.analyze(bad, filter="port eighty")
    with pytest.raises(ValueError, match="no finding"):
        tcpwhy.explain("no-such-id")


def test_a_capture_corrupt_midway_raises_with_the_results_before_it(tmp_path):
    # The 28th of 55 pcapng blocks claims a length of 13 (not a multiple of 4): reading stops
    # there, as the command line's "stopped early" says, with the packets before it analysed.
    data = bytearray((ROOT / "fixtures" / "captures" / "loopback-ipv6.pcapng").read_bytes())
    offsets, off = [], 0
    while off < len(data):
        offsets.append(off)
        off += struct.unpack_from("<I", data, off + 4)[0]
    struct.pack_into("<I", data, offsets[len(offsets) // 2] + 4, 13)
    cut = tmp_path / "corrupt.pcapng"
    cut.write_bytes(data)
    recs, out = records(str(cut))
    assert out.returncode == 2
    with pytest.raises(tcpwhy.CaptureError) as e:
        tcpwhy.analyze(cut)
    summary = [x for x in recs if x["type"] == "summary"][0]
    assert str(e.value) == summary["error"]
    assert e.value.result.summary["packets"] == summary["packets"] > 0


def test_explain_is_the_command_lines():
    out = subprocess.run([cli(), "explain"], capture_output=True, text=True).stdout
    assert tcpwhy.explain() == out
    out = subprocess.run([cli(), "explain", "zero-window", "--color", "never"],
                         capture_output=True, text=True).stdout
    assert tcpwhy.explain("zero-window") == out
