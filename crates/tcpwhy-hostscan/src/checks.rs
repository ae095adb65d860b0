//! The checks: pure functions from snapshots to findings (tested on built snapshots).

use crate::diag::{TCP_ESTABLISHED, TCP_LISTEN, TCP_TIME_WAIT};
use crate::{HostFinding, Snapshot};
use serde_json::json;
use std::collections::BTreeMap;

/// Every check over every snapshot. Namespaces that share the global established hash table
/// (tcp_ehash_entries < 0) are summed for it.
pub fn run(snaps: &[Snapshot]) -> Vec<HostFinding> {
    let mut out = Vec::new();
    let shared: usize = snaps
        .iter()
        .filter(|s| s.int("ipv4/tcp_ehash_entries").is_some_and(|e| e < 0))
        .map(hashed_sockets)
        .sum();
    for s in snaps {
        slow_start_after_idle(s, &mut out);
        ehash_load(s, shared, &mut out);
        port_reuse_risk(s, &mut out);
        stale_state_collisions(s, &mut out);
        syn_backlog(s, &mut out);
        retransmissions(s, &mut out);
    }
    out.sort_by(|a, b| b.impact_ms.total_cmp(&a.impact_ms).then(a.id.cmp(b.id)));
    out
}

fn finding(s: &Snapshot, id: &'static str, severity: &'static str) -> HostFinding {
    HostFinding {
        id,
        namespace: s.namespace.clone(),
        severity,
        explanation: String::new(),
        impact: String::new(),
        impact_ms: 0.0,
        fix: String::new(),
        evidence: serde_json::Value::Null,
    }
}

fn endpoint(a: (std::net::IpAddr, u16)) -> String {
    match a.0 {
        std::net::IpAddr::V4(ip) => format!("{ip}:{}", a.1),
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", a.1),
    }
}

/// The congestion controls that ignore tcp_slow_start_after_idle (they do not use the
/// restart-after-idle cwnd reset: BBR keeps its own model).
fn ignores_ssai(cc: &str) -> bool {
    cc.starts_with("bbr")
}

/// `host-slow-start-after-idle`: the sysctl is on and sockets whose congestion control honours
/// it have been idle longer than their RTO with a window above the initial 10 segments: their
/// next burst starts again from 10 segments and pays the round trips to grow back.
pub fn slow_start_after_idle(s: &Snapshot, out: &mut Vec<HostFinding>) {
    if s.int("ipv4/tcp_slow_start_after_idle") != Some(1) {
        return;
    }
    let default_cc = s
        .sysctls
        .get("ipv4/tcp_congestion_control")
        .cloned()
        .unwrap_or_default();
    let mut affected = Vec::new();
    for sk in s.sockets.iter().filter(|k| k.state == TCP_ESTABLISHED) {
        let (Some(i), Some(cc)) = (sk.info, sk.cong.as_deref()) else {
            continue;
        };
        if ignores_ssai(cc) || i.snd_cwnd <= 10 || i.rto_us == 0 {
            continue;
        }
        if u64::from(i.last_data_sent_ms) * 1000 > u64::from(i.rto_us) {
            // Slow start from 10 doubles each round trip: log2(cwnd / 10) rounds to get back.
            let rounds = (f64::from(i.snd_cwnd) / 10.0).log2().ceil().max(1.0);
            affected.push((sk, i, cc, rounds, rounds * f64::from(i.rtt_us) / 1000.0));
        }
    }
    if affected.is_empty() {
        if ignores_ssai(&default_cc) {
            return; // moot for new sockets (the namespace facts say so)
        }
        let mut f = finding(s, "host-slow-start-after-idle", "risk");
        f.explanation = format!(
            "net.ipv4.tcp_slow_start_after_idle=1 with {default_cc} as the default congestion control: every connection idle longer than its RTO restarts from 10 segments (none is idle with a larger window right now)."
        );
        f.impact = "on the first burst after each idle gap: about log2(window / 10 segments) extra round trips (seed 002: 7 round trips instead of 2 at 50 ms RTT)".into();
        f.impact_ms = 0.0;
        f.fix = "sysctl -w net.ipv4.tcp_slow_start_after_idle=0 (in this namespace), or BBR".into();
        f.evidence =
            json!({"tcp_slow_start_after_idle": 1, "default_congestion_control": default_cc});
        out.push(f);
        return;
    }
    affected.sort_by(|a, b| b.4.total_cmp(&a.4));
    let worst = affected[0];
    let mut f = finding(s, "host-slow-start-after-idle", "now");
    f.explanation = format!(
        "{} connection{} ({}) idle longer than the RTO with windows above 10 segments will restart slow start on the next burst (tcp_slow_start_after_idle=1); worst: {} -> {} cwnd {} idle {} ms > RTO {} ms, RTT {:.1} ms.",
        affected.len(),
        if affected.len() == 1 { "" } else { "s" },
        worst.2,
        endpoint(worst.0.src),
        endpoint(worst.0.dst),
        worst.1.snd_cwnd,
        worst.1.last_data_sent_ms,
        worst.1.rto_us / 1000,
        f64::from(worst.1.rtt_us) / 1000.0,
    );
    f.impact = format!(
        "the next burst of the worst connection pays about {} extra round trips = {:.1} ms",
        worst.3, worst.4
    );
    f.impact_ms = worst.4;
    f.fix = "sysctl -w net.ipv4.tcp_slow_start_after_idle=0 in this namespace (or BBR for these sockets, or keep the connections busy below the RTO)".into();
    f.evidence = json!({
        "tcp_slow_start_after_idle": 1,
        "default_congestion_control": default_cc,
        "sockets": affected.iter().take(10).map(|(k, i, cc, r, ms)| json!({
            "local": endpoint(k.src), "remote": endpoint(k.dst), "congestion_control": cc,
            "cwnd": i.snd_cwnd, "idle_ms": i.last_data_sent_ms, "rto_ms": i.rto_us / 1000,
            "rtt_ms": f64::from(i.rtt_us) / 1000.0, "extra_round_trips": r, "extra_ms": ms,
        })).collect::<Vec<_>>(),
        "affected": affected.len(),
    });
    out.push(f);
}

