//! Floods and scans of SYNs: one capture-level finding each (`syn-flood`, `syn-scan`), named
//! only when no client's TCP stack would have made the attempts, the same with any number of
//! threads, in JSON, text and HTML. Every capture is built here packet by packet; the
//! expected numbers are counted from the packets as they are built.

use crate::common::{tcpwhy, TempDir};
use serde_json::Value;
use std::io::Write;
use std::path::Path;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const RST: u8 = 0x04;

/// One packet: time (microseconds), source, destination, ports, sequence, ack, flags.
#[derive(Clone, Copy)]
struct Pkt {
    us: u64,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
}

/// Ethernet + IPv4 + TCP (no options, no payload); the IP ID is the packet's number, so no
/// two packets look like one captured twice.
fn frame(p: &Pkt, ip_id: u16) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 8;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[18..20].copy_from_slice(&ip_id.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&p.src);
    f[30..34].copy_from_slice(&p.dst);
    f[34..36].copy_from_slice(&p.sport.to_be_bytes());
    f[36..38].copy_from_slice(&p.dport.to_be_bytes());
    f[38..42].copy_from_slice(&p.seq.to_be_bytes());
    f[42..46].copy_from_slice(&p.ack.to_be_bytes());
    f[46] = 0x50;
    f[47] = p.flags;
    f[48..50].copy_from_slice(&512u16.to_be_bytes());
    f
}

/// A pcap of the packets, in time order (equal times keep their order).
fn write_pcap(path: &Path, pkts: &[Pkt]) {
    let mut pkts = pkts.to_vec();
    pkts.sort_by_key(|p| p.us);
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(&0xa1b2c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    for (i, p) in pkts.iter().enumerate() {
        let f = frame(p, i as u16 + 1);
        let t = 1_700_000_000_000_000 + p.us;
        for v in [(t / 1_000_000) as u32, (t % 1_000_000) as u32, 54, 54] {
            w.write_all(&v.to_le_bytes()).unwrap();
        }
        w.write_all(&f).unwrap();
    }
    w.flush().unwrap();
}

const TARGET: [u8; 4] = [192, 0, 2, 1];

/// A SYN from source number `k` (10.0.<k/250>.<k%250 + 1>, port 1024 + 7k) to TARGET:80.
fn spoofed_syn(k: u32, us: u64) -> Pkt {
    Pkt {
        us,
        src: [10, 0, (k / 250) as u8, (k % 250) as u8 + 1],
        dst: TARGET,
        sport: 1024 + (7 * k) as u16,
        dport: 80,
        seq: 1_000 + k * 100_000,
        ack: 0,
        flags: SYN,
    }
}

/// Something later in the capture, on a tuple of its own (a lone ACK: a connection seen
/// mid-stream, not an attempt): capture time goes on to `us`.
fn later(us: u64) -> Pkt {
    Pkt {
        us,
        src: [10, 9, 9, 9],
        dst: [10, 9, 9, 10],
        sport: 50_000,
        dport: 22,
        seq: 5,
        ack: 5,
        flags: ACK,
    }
}

/// `tcpwhy analyze --format json` with `args` on the packets: the findings.
fn findings(pkts: &[Pkt], args: &[&str]) -> Vec<Value> {
    let dir = TempDir::new("flood");
    let path = dir.join("c.pcap");
    write_pcap(&path, pkts);
    let file = path.to_string_lossy().to_string();
    let mut all = vec!["analyze", "--format", "json"];
    all.extend_from_slice(args);
    all.push(&file);
    let out = tcpwhy(&all);
    assert!(
        out.status.code() == Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "finding")
        .collect()
}

fn with_id<'a>(f: &'a [Value], id: &str) -> Vec<&'a Value> {
    f.iter().filter(|x| x["id"] == id).collect()
}

/// 300 SYNs from 300 addresses (distinct 4-tuples) to 192.0.2.1:80, 5 ms apart (0 to
/// 1.495 s), none answered, none sent again; the capture goes on to 6.5 s, so every SYN had
/// 3 s and more to be sent again by a client's stack. One syn-flood finding: 300 attempts,
/// all 300 such that no stack makes them, 300 sources, 200.7 a second (300 / 1.495 s),
/// evidence the first 10 SYNs (frames 1-10). Nothing else: a single SYN unanswered is not
/// syn-unanswered.
fn spoofed_flood() -> Vec<Pkt> {
    let mut p: Vec<Pkt> = (0..300)
        .map(|k| spoofed_syn(k, u64::from(k) * 5_000))
        .collect();
    p.push(later(6_500_000));
    p
}

