//! Each check on snapshots built by hand: positive and negative, with the numbers measured on
//! this kernel where a rule was measured.

use super::*;
use crate::diag::{Socket, TcpInfo, TCP_SYN_SENT};
use crate::ListenerSample;
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

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

fn sock(state: u8, sport: u16, dst: &str, info: Option<TcpInfo>, cc: Option<&str>) -> Socket {
    let (d, p) = dst.rsplit_once(':').expect("addr:port");
    Socket {
        state,
        src: (ip("10.0.0.1"), sport),
        dst: (ip(d), p.parse().expect("port")),
        timer: 0,
        expires_ms: 0,
        rqueue: 0,
        wqueue: 0,
        info,
        cong: cc.map(str::to_string),
    }
}

/// A TIME-WAIT socket from local port `sport` with `left_ms` of its 60 s to go.
fn tw(sport: u16, dst: &str, left_ms: u32) -> Socket {
    Socket {
        timer: TIMER_TIME_WAIT,
        expires_ms: left_ms,
        ..sock(TCP_TIME_WAIT, sport, dst, None, None)
    }
}

fn listener(port: u16, queue: u32, backlog: u32) -> Socket {
    Socket {
        rqueue: queue,
        wqueue: backlog,
        ..sock(TCP_LISTEN, port, "0.0.0.0:0", None, None)
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
        snd_ssthresh: 0x7fff_ffff,
        options: TCPI_OPT_TIMESTAMPS,
        notsent_bytes: Some(0),
        ..TcpInfo::default()
    }
}

fn with_interval(mut s: Snapshot, secs: f64, deltas: &[(&str, u64)]) -> Snapshot {
    s.interval_s = Some(secs);
    for (k, v) in deltas {
        s.deltas.insert(k.to_string(), *v);
    }
    s
}

#[test]
fn restart_window_follows_tcp_cwnd_restart() {
    // Measured here (cubic, RTO 204 ms): cwnd before -> after a 1-byte write after idling.
    assert_eq!(restart_window(981, 388, 204), Some((1, 490)));
    assert_eq!(restart_window(1070, 588, 204), Some((2, 267)));
    assert_eq!(restart_window(1138, 788, 204), Some((3, 142)));
    assert_eq!(restart_window(1130, 1080, 204), Some((5, 35)));
    // The numbers: 1.5 RTO took 34 -> 17, 2.5 RTO took it to the initial 10.
    assert_eq!(restart_window(34, 300, 200), Some((1, 17)));
    assert_eq!(restart_window(34, 500, 200), Some((2, 10)));
    // Within the RTO: no restart; a window at or below 10 stays.
    assert_eq!(restart_window(890, 192, 204), None);
    assert_eq!(restart_window(8, 5000, 200), Some((0, 8)));
    assert_eq!(restart_window(100, 5000, 0), None);
}

#[test]
fn rounds_to_send_doubles_then_grows_by_one() {
    // 320 segments from 10: 10 + 20 + 40 + 80 + 160 = 310, the sixth round sends the rest.
    assert_eq!(rounds_to_send(320, 10, u32::MAX), 6);
    assert_eq!(rounds_to_send(320, 320, u32::MAX), 1);
    // From 490 to send 981: 490 + 980.
    assert_eq!(rounds_to_send(981, 490, 735), 2);
    // ssthresh 20 caps the doubling: 10, 20, 21, 22.
    assert_eq!(rounds_to_send(73, 10, 20), 4);
    assert_eq!(rounds_to_send(0, 10, 20), 0);
}

