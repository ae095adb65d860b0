//! The checks: pure functions from snapshots to findings (tested on built snapshots).
//!
//! Every number a finding states is one the kernel gives (a socket's tcp_info, a counter's
//! increase over the interval) or one derived from them by a rule of this kernel, named where
//! it is used. Counters that overlap are used once: TCPTimeouts counts every retransmission
//! timeout, SYN and SYN-ACK ones included (TCPSynRetrans); TCPSYNChallenge counts SYNs that met
//! an open connection, each then answered by a challenge ACK (TCPChallengeACK, which other
//! triggers also count) or not, rate-limited (TCPACKSkippedChallenge).

use crate::diag::{
    Socket, TcpInfo, TCPI_OPT_TIMESTAMPS, TCP_ESTABLISHED, TCP_LISTEN, TCP_SYN_SENT, TCP_TIME_WAIT,
    TIMER_PROBE, TIMER_TIME_WAIT,
};
use crate::{HostFinding, Snapshot};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Every check over every snapshot. Namespaces that share the global established hash table
/// (tcp_ehash_entries < 0, and the initial namespace, whose table it is) are judged together.
pub fn run(snaps: &[Snapshot]) -> Vec<HostFinding> {
    let mut out = Vec::new();
    ehash_load(snaps, &mut out);
    for s in snaps {
        slow_start_after_idle(s, &mut out);
        port_reuse_risk(s, &mut out);
        port_exhaustion(s, &mut out);
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

fn endpoint(a: (IpAddr, u16)) -> String {
    match a.0 {
        IpAddr::V4(ip) => format!("{ip}:{}", a.1),
        IpAddr::V6(ip) => format!("[{ip}]:{}", a.1),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A counter's increase over the interval (0 without one, or when it did not move).
fn delta(s: &Snapshot, key: &str) -> u64 {
    s.deltas.get(key).copied().unwrap_or(0)
}

fn interval_s(s: &Snapshot) -> f64 {
    s.interval_s.unwrap_or(0.0)
}

/// A duration in the unit that keeps a few digits: "53 ns", "8.8 us", "12.0 ms".
fn duration_us(us: f64) -> String {
    if us < 1.0 {
        format!("{:.0} ns", us * 1000.0)
    } else if us < 1000.0 {
        format!("{us:.1} us")
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

// ---------------------------------------------------------------------------------------------
// host-slow-start-after-idle

/// Linux's initial window (TCP_INIT_CWND; a route's initcwnd can change it).
const INITIAL_WINDOW: u32 = 10;

/// The congestion controls that ignore tcp_slow_start_after_idle: those with their own
/// `cong_control` (BBR), which `tcp_slow_start_after_idle_check` skips.
fn ignores_ssai(cc: &str) -> bool {
    cc.starts_with("bbr")
}

/// What `tcp_cwnd_restart` (net/ipv4/tcp_output.c) makes of a window after `idle_ms` without
/// sending: nothing within one RTO; beyond it the window halves once per further RTO of idle
/// (the loop `while ((delta -= rto) > 0 && cwnd > restart) cwnd >>= 1`), down to the initial
/// window at the least. Returns (halvings, the window it restarts from).
pub fn restart_window(cwnd: u32, idle_ms: u32, rto_ms: u32) -> Option<(u32, u32)> {
    if rto_ms == 0 || idle_ms <= rto_ms {
        return None;
    }
    let floor = INITIAL_WINDOW.min(cwnd);
    let (mut left, mut w, mut halvings) = (i64::from(idle_ms), cwnd, 0u32);
    // Bounded: a u32 window halves to the floor in at most 32 steps.
    while {
        left -= i64::from(rto_ms);
        left > 0
    } && w > floor
        && halvings < 32
    {
        w >>= 1;
        halvings += 1;
    }
    Some((halvings, w.max(floor)))
}

/// Round trips to send `burst` segments starting from `cwnd`: slow start (the window doubles
/// each round trip) up to `ssthresh`, then one segment more per round trip.
pub fn rounds_to_send(burst: u32, cwnd: u32, ssthresh: u32) -> u32 {
    let (mut left, mut w, mut rounds) = (u64::from(burst), u64::from(cwnd.max(1)), 0u32);
    let ssthresh = u64::from(ssthresh);
    // Bounded: 10 000 round trips is far past any window this could be asked about.
    while left > 0 && rounds < 10_000 {
        left = left.saturating_sub(w);
        rounds += 1;
        w = if w < ssthresh {
            (w * 2).min(ssthresh.max(w + 1))
        } else {
            w + 1
        };
    }
    rounds
}

/// Why a socket is not application-idle, if it is not: data written and not yet acknowledged
/// (in flight or queued, e.g. behind a closed receive window), window probes going out.
fn not_idle(k: &Socket, i: &TcpInfo) -> Option<&'static str> {
    if k.timer == TIMER_PROBE || i.probes > 0 {
        Some("zero-window probes")
    } else if k.wqueue > 0 || i.unacked > 0 || i.notsent_bytes.unwrap_or(0) > 0 {
        Some("data queued")
    } else if i.backoff > 0 {
        Some("timer backed off")
    } else {
        None
    }
}

/// One socket whose next write restarts slow start.
struct Restart<'a> {
    sock: &'a Socket,
    info: TcpInfo,
    cc: &'a str,
    halvings: u32,
    restart: u32,
    extra_rounds: u32,
    extra_ms: f64,
}

/// `host-slow-start-after-idle`: the sysctl is on and sockets whose congestion control honours
/// it have sent nothing for longer than their RTO with nothing queued: the next write finds
/// `packets_out == 0` and an idle time over the RTO, and `tcp_cwnd_restart` cuts the window
/// (halved per RTO of idle, down to 10 segments). A socket with data queued or window probes
/// going out is waiting on its peer, not idle: when the window opens the queue goes out at the
/// old window (measured: cwnd 491 after a 6 s zero-window stall, 531 after it).
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
    let mut waiting = 0u64;
    for sk in s.sockets.iter().filter(|k| k.state == TCP_ESTABLISHED) {
        let (Some(i), Some(cc)) = (sk.info, sk.cong.as_deref()) else {
            continue;
        };
        if ignores_ssai(cc) {
            continue;
        }
        let rto_ms = i.rto_us / 1000;
        let Some((halvings, restart)) = restart_window(i.snd_cwnd, i.last_data_sent_ms, rto_ms)
        else {
            continue;
        };
        if restart >= i.snd_cwnd {
            continue;
        }
        if not_idle(sk, &i).is_some() {
            waiting += 1;
            continue;
        }
        // tcp_cwnd_restart keeps ssthresh at tcp_current_ssthresh: at least 3/4 of the window.
        let ssthresh = i.snd_ssthresh.max(i.snd_cwnd / 2 + i.snd_cwnd / 4);
        let rounds = rounds_to_send(i.snd_cwnd, restart, ssthresh);
        let extra_rounds = rounds.saturating_sub(1);
        affected.push(Restart {
            sock: sk,
            info: i,
            cc,
            halvings,
            restart,
            extra_rounds,
            extra_ms: f64::from(extra_rounds) * f64::from(i.rtt_us) / 1000.0,
        });
    }
    if affected.is_empty() {
        if ignores_ssai(&default_cc) {
            return; // moot for new sockets (the namespace facts say so)
        }
        let mut f = finding(s, "host-slow-start-after-idle", "risk");
        f.explanation = format!(
            "net.ipv4.tcp_slow_start_after_idle=1 with {default_cc} as the default congestion control: a connection that sends nothing for longer than its RTO restarts with a smaller window on its next write, halved per RTO of idle, down to 10 segments (none is idle with a larger window right now{}).",
            if waiting > 0 { format!("; {} with data queued or window probes going out {} waiting on the peer, not idle", plural(waiting, "connection", "connections"), if waiting == 1 { "is" } else { "are" }) } else { String::new() }
        );
        f.impact = "on the first burst after each idle gap: about log2(old window / restart window) extra round trips (seed 002: 7 round trips instead of 2 at 50 ms RTT after idling down to 10 segments)".into();
        f.impact_ms = 0.0;
        f.fix = "sysctl -w net.ipv4.tcp_slow_start_after_idle=0 (in this namespace), or BBR".into();
        f.evidence = json!({"tcp_slow_start_after_idle": 1, "default_congestion_control": default_cc, "waiting_on_peer": waiting});
        out.push(f);
        return;
    }
    affected.sort_by(|a, b| b.extra_ms.total_cmp(&a.extra_ms));
    let w = &affected[0];
    let to_floor = (f64::from(w.info.snd_cwnd) / f64::from(INITIAL_WINDOW))
        .log2()
        .ceil()
        .max(0.0) as u32;
    let mut f = finding(s, "host-slow-start-after-idle", "now");
    f.explanation = format!(
        "{} ({}) idle longer than the RTO with nothing queued will restart slow start on the next write (tcp_slow_start_after_idle=1); worst: {} -> {} cwnd {} segments, idle {} ms = {:.1} RTO (RTO {} ms, RTT {:.1} ms): the window drops to {} (halved {}; after {} RTO of idle it is down to {}).",
        plural(affected.len() as u64, "connection", "connections"),
        w.cc,
        endpoint(w.sock.src),
        endpoint(w.sock.dst),
        w.info.snd_cwnd,
        w.info.last_data_sent_ms,
        f64::from(w.info.last_data_sent_ms) / f64::from((w.info.rto_us / 1000).max(1)),
        w.info.rto_us / 1000,
        f64::from(w.info.rtt_us) / 1000.0,
        w.restart,
        plural(u64::from(w.halvings), "time", "times"),
        to_floor + 1,
        INITIAL_WINDOW.min(w.info.snd_cwnd),
    );
    f.impact = format!(
        "a burst as large as the worst connection's window now ({} segments, {} KB) takes {} round trips instead of 1: +{} x {:.1} ms = {:.1} ms; the longer it idles, the smaller the window it restarts from",
        w.info.snd_cwnd,
        u64::from(w.info.snd_cwnd) * u64::from(w.info.snd_mss) / 1000,
        w.extra_rounds + 1,
        w.extra_rounds,
        f64::from(w.info.rtt_us) / 1000.0,
        w.extra_ms,
    );
    f.impact_ms = w.extra_ms;
    f.fix = "sysctl -w net.ipv4.tcp_slow_start_after_idle=0 in this namespace (or BBR for these sockets, or keep the connections busy below the RTO)".into();
    f.evidence = json!({
        "tcp_slow_start_after_idle": 1,
        "default_congestion_control": default_cc,
        "sockets": affected.iter().take(10).map(|r| json!({
            "local": endpoint(r.sock.src), "remote": endpoint(r.sock.dst), "congestion_control": r.cc,
            "cwnd": r.info.snd_cwnd, "idle_ms": r.info.last_data_sent_ms, "rto_ms": r.info.rto_us / 1000,
            "rtt_ms": f64::from(r.info.rtt_us) / 1000.0, "halvings": r.halvings,
            "restart_cwnd": r.restart, "extra_round_trips": r.extra_rounds, "extra_ms": r.extra_ms,
        })).collect::<Vec<_>>(),
        "affected": affected.len(),
        "waiting_on_peer": waiting,
    });
    out.push(f);
}

// ---------------------------------------------------------------------------------------------
// host-ehash-load

/// Sockets in the established hash table: every TCP socket but listeners.
pub fn hashed_sockets(s: &Snapshot) -> usize {
    s.sockets.iter().filter(|k| k.state != TCP_LISTEN).count()
}

/// Average chain length from which the check speaks (seed 003: -1.6% throughput at 8).
const EHASH_LOAD: f64 = 8.0;

/// Seed 003's iperf3 throughput against the average chain length (sockets per bucket):
/// 50.7 Gbps at 1, 49.9 at 8, 48.9 at 16, 47.3 at 32, 44.6 at 64, 40.6 at 128, 36.3 at 192,
/// 32.5 at 256, 27.0 at 320, 25.0 at 384.
const SEED_003: [(f64, f64); 10] = [
    (1.0, 50.7),
    (8.0, 49.9),
    (16.0, 48.9),
    (32.0, 47.3),
    (64.0, 44.6),
    (128.0, 40.6),
    (192.0, 36.3),
    (256.0, 32.5),
    (320.0, 27.0),
    (384.0, 25.0),
];

/// Throughput lost at `load` sockets per bucket, in percent, interpolated linearly between
/// seed 003's measurements (None past its last one, 384).
pub fn ehash_loss_pct(load: f64) -> Option<f64> {
    let base = SEED_003[0].1;
    if load <= SEED_003[0].0 {
        return Some(0.0);
    }
    SEED_003.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        (load <= x1).then(|| {
            let gbps = y0 + (y1 - y0) * (load - x0) / (x1 - x0);
            (1.0 - gbps / base) * 100.0
        })
    })
}

/// The lab's ehash-chain run on this kernel: 1 562 sockets per bucket (200 000 on 128) made a
/// loopback round trip 8.8 us slower (42 300 round trips/s against 67 200 empty).
const LAB_CHAIN: f64 = 1562.0;
const LAB_CHAIN_US: f64 = 8.8;

/// One table and the namespaces that use it.
struct Table<'a> {
    buckets: u64,
    global: bool,
    members: Vec<&'a Snapshot>,
}

