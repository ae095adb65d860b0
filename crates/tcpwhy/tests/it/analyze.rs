//! `tcpwhy analyze` end to end on the fixtures: the facts each capture was built to hold
//! (fixtures/captures/expected.json, derived from construction or tshark, never from tcpwhy),
//! snaplen, stdin, several files, errors and exit codes.

use crate::common::*;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
        .unwrap()
}

fn by_first_frame(mut conns: Vec<Value>) -> Vec<Value> {
    conns.sort_by_key(|c| c["first_frame"].as_u64());
    conns
}

#[test]
fn every_fixture_holds_the_facts_it_was_built_with() {
    let exp = expected();
    let mut files = 0;
    for (name, facts) in exp.as_object().unwrap() {
        if facts["error"].as_bool() == Some(true) {
            continue;
        }
        let (conns, _) = analyze_json(&[&fixture(name)]);
        let conns = by_first_frame(conns);
        let want = facts["connections"].as_array().unwrap();
        assert_eq!(conns.len(), want.len(), "{name}: connection count");
        // tcpwhy reads the TCP header in the first IP fragment and cannot know the length of
        // the reassembled datagram; the builder counted the reassembled payload.
        let fragments = name.contains("-frags") || name.contains("ipv6-exthdr");
        for (got, want) in conns.iter().zip(want) {
            let ctx = format!("{name} connection {}", got["id"]);
            assert_eq!(got["client"], want["client"], "{ctx}");
            assert_eq!(got["server"], want["server"], "{ctx}");
            assert_eq!(got["c2s"]["packets"], want["packets_c2s"], "{ctx}");
            assert_eq!(got["s2c"]["packets"], want["packets_s2c"], "{ctx}");
            if fragments {
                assert!(got["c2s"]["payload_bytes"].as_u64() <= want["payload_c2s"].as_u64());
            } else {
                assert_eq!(got["c2s"]["payload_bytes"], want["payload_c2s"], "{ctx}");
                assert_eq!(got["s2c"]["payload_bytes"], want["payload_s2c"], "{ctx}");
            }
            assert_eq!(got["close"]["kind"], want["close"], "{ctx}");
        }
        files += 1;
    }
    assert!(files >= 28, "only {files} fixtures");
}

#[test]
fn snaplen_cut_capture_gives_the_same_connections() {
    let (full, sf) = analyze_json(&[&fixture("veth-mixed.pcap")]);
    let (cut, sc) = analyze_json(&[&fixture("veth-mixed-s96.pcap")]);
    assert_eq!(full.len(), 6);
    // Every field of every connection: lengths come from the IP header, not the caplen.
    assert_eq!(full, cut);
    assert_eq!(sf["tcp_packets"], sc["tcp_packets"]);
    assert_eq!(sf["bytes"], sc["bytes"]);
    // The 200 000-byte upload (numbers from the fixture README, counted with tshark).
    let upload = full
        .iter()
        .find(|c| c["server"] == "10.99.0.2:5001")
        .unwrap();
    assert_eq!(upload["c2s"]["unique_bytes"], 200_000);
}

#[test]
fn rotated_files_are_one_capture() {
    let (merged, s) = analyze_json(&[&fixture("rotated-1.pcap"), &fixture("rotated-2.pcap")]);
    let (whole, w) = analyze_json(&[&fixture("veth-mixed.pcap")]);
    assert_eq!(
        merged, whole,
        "the upload that crosses the file boundary stays one connection"
    );
    assert_eq!(s["packets"], w["packets"]);
    // Given in the wrong order, the merge by timestamp still restores it.
    let (swapped, _) = analyze_json(&[&fixture("rotated-2.pcap"), &fixture("rotated-1.pcap")]);
    let ids = |v: &[Value]| -> Vec<(String, u64)> {
        let mut x: Vec<_> = v
            .iter()
            .map(|c| {
                (
                    c["client"].as_str().unwrap().into(),
                    c["packets"].as_u64().unwrap(),
                )
            })
            .collect();
        x.sort();
        x
    };
    assert_eq!(ids(&swapped), ids(&whole));
}

#[test]
fn compressed_input_is_detected_by_content() {
    let (plain, _) = analyze_json(&[&fixture("loopback-http.pcap")]);
    let (gz, _) = analyze_json(&[&fixture("compressed-no-extension")]);
    assert_eq!(plain, gz);
    let (plain, _) = analyze_json(&[&fixture("veth-mixed.pcap")]);
    let (zst, _) = analyze_json(&[&fixture("veth-mixed.zst")]);
    assert_eq!(plain, zst);
}

