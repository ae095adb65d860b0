//! Sharding connections over threads changes nothing in the report: `--threads 2, 3, 5` give
//! byte for byte the output of `--threads 1` (everything on one thread), on every fixture and
//! on a capture built here that crosses several of the engine's 32 Ki-packet rounds.

use crate::common::{fixtures, tcpwhy, TempDir};
use proptest::prelude::RngExt as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Ethernet + IPv4 + TCP (no options), `len` payload bytes (headers only are captured).
#[allow(clippy::too_many_arguments)]
fn frame(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u16,
) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 8;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&(40 + len).to_be_bytes());
    // The IP ID is set by `write_pcap`, in capture order.
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    f[42..46].copy_from_slice(&ack.to_be_bytes());
    f[46] = 0x50;
    f[47] = flags;
    f[48..50].copy_from_slice(&65535u16.to_be_bytes());
    f
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;

/// 12 000 request/response connections from 500 client ports on 20 addresses to one server,
/// several open at once: tuples are reused (new generations with predecessors), a server
/// sometimes thinks 150 ms (server-delay), a response is sometimes lost and sent again 250 ms
/// later (rto-retransmission), some connections end with RST, and every 400 connections the
/// traffic pauses 3 s so lingering connections finish in the middle of the capture.
fn build(path: &Path) -> usize {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let server = [10, 9, 9, 9];
    let mut pkts: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut t: u64 = 1_000_000_000; // microseconds
    for i in 0..12_000u32 {
        t += 100 + rnd(300);
        if i % 400 == 399 {
            t += 3_000_000;
        }
        let client = [10, 1, 0, (i % 20) as u8 + 1];
        let port = 40_000 + (rnd(500) as u16);
        let cisn = rnd(1 << 31) as u32;
        let sisn = rnd(1 << 31) as u32;
        let rtt = 200 + rnd(2000);
        let think = if rnd(40) == 0 { 150_000 } else { 50 + rnd(200) };
        let c = |seq: u32, ack: u32, flags: u8, len: u16| {
            frame(client, server, port, 80, seq, ack, flags, len)
        };
        let s = |seq: u32, ack: u32, flags: u8, len: u16| {
            frame(server, client, 80, port, seq, ack, flags, len)
        };
        let mut at = t;
        let mut put = |dt: u64, f: Vec<u8>, pkts: &mut Vec<(u64, Vec<u8>)>| {
            at += dt;
            pkts.push((at, f));
        };
        put(0, c(cisn, 0, SYN, 0), &mut pkts);
        put(rtt, s(sisn, cisn + 1, SYN | ACK, 0), &mut pkts);
        put(1, c(cisn + 1, sisn + 1, ACK, 0), &mut pkts);
        put(5, c(cisn + 1, sisn + 1, ACK | PSH, 100), &mut pkts);
        put(
            rtt + think,
            s(sisn + 1, cisn + 101, ACK | PSH, 1000),
            &mut pkts,
        );
        if rnd(60) == 0 {
            // Lost on the way to the client: sent again after a timeout.
            put(250_000, s(sisn + 1, cisn + 101, ACK | PSH, 1000), &mut pkts);
        }
        put(rtt, c(cisn + 101, sisn + 1001, ACK, 0), &mut pkts);
        if rnd(10) == 0 {
            put(5, c(cisn + 101, sisn + 1001, RST | ACK, 0), &mut pkts);
        } else {
            put(5, c(cisn + 101, sisn + 1001, FIN | ACK, 0), &mut pkts);
            put(rtt, s(sisn + 1001, cisn + 102, FIN | ACK, 0), &mut pkts);
            put(1, c(cisn + 102, sisn + 1002, ACK, 0), &mut pkts);
        }
    }
    pkts.sort_by_key(|p| p.0);
    write_pcap(path, &pkts);
    pkts.len()
}