/// `host-ehash-load`: sockets per established-hash bucket, per table. The initial namespace's
/// table is the global one, which every namespace without its own (tcp_ehash_entries < 0)
/// shares: they are summed, each namespace once (the same namespace under two names, or named
/// and read as this one, counts once).
pub fn ehash_load(snaps: &[Snapshot], out: &mut Vec<HostFinding>) {
    let mut seen = BTreeSet::new();
    let mut global: Option<Table> = None;
    let mut own: Vec<Table> = Vec::new();
    for s in snaps {
        if let Some(ino) = s.netns_inode {
            if !seen.insert(ino) {
                continue;
            }
        }
        let Some(entries) = s.int("ipv4/tcp_ehash_entries").filter(|e| *e != 0) else {
            continue;
        };
        let is_global = entries < 0 || s.init_namespace == Some(true);
        if is_global {
            let t = global.get_or_insert(Table {
                buckets: entries.unsigned_abs(),
                global: true,
                members: Vec::new(),
            });
            t.members.push(s);
        } else {
            own.push(Table {
                buckets: entries.unsigned_abs(),
                global: false,
                members: vec![s],
            });
        }
    }
    for t in global.into_iter().chain(own) {
        let sockets: usize = t.members.iter().map(|s| hashed_sockets(s)).sum();
        let load = sockets as f64 / t.buckets as f64;
        if load < EHASH_LOAD {
            continue;
        }
        let first = t.members[0];
        let names: Vec<&str> = t.members.iter().map(|s| s.namespace.as_str()).collect();
        let read_init = t.members.iter().any(|s| s.init_namespace == Some(true));
        let mut f = finding(first, "host-ehash-load", "now");
        let table = if t.global {
            format!(
                "the global established-hash table ({} buckets: the initial namespace's, shared by every namespace without a table of its own); {} sockets (TIME-WAIT included) in the {} read ({}){}",
                t.buckets,
                sockets,
                plural(names.len() as u64, "namespace", "namespaces"),
                names.join(", "),
                if read_init { "" } else { ", more in those not read (the initial namespace was not)" },
            )
        } else {
            format!(
                "this namespace's own established-hash table ({} buckets): {} sockets (TIME-WAIT included)",
                t.buckets, sockets
            )
        };
        f.explanation = format!(
            "{table}: {load:.1} per bucket, so every incoming segment walks a chain of about {load:.0} sockets to find its own."
        );
        let per_rtt = duration_us(load * LAB_CHAIN_US / LAB_CHAIN);
        f.impact = match ehash_loss_pct(load) {
            Some(p) => format!(
                "about {p:.1}% less throughput per connection, interpolated in seed 003's measurements (8 per bucket: -1.6%, 16: -3.6%, 64: -12.0%, 128: -19.9%, 384: -50.7%); about {per_rtt} more per round trip by the lab's (1 562 per bucket: +8.8 us)"
            ),
            None => format!(
                "more than the -50.7% throughput seed 003 measured at 384 per bucket; about {per_rtt} more per round trip by the lab's (1 562 per bucket: +8.8 us)"
            ),
        };
        f.impact_ms = load * LAB_CHAIN_US / LAB_CHAIN / 1000.0;
        f.fix = if t.global {
            "give busy namespaces their own table: sysctl -w net.ipv4.tcp_child_ehash_entries=N in the parent before creating them (N about the sockets expected); or a larger global table with the thash_entries= boot parameter".into()
        } else {
            "this namespace's table is too small for its sockets: create it again with a larger net.ipv4.tcp_child_ehash_entries in the parent (about the sockets expected), or fewer TIME-WAIT sockets (connection reuse)".into()
        };
        f.evidence = json!({
            "tcp_ehash_entries": first.int("ipv4/tcp_ehash_entries"),
            "buckets": t.buckets,
            "shared_global_table": t.global,
            "namespaces": names,
            "sockets_in_table": sockets,
            "sockets_in_this_namespace": hashed_sockets(first),
            "time_wait": t.members.iter().map(|s| s.sockets.iter().filter(|k| k.state == TCP_TIME_WAIT).count()).sum::<usize>(),
            "per_bucket": load,
            "throughput_loss_pct": ehash_loss_pct(load),
        });
        out.push(f);
    }
}