#[test]
fn slow_start_after_idle_counts_the_round_trips_of_idle_cubic_sockets() {
    let mut s = snap(&[
        ("ipv4/tcp_slow_start_after_idle", "1"),
        ("ipv4/tcp_congestion_control", "cubic"),
    ]);
    // A zero-window stall: data queued, the probe timer pending, backed off (measured here:
    // 2 345 760 bytes queued, timer:(persist), backoff 4, lastsnd 6 032 ms > RTO 208 ms).
    let mut stalled = sock(
        TCP_ESTABLISHED,
        40004,
        "10.0.0.2:80",
        Some(TcpInfo {
            probes: 0,
            backoff: 4,
            notsent_bytes: Some(2_345_760),
            ..idle_info(491, 6032)
        }),
        Some("cubic"),
    );
    stalled.wqueue = 2_345_760;
    stalled.timer = TIMER_PROBE;
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
        stalled.clone(),
    ];
    let mut out = Vec::new();
    slow_start_after_idle(&s, &mut out);
    assert_eq!(ids(&out), ["host-slow-start-after-idle"]);
    assert_eq!(out[0].severity, "now");
    assert_eq!(out[0].evidence["affected"], 1);
    assert_eq!(out[0].evidence["waiting_on_peer"], 1);
    let w = &out[0].evidence["sockets"][0];
    assert_eq!(w["local"], "10.0.0.1:40000");
    // 3 000 ms idle at RTO 250 ms: 11 halvings would be allowed, 5 reach 10 segments.
    assert_eq!(w["halvings"], 5);
    assert_eq!(w["restart_cwnd"], 10);
    // 320 segments from 10: 6 round trips instead of 1, at 50 ms.
    assert_eq!(w["extra_round_trips"], 5);
    assert!((out[0].impact_ms - 250.0).abs() < 1e-9);
    assert!(
        out[0]
            .explanation
            .contains("cwnd 320 segments, idle 3000 ms = 12.0 RTO"),
        "{}",
        out[0].explanation
    );
    // The zero-window stall alone: not idle, so no "now" finding (the sysctl risk remains).
    s.sockets = vec![stalled.clone()];
    let mut out = Vec::new();
    slow_start_after_idle(&s, &mut out);
    assert_eq!(ids(&out), ["host-slow-start-after-idle"]);
    assert_eq!(out[0].severity, "risk");
    assert!(out[0].explanation.contains("waiting on the peer"));
    // Each sign of waiting alone is enough: queued bytes, unacknowledged segments, probes.
    for edit in [
        |k: &mut Socket| k.wqueue = 1,
        |k: &mut Socket| k.info.as_mut().unwrap().unacked = 1,
        |k: &mut Socket| k.info.as_mut().unwrap().notsent_bytes = Some(1),
        |k: &mut Socket| k.info.as_mut().unwrap().probes = 1,
        |k: &mut Socket| k.timer = TIMER_PROBE,
    ] {
        let mut k = sock(
            TCP_ESTABLISHED,
            40000,
            "10.0.0.2:80",
            Some(idle_info(320, 3000)),
            Some("cubic"),
        );
        edit(&mut k);
        s.sockets = vec![k];
        let mut out = Vec::new();
        slow_start_after_idle(&s, &mut out);
        assert_eq!(out[0].severity, "risk", "{:?}", s.sockets[0]);
    }
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
fn ehash_loss_interpolates_seed_003() {
    assert_eq!(ehash_loss_pct(1.0), Some(0.0));
    let at = |x: f64| ehash_loss_pct(x).expect("within the table");
    assert!((at(8.0) - (1.0 - 49.9 / 50.7) * 100.0).abs() < 1e-9);
    assert!((at(384.0) - (1.0 - 25.0 / 50.7) * 100.0).abs() < 1e-9);
    // 9.4 per bucket lies between 8 (-1.58%) and 16 (-3.55%): never below the 8's figure.
    assert!(at(9.4) > at(8.0) && at(9.4) < at(16.0), "{}", at(9.4));
    assert_eq!(ehash_loss_pct(400.0), None);
}

fn tw_fill(n: u16) -> Vec<Socket> {
    (0..n)
        .map(|i| tw(30000 + i, "10.0.0.2:80", 30_000))
        .collect()
}

