//! The lab's vantage matrix on this kernel (root: CI runs as root): the quick cells (client and
//! server vantage, the hosts' offloads on, IPv4) of stale-syn-timewait, slow-start-after-idle
//! and tail-loss, and the --rfc1337 SYN ladder that runs past a minute. Each capture is read
//! with tshark, not with tcpwhy, and must show its pathology (and the fixed one must not);
//! super-segments larger than the MSS must be there with offloads on. What `tcpwhy analyze`
//! names in each cell is printed (the matrix), not asserted: the detectors' costs at every
//! vantage are checked where the detectors are.
//!
//! Without root these tests fail with a message; set TCPWHY_SKIP_LAB=1 to skip them.

mod common;
use common::{have_tshark, tcpwhy, TempDir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// Lab runs share the CPU (their latencies are what is measured): one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The MSS over IPv4 with timestamps on a 1500-byte MTU; without timestamps it is 1460.
const MSS: u64 = 1448;

fn root_or_skip() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root && std::env::var("TCPWHY_SKIP_LAB").as_deref() != Ok("1") {
        panic!("the lab tests need root (CI runs as root); TCPWHY_SKIP_LAB=1 skips them");
    }
    root && have_tshark()
}

/// One TCP frame as tshark reads it.
#[derive(Debug, Clone)]
struct Frame {
    number: u64,
    time: f64,
    sport: u16,
    dport: u16,
    flags: u16,
    seq: u64,
    len: u64,
}

const FIN: u16 = 0x001;
const SYN: u16 = 0x002;
const RST: u16 = 0x004;
const ACK: u16 = 0x010;

fn frames(path: &Path) -> Vec<Frame> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-Y", "tcp", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.number", "-e", "frame.time_relative"])
        .args(["-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.flags"])
        .args(["-e", "tcp.seq_raw", "-e", "tcp.len"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark on {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 7, "{l}");
            Frame {
                number: f[0].parse().unwrap(),
                time: f[1].parse().unwrap(),
                sport: f[2].parse().unwrap(),
                dport: f[3].parse().unwrap(),
                flags: u16::from_str_radix(f[4].trim_start_matches("0x"), 16).unwrap(),
                seq: f[5].parse().unwrap(),
                len: f[6].parse().unwrap(),
            }
        })
        .collect()
}

/// The stale-SYN ladders in a capture: per client port, a SYN, the peer's bare ACK (old
/// numbers), the client's RST, and the same SYN (same ISN) again, then the SYN-ACK. Returns
/// (first SYN frame, SYN-ACK frame, seconds from the first SYN to the SYN-ACK) per ladder.
fn syn_ladders(fr: &[Frame], server_port: u16) -> Vec<(u64, u64, f64)> {
    let mut by_port: BTreeMap<u16, Vec<&Frame>> = BTreeMap::new();
    for f in fr {
        let port = if f.dport == server_port {
            f.sport
        } else if f.sport == server_port {
            f.dport
        } else {
            continue;
        };
        by_port.entry(port).or_default().push(f);
    }
    let mut out = Vec::new();
    for (port, fs) in by_port {
        // Walk each SYN of the client: is it followed by a bare ACK and an RST, and then the
        // same SYN again?
        for (i, syn) in fs.iter().enumerate() {
            if syn.sport != port || syn.flags & (SYN | ACK) != SYN {
                continue;
            }
            let rest = &fs[i + 1..];
            let bare_ack = rest
                .iter()
                .position(|f| f.sport == server_port && f.flags & (SYN | ACK | RST | FIN) == ACK);
            let Some(a) = bare_ack else { continue };
            let rst = rest[a..]
                .iter()
                .position(|f| f.sport == port && f.flags & RST != 0);
            let Some(r) = rst else { continue };
            let again = rest[a + r..]
                .iter()
                .position(|f| f.sport == port && f.flags & (SYN | ACK) == SYN);
            let Some(g) = again else { continue };
            if rest[a + r + g].seq != syn.seq {
                continue;
            }
            // Only the first SYN of a ladder starts one (the retries are inside it).
            if fs[..i]
                .iter()
                .any(|f| f.sport == port && f.flags & (SYN | ACK) == SYN && f.seq == syn.seq)
            {
                continue;
            }
            let synack = rest[a + r + g..]
                .iter()
                .find(|f| f.sport == server_port && f.flags & (SYN | ACK) == (SYN | ACK));
            if let Some(sa) = synack {
                out.push((syn.number, sa.number, sa.time - syn.time));
            }
        }
    }
    out
}