// ---------------------------------------------------------------------------------------------
// TIME-WAIT: who holds it, how fast it comes, which ended early

/// TCP_TIMEWAIT_LEN: every TIME-WAIT lasts 60 s on Linux.
const TIME_WAIT_MS: u32 = 60_000;

/// TIME-WAIT sockets (and FIN-WAIT-2 ones kept as time-wait sockets, which have no tcp_info).
fn is_time_wait(k: &Socket) -> bool {
    k.state == TCP_TIME_WAIT || (k.timer == TIMER_TIME_WAIT && k.info.is_none())
}

/// The local ports something listens on.
fn listening_ports(s: &Snapshot) -> BTreeSet<u16> {
    s.sockets
        .iter()
        .filter(|k| k.state == TCP_LISTEN)
        .map(|k| k.src.1)
        .chain(s.listeners.iter().map(|l| l.local.1))
        .collect()
}

/// TIME-WAIT sockets on a listening port: connections this side, as the server, closed first.
pub fn server_time_wait(s: &Snapshot) -> usize {
    let ports = listening_ports(s);
    s.sockets
        .iter()
        .filter(|k| is_time_wait(k) && ports.contains(&k.src.1))
        .count()
}

/// How long ago the oldest of these TIME-WAIT sockets closed (its 60 s minus what is left),
/// and the close rate that makes: sockets over that span. None for fewer than 2 sockets or a
/// span under 0.1 s, where the rate would say more than the sockets do.
fn close_rate(tws: &[&Socket]) -> Option<(f64, f64)> {
    let oldest_ms = tws
        .iter()
        .filter(|k| k.state == TCP_TIME_WAIT && k.expires_ms <= TIME_WAIT_MS)
        .map(|k| TIME_WAIT_MS - k.expires_ms)
        .max()?;
    let span_s = f64::from(oldest_ms) / 1000.0;
    (tws.len() >= 2 && span_s >= 0.1).then(|| (span_s, tws.len() as f64 / span_s))
}

type Tuple = ((IpAddr, u16), (IpAddr, u16));

/// TIME-WAIT sockets that ended before their 60 s during the interval: a new SYN on the
/// 4-tuple took it over (accepted, or answered with the old ACK and then reset by the client's
/// RST), or an RST killed it. Two parts:
/// - those present at the start with more than the interval left, gone at the end (or there
///   again with more time left than they had: a new connection's), per peer;
/// - those created during the interval (the TW and TWKilled counters) not there at the end,
///   less those this host's own connect() took over (TWRecycled, tcp_tw_reuse).
///
/// None when the interval is too long for the TIME-WAIT created in it to be still there.
pub struct EndedEarly {
    pub total: u64,
    /// Of those present at the start: peer address -> count, on listening ports only.
    pub held_by_peer: BTreeMap<IpAddr, u64>,
    pub created: u64,
}