#[test]
fn ehash_load_per_namespace_and_shared() {
    let mut s = snap(&[("ipv4/tcp_ehash_entries", "128")]);
    s.sockets = tw_fill(1203); // 9.4 per bucket
    let f = run(std::slice::from_ref(&s));
    let e = f
        .iter()
        .find(|x| x.id == "host-ehash-load")
        .unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(e.evidence["per_bucket"], 1203.0 / 128.0);
    assert_eq!(e.evidence["shared_global_table"], false);
    // The text agrees with its reference points and prints a cost it can show.
    assert!(
        e.impact.contains("about 1.9% less throughput"),
        "{}",
        e.impact
    );
    assert!(e.impact.contains("8 per bucket: -1.6%"), "{}", e.impact);
    assert!(
        e.impact.contains("about 53 ns more per round trip"),
        "{}",
        e.impact
    );
    assert!(e.explanation.contains("this namespace's own"));
    // The same sockets in a 262144-bucket table: silent.
    s.sysctls
        .insert("ipv4/tcp_ehash_entries".into(), "262144".into());
    assert!(!ids(&run(std::slice::from_ref(&s))).contains(&"host-ehash-load"));
    // Two namespaces sharing a 256-bucket global table (negative entries): summed, one finding.
    let mut a = s.clone();
    a.sysctls
        .insert("ipv4/tcp_ehash_entries".into(), "-256".into());
    a.sockets.truncate(1500);
    a.netns_inode = Some(1);
    let mut b = a.clone();
    b.namespace = "u".into();
    b.netns_inode = Some(2);
    let f = run(&[a.clone(), b.clone()]);
    let e: Vec<&HostFinding> = f.iter().filter(|x| x.id == "host-ehash-load").collect();
    assert_eq!(e.len(), 1, "{f:?}");
    assert_eq!(e[0].evidence["sockets_in_table"], 2406);
    assert_eq!(e[0].evidence["shared_global_table"], true);
    assert!(e[0].explanation.contains("the initial namespace was not"));
    // The initial namespace reads its (the global) table as positive: the same table.
    let mut init = a.clone();
    init.namespace = crate::THIS_NAMESPACE.into();
    init.sysctls
        .insert("ipv4/tcp_ehash_entries".into(), "256".into());
    init.init_namespace = Some(true);
    init.netns_inode = Some(3);
    let f = run(&[init.clone(), b.clone()]);
    let e: Vec<&HostFinding> = f.iter().filter(|x| x.id == "host-ehash-load").collect();
    assert_eq!(e.len(), 1, "{f:?}");
    assert_eq!(e[0].evidence["sockets_in_table"], 2406);
    assert!(
        !e[0].explanation.contains("was not"),
        "{}",
        e[0].explanation
    );
    // The same namespace read twice (named, and as this one) counts once: 1 203 = 4.7 each.
    let mut twice = b.clone();
    twice.namespace = "u-again".into();
    let f = run(&[b, twice]);
    assert!(!ids(&f).contains(&"host-ehash-load"), "{f:?}");
}