/// Data frames from `port` longer than the MSS: super-segments (TSO at the sender, GRO at the
/// receiver).
fn super_segments(fr: &[Frame], port: u16) -> usize {
    fr.iter().filter(|f| f.sport == port && f.len > MSS).count()
}

/// Bytes `port` sent within `window` seconds of its first data after each silence longer than
/// `idle` seconds (the first data of the capture excluded: a cold start for every phase).
fn first_flights(fr: &[Frame], port: u16, idle: f64, window: f64) -> Vec<u64> {
    let data: Vec<&Frame> = fr.iter().filter(|f| f.sport == port && f.len > 0).collect();
    let mut out = Vec::new();
    for (i, f) in data.iter().enumerate().skip(1) {
        if f.time - data[i - 1].time > idle {
            out.push(
                data[i..]
                    .iter()
                    .take_while(|g| g.time - f.time < window)
                    .map(|g| g.len)
                    .sum(),
            );
        }
    }
    out
}

/// Data frames from `port` that carry only bytes it had sent before (retransmissions).
fn resent(fr: &[Frame], port: u16) -> usize {
    let mut high: Option<u64> = None;
    let mut n = 0;
    for f in fr.iter().filter(|f| f.sport == port) {
        if f.flags & SYN != 0 {
            high = Some(f.seq + 1);
            continue;
        }
        if f.len == 0 {
            continue;
        }
        let end = f.seq + f.len;
        match high {
            Some(h) if end <= h => n += 1,
            _ => high = Some(end.max(high.unwrap_or(0))),
        }
    }
    n
}

fn run(args: &[&str]) -> Vec<Value> {
    let out = tcpwhy(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

fn scenario<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|v| v["type"] == "lab" && v["scenario"] == name)
        .unwrap_or_else(|| panic!("no {name} in {lines:?}"))
}

fn p50(v: &Value, phase: &str) -> f64 {
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == phase)
        .unwrap_or_else(|| panic!("no phase {phase}: {v}"))["p50_ms"]
        .as_f64()
        .unwrap()
}

fn cell<'a>(v: &'a Value, vantage: &str) -> &'a Value {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["vantage"] == vantage)
        .unwrap_or_else(|| panic!("no {vantage} cell: {v}"))
}

/// The matrix as the lab computed it, for the reader of the test's output.
fn print_matrix(lines: &[Value]) {
    let Some(m) = lines.iter().find(|v| v["type"] == "matrix") else {
        return;
    };
    eprintln!("scenario             vantage offl ip  broken ms  fixed ms  added ms (n)       named  cost ms    vs added");
    for c in m["cells"].as_array().unwrap() {
        eprintln!(
            "{:<20} {:<7} {:<4} {:<3} {:>9} {:>9} {:>12} ({:>2}) {:>6} {:>10} {:>8}",
            c["scenario"].as_str().unwrap_or("?"),
            c["vantage"].as_str().unwrap_or("?"),
            c["offloads"].as_str().unwrap_or("?"),
            c["ip"],
            c["broken_p50_ms"],
            c["fixed_p50_ms"],
            c["added_ms"],
            c["occurrences"],
            c["named"],
            c["cost_ms"],
            c["deviation"],
        );
    }
}