/// Sockets in the established hash table: every TCP socket but listeners.
pub fn hashed_sockets(s: &Snapshot) -> usize {
    s.sockets.iter().filter(|k| k.state != TCP_LISTEN).count()
}

/// Average chain length from which the check speaks: seed 003 measured -1.6% throughput at 8
/// and -12% at 64 entries per bucket.
const EHASH_LOAD: f64 = 8.0;

/// `host-ehash-load`: sockets per established-hash bucket.
pub fn ehash_load(s: &Snapshot, shared_sockets: usize, out: &mut Vec<HostFinding>) {
    let Some(entries) = s.int("ipv4/tcp_ehash_entries").filter(|e| *e != 0) else {
        return;
    };
    let buckets = entries.unsigned_abs() as f64;
    let shared = entries < 0;
    let mine = hashed_sockets(s);
    let sockets = if shared {
        shared_sockets.max(mine)
    } else {
        mine
    };
    let load = sockets as f64 / buckets;
    if load < EHASH_LOAD {
        return;
    }
    let mut f = finding(s, "host-ehash-load", "now");
    f.explanation = format!(
        "{} sockets (TIME-WAIT included) in {} {} established-hash buckets: {:.1} per bucket, so every incoming segment walks a chain of about {:.0} sockets to find its own.",
        sockets,
        buckets as u64,
        if shared { "global (shared by every namespace without a table of its own)" } else { "per-namespace" },
        load,
        load
    );
    // Seed 003: throughput -1.6% at 8, -12% at 64, -20% at 128, -51% at 384 per bucket; the lab's
    // ehash-chain run here: 1560 per bucket made loopback round trips 1.6x slower (+8.8 us).
    let loss_pct = (load * 0.14).min(60.0);
    f.impact = format!(
        "about {loss_pct:.0}% less throughput per connection by seed 003's measurements (8 per bucket: -1.6%, 64: -12%, 384: -51%); about {:.1} us more per round trip by the lab's (1560 per bucket: +8.8 us)",
        load * 8.8 / 1560.0
    );
    f.impact_ms = load * 8.8 / 1560.0 / 1000.0;
    f.fix = if shared {
        "give busy namespaces their own table: sysctl -w net.ipv4.tcp_child_ehash_entries=N in the parent before creating them (N about the sockets expected); or a larger global table with the thash_entries= boot parameter".into()
    } else {
        "this namespace's table is too small for its sockets: create it again with a larger net.ipv4.tcp_child_ehash_entries in the parent (about the sockets expected), or fewer TIME-WAIT sockets (connection reuse)".into()
    };
    f.evidence = json!({
        "tcp_ehash_entries": entries,
        "shared_global_table": shared,
        "sockets_in_table": sockets,
        "sockets_in_this_namespace": mine,
        "time_wait": s.sockets.iter().filter(|k| k.state == TCP_TIME_WAIT).count(),
        "per_bucket": load,
    });
    out.push(f);
}