#[test]
fn port_exhaustion_against_the_port_range() {
    let mut s = snap(&[
        ("ipv4/ip_local_port_range", "40000\t40999"),
        ("ipv4/tcp_timestamps", "1"),
        ("ipv4/tcp_tw_reuse", "2"),
    ]);
    // Measured here: 1 000 connects, each closed by the client at once, filled the range;
    // the next 200 failed with EADDRNOTAVAIL.
    s.sockets = (0..1000)
        .map(|i| tw(40000 + i, "10.0.0.2:5000", 59_000 - u32::from(i)))
        .collect();
    let mut out = Vec::new();
    port_exhaustion(&s, &mut out);
    assert_eq!(ids(&out), ["host-port-exhaustion"]);
    assert_eq!(out[0].severity, "now");
    assert_eq!(out[0].evidence["held"], 1000);
    assert!(out[0].explanation.contains("EADDRNOTAVAIL"));
    assert!(out[0]
        .explanation
        .contains("more than 17 new connections/s"));
    assert!(
        out[0].explanation.contains("1000 of the 1000 local ports"),
        "{}",
        out[0].explanation
    );
    // No collision risk is claimed for this side.
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // tcp_tw_reuse=1 with timestamps: TIME-WAIT older than 1 s is taken over, not held.
    s.sysctls.insert("ipv4/tcp_tw_reuse".into(), "1".into());
    let mut out = Vec::new();
    port_exhaustion(&s, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // ... but not with timestamps off.
    s.sysctls.insert("ipv4/tcp_timestamps".into(), "0".into());
    let mut out = Vec::new();
    port_exhaustion(&s, &mut out);
    assert_eq!(out[0].evidence["held"], 1000);
    // 600 in the default 28 232-port range: 2%, silent.
    s.sysctls
        .insert("ipv4/ip_local_port_range".into(), "32768 60999".into());
    s.sockets.truncate(600);
    let mut out = Vec::new();
    port_exhaustion(&s, &mut out);
    assert!(out.is_empty());
}

/// A server on port 5000 that closed first: TIME-WAIT on its listening port.
fn server(ts: &str) -> Snapshot {
    let mut s = snap(&[("ipv4/tcp_timestamps", ts), ("ipv4/tcp_rfc1337", "0")]);
    s.sockets = vec![listener(5000, 0, 128)];
    s
}

fn server_tw(left_ms: u32, peer_port: u16) -> Socket {
    Socket {
        src: (ip("10.0.0.1"), 5000),
        dst: (ip("10.0.0.9"), peer_port),
        ..tw(5000, "10.0.0.9:1", left_ms)
    }
}

#[test]
fn time_wait_ended_early_from_both_dumps_and_the_counters() {
    let mut s = with_interval(
        server("1"),
        2.0,
        &[("TcpExt.TW", 12), ("TcpExt.TWRecycled", 0)],
    );
    s.time_wait_before = vec![
        server_tw(50_000, 41000), // still there at the end: not ended
        server_tw(50_000, 41001), // gone: ended early
        server_tw(50_000, 41002), // there again with a fresh 60 s: a new connection's
        server_tw(1_500, 41003),  // expired on time within the interval
    ];
    s.sockets.push(server_tw(48_000, 41000));
    s.sockets.push(server_tw(59_500, 41002));
    // 12 created in the interval, 1 of them (41002's) still there: 11 gone early.
    let e = time_wait_ended_early(&s).expect("interval under 55 s");
    assert_eq!(e.created, 12);
    assert_eq!(e.held_by_peer.get(&ip("10.0.0.9")), Some(&2));
    assert_eq!(e.total, 2 + 11);
    // This host's own connect() taking TIME-WAIT over (tcp_tw_reuse) is not a SYN meeting it.
    s.deltas.insert("TcpExt.TWRecycled".into(), 11);
    assert_eq!(time_wait_ended_early(&s).map(|e| e.total), Some(2));
    // Over 55 s or more: not judged.
    s.interval_s = Some(56.0);
    assert!(time_wait_ended_early(&s).is_none());
}

#[test]
fn port_reuse_risk_is_the_servers_time_wait() {
    // Seed 004's server: timestamps off here, 600 TIME-WAIT on port 5000 closed over 6 s.
    let mut s = server("0");
    s.sockets
        .extend((0..600).map(|i| server_tw(54_000 + i * 10, 40000 + i as u16)));
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert_eq!(ids(&out), ["host-port-reuse-risk"]);
    let f = &out[0];
    assert_eq!(f.severity, "risk");
    assert_eq!(f.evidence["time_wait_held"], 600);
    assert_eq!(f.evidence["time_wait_per_peer"]["10.0.0.9"], 600);
    assert!(
        f.explanation.contains("timestamps are off here"),
        "{}",
        f.explanation
    );
    // 600 closed within the last 6.0 s: 100 closes/s, said as what it is.
    assert!(
        f.explanation.contains("all closed within the last 6.0 s")
            && f.explanation.contains("about 100 closes/s"),
        "{}",
        f.explanation
    );
    assert!(f.impact.contains("~10 ms"), "{}", f.impact);
    assert!((f.impact_ms - 10.0).abs() < 1e-9);
    // tcp_rfc1337=1: the refused SYN waits for the TIME-WAIT to end.
    s.sysctls.insert("ipv4/tcp_rfc1337".into(), "1".into());
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert!(out[0].impact.contains("up to 60 s"), "{}", out[0].impact);
    assert!((out[0].impact_ms - 60_000.0).abs() < 1e-9);
    // Timestamps on here and on the peer's open connection, no SYN met the TIME-WAIT: silent.
    let mut s = server("1");
    s.sockets
        .extend((0..600).map(|i| server_tw(54_000, 40000 + i)));
    s.sockets.push(Socket {
        src: (ip("10.0.0.1"), 5000),
        ..sock(
            TCP_ESTABLISHED,
            5000,
            "10.0.0.9:39999",
            Some(idle_info(10, 5)),
            Some("cubic"),
        )
    });
    let s = with_interval(s, 2.0, &[("TcpExt.TW", 0)]);
    let mut out = Vec::new();
    port_reuse_risk(&s, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // The peer's open connection without timestamps: named.
    let mut s2 = s.clone();
    if let Some(i) = s2.sockets.last_mut().and_then(|k| k.info.as_mut()) {
        i.options = 0;
    }
    let mut out = Vec::new();
    port_reuse_risk(&s2, &mut out);
    assert_eq!(ids(&out), ["host-port-reuse-risk"]);
    assert!(
        out[0]
            .explanation
            .contains("10.0.0.9 does not use timestamps"),
        "{}",
        out[0].explanation
    );
    // SYNs took TIME-WAIT over in the interval, the peer's timestamps unknown: named, with
    // the count (12 created, none left: seed 004's reconnects, measured here).
    let mut s3 = with_interval(server("1"), 2.0, &[("TcpExt.TW", 12)]);
    s3.sockets.push(listener(5001, 0, 128));
    let mut out = Vec::new();
    port_reuse_risk(&s3, &mut out);
    assert_eq!(ids(&out), ["host-port-reuse-risk"]);
    assert_eq!(out[0].evidence["ended_early"], 12);
    assert!(
        out[0]
            .explanation
            .contains("12 TIME-WAIT sockets ended before their 60 s"),
        "{}",
        out[0].explanation
    );
    assert!(out[0].explanation.contains("not known here"));
    // A host that listens on nothing holds no server's TIME-WAIT.
    let mut c = s3.clone();
    c.sockets.clear();
    let mut out = Vec::new();
    port_reuse_risk(&c, &mut out);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn stale_state_counts_each_syn_once() {
    // The client of seed 004's reconnects (measured: 12 reconnects, each +1 on TCPSynRetrans,
    // TCPTimeouts, TcpTimeoutRehash and OutRsts).
    let c = with_interval(
        snap(&[]),
        1.0,
        &[
            ("Tcp.ActiveOpens", 24),
            ("TcpExt.TCPSynRetrans", 12),
            ("TcpExt.TCPTimeouts", 12),
            ("Tcp.OutRsts", 12),
        ],
    );
    let f = run(std::slice::from_ref(&c));
    assert_eq!(ids(&f), ["host-stale-state-collisions"], "{f:?}");
    assert_eq!(f[0].evidence["syn_retransmits_after_rst"], 12);
    assert!(
        f[0].explanation.contains("12 SYN retransmissions (12.0/s)"),
        "{}",
        f[0].explanation
    );
    assert!(f[0].impact.contains("~10 ms"));
    // RSTs the abort counters explain (zero-linger closes) do not count.
    let mut aborts = c.clone();
    aborts.deltas.insert("TcpExt.TCPAbortOnData".into(), 12);
    let f = run(std::slice::from_ref(&aborts));
    assert_eq!(ids(&f), ["host-retransmissions"], "lost SYNs then: {f:?}");
    // The server of seed 000: 20 SYNs on open connections, 12 challenge ACKs sent, 8 skipped;
    // TCPChallengeACK + TCPSYNChallenge + skipped would say 40.
    let srv = with_interval(
        snap(&[]),
        2.0,
        &[
            ("TcpExt.TCPSYNChallenge", 20),
            ("TcpExt.TCPChallengeACK", 12),
            ("TcpExt.TCPACKSkippedChallenge", 8),
        ],
    );
    let f = run(std::slice::from_ref(&srv));
    assert_eq!(ids(&f), ["host-stale-state-collisions"]);
    assert!(
        f[0].explanation.contains("20 SYNs (10.0/s)"),
        "{}",
        f[0].explanation
    );
    assert!(f[0].explanation.contains("up to 8 of them not answered"));
    assert!((f[0].impact_ms - 1000.0).abs() < 1e-9);
    // PAWS rejects of data segments are not SYNs: silent.
    let paws = with_interval(snap(&[]), 2.0, &[("TcpExt.PAWSEstab", 500)]);
    assert!(run(std::slice::from_ref(&paws)).is_empty());
    // Lifetime totals without an interval: nothing judged.
    let mut totals = snap(&[]);
    totals
        .counters
        .insert("TcpExt.TCPSYNChallenge".into(), 1_000_000);
    assert!(run(std::slice::from_ref(&totals)).is_empty());
    // rfc1337 at the server: the retried SYN meets TIME-WAIT within 500 ms, unanswered.
    let tw = with_interval(
        snap(&[("ipv4/tcp_rfc1337", "1")]),
        12.0,
        &[("TcpExt.TCPACKSkippedTimeWait", 2)],
    );
    let f = run(std::slice::from_ref(&tw));
    assert_eq!(ids(&f), ["host-stale-state-collisions"]);
    assert!((f[0].impact_ms - 60_000.0).abs() < 1e-9);
}

#[test]
fn retransmissions_by_kind_without_double_counting() {
    // 0.1% loss measured here over 3 s: 7 386 retransmitted of 7 537 584 sent, 7 385 fast.
    let mut s = with_interval(
        snap(&[]),
        3.0,
        &[
            ("Tcp.RetransSegs", 7386),
            ("Tcp.OutSegs", 7_537_584),
            ("TcpExt.TCPFastRetrans", 7385),
            ("TcpExt.TCPSackRecovery", 175),
            ("TcpExt.TCPLossProbes", 5),
        ],
    );
    let mut k = sock(
        TCP_ESTABLISHED,
        44474,
        "10.0.0.2:5000",
        Some(idle_info(403, 4)),
        Some("cubic"),
    );
    if let Some(i) = k.info.as_mut() {
        i.total_retrans = 7386;
        i.rtt_us = 205;
    }
    s.sockets = vec![k];
    let f = run(std::slice::from_ref(&s));
    assert_eq!(ids(&f), ["host-retransmissions"]);
    let e = &f[0].evidence;
    assert!((e["fast_retransmits_per_s"].as_f64().unwrap() - 7385.0 / 3.0).abs() < 1e-6);
    assert!((e["retransmitted_share_pct"].as_f64().unwrap() - 0.09799).abs() < 1e-4);
    assert!(
        f[0].explanation
            .contains("2462.0 segments/s retransmitted (0.098%"),
        "{}",
        f[0].explanation
    );
    assert!(f[0].impact.contains("fast retransmit"));
    // SYN retransmissions are in TCPTimeouts too: 11 and 11 are 11 lost SYNs, no data timeout.
    let s = with_interval(
        snap(&[]),
        2.0,
        &[("TcpExt.TCPSynRetrans", 11), ("TcpExt.TCPTimeouts", 11)],
    );
    let f = run(std::slice::from_ref(&s));
    assert_eq!(f[0].evidence["syn_retransmits_per_s"], 5.5);
    assert_eq!(f[0].evidence["data_timeouts_per_s"], 0.0);
    assert!((f[0].impact_ms - 1000.0).abs() < 1e-9);
    // Reordering only: 40 fast retransmits and 2 probes in 4 s, 42 segments D-SACKed back
    // (each resend arrived twice), so none was needed: silent. With 20 D-SACKed, 20 fast
    // retransmits were needed, 5/s: still under ten a second, silent; with 0, 10/s: named,
    // and the D-SACK share is in the evidence when there is one.
    let reorder = |dsack: u64| {
        with_interval(
            snap(&[]),
            4.0,
            &[
                ("Tcp.RetransSegs", 42),
                ("TcpExt.TCPFastRetrans", 40),
                ("TcpExt.TCPLossProbes", 2),
                ("TcpExt.TCPDSACKRecvSegs", dsack),
            ],
        )
    };
    assert!(run(&[reorder(42)]).is_empty());
    assert!(run(&[reorder(20)]).is_empty());
    let f = run(&[reorder(0)]);
    assert_eq!(ids(&f), ["host-retransmissions"]);
    assert_eq!(f[0].evidence["dsack_segments_per_s"], 0.0);
    assert!(!f[0].explanation.contains("D-SACK"), "{}", f[0].explanation);
    // 80 fast retransmits, 20 D-SACKed: 60 needed in 4 s, 15/s, named, with 5/s said.
    let mut s = reorder(20);
    s.deltas.insert("TcpExt.TCPFastRetrans".into(), 80);
    let f = run(&[s]);
    assert_eq!(ids(&f), ["host-retransmissions"]);
    assert_eq!(f[0].evidence["dsack_segments_per_s"], 5.0);
    assert!(
        f[0].explanation
            .contains("5.0/s of the resends arrived twice (D-SACK)"),
        "{}",
        f[0].explanation
    );
    // The host's own backlog drops are named as a place of the loss, and change the fix.
    let mut s = reorder(0);
    s.deltas.insert("Softnet.Dropped".into(), 156);
    let f = run(&[s]);
    assert_eq!(f[0].evidence["backlog_drops_per_s"], 39.0);
    assert!(
        f[0].explanation
            .contains("this host dropped 39.0 packets/s itself"),
        "{}",
        f[0].explanation
    );
    assert!(f[0].fix.starts_with("raise net.core.netdev_max_backlog"));
    // Quiet counters: silent.
    let s = with_interval(
        snap(&[]),
        2.0,
        &[("Tcp.OutSegs", 100_000), ("Tcp.RetransSegs", 0)],
    );
    assert!(run(std::slice::from_ref(&s)).is_empty());
}

#[test]
fn a_full_accept_queue_is_named() {
    let mut s = snap(&[]);
    s.sockets = vec![listener(5000, 2, 1)];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert_eq!(ids(&out), ["host-syn-backlog"]);
    assert!(
        out[0]
            .explanation
            .contains("10.0.0.1:5000 (backlog 1, 2 waiting)"),
        "{}",
        out[0].explanation
    );
    // listen(0) holds one connection, and is full with it (measured: Recv-Q 1, Send-Q 0).
    s.sockets = vec![listener(6000, 1, 0)];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert!(out[0]
        .explanation
        .contains("10.0.0.1:6000 (backlog 0, 1 waiting)"));
    // Room left: silent.
    s.sockets = vec![listener(5000, 0, 128), listener(6000, 1, 1)];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert!(out.is_empty());
    // Over an interval: the listener seen full in the samples is named with the drops, even
    // when it drained by the end.
    let mut s = with_interval(
        snap(&[]),
        2.0,
        &[("TcpExt.ListenOverflows", 6), ("TcpExt.ListenDrops", 6)],
    );
    s.listeners = vec![
        ListenerSample {
            local: (ip("10.0.0.1"), 6000),
            backlog: 0,
            max_queue: 1,
            samples: 20,
            full_samples: 15,
        },
        ListenerSample {
            local: (ip("10.0.0.1"), 22),
            backlog: 128,
            max_queue: 0,
            samples: 20,
            full_samples: 0,
        },
    ];
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert!(
        out[0]
            .explanation
            .contains("10.0.0.1:6000 (backlog 0; full in 15 of 20 samples, up to 1 waiting)"),
        "{}",
        out[0].explanation
    );
    assert!(out[0]
        .explanation
        .contains("6 SYNs or handshake ACKs were dropped"));
    assert!(!out[0].explanation.contains(":22"));
    // Drops with no listener seen full: the longest queues are named as candidates.
    s.listeners[0].full_samples = 0;
    let mut out = Vec::new();
    syn_backlog(&s, &mut out);
    assert!(
        out[0]
            .explanation
            .contains("no listener's accept queue was seen full in 20 samples"),
        "{}",
        out[0].explanation
    );
    assert!(out[0]
        .explanation
        .contains("10.0.0.1:6000 (1 of backlog 0)"));
}

#[test]
fn sampling_listeners_keeps_the_peak() {
    let mut v = Vec::new();
    crate::sample_listeners(&mut v, &[listener(80, 3, 128), listener(81, 2, 1)]);
    crate::sample_listeners(&mut v, &[listener(80, 9, 128), listener(81, 0, 1)]);
    crate::sample_listeners(&mut v, &[sock(TCP_SYN_SENT, 1, "10.0.0.2:80", None, None)]);
    assert_eq!(v.len(), 2);
    assert_eq!((v[0].max_queue, v[0].samples, v[0].full_samples), (9, 2, 0));
    assert_eq!((v[1].max_queue, v[1].samples, v[1].full_samples), (2, 2, 1));
}