#[test]
fn quick_cells_capture_each_pathology_at_client_and_server_with_offloads() {
    if !root_or_skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("labtest-vantage");
    let d = format!("{}/", dir.path().display());
    let lines = run(&[
        "lab",
        "run",
        "stale-syn-timewait",
        "slow-start-after-idle",
        "tail-loss",
        "--quick",
        "--vantage",
        "client,server",
        "--offloads",
        "on",
        "--ip",
        "4",
        "--json",
        "--capture",
        &d,
    ]);
    print_matrix(&lines);
    let cap = |scenario: &str, vantage: &str, phase: &str| {
        let p = dir.join(format!("{scenario}-{vantage}-on-ip4-{phase}.pcap"));
        assert!(p.exists(), "{} missing", p.display());
        frames(&p)
    };

    // Stale SYN: every reconnect the client measured as slow is a ladder in both captures,
    // about as long as the client measured; none in the fixed captures. The 1 MB upload
    // leaves the client in TSO frames and reaches the server merged by GRO.
    let v = scenario(&lines, "stale-syn-timewait");
    let slow = cell(v, "client")["occurrences"].as_u64().unwrap();
    assert!(slow >= 2, "most reconnects meet TIME-WAIT: {v}");
    assert!(p50(v, "fixed") < p50(v, "broken") / 2.0, "{v}");
    for vantage in ["client", "server"] {
        let broken = cap("stale-syn-timewait", vantage, "broken");
        let ladders = syn_ladders(&broken, 5000);
        assert_eq!(ladders.len() as u64, slow, "{vantage}: {ladders:?}");
        for (_, _, secs) in &ladders {
            assert!((0.002..0.5).contains(secs), "{vantage}: {ladders:?}");
        }
        let port = |f: &Frame| f.dport == 5000;
        let client_port = broken.iter().find(|f| port(f)).map(|f| f.sport).unwrap();
        assert!(
            super_segments(&broken, client_port) > 0,
            "{vantage}: no upload frame over {MSS} bytes"
        );
        let fixed = cap("stale-syn-timewait", vantage, "fixed");
        assert!(syn_ladders(&fixed, 5000).is_empty(), "{vantage}");
    }

    // Slow start after idle: after each 3 s gap the server sends one initial window (10
    // segments) in the first round trip when it restarts, and far more when it does not. The
    // sender's capture holds TSO frames, the receiver's GRO-merged ones.
    let v = scenario(&lines, "slow-start-after-idle");
    assert!(p50(v, "broken") > p50(v, "fixed") + 100.0, "{v}");
    for vantage in ["client", "server"] {
        // The server's ports: 5000 broken, 5001 fixed (one port per phase).
        let broken = cap("slow-start-after-idle", vantage, "broken");
        let fixed = cap("slow-start-after-idle", vantage, "fixed");
        let b = first_flights(&broken, 5000, 1.0, 0.04);
        let f = first_flights(&fixed, 5001, 1.0, 0.04);
        assert_eq!(b.len(), 2, "{vantage}: two idle gaps: {b:?}");
        assert_eq!(f.len(), 2, "{vantage}: {f:?}");
        for &x in &b {
            assert!(x <= 10 * MSS, "{vantage}: restart flight {x} bytes: {b:?}");
        }
        for &x in &f {
            assert!(x >= 4 * 10 * MSS, "{vantage}: kept window {x} bytes: {f:?}");
        }
        assert!(super_segments(&broken, 5000) > 0, "{vantage}");
        assert!(super_segments(&fixed, 5001) > 0, "{vantage}");
    }

    // Tail loss: the mid router (on the server's side) drops each response's last segment
    // once: the server's capture holds each tail and its retransmission, the client's only the
    // retransmission. Nothing is resent in the control run.
    let v = scenario(&lines, "tail-loss");
    let dropped = v["phases"][0]["extra"]["emulator_dropped"]
        .as_u64()
        .unwrap();
    assert_eq!(dropped, 8, "{v}");
    assert!(p50(v, "broken") > p50(v, "control") + 100.0, "{v}");
    let server = cap("tail-loss", "server", "broken");
    assert_eq!(resent(&server, 5000), 8);
    assert!(super_segments(&server, 5000) > 0);
    assert_eq!(resent(&cap("tail-loss", "client", "broken"), 5000), 0);
    for vantage in ["client", "server"] {
        assert_eq!(resent(&cap("tail-loss", vantage, "control"), 5001), 0);
    }
}