#[test]
fn stdin_is_read_with_a_dash() {
    let bytes = std::fs::read(fixtures().join("veth-mixed.zst")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["analyze", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // Dribble it in small pieces, as a pipe from tcpdump would.
        for chunk in bytes.chunks(7) {
            if stdin.write_all(chunk).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let n = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"type\":\"connection\""))
        .count();
    assert_eq!(n, 6);
}

#[test]
fn json_lines_carry_the_documented_fields() {
    let (conns, summary) = analyze_json(&[&fixture("reused-tuple.pcap")]);
    let conns = by_first_frame(conns);
    assert_eq!(conns.len(), 3);
    for c in &conns {
        for field in [
            "id",
            "client",
            "server",
            "first_frame",
            "last_frame",
            "start",
            "end",
            "duration_ms",
            "close",
            "end_reason",
            "prev",
            "packets",
            "retransmissions",
            "handshake",
            "rtt_ms",
            "vantage",
            "c2s",
            "s2c",
        ] {
            assert!(c.get(field).is_some(), "missing {field}");
        }
        assert_eq!(c["version"], 1);
    }
    // Connection 2 reuses the tuple of connection 1 after a clean close (README: 2 s later,
    // new ISN below the old client's final sequence): the predecessor is named.
    assert_eq!(conns[1]["prev"]["id"], conns[0]["id"]);
    assert_eq!(conns[1]["prev"]["close"]["kind"], "fin");
    assert_eq!(conns[1]["handshake"]["invalid_acks"], 1);
    assert_eq!(conns[1]["c2s"]["syn_retransmits"], 1);
    assert_eq!(conns[2]["prev"]["id"], conns[1]["id"]);
    assert_eq!(conns[0]["prev"], Value::Null);
    assert_eq!(summary["connections"], 3);
    assert_eq!(summary["version"], 1);
}

#[test]
fn midstream_connection_says_roles_were_inferred() {
    let (conns, _) = analyze_json(&[&fixture("midstream.pcap")]);
    assert_eq!(conns[0]["role_inferred"], true);
    assert_eq!(conns[0]["server"], "10.0.0.2:6379");
}

#[test]
fn unanswered_syns_are_one_connection_with_retries() {
    let (conns, _) = analyze_json(&[&fixture("syn-unanswered.pcap")]);
    assert_eq!(conns.len(), 1);
    // SYNs at 0, 1, 3 and 7 s, the last one answered (fixture README).
    assert_eq!(conns[0]["c2s"]["syn_retransmits"], 3);
}

#[test]
fn not_a_capture_is_one_line_naming_file_and_offset_exit_2() {
    for name in ["not-a-capture.txt", "bad-magic.pcap"] {
        let out = tcpwhy(&["analyze", &fixture(name)]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(name) && err.contains("at byte 0"), "{err}");
        assert!(!err.contains("panicked"));
    }
    let out = tcpwhy(&["analyze", "/nonexistent/x.pcap"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn truncated_file_gives_results_and_a_warning() {
    let out = tcpwhy(&[
        "analyze",
        "--format",
        "json",
        &fixture("truncated-last-record.pcap"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("truncated"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["packets"], 9);
    assert_eq!(summary["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn header_only_capture_is_fine_and_empty() {
    let (conns, summary) = analyze_json(&[&fixture("empty.pcap")]);
    assert!(conns.is_empty());
    assert_eq!(summary["packets"], 0);
}

#[test]
fn output_file_and_broken_pipe() {
    let dir = TempDir::new("test");
    let path = dir.join("out.jsonl");
    let f = fixture("veth-mixed.pcap");
    let out = tcpwhy(&[
        "analyze",
        "--format",
        "json",
        "-o",
        path.to_str().unwrap(),
        &f,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let direct = tcpwhy(&["analyze", "--format", "json", &f]);
    assert_eq!(std::fs::read(&path).unwrap(), direct.stdout);
    // `| head -c 1`: the reader goes away; tcpwhy must exit 0 without a message.
    let script = format!(
        "'{}' analyze --format json '{}' '{}' | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_tcpwhy"),
        f,
        fixture("loopback-http.pcap")
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("tcpwhy"),
        "{out:?}"
    );
}

#[test]
fn text_report_gives_the_answer_then_totals_and_slowest() {
    let out = tcpwhy(&["analyze", &fixture("veth-mixed.pcap")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    // The answer first: this healthy capture has no latency cause.
    assert_eq!(lines.next(), Some("No latency cause found."));
    assert_eq!(lines.next(), Some(""));
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("226 packets, 224 TCP, 6 connections"),
        "{first}"
    );
    assert!(text.contains("skipped: 2 not-ip"), "{text}");
    assert!(text.contains("Slowest connections"));
    // The slowest is the connection aborted with RST after ~50 ms (fixture README).
    let row = text
        .lines()
        .skip_while(|l| !l.contains("client -> server"))
        .nth(1)
        .unwrap();
    assert!(
        row.contains("10.99.0.2:7001") && row.contains("rst by client"),
        "{row}"
    );
}

/// The records of a little-endian microsecond pcap: (offset of the record header, its
/// length with the header).
fn records(pcap: &[u8]) -> Vec<(usize, usize)> {
    assert_eq!(
        pcap[..4],
        [0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian microsecond pcap"
    );
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push((at, 16 + caplen));
        at += 16 + caplen;
    }
    out
}

/// loopback-http.pcap changed two ways, each a copy: the first record's microseconds field
/// set to 8 915 240 (tcpflow's bug8.pcap has that value: read as it is, the packet is 8.9 s
/// after the rest, and every interval after it came out 0 with no warning), and the last
/// record moved before the first (a file out of time order by 669.7 ms, the capture's span as
/// tshark gives it).
/// Each run warns once, on standard error and in the summary; the first keeps the SYN at its
/// whole second and the connections' durations (1.075 ms for connection 1 before: its SYN
/// is now up to a second early, so at least that) instead of zeros.
#[test]
fn timestamps_out_of_range_or_out_of_order_are_warned() {
    let orig = std::fs::read(fixture("loopback-http.pcap")).unwrap();
    let recs = records(&orig);
    assert_eq!(recs.len(), 53);
    let dir = TempDir::new("timestamps");

    let mut bad = orig.clone();
    bad[recs[0].0 + 4..recs[0].0 + 8].copy_from_slice(&8_915_240u32.to_le_bytes());
    let path = dir.join("bad-fraction.pcap");
    std::fs::write(&path, &bad).unwrap();
    let out = tcpwhy(&["analyze", "--format", "json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 packet had a timestamp whose fraction of a second is out of range"),
        "{err}"
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.last().unwrap();
    assert_eq!(summary["warnings"].as_array().unwrap().len(), 1);
    let conns: Vec<&Value> = lines.iter().filter(|v| v["type"] == "connection").collect();
    assert_eq!(conns.len(), 4);
    assert!(
        conns
            .iter()
            .all(|c| c["duration_ms"].as_f64().unwrap() >= 0.9),
        "{conns:?}"
    );

    let (last, first) = (recs[52], recs[0]);
    let mut shuffled = orig[..24].to_vec();
    shuffled.extend_from_slice(&orig[last.0..last.0 + last.1]);
    shuffled.extend_from_slice(&orig[first.0..last.0]);
    let path = dir.join("shuffled.pcap");
    std::fs::write(&path, &shuffled).unwrap();
    let out = tcpwhy(&["analyze", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 packet was stamped earlier than the packet before it in the same file (by up to 669.7 ms): the file is not in time order"),
        "{err}"
    );
}

/// loopback-http.pcap's 53 frames cut to 40 bytes each, as a capture with a 40-byte snapshot
/// length keeps them (tcpflow's simson.pcap): Ethernet 14 + IPv4 20 leave 6 bytes of each
/// 20-byte TCP header. Nothing can be analysed: the report says so rather than "No latency
/// cause found", and a warning names the 53 packets skipped and the snapshot length.
#[test]
fn a_capture_cut_before_every_tcp_header_says_nothing_was_analysed() {
    let orig = std::fs::read(fixture("loopback-http.pcap")).unwrap();
    let mut cut = orig[..24].to_vec();
    for (at, _) in records(&orig) {
        cut.extend_from_slice(&orig[at..at + 8]);
        cut.extend_from_slice(&40u32.to_le_bytes());
        cut.extend_from_slice(&orig[at + 12..at + 16]);
        cut.extend_from_slice(&orig[at + 16..at + 56]);
    }
    let dir = TempDir::new("snaplen-40");
    let path = dir.join("cut.pcap");
    std::fs::write(&path, &cut).unwrap();
    let out = tcpwhy(&["analyze", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().next(),
        Some("No TCP connection to analyse."),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("53 packets could not be decoded and were skipped (53 tcp-truncated): the capture's snapshot length cut every TCP packet before its header ended"),
        "{err}"
    );
}