#[test]
fn a_flood_of_spoofed_syns_is_one_syn_flood_finding() {
    let f = findings(&spoofed_flood(), &[]);
    assert_eq!(f.len(), 1, "{f:?}");
    let x = &f[0];
    assert_eq!(x["id"], "syn-flood");
    assert_eq!(x["connection"], Value::Null);
    assert_eq!((&x["client"], &x["server"]), (&Value::Null, &Value::Null));
    assert_eq!(x["cost_ms"], 0.0);
    assert_eq!(
        x["frames"],
        serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    );
    let d = &x["details"];
    assert_eq!(d["target"], "192.0.2.1:80");
    assert_eq!(
        (d["attempts"].as_u64(), d["crafted"].as_u64()),
        (Some(300), Some(300))
    );
    assert_eq!(
        (d["sources"].as_u64(), &d["sources_estimated"]),
        (Some(300), &Value::Bool(false))
    );
    assert_eq!(
        d["answered"],
        serde_json::json!({"syn_ack": 0, "rst": 0, "other": 0, "none": 300})
    );
    assert_eq!(d["duration_ms"], 1495.0);
    assert_eq!(d["per_second"], 200.7);
    assert_eq!(d["retried"], 0);
    assert_eq!(
        (x["start_ns"].as_i64(), x["end_ns"].as_i64()),
        (
            Some(1_700_000_000_000_000_000),
            Some(1_700_000_001_495_000_000)
        )
    );
}

/// The same flood with the capture ending at 3.495 s: a SYN after 0.495 s (k = 100..299) had
/// less than 3 s in the capture to be sent again by a client's stack, so only the first 100
/// (k = 0..99, the last at 0.495 + 3 = 3.495 s) count as made by no stack: still a flood
/// (100 >= 100, 100 / 1.495 s = 67 a second).
#[test]
fn syns_too_close_to_the_end_of_the_capture_are_not_counted_as_crafted() {
    let mut p = spoofed_flood();
    p.pop();
    p.push(later(3_495_000));
    let f = findings(&p, &[]);
    let d = &with_id(&f, "syn-flood")[0]["details"];
    assert_eq!(
        (d["attempts"].as_u64(), d["crafted"].as_u64()),
        (Some(300), Some(100))
    );
}

/// 99 attempts no stack would make at one target are not a flood; 100 are (the threshold:
/// syn_flood.rs). The capture goes on to 6.5 s after each.
#[test]
fn a_flood_takes_a_hundred_attempts() {
    for (n, named) in [(99u32, false), (100, true)] {
        let mut p: Vec<Pkt> = (0..n)
            .map(|k| spoofed_syn(k, u64::from(k) * 5_000))
            .collect();
        p.push(later(6_500_000));
        let f = findings(&p, &[]);
        assert_eq!(
            with_id(&f, "syn-flood").len(),
            usize::from(named),
            "{n}: {f:?}"
        );
    }
}

/// 150 such SYNs one second apart (a health check with a short connect timeout, against a
/// host that never answers): 1 a second, under the 10 a second a flood takes.
#[test]
fn a_slow_trickle_of_abandoned_syns_is_not_a_flood() {
    let mut p: Vec<Pkt> = (0..150)
        .map(|k| spoofed_syn(k, u64::from(k) * 1_000_000))
        .collect();
    p.push(later(160_000_000));
    assert!(with_id(&findings(&p, &[]), "syn-flood").is_empty());
}