pub fn time_wait_ended_early(s: &Snapshot) -> Option<EndedEarly> {
    let secs = s.interval_s?;
    let interval_ms = (secs * 1000.0) as u64;
    // 5 s of margin on the 60 s: a TIME-WAIT made at the start must still be there at the end.
    if interval_ms + 5_000 > u64::from(TIME_WAIT_MS) {
        return None;
    }
    let ports = listening_ports(s);
    let end: BTreeMap<Tuple, u32> = s
        .sockets
        .iter()
        .filter(|k| is_time_wait(k))
        .map(|k| ((k.src, k.dst), k.expires_ms))
        .collect();
    let mut held_by_peer = BTreeMap::new();
    let mut from_start = 0u64;
    // Start sockets found again at the end as themselves (their timer run down, not reset).
    let mut same = 0u64;
    for k in s.time_wait_before.iter().filter(|k| is_time_wait(k)) {
        let expected = u64::from(k.expires_ms).saturating_sub(interval_ms);
        // Timers fire within a second or so of their time: 2 s of margin.
        let still = end
            .get(&(k.src, k.dst))
            .is_some_and(|left| u64::from(*left) <= expected + 2_000);
        if still {
            same += 1;
            continue;
        }
        // Gone, or there again with more time left: ended early, unless its time was up.
        if u64::from(k.expires_ms) > interval_ms + 1_000 {
            from_start += 1;
            if ports.contains(&k.src.1) {
                *held_by_peer.entry(k.dst.0).or_insert(0) += 1;
            }
        }
    }
    let created = delta(s, "TcpExt.TW") + delta(s, "TcpExt.TWKilled");
    let new_at_end = (end.len() as u64).saturating_sub(same);
    let gone_new = created
        .saturating_sub(new_at_end)
        .saturating_sub(delta(s, "TcpExt.TWRecycled"));
    Some(EndedEarly {
        total: from_start + gone_new,
        held_by_peer,
        created,
    })
}

/// What a peer's open connections say about its timestamps: (with, without).
fn peer_timestamps(s: &Snapshot, peer: IpAddr) -> (u64, u64) {
    let mut with = 0;
    let mut without = 0;
    for k in s.sockets.iter().filter(|k| k.dst.0 == peer) {
        if let Some(i) = k
            .info
            .filter(|_| k.state != TCP_LISTEN && k.state != TCP_SYN_SENT)
        {
            if i.options & TCPI_OPT_TIMESTAMPS != 0 {
                with += 1;
            } else {
                without += 1;
            }
        }
    }
    (with, without)
}

/// The cost of one SYN refused by leftover state, by client: Linux >= 5.6 resends it 2
/// jiffies after its RST (TCP_TIMEOUT_MIN; measured here, HZ=250: 8.6-16.2 ms, ~10 ms
/// typical), others after their initial RTO.
const STALE_RETRY_COST: &str = "~10 ms from a Linux >= 5.6 client (it resends the SYN 2 jiffies after its RST: 8-16 ms measured here), about 1 s from older Linux and BSD clients (their initial RTO), 3 s from Windows and Solaris (seed 004: 3.4 s)";
const STALE_RETRY_MS: f64 = 10.0;
/// With tcp_rfc1337=1 the TIME-WAIT ignores the client's RST: the SYN waits until it ends
/// (measured here: every reconnect past a 10 s connect timeout; the lab: about 67 s).
const RFC1337_MS: f64 = 60_000.0;

/// `host-port-reuse-risk`: TIME-WAIT held for connections this side closed first, on ports it
/// listens on (the server side of seed 004). A client reconnecting from a port still in that
/// TIME-WAIT sends a SYN it must judge: accepted at once when its timestamp is newer than the
/// old connection's last one (both ends with timestamps, and a timestamp tick, 1 ms, later) or
/// its ISN lies beyond the old connection's end; otherwise answered with the old connection's
/// ACK, which the client resets and retries. Linux ISNs grow 15.6 M per second for a 4-tuple,
/// so without timestamps a reconnect within 60 s collides when the old connection moved more
/// than 15.6 MB per second between its SYN and the new one (docs/tcp-signatures.md section 1).
/// Linux's connect() skips local ports the client itself holds in TIME-WAIT, so that side has
/// no such risk: its effect is port exhaustion (`host-port-exhaustion`).
///
/// Speaks when timestamps are off here, or off on an open connection of a peer it holds
/// TIME-WAIT for, or when SYNs took such TIME-WAIT over during the interval; silent when both
/// ends are known to use timestamps and no SYN met the TIME-WAIT.
pub fn port_reuse_risk(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let ports = listening_ports(s);
    let held: Vec<&Socket> = s
        .sockets
        .iter()
        .filter(|k| is_time_wait(k) && ports.contains(&k.src.1))
        .collect();
    let early = time_wait_ended_early(s);
    // Segments (retried SYNs among them) that met TIME-WAIT within 500 ms of its last answer:
    // with tcp_rfc1337=1 a refused SYN's TIME-WAIT does not end, and this is what shows.
    let tw_skipped = delta(s, "TcpExt.TCPACKSkippedTimeWait");
    let met = early.as_ref().map_or(0, |e| e.total) + tw_skipped;
    // TIME-WAIT ending early on a host that listens on nothing is not a server's.
    if (held.is_empty() && met == 0) || ports.is_empty() {
        return;
    }
    let mut per_peer: BTreeMap<IpAddr, u64> = BTreeMap::new();
    for k in &held {
        *per_peer.entry(k.dst.0).or_insert(0) += 1;
    }
    if let Some(e) = &early {
        for p in e.held_by_peer.keys() {
            per_peer.entry(*p).or_insert(0);
        }
    }
    let here_off = s.int("ipv4/tcp_timestamps") == Some(0);
    // Peers whose open connections go without timestamps.
    let peers_off: Vec<(IpAddr, u64, u64)> = per_peer
        .keys()
        .map(|p| {
            let (w, wo) = peer_timestamps(s, *p);
            (*p, w, wo)
        })
        .filter(|(_, _, wo)| *wo > 0)
        .collect();
    let all_known_on = !here_off
        && !per_peer.is_empty()
        && per_peer.keys().all(|p| {
            let (w, wo) = peer_timestamps(s, *p);
            w > 0 && wo == 0
        });
    if !here_off && peers_off.is_empty() && (met == 0 || all_known_on) {
        return;
    }
    let rfc1337 = s.int("ipv4/tcp_rfc1337") == Some(1);
    let top = per_peer
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(p, n)| (*p, *n));
    let mut ports_used: Vec<u16> = held.iter().map(|k| k.src.1).collect();
    ports_used.sort_unstable();
    ports_used.dedup();
    let mut f = finding(s, "host-port-reuse-risk", "risk");
    let holding = if held.is_empty() {
        "This side closes connections first on its listening ports and so holds their TIME-WAIT (none left at the end of the interval)".to_string()
    } else {
        let rate = close_rate(&held).map_or(String::new(), |(span, r)| {
            format!(", all closed within the last {span:.1} s (the oldest has {:.1} s of its 60 s left): about {r:.0} closes/s", 60.0 - span)
        });
        format!(
            "This side holds {} for connections it closed first on port{} {}{}{}",
            plural(held.len() as u64, "TIME-WAIT socket", "TIME-WAIT sockets"),
            if ports_used.len() == 1 { "" } else { "s" },
            ports_used
                .iter()
                .take(5)
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            match top {
                Some((p, n)) if per_peer.len() > 1 => format!(" ({n} of them with {p})"),
                Some((p, _)) => format!(" (all with {p})"),
                None => String::new(),
            },
            rate,
        )
    };
    let timestamps = if here_off {
        "; timestamps are off here (net.ipv4.tcp_timestamps=0), so TIME-WAIT cannot accept a new SYN by its timestamp".to_string()
    } else if let Some((p, w, wo)) = peers_off.first() {
        format!(
            "; {p} does not use timestamps ({wo} of its {} open connections without), so TIME-WAIT cannot accept its SYNs by their timestamp",
            w + wo
        )
    } else {
        "; whether the clients use timestamps is not known here (no open connection of theirs shows it)".to_string()
    };
    let events = match (&early, s.interval_s) {
        (Some(e), Some(t)) if e.total > 0 => format!(
            ". Over {t:.1} s, {} before their 60 s ({} created in that time): each taken over by a SYN from the same client port (accepted, or answered with the old connection's ACK and then reset by the client) or killed by an RST",
            plural(e.total, "TIME-WAIT socket ended", "TIME-WAIT sockets ended"),
            e.created
        ),
        (None, Some(t)) => format!(". (Which TIME-WAIT ended early is not judged over {t:.0} s: the interval must be under 55 s.)"),
        _ => String::new(),
    } + &if tw_skipped > 0 {
        format!(
            ". {} met TIME-WAIT here within 500 ms of its last answer and went unanswered (TCPACKSkippedTimeWait): a client's quick SYN retry",
            plural(tw_skipped, "segment", "segments")
        )
    } else {
        String::new()
    };
    f.explanation = format!(
        "{holding}{timestamps}{events}. A client reconnecting from a port still in TIME-WAIT here is refused with the old connection's ACK when its SYN's timestamp is not newer (timestamps off at either end, or less than 1 ms later) and its ISN lies below the old connection's end (the old connection moved more than 15.6 MB per second between its SYN and the new one){}.",
        if rfc1337 { "; tcp_rfc1337=1 here: the client's RST does not end the TIME-WAIT, so the refused SYN waits for it to end" } else { "" },
    );
    f.impact = if rfc1337 {
        "each refused SYN: until the TIME-WAIT ends, up to 60 s (tcp_rfc1337=1 keeps it deaf to the client's RST; measured here: every reconnect ran past a 10 s connect timeout)".into()
    } else {
        format!("each refused SYN: {STALE_RETRY_COST}")
    };
    f.impact_ms = if rfc1337 { RFC1337_MS } else { STALE_RETRY_MS };
    f.fix = "keep TCP timestamps on at both ends (net.ipv4.tcp_timestamps=1: TIME-WAIT then accepts a SYN with a newer timestamp); let clients close first where the protocol allows (the client then holds TIME-WAIT, whose ports Linux skips), or reuse connections; keep tcp_rfc1337=0; do not shorten TIME-WAIT".into();
    f.evidence = json!({
        "time_wait_held": held.len(),
        "listening_ports": ports_used,
        "time_wait_per_peer": per_peer.iter().map(|(p, n)| (p.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "close_rate_per_s": close_rate(&held).map(|(_, r)| r),
        "ended_early": early.as_ref().map(|e| e.total),
        "ack_skipped_in_time_wait": tw_skipped,
        "created_in_interval": early.as_ref().map(|e| e.created),
        "peers_without_timestamps": peers_off.iter().map(|(p, _, wo)| json!({"peer": p.to_string(), "connections_without": wo})).collect::<Vec<_>>(),
        "tcp_timestamps": s.int("ipv4/tcp_timestamps"),
        "tcp_rfc1337": s.int("ipv4/tcp_rfc1337"),
        "interval_s": s.interval_s,
    });
    out.push(f);
}

/// Whether an address is loopback (tcp_tw_reuse=2 reuses TIME-WAIT to those only).
fn loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => v.is_loopback(),
        IpAddr::V6(v) => v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
    }
}