/// The --rfc1337 case: the TIME-WAIT socket ignores the client's RST, so the same SYN is
/// retried with backoff until TIME-WAIT ends (about a minute). One reconnect (--quick).
#[test]
fn rfc1337_syn_ladder_runs_past_a_minute() {
    if !root_or_skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("labtest-rfc1337");
    let d = format!("{}/", dir.path().display());
    let lines = run(&[
        "lab",
        "run",
        "stale-syn-timewait",
        "--rfc1337",
        "--quick",
        "--vantage",
        "client,server",
        "--offloads",
        "on",
        "--ip",
        "4",
        "--json",
        "--capture",
        &d,
    ]);
    print_matrix(&lines);
    let v = scenario(&lines, "stale-syn-timewait");
    let broken = p50(v, "broken");
    assert!((60_000.0..90_000.0).contains(&broken), "{v}");
    assert!(p50(v, "fixed") < 100.0, "{v}");
    for vantage in ["client", "server"] {
        let p = dir.join(format!(
            "stale-syn-timewait-rfc1337-{vantage}-on-ip4-broken.pcap"
        ));
        let fr = frames(&p);
        let ladders = syn_ladders(&fr, 5000);
        assert_eq!(ladders.len(), 1, "{vantage}: {ladders:?}");
        let (first, synack, secs) = ladders[0];
        // The capture's ladder is the connect() the client measured, within a few ms.
        assert!(
            (secs * 1e3 - broken).abs() < 20.0,
            "{vantage}: {secs} s against {broken} ms"
        );
        // Every retry is the same SYN, each answered by the bare ACK and the client's RST.
        let syn = fr.iter().find(|f| f.number == first).unwrap();
        let retries = fr
            .iter()
            .filter(|f| f.number > first && f.number < synack)
            .filter(|f| f.sport == syn.sport && f.flags & (SYN | ACK) == SYN)
            .inspect(|f| assert_eq!(f.seq, syn.seq, "{vantage}: frame {}", f.number))
            .count();
        let rsts = fr
            .iter()
            .filter(|f| f.number > first && f.number < synack)
            .filter(|f| f.sport == syn.sport && f.flags & RST != 0)
            .count();
        assert!(retries >= 5, "{vantage}: {retries} retries");
        // Each SYN met the bare ACK and the client's RST, but the last (TIME-WAIT had ended)
        // and the quick retry 2 jiffies after the first RST (the TIME-WAIT socket sends at
        // most one such ACK per 500 ms, net.ipv4.tcp_invalid_ratelimit).
        assert!(
            rsts + 1 >= retries && rsts <= retries,
            "{vantage}: {rsts} RSTs, {retries} SYNs after the first"
        );
    }
}

/// Cells need a capture: the scenarios without one refuse them, before anything is built
/// (no root needed); unknown vantages, offloads and IP versions are usage errors.
#[test]
fn cells_are_refused_where_they_cannot_be() {
    for args in [
        &["lab", "run", "seed000-reproducer", "--vantage", "all"][..],
        &["lab", "run", "ehash-chain", "--ip", "6"][..],
        &["lab", "run", "stale-syn-timewait", "--vantage", "tap"][..],
        &["lab", "run", "stale-syn-timewait", "--offloads", "some"][..],
        &["lab", "run", "stale-syn-timewait", "--ip", "5"][..],
    ] {
        let out = tcpwhy(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.is_empty(), "{args:?}");
        if args[2] == "seed000-reproducer" {
            assert!(err.contains("records no capture"), "{err}");
        }
    }
}