/// 300 clients whose SYNs (5 ms apart) are each sent again 1 s and 3 s later by their stack,
/// never answered (a server that is down): real clients, not a flood. Each is syn-unanswered
/// (3 SYNs, 2 retries); no syn-flood.
#[test]
fn clients_retrying_an_unreachable_server_are_not_a_flood() {
    let mut p = Vec::new();
    for k in 0..300u32 {
        for again in [0, 1_000_000, 3_000_000] {
            p.push(spoofed_syn(k, u64::from(k) * 5_000 + again));
        }
    }
    p.push(later(10_000_000));
    let f = findings(&p, &[]);
    assert!(with_id(&f, "syn-flood").is_empty());
    assert_eq!(with_id(&f, "syn-unanswered").len(), 300);
}

/// One client retrying one SYN (1, 2, 4 s later): syn-unanswered, one attempt, no flood.
#[test]
fn one_client_retrying_is_syn_unanswered_not_a_flood() {
    let p: Vec<Pkt> = [0, 1_000_000, 3_000_000, 7_000_000]
        .iter()
        .map(|&us| spoofed_syn(0, us))
        .chain([later(20_000_000)])
        .collect();
    let f = findings(&p, &[]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["id"], "syn-unanswered");
}

/// A flood at an open port: the server answers each of the 300 SYNs with a SYN-ACK (and
/// sends it again 1 s later) that the spoofed sources never acknowledge. All 300 are
/// attempts no stack makes (a stack acknowledges a SYN-ACK), also the last ones, 1 s before
/// the end of the capture.
#[test]
fn a_flood_answered_by_syn_acks_never_acknowledged() {
    let mut p = Vec::new();
    for k in 0..300u32 {
        let syn = spoofed_syn(k, u64::from(k) * 5_000);
        p.push(syn);
        for again in [100, 1_000_100] {
            p.push(Pkt {
                us: syn.us + again,
                src: syn.dst,
                dst: syn.src,
                sport: syn.dport,
                dport: syn.sport,
                seq: 777,
                ack: syn.seq + 1,
                flags: SYN | ACK,
            });
        }
    }
    p.push(later(2_500_000));
    let f = findings(&p, &[]);
    let x = with_id(&f, "syn-flood");
    assert_eq!(x.len(), 1, "{f:?}");
    let d = &x[0]["details"];
    assert_eq!(
        (d["attempts"].as_u64(), d["crafted"].as_u64()),
        (Some(300), Some(300))
    );
    assert_eq!(d["answered"]["syn_ack"], 300);
    assert!(x[0]["explanation"]
        .as_str()
        .unwrap()
        .contains("the server answered 300 with a SYN-ACK that was never acknowledged"));
}

/// A SYN scan: 192.0.2.100 port 50000 sends one SYN to each of ports 1-200 of 192.0.2.9, 1 ms
/// apart (frames 1-200 are its SYNs, the answers come after them). Ports 22 and 80 answer
/// with a SYN-ACK, which the scanner resets; ports 25 and 113 answer with RST|ACK; the rest
/// never answer. The capture goes on to 5 s. One syn-scan finding: 200 attempts at 200
/// services (1 host, 200 ports), 198 made by no stack (the 2 refused are not: a stack gives
/// up at a reset too), open 22 and 80, closed 25 and 113, 196 silent, 200 a second (200 /
/// 0.199 s, at least 1 s: 200); evidence frames 1-10. The refusals are syn-refused too; no
/// port is flooded (one attempt each).
fn scan() -> Vec<Pkt> {
    let (me, host) = ([192, 0, 2, 100], [192, 0, 2, 9]);
    let mut p = Vec::new();
    for port in 1..=200u16 {
        let us = u64::from(port - 1) * 1_000;
        let syn = Pkt {
            us,
            src: me,
            dst: host,
            sport: 50_000,
            dport: port,
            seq: 4242,
            ack: 0,
            flags: SYN,
        };
        p.push(syn);
        let answer = |flags, seq, dt| Pkt {
            us: 200_000 + dt,
            src: host,
            dst: me,
            sport: port,
            dport: 50_000,
            seq,
            ack: 4243,
            flags,
        };
        match port {
            22 | 80 => {
                p.push(answer(SYN | ACK, 9000, u64::from(port)));
                let mut r = syn;
                (r.us, r.seq, r.flags) = (200_000 + u64::from(port) + 1, 4243, RST);
                p.push(r);
            }
            25 | 113 => p.push(answer(RST | ACK, 0, u64::from(port))),
            _ => {}
        }
    }
    p.push(later(5_000_000));
    p
}