/// The local ports held toward one destination.
#[derive(Default)]
struct Ports<'a> {
    all: u64,
    time_wait: Vec<&'a Socket>,
    /// TIME-WAIT that connect() may take over (tcp_tw_reuse).
    reusable: u64,
}

/// `host-port-exhaustion`: the connecting side's local ports toward one destination, against
/// the ephemeral range. A connection's 4-tuple must be unique, so toward one destination
/// address and port each local port serves one socket at a time; connect() skips ports held in
/// TIME-WAIT unless tcp_tw_reuse lets it take one over (1: any destination, 2: loopback only;
/// the old connection must have used timestamps and be older than tcp_tw_reuse_delay, 1 s),
/// and fails with EADDRNOTAVAIL when no port is left (measured: 1 200 connects into a
/// 1 000-port range, 200 failed). It never meets the server's TIME-WAIT on those ports: that
/// risk is the server's (`host-port-reuse-risk`).
pub fn port_exhaustion(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let range = s.ints("ipv4/ip_local_port_range").unwrap_or_default();
    let (lo, hi) = match range[..] {
        [lo, hi] if hi >= lo && lo >= 0 => (lo, hi),
        _ => return,
    };
    let width = (hi - lo + 1) as u64;
    let ports = listening_ports(s);
    let tw_reuse = s.int("ipv4/tcp_tw_reuse").unwrap_or(0);
    let timestamps = s.int("ipv4/tcp_timestamps").unwrap_or(1) != 0;
    let reuse_delay_ms = s.int("ipv4/tcp_tw_reuse_delay").unwrap_or(1000).max(0) as u64;
    let mut per_dest: BTreeMap<(IpAddr, u16), Ports> = BTreeMap::new();
    for k in &s.sockets {
        let port = i64::from(k.src.1);
        if k.state == TCP_LISTEN || port < lo || port > hi || ports.contains(&k.src.1) {
            continue;
        }
        let e = per_dest.entry(k.dst).or_default();
        e.all += 1;
        if is_time_wait(k) {
            e.time_wait.push(k);
            let age_ms = u64::from(TIME_WAIT_MS.saturating_sub(k.expires_ms));
            let reusable = timestamps
                && (tw_reuse == 1 || (tw_reuse == 2 && loopback(k.dst.0)))
                && age_ms > reuse_delay_ms;
            if reusable {
                e.reusable += 1;
            }
        }
    }
    let Some((dest, p)) = per_dest.into_iter().max_by_key(|(_, p)| p.all - p.reusable) else {
        return;
    };
    let (tws, reusable) = (p.time_wait, p.reusable);
    let tw = tws.len() as u64;
    let held = p.all - reusable;
    // Half the range held toward one destination: the next burst can take the rest.
    if held * 2 < width {
        return;
    }
    let now = held >= width;
    let mut f = finding(s, "host-port-exhaustion", if now { "now" } else { "risk" });
    let rate = close_rate(&tws);
    f.explanation = format!(
        "{held} of the {width} local ports ({lo}-{hi}) toward {} are held ({tw} in TIME-WAIT{}){}: {}. TIME-WAIT holds each port 60 s, so more than {:.0} new connections/s to one destination cannot last{}.",
        endpoint(dest),
        if reusable > 0 { format!(", {reusable} more in TIME-WAIT that tcp_tw_reuse lets connect() take over are not counted") } else { String::new() },
        match rate {
            Some((span, r)) if tw > 0 => format!("; the TIME-WAIT ones all closed within the last {span:.1} s: about {r:.0} connections/s"),
            _ => String::new(),
        },
        if now { "a connect() to it fails now with EADDRNOTAVAIL (\"Cannot assign requested address\") until one ends" } else { "once the rest are taken, connect() to it fails with EADDRNOTAVAIL (\"Cannot assign requested address\")" },
        width as f64 / 60.0,
        match tw_reuse {
            0 => "; tcp_tw_reuse=0: connect() never takes over TIME-WAIT".to_string(),
            2 if !loopback(dest.0) => "; tcp_tw_reuse=2 (the default) takes over TIME-WAIT toward loopback only".to_string(),
            _ if !timestamps => "; timestamps are off here, and tcp_tw_reuse takes over only TIME-WAIT of connections that used them".to_string(),
            _ => String::new(),
        },
    );
    f.impact = "connect() fails: the application gets an error, not a delay (or retries and waits); connections to other destinations are not affected".into();
    f.impact_ms = if now { 1000.0 } else { 0.0 };
    f.fix = "reuse connections (pooling, keep-alive) instead of one per request; widen net.ipv4.ip_local_port_range; net.ipv4.tcp_tw_reuse=1 with timestamps on lets connect() take over TIME-WAIT older than 1 s; spread over more destination addresses or ports".into();
    f.evidence = json!({
        "destination": endpoint(dest),
        "held": held,
        "time_wait": tw,
        "time_wait_reusable": reusable,
        "range_width": width,
        "ip_local_port_range": [lo, hi],
        "tcp_tw_reuse": tw_reuse,
        "tcp_timestamps": s.int("ipv4/tcp_timestamps"),
        "close_rate_per_s": rate.map(|(_, r)| r),
    });
    out.push(f);
}

