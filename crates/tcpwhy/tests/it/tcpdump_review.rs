//! Findings on tcpdump's own test captures (../shared/corpus/tcpdump-tests: traces nobody on
//! this project made, which the detectors were never tuned on before) checked by hand with
//! tshark on 2026-11-26 (the README's "How accurate is it" has the table). Each line is one
//! verdict: how many findings of that id the capture must give, and the packets that decide it.

use crate::common::tcpwhy;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    match std::env::var_os("TCPWHY_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tcpdump-tests"),
    }
}

/// (capture, finding id, how many, why)
const REVIEWED: &[(&str, &str, usize, &str)] = &[
    (
        "bgp-as-path-oobr.pcap",
        "rto-retransmission",
        0,
        "fuzz segments at one timestamp overlapping each other: a 0 ms 'wait' is no timer's",
    ),
    (
        "of10_inv_OFPST_FLOW.pcap",
        "rto-retransmission",
        0,
        "a hand-edited copy of frame 1 (same IP ID and sequence) stamped in 1970: no wait at all",
    ),
    (
        "bgp-shutdown-msg-variations.pcap",
        "rto-retransmission",
        0,
        "SYNs carrying data, 1 ms apart: SYN retries (if anything), not data timeouts",
    ),
    (
        "mptcp-v0.pcap",
        "server-delay",
        0,
        "MPTCP: the replies went out on the other subflow 5-7.5 ms later (DATA_ACK 2914)",
    ),
    (
        "mptcp-v0.pcap",
        "sender-limited",
        0,
        "MPTCP: the server answered on the other subflow at 0.180 s; the 1.2 s is think time",
    ),
    (
        "bgp-lu-multiple-labels.pcap",
        "server-delay",
        0,
        "BGP peers: the Cease NOTIFICATION 466 ms after an UPDATE is an operator's reset, no answer",
    ),
    (
        "bgp-bgpsec.pcap",
        "server-delay",
        0,
        "BGP peers: 2530 bytes of UPDATEs 62.8 ms after the other's UPDATE are its own routes",
    ),
    (
        "bgp-infinite-loop.pcap",
        "rto-retransmission",
        0,
        "the same packet (IP ID 0xc78a, TTL 64, 34 bytes) captured twice 60 ms apart: no resend",
    ),
    (
        "bgp-shutdown-msg-variations.pcap",
        "syn-unanswered",
        0,
        "three SYNs with other data each 1.2 and 0.9 ms apart: a tool's packets, no timer's retry",
    ),
    (
        "pptp.pcap",
        "server-delay",
        1,
        "Start-Control-Connection-Reply 68.5 ms, Outgoing-Call-Reply 168.8 ms after their requests",
    ),
    (
        "pptp.pcap",
        "rto-retransmission",
        0,
        "every server packet captured twice 0.1 ms apart with the same IP ID: duplicates",
    ),
    (
        "ssh.pcap",
        "spurious-retransmission",
        1,
        "a resend after reordering's duplicate ACK, proven by the D-SACK 5186-5283 in frame 54",
    ),
    (
        "of10_pf5240.pcap",
        "nagle-delayed-ack",
        1,
        "5 replies held until the controller's 39-40 ms delayed ACKs, released ~1 ms after each",
    ),
    (
        "of10_7050sx_bsn.pcap",
        "nagle-delayed-ack",
        1,
        "5 replies held 40-43 ms by the controller's delayed ACKs, captured at the controller \
         3.4 ms from the switch: each B echoes its ACK's TSval (2026-11-27 review)",
    ),
    (
        "bgp-4byte-asn.pcap",
        "syn-refused",
        2,
        "SYNs to port 179 answered by RST/ACK within 0.05 ms (the peer's BGP not yet listening)",
    ),
    (
        "of13_ericsson.pcapng",
        "connection-reset",
        0,
        "the switch closed with FIN after HELLO_FAILED; its RST answers a request sent after that",
    ),
    (
        "dns_tcp.pcap",
        "path-latency",
        1,
        "SYN-ACK, response and FIN each one 126 ms upstream round trip behind a split-TCP box",
    ),
];

#[test]
fn findings_on_tcpdumps_test_captures_stay_as_checked_by_hand() {
    let dir = corpus_dir();
    let mut wrong = Vec::new();
    for (file, id, want, why) in REVIEWED {
        let path = dir.join(file);
        assert!(path.exists(), "{} (set TCPWHY_CORPUS)", path.display());
        let out = tcpwhy(&["analyze", "--format", "json", &path.to_string_lossy()]);
        let got = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
            .filter(|v| v["type"] == "finding" && v["id"] == *id)
            .count();
        if got != *want {
            wrong.push(format!("{file}: {id} x{got}, want {want}: {why}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_late_syn_ack_is_not_taken_for_the_paths_round_trip() {
    // accecn_handshake.pcap: SYN -> SYN-ACK 222 ms, but the GET is answered 58 ms later and
    // acknowledged 39 ms later (the server's TCP timestamps advance 42 ms: one round trip).
    // The path's round trip is at most the exchange's 58 ms, not the handshake's 223 ms.
    let path = corpus_dir().join("accecn_handshake.pcap");
    let out = tcpwhy(&["analyze", "--format", "json", &path.to_string_lossy()]);
    let p: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|v| v["type"] == "finding" && v["id"] == "path-latency")
        .collect();
    assert_eq!(p.len(), 1, "{p:?}");
    let rtt = p[0]["details"]["rtt_ms"].as_f64().unwrap();
    assert!((39.0..=60.0).contains(&rtt), "{rtt} ms: {p:?}");
    assert!(p[0]["cost_ms"].as_f64().unwrap() < 160.0, "{p:?}");
}