#[test]
fn a_syn_scan_is_one_syn_scan_finding() {
    let f = findings(&scan(), &[]);
    let ids: Vec<&str> = f.iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["syn-refused", "syn-refused", "syn-scan"], "{f:?}");
    let x = with_id(&f, "syn-scan")[0];
    assert_eq!(
        x["frames"],
        serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    );
    let d = &x["details"];
    assert_eq!(d["source"], "192.0.2.100");
    assert_eq!(
        (d["attempts"].as_u64(), d["crafted"].as_u64()),
        (Some(200), Some(198))
    );
    assert_eq!(
        (
            d["targets"].as_u64(),
            d["hosts"].as_u64(),
            d["ports"].as_u64()
        ),
        (Some(200), Some(1), Some(200))
    );
    assert_eq!(d["open"], serde_json::json!(["22", "80"]));
    assert_eq!(d["closed"], serde_json::json!(["25", "113"]));
    assert_eq!(d["silent_count"], 196);
    assert_eq!(d["per_second"], 200.0);
    assert!(x["explanation"]
        .as_str()
        .unwrap()
        .starts_with("192.0.2.100 sent 200 SYNs to 200 ports of 192.0.2.9 in 199 ms"));
}

/// `--disable` turns each off; `--fail-on` sees them; `tcpwhy explain` documents them.
#[test]
fn the_findings_are_registered() {
    assert!(findings(&spoofed_flood(), &["--disable", "syn-flood"]).is_empty());
    let f = findings(&scan(), &["--disable", "syn-scan"]);
    assert!(with_id(&f, "syn-scan").is_empty() && with_id(&f, "syn-refused").len() == 2);
    let dir = TempDir::new("flood-fail");
    let path = dir.join("f.pcap");
    write_pcap(&path, &spoofed_flood());
    let file = path.to_string_lossy().to_string();
    let out = tcpwhy(&["analyze", "--quiet", "--fail-on", "syn-flood", &file]);
    assert_eq!(out.status.code(), Some(1));
    for id in ["syn-flood", "syn-scan"] {
        let out = tcpwhy(&["explain", id]);
        assert_eq!(out.status.code(), Some(0));
        let doc = String::from_utf8_lossy(&out.stdout);
        assert!(
            doc.contains("\nThresholds.") && doc.contains("\nCost. None") && !doc.contains("**"),
            "{doc}"
        );
        let list = String::from_utf8_lossy(&tcpwhy(&["explain"]).stdout).to_string();
        assert!(list.lines().any(|l| l.starts_with(id)), "{list}");
    }
}

/// The findings come from every worker's summary, merged at the end: the report is byte for
/// byte the same with any number of threads, in JSON, text and HTML; text and HTML name the
/// findings as about the capture as a whole.
#[test]
fn the_same_with_any_thread_count_in_every_format() {
    let dir = TempDir::new("flood-threads");
    let mut p = spoofed_flood();
    // The scan beside the flood, 10 s later.
    p.extend(scan().into_iter().map(|mut x| {
        x.us += 10_000_000;
        x
    }));
    let path = dir.join("both.pcap");
    write_pcap(&path, &p);
    let file = path.to_string_lossy().to_string();
    for args in [
        &["--format", "json"][..],
        &[][..],
        &["--format", "html"][..],
    ] {
        let run = |threads: &str| {
            let mut all = vec!["analyze", "--threads", threads];
            all.extend_from_slice(args);
            all.push(&file);
            tcpwhy(&all).stdout
        };
        let one = run("1");
        for threads in ["2", "3", "5"] {
            assert!(run(threads) == one, "{args:?} --threads {threads}");
        }
        let text = String::from_utf8_lossy(&one);
        for id in ["syn-flood", "syn-scan"] {
            assert!(text.contains(id), "{args:?}: {id}");
        }
        if args.is_empty() {
            assert!(text.contains("syn-scan: 0.000 ms lost: about the capture as a whole"));
        }
        if args.contains(&"html") {
            assert!(text.contains("syn-flood &middot; the capture as a whole"));
        }
    }
}