/// A pcap of `pkts` (time in microseconds, frame): headers only were captured, the frame on
/// the wire carried the payload too. Each frame gets the next IPv4 ID in capture order, as
/// from one host-wide counter (Windows-like): a segment sent again carries an ID of its own,
/// as every real stack's does (an ID repeated on the segment sent just before is a copy).
fn write_pcap(path: &Path, pkts: &[(u64, Vec<u8>)]) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(&0xa1b2c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    for (i, (ts, f)) in pkts.iter().enumerate() {
        let mut f = f.clone();
        f[18..20].copy_from_slice(&(i as u16).wrapping_add(1).to_be_bytes());
        let f = &f;
        let wire = 14 + u32::from(u16::from_be_bytes([f[16], f[17]]));
        w.write_all(&((ts / 1_000_000) as u32).to_le_bytes())
            .unwrap();
        w.write_all(&((ts % 1_000_000) as u32).to_le_bytes())
            .unwrap();
        w.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        w.write_all(&wire.to_le_bytes()).unwrap();
        w.write_all(f).unwrap();
    }
    w.flush().unwrap();
}

/// The JSON records of `--threads 1` (everything on one thread) for `file`.
fn one_thread_records(file: &str) -> Vec<Value> {
    let out = tcpwhy(&["analyze", "--threads", "1", "--format", "json", file]);
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Exit code, standard output and standard error (broken fixtures fail the same way).
fn run(threads: usize, args: &[&str], file: &str) -> Vec<u8> {
    let t = threads.to_string();
    let mut all = vec!["analyze", "--threads", &t];
    all.extend_from_slice(args);
    all.push(file);
    let out = tcpwhy(&all);
    let mut v = format!("exit {:?}\n", out.status.code()).into_bytes();
    v.extend(out.stdout);
    v.extend(b"--- stderr\n");
    v.extend(out.stderr);
    v
}

fn same_for_any_thread_count(file: &str) {
    // (JSON with and without exchanges: the workers write JSON lines themselves, dropping
    // exchanges and stalls unless asked for them. Text and HTML take connections in brief
    // from the workers, text with details takes them whole.)
    for args in [
        &["--format", "json", "--exchanges"][..],
        &["--format", "json"][..],
        &["--top", "50"][..],
        &["--details", "--top", "20"][..],
        &["--format", "html"][..],
    ] {
        let one = run(1, args, file);
        assert!(!one.is_empty());
        for threads in [2, 3, 5] {
            let many = run(threads, args, file);
            if many != one {
                let (a, b) = (
                    String::from_utf8_lossy(&one),
                    String::from_utf8_lossy(&many),
                );
                let (i, (x, y)) = a
                    .lines()
                    .zip(b.lines())
                    .enumerate()
                    .find(|(_, (x, y))| x != y)
                    .unwrap_or((0, ("(line count differs)", "")));
                panic!("{file} {args:?}: --threads {threads} differs at line {}:\n  1: {x}\n  {threads}: {y}", i + 1);
            }
        }
    }
}

#[test]
fn every_fixture_gives_the_same_report_with_any_thread_count() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["captures", "lab"] {
        let root = fixtures().parent().unwrap().to_path_buf();
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.contains(".pcap") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    for f in files {
        same_for_any_thread_count(f.to_str().unwrap());
    }
}

#[test]
fn a_capture_across_many_rounds_gives_the_same_report_with_any_thread_count() {
    let dir = TempDir::new("threads");
    let path = dir.join("capture.pcap");
    let packets = build(&path);
    assert!(packets > 3 * 32 * 1024, "{packets} packets: several rounds");
    let file = path.to_str().unwrap();
    // The capture exercises what ordering could get wrong: findings, tuples reused with a
    // predecessor, connections finished by timers in the middle of the capture.
    let recs = one_thread_records(file);
    let conns: Vec<&Value> = recs.iter().filter(|r| r["type"] == "connection").collect();
    assert_eq!(conns.len(), 12_000);
    let count = |f: &dyn Fn(&&Value) -> bool| recs.iter().filter(|r| f(r)).count();
    assert!(count(&|r| r["type"] == "connection" && !r["prev"].is_null()) > 1000);
    assert!(count(&|r| r["id"] == "server-delay") > 100);
    assert!(count(&|r| r["id"] == "rto-retransmission") > 50);
    let mid = conns
        .iter()
        .position(|c| c["end_reason"] == "closed")
        .unwrap();
    assert!(mid < conns.len() / 2, "connections finished mid-capture");
    same_for_any_thread_count(file);
}

#[test]
fn frames_that_are_not_tcp_do_not_move_time_for_threads_alone() {
    // One open connection, then an ARP frame 400 s later (past the 300 s idle timeout) and a
    // TCP frame stamped before that ARP frame: one thread finishes the connection at the end
    // of the capture (only TCP moves its clock); threads must too, and must clamp the late
    // TCP frame's time the same way.
    let dir = TempDir::new("threads-arp");
    let path = dir.join("capture.pcap");
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let recs: Vec<(u64, Vec<u8>)> = vec![
        (1_000_000, frame(a, b, 40000, 80, 100, 0, SYN, 0)),
        (1_000_100, frame(b, a, 80, 40000, 500, 101, SYN | ACK, 0)),
        (1_000_200, frame(a, b, 40000, 80, 101, 501, ACK, 0)),
        (401_000_000, arp),
        (300_000_000, frame(a, b, 40001, 80, 7, 0, SYN, 0)),
    ];
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    w.write_all(&0xa1b2c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    for (ts, f) in &recs {
        for v in [
            (ts / 1_000_000) as u32,
            (ts % 1_000_000) as u32,
            f.len() as u32,
            f.len() as u32,
        ] {
            w.write_all(&v.to_le_bytes()).unwrap();
        }
        w.write_all(f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let file = path.to_str().unwrap();
    let out = tcpwhy(&["analyze", "--threads", "1", "--format", "json", file]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"end_reason\":\"capture-end\""), "{text}");
    same_for_any_thread_count(file);
}

#[test]
fn connections_open_at_the_end_give_the_same_report_with_any_thread_count() {
    // 30 000 connections still open when the capture ends: each worker finishes its share in
    // pieces of 4096 (engine.rs, END_PIECE), merged as they come; with 2, 3 or 5 workers every
    // worker sends several pieces. Every 7th connection is a SYN sent twice and never answered
    // (syn-unanswered, reported at the end), every 5th has a request not yet answered, so the
    // end's records are findings as well as connections.
    let dir = TempDir::new("threads-end");
    let path = dir.join("capture.pcap");
    let server = [10, 9, 9, 9];
    let mut pkts: Vec<(u64, Vec<u8>)> = Vec::new();
    for i in 0..30_000u32 {
        let t = 1_000_000_000 + u64::from(i) * 1000; // microseconds, 1 ms apart
        let client = [10, 2, (i >> 14) as u8, (i % 200) as u8 + 1];
        let port = 32_768 + (i % 16_384) as u16;
        let cisn = i.wrapping_mul(2_654_435_761);
        let sisn = cisn ^ 0x5555_5555;
        let c = |seq: u32, ack: u32, flags: u8, len: u16| {
            frame(client, server, port, 80, seq, ack, flags, len)
        };
        let s = |seq: u32, ack: u32, flags: u8, len: u16| {
            frame(server, client, 80, port, seq, ack, flags, len)
        };
        pkts.push((t, c(cisn, 0, SYN, 0)));
        if i % 7 == 0 {
            pkts.push((t + 1_000_000, c(cisn, 0, SYN, 0)));
            continue;
        }
        pkts.push((t + 300, s(sisn, cisn + 1, SYN | ACK, 0)));
        pkts.push((t + 301, c(cisn + 1, sisn + 1, ACK, 0)));
        pkts.push((t + 305, c(cisn + 1, sisn + 1, ACK | PSH, 100)));
        if i % 5 != 0 {
            pkts.push((t + 700, s(sisn + 1, cisn + 101, ACK | PSH, 1000)));
            pkts.push((t + 1000, c(cisn + 101, sisn + 1001, ACK, 0)));
        }
    }
    pkts.sort_by_key(|p| p.0);
    write_pcap(&path, &pkts);
    let file = path.to_str().unwrap();
    let recs = one_thread_records(file);
    let count = |f: &dyn Fn(&Value) -> bool| recs.iter().filter(|r| f(r)).count();
    assert_eq!(
        count(&|r| r["type"] == "connection" && r["end_reason"] == "capture-end"),
        30_000
    );
    assert_eq!(
        count(&|r| r["id"] == "syn-unanswered"),
        30_000_usize.div_ceil(7)
    );
    same_for_any_thread_count(file);
}
