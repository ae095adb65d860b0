//! Each check on snapshots built by hand: positive and negative.

use super::*;
use crate::diag::{Socket, TcpInfo};
use std::net::IpAddr;

fn snap(sysctls: &[(&str, &str)]) -> Snapshot {
    Snapshot {
        namespace: "t".into(),
        sysctls: sysctls
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Snapshot::default()
    }
}

fn sock(state: u8, sport: u16, dst: &str, info: Option<TcpInfo>, cc: Option<&str>) -> Socket {
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let (d, p) = dst.split_once(':').unwrap();
    Socket {
        state,
        src: (ip, sport),
        dst: (d.parse().unwrap(), p.parse().unwrap()),
        rqueue: 0,
        wqueue: 0,
        info,
        cong: cc.map(str::to_string),
    }
}

fn ids(f: &[HostFinding]) -> Vec<&'static str> {
    f.iter().map(|x| x.id).collect()
}

fn idle_info(cwnd: u32, idle_ms: u32) -> TcpInfo {
    TcpInfo {
        rto_us: 250_000,
        snd_mss: 1448,
        last_data_sent_ms: idle_ms,
        last_data_recv_ms: idle_ms,
        rtt_us: 50_000,
        snd_cwnd: cwnd,
        total_retrans: 0,
    }
}

#[test]
fn slow_start_after_idle_counts_the_round_trips_of_idle_cubic_sockets() {
    let mut s = snap(&[
        ("ipv4/tcp_slow_start_after_idle", "1"),
        ("ipv4/tcp_congestion_control", "cubic"),
    ]);
    s.sockets = vec![
        sock(
            TCP_ESTABLISHED,
            40000,
            "10.0.0.2:80",
            Some(idle_info(320, 3000)),
            Some("cubic"),
        ),
        // BBR ignores the sysctl; a busy socket and one at the initial window are not affected.
        sock(
            TCP_ESTABLISHED,
            40001,
            "10.0.0.2:80",
            Some(idle_info(320, 3000)),
            Some("bbr"),
        ),
        sock(
            TCP_ESTABLISHED,
            40002,
            "10.0.0.2:80",
            Some(idle_info(320, 100)),
            Some("cubic"),
        ),
        sock(
            TCP_ESTABLISHED,
            40003,
            "10.0.0.2:80",
            Some(idle_info(10, 3000)),
            Some("cubic"),
        ),
    ];
    let mut out = Vec::new();
    slow_start_after_idle(&s, &mut out);
    assert_eq!(ids(&out), ["host-slow-start-after-idle"]);
    assert_eq!(out[0].severity, "now");
    assert_eq!(out[0].evidence["affected"], 1);
    // 320 -> 10 segments: 5 doublings (10, 20, 40, 80, 160, 320) at 50 ms.
    assert_eq!(out[0].evidence["sockets"][0]["extra_round_trips"], 5.0);
    assert!((out[0].impact_ms - 250.0).abs() < 1e-9);
    // The sysctl at 0: nothing.
    s.sysctls
        .insert("ipv4/tcp_slow_start_after_idle".into(), "0".into());
    let mut out = Vec::new();
    slow_start_after_idle(&s, &mut out);
    assert!(out.is_empty());
    // At 1 with BBR as the default and no affected socket: moot, nothing said.
    let s = snap(&[
        ("ipv4/tcp_slow_start_after_idle", "1"),
        ("ipv4/tcp_congestion_control", "bbr"),
    ]);
    let mut out = Vec::new();
    slow_start_after_idle(&s, &mut out);
    assert!(out.is_empty());
}