/// cs_synscan.pcapng (../shared/corpus/real): nmap's SYN scan of 64.13.134.52 from
/// 172.16.0.8, checked with tshark: 1994 SYNs from ports 36050, 36051 and 36061 (one each
/// per tuple) to 1000 ports, 0 to 5.14 s; SYN-ACKs from ports 22, 53 and 80 (resent, never
/// acknowledged); RST|ACK from 25, 70, 31337 and 113 (twice: two source ports); the capture
/// ends at 23.1 s. So: 1994 attempts, 1989 made by no stack (all but the 5 refused), 1000
/// ports, open 22, 53, 80, closed 25, 70, 113, 31337, 993 silent; the 5 refusals stay
/// syn-refused; nothing stale. (Skipped when the corpus is absent: TCPWHY_REAL_CORPUS.)
#[test]
fn the_corpus_syn_scan_is_named() {
    let dir = match std::env::var_os("TCPWHY_REAL_CORPUS") {
        Some(p) => std::path::PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real"),
    };
    let file = dir.join("cs_synscan.pcapng");
    if !file.exists() {
        eprintln!("skipped: {} is absent", file.display());
        return;
    }
    let out = tcpwhy(&["analyze", "--format", "json", &file.to_string_lossy()]);
    let f: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "finding")
        .collect();
    assert_eq!(with_id(&f, "syn-refused").len(), 5);
    assert!(with_id(&f, "syn-stale-state").is_empty() && with_id(&f, "syn-flood").is_empty());
    let s = with_id(&f, "syn-scan");
    assert_eq!(s.len(), 1);
    let d = &s[0]["details"];
    assert_eq!(d["source"], "172.16.0.8");
    assert_eq!(
        (d["attempts"].as_u64(), d["crafted"].as_u64()),
        (Some(1994), Some(1989))
    );
    assert_eq!(
        (d["targets"].as_u64(), d["hosts"].as_u64()),
        (Some(1000), Some(1))
    );
    assert_eq!(d["open"], serde_json::json!(["22", "53", "80"]));
    assert_eq!(d["closed"], serde_json::json!(["25", "70", "113", "31337"]));
    assert_eq!(d["silent_count"], 993);
}

/// A capture with nothing but the flood: the reports do not say "No latency cause found",
/// nor that the flood cost the most; they name it as found, at no cost to any connection.
#[test]
fn a_flood_alone_is_named_without_a_cost() {
    let dir = TempDir::new("flood-alone");
    let path = dir.join("f.pcap");
    write_pcap(&path, &spoofed_flood());
    let file = path.to_string_lossy().to_string();
    let text = String::from_utf8_lossy(&tcpwhy(&["analyze", &file]).stdout).to_string();
    assert!(!text.contains("No latency cause found"), "{text}");
    assert!(text.contains(
        " 1. syn-flood: 0.000 ms lost: about the capture as a whole, no connection waited on it\n    300 connection attempts to 192.0.2.1:80 in 1495 ms (201 a second) from 300 source addresses never completed a handshake: none was answered. 300 of them"
    ), "{text}");
    let html = String::from_utf8_lossy(&tcpwhy(&["analyze", "--format", "html", &file]).stdout)
        .to_string();
    assert!(html.contains(
        "<div class=\"answer\">No connection lost time to a known cause; found: <b>syn-flood</b>.</div>"
    ));
    assert!(!html.contains("cost the most"));
}

/// The packets of one attempt from `client` port `sport` to `server` port `dport` whose SYN
/// leaves at `us` with sequence number `isn`: refused (RST|ACK with sequence 0 acknowledging
/// ISN + 1, 100 us later) or, when `open`, answered (SYN-ACK 100 us later, the client's ACK
/// 100 us after that).
fn attempt(
    us: u64,
    client: [u8; 4],
    sport: u16,
    server: [u8; 4],
    dport: u16,
    isn: u32,
    open: bool,
) -> Vec<Pkt> {
    let syn = Pkt {
        us,
        src: client,
        dst: server,
        sport,
        dport,
        seq: isn,
        ack: 0,
        flags: SYN,
    };
    let answer = |dt, seq, flags| Pkt {
        us: us + dt,
        src: server,
        dst: client,
        sport: dport,
        dport: sport,
        seq,
        ack: isn + 1,
        flags,
    };
    if !open {
        return vec![syn, answer(100, 0, RST | ACK)];
    }
    let mut ack = syn;
    (ack.us, ack.seq, ack.ack, ack.flags) = (us + 200, isn + 1, 9001, ACK);
    vec![syn, answer(100, 9000, SYN | ACK), ack]
}