// ---------------------------------------------------------------------------------------------
// host-stale-state-collisions

/// RSTs this host sent that its abort counters do not explain (a close with unread data, a
/// zero-linger close, memory pressure: each sends one and counts it).
fn unexplained_rsts(s: &Snapshot) -> u64 {
    delta(s, "Tcp.OutRsts").saturating_sub(
        delta(s, "TcpExt.TCPAbortOnClose")
            + delta(s, "TcpExt.TCPAbortOnData")
            + delta(s, "TcpExt.TCPAbortOnMemory"),
    )
}

/// SYN retransmissions that followed an RST this host sent in SYN-SENT: a SYN answered with an
/// ACK for other numbers (the peer's leftover state: TIME-WAIT, or an open connection's
/// challenge ACK) is reset and sent again, 2 jiffies later on Linux >= 5.6 (measured here:
/// 12 reconnects into TIME-WAIT moved TCPSynRetrans, TCPTimeouts and OutRsts by 12 each, nothing
/// else). A SYN lost on the way moves TCPSynRetrans without an RST; one refused by a closed port
/// moves neither. The count is the smaller of the SYN retransmissions and the RSTs not
/// explained otherwise, and only on a host that opened connections (or still is).
pub fn stale_syn_retries(s: &Snapshot) -> u64 {
    let connecting = s.sockets.iter().any(|k| k.state == TCP_SYN_SENT);
    if delta(s, "Tcp.ActiveOpens") == 0 && !connecting {
        return 0;
    }
    delta(s, "TcpExt.TCPSynRetrans").min(unexplained_rsts(s))
}

/// `host-stale-state-collisions`: SYNs meeting leftover state over the interval, on either
/// side, each counted once:
/// - here as the server: TCPSYNChallenge (a SYN on an open connection's 4-tuple, seed 000;
///   its challenge ACK is counted in TCPChallengeACK or, rate-limited, TCPACKSkippedChallenge,
///   so neither is added), TCPACKSkippedTimeWait (a segment, such as a retried SYN, meeting
///   TIME-WAIT within 500 ms of its last answer: not answered at all);
/// - here as the client: SYN retransmissions after an RST in SYN-SENT ([`stale_syn_retries`]),
///   and PAWSActive (a SYN-ACK rejected by its timestamp).
///
/// A refused SYN in TIME-WAIT moves no counter on the server: there it shows as TIME-WAIT
/// ended early (`host-port-reuse-risk`). PAWS rejects of data segments (PAWSEstab) are not
/// SYNs and are not counted.
pub fn stale_state_collisions(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let Some(t) = s.interval_s.filter(|t| *t > 0.0) else {
        return;
    };
    let challenged = delta(s, "TcpExt.TCPSYNChallenge");
    let skipped_challenge = delta(s, "TcpExt.TCPACKSkippedChallenge").min(challenged);
    let tw_skipped = delta(s, "TcpExt.TCPACKSkippedTimeWait");
    let retries = stale_syn_retries(s);
    let paws_active = delta(s, "TcpExt.PAWSActive");
    if challenged + tw_skipped + retries + paws_active == 0 {
        return;
    }
    let rfc1337 = s.int("ipv4/tcp_rfc1337") == Some(1);
    let mut parts = Vec::new();
    let mut costs = Vec::new();
    let mut impact_ms: f64 = 0.0;
    if retries > 0 {
        // SYN-SENT sockets still retrying: those whose SYN keeps meeting the state.
        let waiting: Vec<&Socket> = s
            .sockets
            .iter()
            .filter(|k| k.state == TCP_SYN_SENT && k.info.is_some_and(|i| i.retransmits > 0))
            .collect();
        parts.push(format!(
            "as the client: {} ({:.1}/s) came with as many RSTs this host sent ({} RSTs not from aborts): a SYN answered with an ACK for another connection's numbers (the server's TIME-WAIT, or an open connection's challenge ACK) is reset and sent again{}",
            plural(retries, "SYN retransmission", "SYN retransmissions"),
            retries as f64 / t,
            unexplained_rsts(s),
            if waiting.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} still in SYN-SENT after retries (to {}, {} so far): a SYN refused again and again meets state that ignores the RST (tcp_rfc1337=1 at the server) and waits until it ends, or is lost",
                    plural(waiting.len() as u64, "connection is", "connections are"),
                    endpoint(waiting[0].dst),
                    waiting[0].info.map_or(0, |i| i.retransmits)
                )
            }
        ));
        costs.push(format!("a SYN reset and retried: {STALE_RETRY_COST}"));
        impact_ms = impact_ms.max(STALE_RETRY_MS);
    }
    if paws_active > 0 {
        parts.push(format!(
            "as the client: {} rejected by PAWS (its timestamp older than the last one seen on the 4-tuple): the connection is reset and the SYN sent again",
            plural(paws_active, "SYN-ACK", "SYN-ACKs")
        ));
        costs.push(format!("a SYN-ACK rejected by PAWS: {STALE_RETRY_COST}"));
        impact_ms = impact_ms.max(STALE_RETRY_MS);
    }
    if challenged > 0 {
        parts.push(format!(
            "as the server: {} ({:.1}/s) met an open connection on their 4-tuple (TCPSYNChallenge; seed 000: the old connection's RST was lost){}",
            plural(challenged, "SYN", "SYNs"),
            challenged as f64 / t,
            if skipped_challenge > 0 {
                format!(", up to {skipped_challenge} of them not answered (the challenge ACK rate-limited to one per 500 ms per socket)")
            } else {
                ", each answered by a challenge ACK".to_string()
            }
        ));
        costs.push(format!(
            "a SYN answered by a challenge ACK: {STALE_RETRY_COST}"
        ));
        impact_ms = impact_ms.max(STALE_RETRY_MS);
        if skipped_challenge > 0 {
            costs.push(
                "an unanswered SYN: the client's next SYN retransmission, 1 s or more".into(),
            );
            impact_ms = impact_ms.max(1000.0);
        }
    }
    if tw_skipped > 0 {
        parts.push(format!(
            "as the server: {} meeting TIME-WAIT within 500 ms of its last answer went unanswered (TCPACKSkippedTimeWait){}",
            plural(tw_skipped, "segment", "segments"),
            if rfc1337 {
                ": tcp_rfc1337=1 here keeps TIME-WAIT deaf to the client's RST, so the client's quick retry meets it again and waits for its next retransmission, until the TIME-WAIT ends"
            } else {
                ""
            }
        ));
        costs.push(if rfc1337 {
            "a SYN into TIME-WAIT with tcp_rfc1337=1: until the TIME-WAIT ends, up to 60 s".into()
        } else {
            "an unanswered segment: the sender's next retransmission, 1 s or more for a SYN".into()
        });
        impact_ms = impact_ms.max(if rfc1337 { RFC1337_MS } else { 1000.0 });
    }
    let mut f = finding(s, "host-stale-state-collisions", "now");
    f.explanation = format!(
        "SYNs are meeting leftover state of earlier connections on their 4-tuple, over {t:.1} s: {}.",
        parts.join("; ")
    );
    f.impact = format!("per event: {}", costs.join("; "));
    f.impact_ms = impact_ms;
    f.fix = "capture the port (tcpwhy analyze names each collision with syn-stale-state); keep timestamps on at both ends, keep tcp_rfc1337=0, let the client close first, reuse connections instead of reconnecting on the same ports".into();
    f.evidence = json!({
        "interval_s": t,
        "syn_retransmits_after_rst": retries,
        "TcpExt.TCPSynRetrans": delta(s, "TcpExt.TCPSynRetrans"),
        "Tcp.OutRsts": delta(s, "Tcp.OutRsts"),
        "rsts_not_from_aborts": unexplained_rsts(s),
        "TcpExt.TCPSYNChallenge": challenged,
        "TcpExt.TCPChallengeACK": delta(s, "TcpExt.TCPChallengeACK"),
        "TcpExt.TCPACKSkippedChallenge": delta(s, "TcpExt.TCPACKSkippedChallenge"),
        "TcpExt.TCPACKSkippedTimeWait": tw_skipped,
        "TcpExt.PAWSActive": paws_active,
        "tcp_rfc1337": s.int("ipv4/tcp_rfc1337"),
    });
    out.push(f);
}

