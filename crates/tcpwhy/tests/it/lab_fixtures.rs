//! The lab's captures (fixtures/lab, made on this kernel) read by `tcpwhy analyze`: the facts
//! fixtures/lab/README.md lists, read off the packets with tshark, and nothing of them in the
//! fixed/control captures. No root needed.

use crate::common::{analyze_json, lab_fixture};
use serde_json::Value;

fn conns(name: &str) -> Vec<Value> {
    let (mut c, _) = analyze_json(&[&lab_fixture(name)]);
    c.sort_by_key(|c| c["first_frame"].as_u64());
    c
}

/// SYN -> ACK with other numbers -> client RST -> the same SYN again.
fn is_stale(c: &Value) -> bool {
    c["handshake"]["invalid_acks"].as_u64() > Some(0)
        && c["handshake"]["client_rsts"].as_u64() > Some(0)
        && c["c2s"]["syn_retransmits"].as_u64() > Some(0)
}

#[test]
fn stale_syn_timewait() {
    let c = conns("stale-syn-timewait-broken.pcap.gz");
    assert_eq!(c.len(), 6, "3 uploads and 3 reconnects");
    let stale: Vec<&Value> = c.iter().filter(|c| is_stale(c)).collect();
    assert_eq!(stale.len(), 3);
    let r = stale[0];
    assert_eq!(r["first_frame"], 1341);
    assert_eq!(r["client"], "10.201.1.2:41000");
    assert_eq!(r["handshake"]["syn_frame"], 1344);
    assert_eq!(r["handshake"]["syn_ack_frame"], 1345);
    // The predecessor on the tuple: the upload, closed first by the server (TIME-WAIT there).
    assert_eq!(r["prev"]["close"]["kind"], "fin");
    assert_eq!(r["prev"]["close"]["by"], "server");
    assert_eq!(r["prev"]["timestamps"], false);
    // The old rcv_nxt (the TIME-WAIT ACK's ack number) is the new ISN + 656 941 (tshark shows
    // that ACK with relative ack 656941, relative to the new ISN).
    let old_rcv_nxt = r["prev"]["client_next_seq"].as_u64().unwrap();
    let isn = r["c2s"]["isn"].as_u64().unwrap();
    assert_eq!(old_rcv_nxt.wrapping_sub(isn) & 0xFFFF_FFFF, 656_941);
    assert!(conns("stale-syn-timewait-fixed.pcap.gz")
        .iter()
        .all(|c| !is_stale(c)));
}

#[test]
fn stale_syn_lost_rst() {
    let c = conns("stale-syn-lost-rst-broken.pcap");
    assert_eq!(c.len(), 10);
    let stale: Vec<&Value> = c.iter().filter(|c| is_stale(c)).collect();
    assert_eq!(stale.len(), 5);
    let r = stale[0];
    assert_eq!(r["first_frame"], 9);
    assert_eq!(r["handshake"]["syn_frame"], 12);
    assert_eq!(r["handshake"]["syn_ack_frame"], 13);
    // The predecessor was reset by the client (the RST the router then dropped).
    assert_eq!(r["prev"]["close"]["kind"], "rst");
    assert_eq!(r["prev"]["close"]["by"], "client");
    assert!(conns("stale-syn-lost-rst-control.pcap")
        .iter()
        .all(|c| !is_stale(c)));
}

#[test]
fn syn_backlog_full() {
    let c = conns("syn-backlog-full-broken.pcap");
    assert_eq!(c.len(), 8);
    let mut retried: Vec<(String, u64)> = c
        .iter()
        .filter(|c| c["c2s"]["syn_retransmits"].as_u64() > Some(0))
        .map(|c| {
            (
                c["client"].as_str().unwrap().to_string(),
                c["c2s"]["syn_retransmits"].as_u64().unwrap(),
            )
        })
        .collect();
    retried.sort();
    let ports: Vec<&str> = retried
        .iter()
        .map(|(c, _)| c.rsplit(':').next().unwrap())
        .collect();
    assert_eq!(ports, ["41678", "41692", "41696", "41708"]);
    assert!(retried.iter().all(|(_, n)| *n == 3), "{retried:?}");
    assert!(conns("syn-backlog-full-fixed.pcap")
        .iter()
        .all(|c| c["c2s"]["syn_retransmits"] == 0));
}

#[test]
fn tail_loss() {
    let c = conns("tail-loss-broken.pcap");
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["s2c"]["retrans_segments"], 8);
    assert_eq!(c[0]["s2c"]["retrans_bytes"], 8 * 500);
    let c = conns("tail-loss-control.pcap");
    assert_eq!(c[0]["s2c"]["retrans_segments"], 0);
}

#[test]
fn nagle_and_slow_start_captures_read_clean() {
    for f in [
        "nagle-delayed-ack-broken.pcap",
        "nagle-delayed-ack-fixed.pcap",
        "slow-start-after-idle-broken.pcap.gz",
        "slow-start-after-idle-fixed.pcap.gz",
        "slow-start-after-idle-bbr.pcap.gz",
    ] {
        let c = conns(f);
        assert!(!c.is_empty(), "{f}");
        for conn in &c {
            assert_eq!(
                conn["retransmissions"], 0,
                "{f}: no loss in these scenarios"
            );
            assert_eq!(conn["role"], "syn", "{f}: handshake captured");
        }
    }
    // One connection of 20 exchanges: 20 x (100 + 100) request bytes, 20 x 2 response bytes.
    let c = conns("nagle-delayed-ack-broken.pcap");
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["c2s"]["unique_bytes"], 4000);
    assert_eq!(c[0]["s2c"]["unique_bytes"], 40);
}