/// A reconnect loop: 10.1.0.1 connects to 10.1.0.2:6653 from port 40000 at 0 s (frames 1-2:
/// refused), from port 40001 at 2 s (frames 3-4: refused again) and from port 40002 at 4 s
/// (frames 5-7: answered). The client could not connect for 4 s: when the third attempt is
/// answered, each refusal is linked to the SYN after it (frames 3 and 5) and costs the time
/// from its SYN to that one, 2000 ms each, `medium` (the service may have come up any time
/// before the next attempt). The same with one thread and with two.
#[test]
fn a_refused_client_trying_again_from_new_ports_lost_the_time_until_its_next_try() {
    let (c, s) = ([10, 1, 0, 1], [10, 1, 0, 2]);
    let mut p = attempt(0, c, 40_000, s, 6653, 1000, false);
    p.extend(attempt(2_000_000, c, 40_001, s, 6653, 2000, false));
    p.extend(attempt(4_000_000, c, 40_002, s, 6653, 3000, true));
    let f = findings(&p, &["--threads", "1"]);
    assert_eq!(f, findings(&p, &["--threads", "2"]));
    let r = with_id(&f, "syn-refused");
    assert_eq!(r.len(), 2, "{f:?}");
    for (x, (first, next)) in r.iter().zip([(1, 3), (3, 5)]) {
        assert_eq!(x["cost_ms"].as_f64(), Some(2000.0), "{x}");
        assert_eq!(x["frames"], serde_json::json!([first, first + 1, next]));
        assert_eq!(x["details"]["linked_by"], "client");
        assert_eq!(x["details"]["linked_frame"], next);
        assert_eq!(x["confidence"]["level"], "medium");
    }
    assert!(r[0]["explanation"]
        .as_str()
        .unwrap()
        .contains("the client tried again from port 40001 2000 ms after the reset (frame 3)"));
}

/// BGP peers: 10.2.0.2 connects to 10.2.0.1:179 from port 51000 at 0 s and is refused 100 us
/// later (frames 1-2); at 1.8 s 10.2.0.1 connects to 10.2.0.2:179 itself from port 33001
/// (frames 3-5, answered). Nobody waited on the refusal: its finding keeps the reset's 0.1 ms
/// and is `low`, linked to frame 3 by the server. A client that probed another port of the
/// host in between (a scan) is not linked to its later SYN to the refused port, though that
/// SYN is answered.
#[test]
fn a_refusal_followed_by_the_peer_connecting_back_is_low() {
    let (a, b) = ([10, 2, 0, 1], [10, 2, 0, 2]);
    let mut p = attempt(0, b, 51_000, a, 179, 1000, false);
    p.extend(attempt(1_800_000, a, 33_001, b, 179, 2000, true));
    let f = findings(&p, &[]);
    let r = with_id(&f, "syn-refused");
    assert_eq!(r.len(), 1, "{f:?}");
    assert_eq!(r[0]["cost_ms"].as_f64(), Some(0.1));
    assert_eq!(r[0]["details"]["linked_by"], "server");
    assert_eq!(r[0]["details"]["linked_frame"], 3);
    assert_eq!(r[0]["confidence"]["level"], "low");

    let (c, s) = ([10, 3, 0, 1], [10, 3, 0, 2]);
    let mut p = attempt(0, c, 40_000, s, 113, 1000, false);
    p.extend(attempt(1_000, c, 40_000, s, 25, 1500, false));
    p.extend(attempt(2_000_000, c, 40_001, s, 113, 2000, true));
    let f = findings(&p, &[]);
    let r = with_id(&f, "syn-refused");
    assert_eq!(r.len(), 2, "{f:?}");
    assert!(
        r.iter()
            .all(|x| x["details"]["linked_by"].is_null() && x["cost_ms"].as_f64() == Some(0.1)),
        "{f:?}"
    );
}