// ---------------------------------------------------------------------------------------------
// host-syn-backlog

/// `host-syn-backlog`: listen queues overflowing, named by listener. A listener is full when
/// its accept queue holds more than its backlog (the kernel's test: listen(0) holds one);
/// over an interval every listener is sampled each 100 ms, so the one that filled is named
/// even when it has drained by the end. ListenOverflows counts SYNs and handshake ACKs
/// dropped for a full accept queue; ListenDrops counts those and every other drop at a
/// listener (a full SYN queue among them), so it is the total.
pub fn syn_backlog(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let mut seen = s.listeners.clone();
    if s.interval_s.is_none() {
        crate::sample_listeners(&mut seen, &s.sockets);
    }
    let full: Vec<&crate::ListenerSample> = seen.iter().filter(|l| l.full_samples > 0).collect();
    let overflows = delta(s, "TcpExt.ListenOverflows");
    let drops = delta(s, "TcpExt.ListenDrops").max(overflows);
    let synq = delta(s, "TcpExt.TCPReqQFullDrop");
    if full.is_empty() && drops == 0 {
        return;
    }
    let t = interval_s(s);
    let mut f = finding(s, "host-syn-backlog", "now");
    let listeners: Vec<String> = full
        .iter()
        .map(|l| {
            if l.samples > 1 {
                format!(
                    "{} (backlog {}; full in {} of {} samples, up to {} waiting)",
                    endpoint(l.local),
                    l.backlog,
                    l.full_samples,
                    l.samples,
                    l.max_queue
                )
            } else {
                format!(
                    "{} (backlog {}, {} waiting)",
                    endpoint(l.local),
                    l.backlog,
                    l.max_queue
                )
            }
        })
        .collect();
    let counters = if drops > 0 {
        format!(
            "over {t:.1} s {} dropped at listeners ({:.1}/s; ListenDrops), {overflows} of them for a full accept queue (ListenOverflows){}",
            plural(drops, "SYN or handshake ACK was", "SYNs or handshake ACKs were"),
            drops as f64 / t.max(f64::MIN_POSITIVE),
            if synq > 0 { format!(", {synq} for a full SYN queue (TCPReqQFullDrop)") } else { String::new() }
        )
    } else {
        String::new()
    };
    f.explanation = match (listeners.is_empty(), counters.is_empty()) {
        (false, true) => format!(
            "accept queue full: {}; the application does not accept() fast enough, and the next SYN is dropped.",
            listeners.join(", ")
        ),
        (false, false) => format!(
            "accept queue full: {}; the application does not accept() fast enough: {counters}.",
            listeners.join(", ")
        ),
        _ => format!(
            "{counters}; no listener's accept queue was seen full in {} samples (a SYN queue overflow, or a queue that filled between samples): the listeners with the longest queues were {}.",
            seen.iter().map(|l| l.samples).max().unwrap_or(0),
            {
                let mut v: Vec<&crate::ListenerSample> = seen.iter().collect();
                v.sort_by_key(|l| std::cmp::Reverse(l.max_queue));
                let named: Vec<String> = v.iter().take(3).map(|l| format!("{} ({} of backlog {})", endpoint(l.local), l.max_queue, l.backlog)).collect();
                if named.is_empty() { "none (no listener)".to_string() } else { named.join(", ") }
            }
        ),
    };
    f.impact = "each dropped SYN waits for the client's SYN retransmission: 1 s (the initial RTO), the next ones 1 s apart on Linux >= 6.5 (tcp_syn_linear_timeouts), doubling on older kernels (the lab's syn-backlog-full: 3.06 s per connection)".into();
    f.impact_ms = 1000.0;
    f.fix = "accept() faster (more acceptor threads), raise the listen() backlog together with net.core.somaxconn and net.ipv4.tcp_max_syn_backlog".into();
    f.evidence = json!({
        "listeners": full.iter().map(|l| json!({"local": endpoint(l.local), "backlog": l.backlog, "max_accept_queue": l.max_queue, "samples": l.samples, "full_samples": l.full_samples})).collect::<Vec<_>>(),
        "listen_overflows": overflows,
        "listen_drops": drops,
        "syn_queue_full_drops": synq,
        "interval_s": s.interval_s,
        "somaxconn": s.int("core/somaxconn"),
        "tcp_max_syn_backlog": s.int("ipv4/tcp_max_syn_backlog"),
    });
    out.push(f);
}