/// `host-port-reuse-risk`: TIME-WAIT sockets per destination against the ephemeral port
/// range, and the settings that make a collision with TIME-WAIT cost more (seed 004).
pub fn port_reuse_risk(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let range = s.ints("ipv4/ip_local_port_range").unwrap_or_default();
    let width = match range[..] {
        [lo, hi] if hi >= lo => (hi - lo + 1) as f64,
        _ => return,
    };
    let mut per_dest: BTreeMap<(std::net::IpAddr, u16), usize> = BTreeMap::new();
    for k in s.sockets.iter().filter(|k| k.state == TCP_TIME_WAIT) {
        // Our side made the connection when its port is in the ephemeral range.
        let port = i64::from(k.src.1);
        if port >= range[0] && port <= range[1] {
            *per_dest.entry(k.dst).or_insert(0) += 1;
        }
    }
    let Some((dest, tw)) = per_dest
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, n)| (*d, *n))
    else {
        return;
    };
    let used = tw as f64 / width;
    let timestamps = s.int("ipv4/tcp_timestamps");
    let rfc1337 = s.int("ipv4/tcp_rfc1337");
    let tw_reuse = s.int("ipv4/tcp_tw_reuse");
    // A quarter of the range in TIME-WAIT to one destination: a new connection's port has
    // that chance of meeting one.
    if used < 0.25 {
        return;
    }
    let mut f = finding(s, "host-port-reuse-risk", "now");
    let rate = tw as f64 / 60.0;
    f.explanation = format!(
        "{tw} TIME-WAIT sockets towards {} use {:.0}% of the {} ephemeral ports (about {rate:.0} new connections/s over the 60 s TIME-WAIT): a new connection's port has a {:.0}% chance of meeting leftover state{}{}.",
        endpoint(dest),
        used * 100.0,
        width as u64,
        used.min(1.0) * 100.0,
        if timestamps == Some(0) { "; tcp_timestamps=0, so TIME-WAIT cannot tell the new SYN from an old segment" } else { "" },
        if rfc1337 == Some(1) { "; tcp_rfc1337=1 turns each collision into about a minute" } else { "" },
    );
    f.impact = if rfc1337 == Some(1) {
        "each collision: about a minute (RFC 1337 keeps TIME-WAIT deaf to the client's RST)".into()
    } else {
        "each collision: a retried SYN, about 10 ms on Linux >= 5.6, 1 s or 3 s on older or other stacks (seeds 000 and 004)".into()
    };
    f.impact_ms = if rfc1337 == Some(1) { 60_000.0 } else { 10.0 } * used.min(1.0);
    f.fix = "reuse connections (pooling, keep-alive); keep net.ipv4.tcp_timestamps=1; widen net.ipv4.ip_local_port_range; net.ipv4.tcp_tw_reuse=1 lets outgoing connections reuse TIME-WAIT ports safely with timestamps; keep tcp_rfc1337=0".into();
    f.evidence = json!({
        "destination": endpoint(dest),
        "time_wait_to_destination": tw,
        "ip_local_port_range": range,
        "tcp_timestamps": timestamps,
        "tcp_rfc1337": rfc1337,
        "tcp_tw_reuse": tw_reuse,
    });
    out.push(f);
}

/// Per second over the interval, if the counter moved.
fn rate(s: &Snapshot, key: &str) -> Option<f64> {
    let d = *s.deltas.get(key)?;
    let secs = s.interval_s.filter(|t| *t > 0.0)?;
    Some(d as f64 / secs)
}

/// `host-stale-state-collisions`: the counters that rise when SYNs meet leftover state.
pub fn stale_state_collisions(s: &Snapshot, out: &mut Vec<HostFinding>) {
    const KEYS: [&str; 6] = [
        "TcpExt.TCPChallengeACK",
        "TcpExt.TCPSYNChallenge",
        "TcpExt.TCPACKSkippedTimeWait",
        "TcpExt.TCPACKSkippedChallenge",
        "TcpExt.PAWSActive",
        "TcpExt.PAWSEstab",
    ];
    let rising: Vec<(&str, u64, f64)> = KEYS
        .iter()
        .filter_map(|k| Some((*k, *s.deltas.get(*k)?, rate(s, k)?)))
        .filter(|(_, d, _)| *d > 0)
        .collect();
    if rising.is_empty() {
        return;
    }
    let mut f = finding(s, "host-stale-state-collisions", "now");
    let list: Vec<String> = rising
        .iter()
        .map(|(k, d, r)| format!("{} +{d} ({r:.1}/s)", k.trim_start_matches("TcpExt.")))
        .collect();
    f.explanation = format!(
        "SYNs are meeting leftover state: {} over {:.0} s (challenge ACKs and ACKs skipped in TIME-WAIT are seed 000's symptom: each such SYN waits for a retry).",
        list.join(", "),
        s.interval_s.unwrap_or(0.0)
    );
    let per_s: f64 = rising.iter().map(|r| r.2).sum();
    f.impact = format!("about {per_s:.1} connection attempts/s delayed by a SYN retry (~10 ms on Linux >= 5.6, 1 s or more elsewhere)");
    f.impact_ms = 10.0 * per_s.min(100.0);
    f.fix = "capture the port (tcpwhy analyze names each collision with syn-stale-state); keep timestamps on, close connections cleanly, reuse them instead of reconnecting on the same ports".into();
    f.evidence = json!(rising
        .iter()
        .map(|(k, d, r)| (k.to_string(), json!({"delta": d, "per_s": r})))
        .collect::<serde_json::Map<_, _>>());
    out.push(f);
}