#[test]
fn ehash_load_per_namespace_and_shared() {
    let mut s = snap(&[("ipv4/tcp_ehash_entries", "128")]);
    s.sockets = (0..2000)
        .map(|i| sock(TCP_TIME_WAIT, 30000 + i, "10.0.0.2:80", None, None))
        .collect();
    let f = run(std::slice::from_ref(&s));
    assert!(ids(&f).contains(&"host-ehash-load"), "{f:?}");
    let e = f.iter().find(|x| x.id == "host-ehash-load").unwrap();
    assert_eq!(e.evidence["per_bucket"], 2000.0 / 128.0);
    assert_eq!(e.evidence["shared_global_table"], false);
    // The same sockets in a 262144-bucket table: silent.
    s.sysctls
        .insert("ipv4/tcp_ehash_entries".into(), "262144".into());
    assert!(!ids(&run(std::slice::from_ref(&s))).contains(&"host-ehash-load"));
    // Two namespaces sharing a 256-bucket global table (negative entries): summed.
    let mut a = s.clone();
    a.sysctls
        .insert("ipv4/tcp_ehash_entries".into(), "-256".into());
    a.sockets.truncate(1500);
    let mut b = a.clone();
    b.namespace = "u".into();
    let f = run(&[a, b]);
    let e = f.iter().find(|x| x.id == "host-ehash-load").unwrap();
    assert_eq!(e.evidence["sockets_in_table"], 3000);
    assert_eq!(e.evidence["shared_global_table"], true);
}

#[test]
fn port_reuse_risk_against_the_port_range() {
    let mut s = snap(&[
        ("ipv4/ip_local_port_range", "40000\t40999"),
        ("ipv4/tcp_timestamps", "0"),
        ("ipv4/tcp_rfc1337", "1"),
    ]);
    s.sockets = (0..600)
        .map(|i| sock(TCP_TIME_WAIT, 40000 + i, "10.0.0.2:5000", None, None))
        .collect();
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert_eq!(ids(&out), ["host-port-reuse-risk"]);
    assert_eq!(out[0].evidence["time_wait_to_destination"], 600);
    assert!(out[0].explanation.contains("60%"), "{}", out[0].explanation);
    assert!(out[0].explanation.contains("tcp_rfc1337=1"));
    assert!(out[0].explanation.contains("tcp_timestamps=0"));
    // The same 600 in the default 28 232-port range: 2%, silent.
    s.sysctls
        .insert("ipv4/ip_local_port_range".into(), "32768 60999".into());
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert!(out.is_empty());
}

#[test]
fn counter_checks_need_the_counters_to_move() {
    let mut s = snap(&[]);
    s.counters
        .insert("TcpExt.TCPChallengeACK".into(), 1_000_000);
    s.counters.insert("TcpExt.ListenDrops".into(), 5_000);
    s.counters.insert("TcpExt.TCPTimeouts".into(), 90_000);
    // Lifetime totals alone: no finding.
    assert!(run(std::slice::from_ref(&s)).is_empty());
    // Over a 2 s interval: challenge ACKs +40, listen drops +6, timeouts +10.
    s.interval_s = Some(2.0);
    s.deltas.insert("TcpExt.TCPChallengeACK".into(), 40);
    s.deltas.insert("TcpExt.ListenDrops".into(), 6);
    s.deltas.insert("TcpExt.TCPTimeouts".into(), 10);
    s.deltas.insert("TcpExt.TCPSynRetrans".into(), 0);
    let f = run(std::slice::from_ref(&s));
    let mut got = ids(&f);
    got.sort();
    assert_eq!(
        got,
        [
            "host-retransmissions",
            "host-stale-state-collisions",
            "host-syn-backlog"
        ]
    );
    let c = f
        .iter()
        .find(|x| x.id == "host-stale-state-collisions")
        .unwrap();
    assert_eq!(c.evidence["TcpExt.TCPChallengeACK"]["per_s"], 20.0);
    // Quiet counters: silent.
    for v in s.deltas.values_mut() {
        *v = 0;
    }
    assert!(run(std::slice::from_ref(&s)).is_empty());
}

#[test]
fn a_full_accept_queue_is_named() {
    let mut s = snap(&[]);
    let mut l = sock(TCP_LISTEN, 5000, "0.0.0.0:0", None, None);
    l.rqueue = 2;
    l.wqueue = 1; // Linux lets the queue hold backlog + 1
    s.sockets = vec![l.clone()];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert_eq!(ids(&out), ["host-syn-backlog"]);
    assert!(out[0].explanation.contains("10.0.0.1:5000 (2 of 1)"));
    l.rqueue = 0;
    l.wqueue = 128;
    s.sockets = vec![l];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert!(out.is_empty());
}