// ---------------------------------------------------------------------------------------------
// host-retransmissions

/// `host-retransmissions`: retransmitted segments over the interval, by kind, each counted
/// once: TCPSynRetrans (SYN and SYN-ACK retransmissions) is also in TCPTimeouts, so data
/// timeouts are TCPTimeouts - TCPSynRetrans; SYN retransmissions after a reset in SYN-SENT
/// belong to `host-stale-state-collisions` and are left out here; fast retransmits
/// (TCPFastRetrans) and tail loss probes (TCPLossProbes) have their own counts; RetransSegs
/// counts every retransmitted segment, against OutSegs for the share.
///
/// A resend the receiver reports back in a D-SACK (TCPDSACKRecvSegs) arrived twice: the
/// first copy was reordered or late, not lost. Those are taken off the fast retransmits
/// first (reordering on a LAN or veth is what triggers them) and the rest off the tail loss
/// probes (a probe whose original arrived), so a host whose only resends are reordering's is
/// not called lossy. The raw counts stay in the evidence. Packets the host itself dropped
/// because a CPU's input backlog was full (softnet_stat) are named as a place of the loss:
/// over veth and on a busy receiver they are often all of it.
pub fn retransmissions(s: &Snapshot, out: &mut Vec<HostFinding>) {
    let Some(t) = s.interval_s.filter(|t| *t > 0.0) else {
        return;
    };
    let syn = delta(s, "TcpExt.TCPSynRetrans");
    let stale = stale_syn_retries(s);
    let syn_lost = syn.saturating_sub(stale);
    let rto = delta(s, "TcpExt.TCPTimeouts").saturating_sub(syn);
    let fast = delta(s, "TcpExt.TCPFastRetrans");
    let probes = delta(s, "TcpExt.TCPLossProbes");
    let segs = delta(s, "Tcp.RetransSegs");
    let sent = delta(s, "Tcp.OutSegs");
    let recoveries = delta(s, "TcpExt.TCPSackRecovery") + delta(s, "TcpExt.TCPRenoRecovery");
    let spurious = delta(s, "TcpExt.TCPDSACKRecvSegs");
    let backlog = delta(s, "Softnet.Dropped");
    let fast_needed = fast.saturating_sub(spurious);
    let probes_needed = probes.saturating_sub(spurious.saturating_sub(fast));
    let rate = |n: u64| n as f64 / t;
    // Timeouts and lost SYNs stall a connection for the RTO: one a second is worth naming.
    // Fast retransmits cost about a round trip each: ten a second (0.1% loss at this host's
    // loopback rate made 2 460/s).
    if rate(rto + syn_lost) < 1.0 && rate(probes_needed) < 10.0 && rate(fast_needed) < 10.0 {
        return;
    }
    let mut top: Vec<&Socket> = s
        .sockets
        .iter()
        .filter(|k| k.info.is_some_and(|i| i.total_retrans > 0))
        .collect();
    top.sort_by_key(|k| std::cmp::Reverse(k.info.map_or(0, |i| i.total_retrans)));
    let worst_rtt_ms = top
        .iter()
        .filter_map(|k| k.info.map(|i| f64::from(i.rtt_us) / 1000.0))
        .fold(0.0, f64::max);
    let mut f = finding(s, "host-retransmissions", "now");
    f.explanation = format!(
        "over {t:.1} s: {:.1} segments/s retransmitted ({:.3}% of the {:.0}/s sent): {:.1}/s by fast retransmit in {:.1} recoveries/s, {:.1} data timeouts/s, {:.1} tail loss probes/s, {:.1} SYN or SYN-ACK retransmissions/s{}{}{}{}.",
        rate(segs),
        if sent > 0 { segs as f64 * 100.0 / sent as f64 } else { 0.0 },
        rate(sent),
        rate(fast),
        rate(recoveries),
        rate(rto),
        rate(probes),
        rate(syn_lost),
        if stale > 0 { format!(" (and {stale} after a reset in SYN-SENT: host-stale-state-collisions)") } else { String::new() },
        if spurious > 0 { format!("; {:.1}/s of the resends arrived twice (D-SACK): reordering or an early timer, not loss", rate(spurious)) } else { String::new() },
        if backlog > 0 { format!("; this host dropped {:.1} packets/s itself, a CPU's input backlog being full (/proc/net/softnet_stat; its size is net.core.netdev_max_backlog)", rate(backlog)) } else { String::new() },
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
    let mut costs = Vec::new();
    let mut impact_ms: f64 = 0.0;
    if syn_lost > 0 {
        costs.push("a lost SYN or SYN-ACK: 1 s (the initial RTO)".to_string());
        impact_ms = impact_ms.max(1000.0);
    }
    if rto > 0 {
        costs.push("a timeout: its connection stalls for an RTO (>= 200 ms on Linux), then restarts from one segment".to_string());
        impact_ms = impact_ms.max(200.0);
    }
    if probes > 0 {
        costs.push("a tail loss probe: about 2 round trips before the probe goes out".to_string());
        impact_ms = impact_ms.max(2.0 * worst_rtt_ms);
    }
    if fast > 0 {
        costs.push(format!(
            "a fast retransmit: the data behind the lost segment waits about a round trip more{}, and the window shrinks (cubic: to 70%)",
            if worst_rtt_ms > 0.0 { format!(" ({worst_rtt_ms:.1} ms on the worst socket)") } else { String::new() }
        ));
        impact_ms = impact_ms.max(worst_rtt_ms);
    }
    f.impact = format!("per event: {}", costs.join("; "));
    f.impact_ms = impact_ms;
    f.fix = if backlog > 0 {
        "raise net.core.netdev_max_backlog (and net.core.netdev_budget if softnet_stat's third column grows too) so this host stops dropping its own input, then look for the rest of the loss on the path (interface drops: ip -s link, a policer, a full queue)".into()
    } else {
        "find the loss on the path (interface drops: ip -s link, a policer, a full queue); capture one of the sockets below and run tcpwhy analyze".into()
    };
    f.evidence = json!({
        "interval_s": t,
        "retransmitted_segments_per_s": rate(segs),
        "retransmitted_share_pct": if sent > 0 { segs as f64 * 100.0 / sent as f64 } else { 0.0 },
        "fast_retransmits_per_s": rate(fast),
        "recoveries_per_s": rate(recoveries),
        "data_timeouts_per_s": rate(rto),
        "loss_probes_per_s": rate(probes),
        "syn_retransmits_per_s": rate(syn_lost),
        "syn_retransmits_after_rst": stale,
        "dsack_segments_per_s": rate(spurious),
        "backlog_drops_per_s": rate(backlog),
        "top_sockets": top.iter().take(5).map(|k| json!({
            "local": endpoint(k.src), "remote": endpoint(k.dst),
            "total_retrans": k.info.map_or(0, |i| i.total_retrans)})).collect::<Vec<_>>(),
    });
    out.push(f);
}

#[cfg(test)]
mod tests;