/// `host-syn-backlog`: listen queues overflowing, now or over the interval.
pub fn syn_backlog(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let full: Vec<&crate::diag::Socket> = s
        .sockets
        .iter()
        .filter(|k| k.state == TCP_LISTEN && k.wqueue > 0 && k.rqueue * 10 >= k.wqueue * 9)
        .collect();
    let drops = rate(s, "TcpExt.ListenDrops").filter(|r| *r > 0.0);
    let overflows = rate(s, "TcpExt.ListenOverflows").filter(|r| *r > 0.0);
    if full.is_empty() && drops.is_none() && overflows.is_none() {
        return;
    }
    let mut f = finding(s, "host-syn-backlog", "now");
    let listeners: Vec<String> = full
        .iter()
        .map(|k| format!("{} ({} of {})", endpoint(k.src), k.rqueue, k.wqueue))
        .collect();
    f.explanation = format!(
        "{}{}",
        if listeners.is_empty() {
            String::new()
        } else {
            format!(
                "accept queue full or nearly: {}; the application does not accept() fast enough. ",
                listeners.join(", ")
            )
        },
        match (overflows, drops) {
            (None, None) => String::new(),
            (o, d) => format!(
                "ListenOverflows {:.1}/s, ListenDrops {:.1}/s: SYNs or handshake ACKs are being dropped.",
                o.unwrap_or(0.0),
                d.unwrap_or(0.0)
            ),
        }
    );
    f.impact = "each dropped SYN waits for the client's SYN retransmission: 1 s, then 2 s or 3 s (the lab's syn-backlog-full: 3.06 s per connection)".into();
    f.impact_ms = 1000.0;
    f.fix = "accept() faster (more acceptor threads), raise the listen() backlog together with net.core.somaxconn and net.ipv4.tcp_max_syn_backlog".into();
    f.evidence = json!({
        "listeners": full.iter().map(|k| json!({"local": endpoint(k.src), "accept_queue": k.rqueue, "backlog": k.wqueue})).collect::<Vec<_>>(),
        "listen_overflows_per_s": overflows,
        "listen_drops_per_s": drops,
        "somaxconn": s.int("core/somaxconn"),
        "tcp_max_syn_backlog": s.int("ipv4/tcp_max_syn_backlog"),
    });
    out.push(f);
}

/// `host-retransmissions`: timeouts, loss probes and SYN retransmissions per second, and the
/// sockets that retransmitted most.
pub fn retransmissions(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let timeouts = rate(s, "TcpExt.TCPTimeouts").unwrap_or(0.0);
    let probes = rate(s, "TcpExt.TCPLossProbes").unwrap_or(0.0);
    let syn = rate(s, "TcpExt.TCPSynRetrans").unwrap_or(0.0);
    if timeouts + syn < 1.0 && probes < 10.0 {
        return;
    }
    let mut top: Vec<&crate::diag::Socket> = s
        .sockets
        .iter()
        .filter(|k| k.info.is_some_and(|i| i.total_retrans > 0))
        .collect();
    top.sort_by_key(|k| std::cmp::Reverse(k.info.map_or(0, |i| i.total_retrans)));
    let mut f = finding(s, "host-retransmissions", "now");
    f.explanation = format!(
        "{timeouts:.1} retransmission timeouts/s, {probes:.1} tail loss probes/s and {syn:.1} SYN retransmissions/s over {:.0} s{}.",
        s.interval_s.unwrap_or(0.0),
        match top.first() {
            Some(k) => format!(
                "; most retransmissions: {} -> {} ({})",
                endpoint(k.src),
                endpoint(k.dst),
                k.info.map_or(0, |i| i.total_retrans)
            ),
            None => String::new(),
        }
    );
    f.impact = "each timeout stalls its connection for an RTO (>= 200 ms on Linux), each SYN retransmission 1 s or more".into();
    f.impact_ms = 200.0 * timeouts.min(100.0) + 1000.0 * syn.min(100.0);
    f.fix = "find the loss on the path (interface drops: ip -s link, a policer, a full queue); capture one of the sockets below and run tcpwhy analyze".into();
    f.evidence = json!({
        "timeouts_per_s": timeouts,
        "loss_probes_per_s": probes,
        "syn_retransmits_per_s": syn,
        "top_sockets": top.iter().take(5).map(|k| json!({
            "local": endpoint(k.src), "remote": endpoint(k.dst),
            "total_retrans": k.info.map_or(0, |i| i.total_retrans)})).collect::<Vec<_>>(),
    });
    out.push(f);
}

#[cfg(test)]
mod tests;
