//! From events to what `tcpwhy watch` reports: a record per connect() and findings with the
//! same ids, costs and fixes as `tcpwhy analyze`. Pure functions of the events, so they are
//! tested on events built field by field.
//!
//! Costs are times the kernel measured, priced as analyze prices the same packets:
//! - `syn-stale-state`: the connect() sent an RST in SYN-SENT (the answer to its SYN
//!   acknowledged something else: TIME-WAIT or a stale socket of an earlier connection on the
//!   4-tuple) and later completed: from the first SYN to the handshake's end.
//! - `syn-unanswered`: SYNs retransmitted with no reset: from the first SYN to the SYN that
//!   was answered, or to the end of the attempt when none was.
//! - `syn-refused`: a reset received in SYN-SENT: from the first SYN to the socket's close.
//! - `rto-retransmission`: a resend after a timer: the retransmission timer (the socket
//!   entered the Loss state) or the tail loss probe's (data resent outside Recovery and Loss).
//!   Analyze prices it from the lost segment's first transmission to its last resend. The
//!   kernel does not keep the first transmission's time, but it keeps the last ACK's
//!   (tp->rcv_tstamp, in jiffies): a lost tail left with the data that ACK covers, one round
//!   trip before it came back. So the first resend of an episode costs the time since the last
//!   ACK plus the smoothed round trip, and each later resend with no ACK between (the
//!   back-off) the time since the previous one; an episode's findings add up to its whole wait.
//! - Server side: this host dropped a 4-tuple's pure SYN (it met a TIME-WAIT socket: seed 004's
//!   collision seen from the server; or PAWS, a firewall) or its final handshake ACK (the
//!   accept queue was full): from the first drop to the handshake's end on this host (at a
//!   full queue, from the first dropped data, or from the ACK when the handshake waited for
//!   the listener's SYN-ACK resend; else nobody waited). When the
//!   client is watched too (one host, or namespaces on it), its own finding already prices
//!   the wait: the server's view is folded into it, not counted twice.
//! - `slow-start-restart`: a write on a socket idle for longer than its RTO, whose window the
//!   kernel restarts; priced by the extra round trips the write needs from the restarted
//!   window (slow start) against the window it had (at one smoothed round trip each).

use crate::event::{
    Event, EV_ACCEPT, EV_BURST_END, EV_CONNECT, EV_DROP, EV_DSACK, EV_LOSS, EV_PROBE, EV_RESTART,
    EV_ZERO_WINDOW, TCP_CLOSE, TCP_ESTABLISHED, TCP_LISTEN, TCP_TIME_WAIT,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// The process a socket belongs to (the one that called connect()).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// 0 when not known (a socket this watch did not see connect).
    pub pid: u32,
    pub command: String,
    /// Its cgroup (v2) id, the inode number of the cgroup's directory (0: not known).
    pub cgroup: u64,
}

/// One connect() that left SYN-SENT.
#[derive(Clone, Debug, PartialEq)]
pub struct Connect {
    /// The first SYN (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    /// The handshake's end or the attempt's (CLOCK_MONOTONIC ns).
    pub end_ns: u64,
    pub netns: u32,
    pub process: Process,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub established: bool,
    pub syn_retransmits: u32,
    pub resets_sent: u32,
    pub resets_received: u32,
}

impl Connect {
    pub fn ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }
}

/// A cause named live, as analyze names it in a capture.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchFinding {
    pub id: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cost_ns: u64,
    pub netns: u32,
    pub process: Process,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub explanation: String,
    pub fix: String,
    pub evidence: Value,
}

/// What the judge needs to know of the running kernel.
#[derive(Clone, Debug, Default)]
pub struct Kernel {
    /// CONFIG_HZ: jiffies per second (icsk_rto is in jiffies). None when unknown.
    pub hz: Option<u32>,
    /// `enum sk_rst_reason` by number, from tcp:tcp_send_reset's format.
    pub reset_reasons: BTreeMap<u32, String>,
    /// `enum skb_drop_reason` by number, from skb:kfree_skb's format.
    pub drop_reasons: BTreeMap<u32, String>,
}

/// The ids watch can name, with the tracepoints each needs (for `unavailable` lists and
/// `tcpwhy explain`).
pub const IDS: &[(&str, &[&str])] = &[
    (
        "syn-stale-state",
        &[
            "sock:inet_sock_set_state",
            "tcp:tcp_send_reset",
            "tcp:tcp_retransmit_skb",
        ],
    ),
    (
        "syn-unanswered",
        &["sock:inet_sock_set_state", "tcp:tcp_retransmit_skb"],
    ),
    (
        "syn-refused",
        &["sock:inet_sock_set_state", "tcp:tcp_receive_reset"],
    ),
    (
        "rto-retransmission",
        &["tcp:tcp_cong_state_set", "tcp:tcp_retransmit_skb"],
    ),
    (
        "syn-stale-state (server side)",
        &["skb:kfree_skb", "sock:inet_sock_set_state"],
    ),
    (
        "syn-unanswered (server side)",
        &["skb:kfree_skb", "sock:inet_sock_set_state"],
    ),
    (
        "accept-queue-full",
        &[
            "skb:kfree_skb",
            "sock:inet_sock_set_state",
            "tcp:tcp_retransmit_synack",
        ],
    ),
    ("slow-start-restart", &["tcp:tcp_sendmsg_locked"]),
    ("zero-window", &["tcp:tcp_probe"]),
];

/// What `tcpwhy explain ID` says of watch: how it sees the cause, or why it does not.
pub fn visibility(id: &str) -> String {
    let how = match id {
        "syn-stale-state" => "Seen from both sides. Client: a connect() that sent a reset in SYN-SENT (tcp:tcp_send_reset, reason TCP_INVALID_ACK_SEQUENCE) and then completed; cost from the first SYN (sock:inet_sock_set_state) to the handshake's end. Server: a SYN this host dropped at a TIME-WAIT socket or by PAWS (skb:kfree_skb); cost from the first dropped SYN to the handshake's end. When both ends are on the watched host, the client's finding carries the server's view.",
        "syn-unanswered" => "Seen from both sides. Client: SYN retransmissions (tcp:tcp_retransmit_skb in SYN-SENT) with no reset; cost from the first SYN to the SYN that was answered, or to the attempt's end. Server: SYNs this host dropped (skb:kfree_skb, e.g. NETFILTER_DROP), priced from the first drop to the handshake's end. SYNs dropped because the listener's SYN or accept queue was full are freed as consumed, with no drop reason on this kernel: the server cannot see them (the client's side does; `tcpwhy host` counts ListenDrops).",
        "syn-refused" => "Seen: a reset received in SYN-SENT (tcp:tcp_receive_reset); cost from the first SYN to the socket's close.",
        "rto-retransmission" => "Seen: the Loss state (tcp:tcp_cong_state_set) and resends outside Recovery and Loss (tail loss probes, tcp:tcp_retransmit_skb); cost from the lost data's first transmission (the last ACK's time plus one smoothed round trip) to the resend.",
        "slow-start-restart" => "Seen at the sender: a write (raw tracepoint tcp:tcp_sendmsg_locked) on a socket with nothing in flight, idle for longer than its RTO, whose window is above the initial 10 segments, with net.ipv4.tcp_slow_start_after_idle=1 and a congestion control that uses the window (not BBR); cost: the time from the write to the burst's last data sent against the same segments at the window kept (the larger of the one it had and the one the restarted burst reached), one window per smoothed round trip; never more than the extra round trips the restarted window needs (slow start). Counted from the first write after the idle period only (a response written in several calls is under-priced), and a route's initcwnd is not read (10 assumed).",
        "zero-window" => "Seen at the sender: tcp:tcp_probe (BTF-typed, one direct read per received segment) finds the window the peer advertised at zero, then open again; cost from the ACK that closed it to the one that opened it (tp->rcv_tstamp, in jiffies: a stall of one jiffy or less, 4 ms at HZ=250, is below that clock's resolution and not priced). A socket reset or aborted while the window is still zero is reported to its close, as never recovered (`recovered`: false). A stall that ends after this side has called close() (it left ESTABLISHED, and its ACKs no longer pass tcp:tcp_probe) is not reported.",
        "accept-queue-full" => "Seen at the server when the handshake's last ACK (or the data after it) is dropped because the accept queue is full (skb:kfree_skb: reason TCP_LISTEN_OVERFLOW, or NO_SOCKET at a listener whose queue is full, as the syncookie path drops it); cost from the first dropped data (the client sends it again on its timer) to the handshake's end, or, when the client sent none, from the dropped ACK to the handshake its answer to the listener's SYN-ACK resend (tcp:tcp_retransmit_synack) completed. A dropped ACK whose connection the client's next segment made costs nobody anything and is not reported. When the client is watched too, its timer resends of the dropped data are that same wait and are taken into this finding (not reported as rto-retransmission). SYNs refused for the same reason are freed with no drop reason: those show on the client as syn-unanswered; `tcpwhy host` names full accept queues from counters and the listeners' queues.",
        "tfo-fallback" => "Not seen: no tracepoint marks a SYN-ACK that leaves the SYN's data untaken. The client's kernel counts them (TCPFastOpenActiveFail in /proc/net/netstat, `nstat TcpExtTCPFastOpenActiveFail`); analyze a capture for which connections and what they cost.",
        _ => "Not seen: it is a property of packet timing (who waited for whom on the wire), which no tracepoint announces; analyze a capture.",
    };
    format!("**Live (tcpwhy watch).** {how}")
}

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A finding of `id` on the event's socket, lasting `(start_ns, end_ns)`; the caller writes
/// its explanation, fix and evidence.
fn finding(
    id: &'static str,
    e: &Event,
    (start_ns, end_ns): (u64, u64),
    cost_ns: u64,
) -> WatchFinding {
    WatchFinding {
        id,
        start_ns,
        end_ns,
        cost_ns,
        netns: e.netns,
        process: process(e),
        local: e.local,
        remote: e.remote,
        explanation: String::new(),
        fix: String::new(),
        evidence: Value::Null,
    }
}

fn process(e: &Event) -> Process {
    Process {
        pid: e.tgid,
        command: e.comm.clone(),
        cgroup: e.cgroup,
    }
}

fn who(p: &Process) -> String {
    if p.pid == 0 {
        "a socket whose connect() was not seen".to_string()
    } else {
        format!("{} (pid {})", p.command, p.pid)
    }
}

/// A socket's current run of timeouts: the last ACK it had (jiffies) and the last resend.
#[derive(Clone, Copy, Debug)]
struct Episode {
    rcv_tstamp: u32,
    last_ns: u64,
}

/// Episodes are forgotten once this old (TCP_RTO_MAX is 120 s: a longer silence is a new
/// episode anyway), checked when the table passes `KEPT` sockets.
const EPISODE_TTL_NS: u64 = 130_000_000_000;
/// The most sockets or 4-tuples any of the judge's tables keeps: its memory stays bounded
/// when a host drops SYNs from a flood or restarts thousands of idle connections a second.
const KEPT: usize = 65_536;
/// How often the tables of drops and restarts are scanned for ones waited on too long.
const SCAN_EVERY_NS: u64 = 1_000_000_000;

/// A connection as (client, server) addresses, the same from both ends.
type Pair = (SocketAddr, SocketAddr);

/// How long a server-side finding waits for the client's own (the client's connect() ends
/// one round trip after the server's handshake, or before it), and how long a client-side
/// finding is remembered to fold a late server-side one into.
const FOLD_WAIT_NS: u64 = 1_000_000_000;
const CLIENT_KEPT_NS: u64 = 10_000_000_000;
/// Drops whose handshake never completes are reported this long after the last one (longer
/// than any SYN retry schedule: TCP_RTO_MAX is 120 s).
const DROP_TTL_NS: u64 = 130_000_000_000;
/// The shortest wait a server-side drop is reported for.
const MIN_SERVER_WAIT_NS: u64 = 1_000_000;
/// How long a restarting write waits for its burst's end before it is estimated.
const BURST_WAIT_NS: u64 = 30_000_000_000;
/// How long a timeout's finding waits for a D-SACK: four smoothed round trips, within these
/// (the D-SACK is seen at the segment after the one that carries it, which a shut window can
/// hold back for hundreds of milliseconds).
const RESEND_WAIT_MIN_NS: u64 = 1_000_000_000;
const RESEND_WAIT_MAX_NS: u64 = 3_000_000_000;

/// Turns events into records and findings, remembering each socket's timeout episode.
#[derive(Debug, Default)]
pub struct Judge {
    pub kernel: Kernel,
    episodes: HashMap<u64, Episode>,
    /// Server-side findings waiting `FOLD_WAIT_NS` for the client's own.
    held: Vec<(u64, Pair, WatchFinding)>,
    /// Client-side opening findings of the last `CLIENT_KEPT_NS` (when they ended).
    clients: HashMap<Pair, u64>,
    /// Drops not yet followed by their handshake: the last drop event of each 4-tuple.
    pending: HashMap<(u32, Pair), Event>,
    /// Timeout findings waiting for a D-SACK that would prove their resend unneeded.
    resends: Vec<(u64, u64, WatchFinding)>,
    /// Timeout resends a D-SACK proved unneeded: not findings.
    pub spurious_resends: u64,
    /// Restarting writes whose burst has not ended yet, by socket.
    restarts: HashMap<u64, Event>,
    /// Server-side findings folded into the client's finding of the same connection.
    pub folded: u64,
    /// 4-tuples with one dropped SYN and no handshake within `DROP_TTL_NS` (or before the end):
    /// a wait that cannot be priced (the client gave up, or retried from elsewhere), and
    /// 4-tuples not followed because `KEPT` were already waiting.
    pub unresolved_drops: u64,
    /// When `due` next scans `pending` and `restarts`.
    next_scan_ns: u64,
}

/// Whether a server-side finding is the wait of the client's opening that ended at
/// `opening_end_ns`: its drops began before the opening ended. Drops after it (the
/// handshake's last ACK at a full accept queue) are a wait of their own.
fn same_wait(server: &WatchFinding, opening_end_ns: u64) -> bool {
    server.start_ns < opening_end_ns
}

/// The findings of `v` whose time has come, taken out of it.
fn take_due<K>(v: &mut Vec<(u64, K, WatchFinding)>, now_ns: u64) -> Vec<WatchFinding> {
    let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(v)
        .into_iter()
        .partition(|(t, _, _)| *t <= now_ns);
    *v = waiting;
    ready.into_iter().map(|(_, _, f)| f).collect()
}

impl Judge {
    pub fn new(kernel: Kernel) -> Judge {
        Judge {
            kernel,
            ..Judge::default()
        }
    }

    /// The connect record and the finding (if any) one event makes. Server-side findings come
    /// later, from `due`.
    pub fn judge(&mut self, e: &Event) -> (Option<Connect>, Option<WatchFinding>) {
        match e.kind {
            EV_CONNECT => {
                let c = self.kernel.connect(e);
                let f = self.kernel.opening_finding(e, &c);
                if let Some(f) = &f {
                    self.client_finding(f);
                }
                (Some(c), f)
            }
            EV_LOSS | EV_PROBE => {
                // Held until a D-SACK could have said the resend was not needed: the D-SACK
                // comes a round trip after the resend, and is seen at the segment after it.
                if let Some(f) = self.timeout(e) {
                    let wait = (4 * u64::from(e.srtt_us) * 1000)
                        .clamp(RESEND_WAIT_MIN_NS, RESEND_WAIT_MAX_NS);
                    self.resends.push((e.ts_ns + wait, e.sk, f));
                }
                (None, None)
            }
            EV_DSACK => {
                let before = self.resends.len();
                self.resends
                    .retain(|(_, sk, f)| *sk != e.sk || f.end_ns > e.ts_ns);
                self.spurious_resends += (before - self.resends.len()) as u64;
                (None, None)
            }
            EV_DROP => {
                let key = (e.netns, (e.remote, e.local));
                if self.pending.len() < KEPT || self.pending.contains_key(&key) {
                    self.pending.insert(key, e.clone());
                } else {
                    self.unresolved_drops += 1;
                }
                (None, None)
            }
            EV_ACCEPT => {
                self.pending.remove(&(e.netns, (e.remote, e.local)));
                let mut f = self.kernel.server_finding(e, true);
                if let Some(f) = f.as_mut().filter(|f| f.id == "accept-queue-full") {
                    self.fold_client_timeouts(f, e);
                }
                self.server_finding(e.ts_ns, (e.remote, e.local), f);
                (None, None)
            }
            EV_RESTART => {
                if self.restarts.len() >= KEPT && !self.restarts.contains_key(&e.sk) {
                    // No room to wait for this burst's end: estimated now.
                    return (None, self.kernel.restart_finding(e, None));
                }
                // A restart before the previous burst's end was seen: that one is estimated.
                let f = self
                    .restarts
                    .insert(e.sk, e.clone())
                    .and_then(|r| self.kernel.restart_finding(&r, None));
                (None, f)
            }
            EV_ZERO_WINDOW => (None, self.kernel.zero_window_finding(e)),
            EV_BURST_END => {
                let f = self
                    .restarts
                    .remove(&e.sk)
                    .and_then(|r| self.kernel.restart_finding(&r, Some(e)));
                (None, f)
            }
            _ => (None, None),
        }
    }

    /// A client-side opening finding: a held server-side finding of the same connection and
    /// the same wait (`same_wait`) is folded into it.
    fn client_finding(&mut self, f: &WatchFinding) {
        let pair = (f.local, f.remote);
        let before = self.held.len();
        self.held
            .retain(|(_, p, s)| *p != pair || !same_wait(s, f.end_ns));
        self.folded += (before - self.held.len()) as u64;
        if self.clients.len() >= KEPT {
            let now = f.end_ns;
            self.clients
                .retain(|_, t| now.saturating_sub(*t) < CLIENT_KEPT_NS);
        }
        self.clients.insert(pair, f.end_ns);
    }

    /// A full accept queue dropped this connection's handshake ACK and the data after it:
    /// the client's timer resends of that data (held for their D-SACK wait) are the same
    /// wait, whose cause the server's finding names. They are taken into it, not reported
    /// as `rto-retransmission` too.
    fn fold_client_timeouts(&mut self, f: &mut WatchFinding, e: &Event) {
        let before = self.resends.len();
        self.resends.retain(|(_, _, r)| {
            !(r.id == "rto-retransmission"
                && r.local == e.remote
                && r.remote == e.local
                && r.end_ns >= e.syn_ns
                && r.end_ns <= e.ts_ns)
        });
        let n = before - self.resends.len();
        if n > 0 {
            f.evidence["client_timeouts_folded"] = json!(n);
            f.explanation.push_str(&format!(
                " The client ({}) is watched too: its {n} timer resend{} of that data {} part of this wait.",
                e.remote,
                if n == 1 { "" } else { "s" },
                if n == 1 { "is" } else { "are" },
            ));
        }
    }

    fn server_finding(&mut self, now: u64, pair: Pair, f: Option<WatchFinding>) {
        let Some(f) = f else { return };
        if self
            .clients
            .get(&pair)
            .is_some_and(|t| now.saturating_sub(*t) < CLIENT_KEPT_NS && same_wait(&f, *t))
        {
            self.folded += 1;
            return;
        }
        self.held.push((now + FOLD_WAIT_NS, pair, f));
    }

    /// Findings whose wait is over: server-side ones (for the client's), timeouts (for a
    /// D-SACK), and, scanned once a second, drops never followed by a handshake and bursts
    /// never seen to end (`now_ns`: CLOCK_MONOTONIC; `u64::MAX` at the end, to flush all).
    pub fn due(&mut self, now_ns: u64) -> Vec<WatchFinding> {
        let mut out = Vec::new();
        if now_ns >= self.next_scan_ns {
            self.next_scan_ns = now_ns.saturating_add(SCAN_EVERY_NS);
            out = self.scan(now_ns);
        }
        out.extend(take_due(&mut self.held, now_ns));
        out.extend(take_due(&mut self.resends, now_ns));
        out
    }

    /// Drops no handshake followed within `DROP_TTL_NS` become findings (held like the
    /// others); bursts whose end is not seen within `BURST_WAIT_NS` (a connection left idle
    /// after it) are estimated rather than kept waiting.
    fn scan(&mut self, now_ns: u64) -> Vec<WatchFinding> {
        let stale: Vec<(u32, Pair)> = self
            .pending
            .iter()
            .filter(|(_, e)| now_ns.saturating_sub(e.last_syn_ns) >= DROP_TTL_NS)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            if let Some(e) = self.pending.remove(&k) {
                if e.drops < 2 {
                    self.unresolved_drops += 1;
                    continue;
                }
                let f = self.kernel.server_finding(&e, false);
                self.server_finding(e.ts_ns, k.1, f);
            }
        }
        let late: Vec<u64> = self
            .restarts
            .iter()
            .filter(|(_, r)| now_ns.saturating_sub(r.ts_ns) >= BURST_WAIT_NS)
            .map(|(k, _)| *k)
            .collect();
        late.into_iter()
            .filter_map(|k| self.restarts.remove(&k))
            .filter_map(|r| self.kernel.restart_finding(&r, None))
            .collect()
    }

    fn timeout(&mut self, e: &Event) -> Option<WatchFinding> {
        let hz = u64::from(self.kernel.hz?.max(1));
        let jiffies_ns = |j: u32| u64::from(j) * 1_000_000_000 / hz;
        let srtt_ns = u64::from(e.srtt_us) * 1000;
        let previous = self
            .episodes
            .get(&e.sk)
            .filter(|p| p.rcv_tstamp == e.rcv_tstamp && p.last_ns <= e.ts_ns)
            .copied();
        let (start_ns, continued) = match previous {
            Some(p) => (p.last_ns, true),
            None => (
                e.ts_ns
                    .saturating_sub(jiffies_ns(e.rcv_age))
                    .saturating_sub(srtt_ns),
                false,
            ),
        };
        if self.episodes.len() >= KEPT {
            let now = e.ts_ns;
            self.episodes
                .retain(|_, p| now.saturating_sub(p.last_ns) < EPISODE_TTL_NS);
        }
        self.episodes.insert(
            e.sk,
            Episode {
                rcv_tstamp: e.rcv_tstamp,
                last_ns: e.ts_ns,
            },
        );
        let cost = e.ts_ns - start_ns.min(e.ts_ns);
        let mut f = finding("rto-retransmission", e, (start_ns, e.ts_ns), cost);
        let probe = e.kind == EV_PROBE;
        let what = if probe {
            "sent a tail loss probe (its timer fired: nothing acknowledged for about two round trips)".to_string()
        } else {
            format!(
                "resent after its retransmission timer fired (RTO {})",
                ms(jiffies_ns(e.rto_jiffies))
            )
        };
        let since = if continued {
            format!(
                "{} after its previous resend, with no acknowledgement between (back-off)",
                ms(cost)
            )
        } else {
            format!(
                "{} after the last acknowledgement it received, {} since the lost data left (with one smoothed round trip, {}, before that acknowledgement)",
                ms(jiffies_ns(e.rcv_age)),
                ms(cost),
                ms(srtt_ns)
            )
        };
        f.explanation = format!(
            "{} -> {} ({}) {what}: {since}.",
            e.local,
            e.remote,
            who(&f.process),
        );
        f.fix = if probe {
            "find the loss on the path (interface drops, a policer, a congested queue); a lost tail (the last segments of a response) recovers only by a timer: keep SACK and tail loss probes on (net.ipv4.tcp_sack=1, tcp_early_retrans=3) so recovery takes 2 RTTs rather than an RTO".into()
        } else {
            "find the loss on the path (interface drops, a policer, a congested queue); for tail loss keep SACK and tail loss probes on (net.ipv4.tcp_sack=1, tcp_early_retrans=3) so recovery takes 2 RTTs rather than an RTO".into()
        };
        f.evidence = json!({
            "timer": if probe { "tail loss probe" } else { "retransmission timeout" },
            "backoff": continued,
            "rto_ms": jiffies_ns(e.rto_jiffies) as f64 / 1e6,
            "since_last_ack_ms": jiffies_ns(e.rcv_age) as f64 / 1e6,
            "srtt_ms": f64::from(e.srtt_us) / 1e3,
            "congestion_state": e.ca_state,
            "mss": e.mss,
        });
        Some(f)
    }
}

/// The congestion window `tcp_cwnd_restart` leaves after `idle` jiffies with an RTO of `rto`:
/// halved once per RTO of idle after the first, never below the initial window (or the window
/// itself, when smaller).
pub fn restarted_cwnd(cwnd: u32, idle: u32, rto: u32, initial: u32) -> u32 {
    let restart = initial.min(cwnd);
    let mut w = cwnd;
    let mut delta = i64::from(idle);
    loop {
        delta -= i64::from(rto.max(1));
        if delta <= 0 || w <= restart {
            break;
        }
        w >>= 1;
    }
    w.max(restart)
}

/// Round trips to send `segments` starting from a window of `cwnd`: doubling below
/// `ssthresh` (slow start), one more segment per round trip above it.
pub fn rounds(segments: u64, cwnd: u32, ssthresh: u32) -> u64 {
    let mut w = u64::from(cwnd.max(1));
    let (mut sent, mut n) = (0u64, 0u64);
    while sent < segments {
        sent += w;
        n += 1;
        w = if w < u64::from(ssthresh) {
            (w * 2).min(u64::from(ssthresh).max(w + 1))
        } else {
            w + 1
        };
    }
    n
}

/// A TCP state's name (include/net/tcp_states.h); "none" for 0 (no socket).
fn state_name(s: u32) -> &'static str {
    match s {
        0 => "none",
        1 => "ESTABLISHED",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "CLOSE",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "other",
    }
}

/// TCP_INIT_CWND: the window a restart falls back to (a route's initcwnd is not read).
const INITIAL_CWND: u32 = 10;

impl Kernel {
    fn drop_reason(&self, n: u32) -> String {
        self.drop_reasons
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("reason {n}"))
    }

    /// A server-side finding from a 4-tuple's drops: `completed` when its handshake ended
    /// (`EV_ACCEPT`, at `e.ts_ns`), else the drops alone (the last one's event).
    fn server_finding(&self, e: &Event, completed: bool) -> Option<WatchFinding> {
        let reason = self.drop_reason(e.drop_reason);
        let overflow = reason == "TCP_LISTEN_OVERFLOW" || e.queue_full;
        let timewait = e.rx_state == TCP_TIME_WAIT || reason.contains("TW_PAWS");
        // A SYN that met a connected socket of the same 4-tuple (one whose close the peer
        // never heard of: seed 000's lost reset) is answered by a challenge ACK and dropped.
        let stale_socket = !timewait && e.rx_state != 0 && e.rx_state != TCP_LISTEN;
        let id = if overflow {
            "accept-queue-full"
        } else if timewait || stale_socket {
            "syn-stale-state"
        } else {
            "syn-unanswered"
        };
        let end = if completed { e.ts_ns } else { e.last_syn_ns };
        // At a full accept queue the client waits only for what it must send again: its
        // dropped data (its retransmission timer), or, when it sent none (it waits for the
        // server to speak), its answer to the listener's SYN-ACK resend. A dropped handshake
        // ACK whose connection the client's next segment made (its request, sent when it
        // chose) delayed nobody.
        let start = if !overflow {
            e.syn_ns
        } else if e.data_drop_ns != 0 {
            e.data_drop_ns.max(e.syn_ns)
        } else if e.synack_ns != 0 {
            e.syn_ns
        } else {
            return None;
        };
        let cost = end.saturating_sub(start);
        if cost < MIN_SERVER_WAIT_NS {
            return None;
        }
        let mut f = finding(id, e, (start, end), cost);
        let server = if e.tgid == 0 {
            "a server socket".to_string()
        } else {
            format!("the listener of {} (pid {})", e.comm, e.tgid)
        };
        let what = if overflow {
            format!(
                "dropped the handshake's last ACK (or the data after it) from {} {} time{}: the listener's accept queue was full ({reason}{})",
                e.remote,
                e.drops,
                if e.drops == 1 { "" } else { "s" },
                if reason == "TCP_LISTEN_OVERFLOW" {
                    ""
                } else {
                    ": no socket could be made for it while the queue was full"
                },
            )
        } else if timewait {
            format!(
                "dropped {} SYN{} from {}: the 4-tuple was still held by a TIME-WAIT socket of an earlier connection, which did not accept the new SYN (drop reason {reason}; it answers with an ACK of the old connection, the client resets and sends its SYN again)",
                e.drops,
                if e.drops == 1 { "" } else { "s" },
                e.remote,
            )
        } else if stale_socket {
            format!(
                "dropped {} SYN{} from {}: the 4-tuple still had a socket of an earlier connection here (state {}), which the client had already closed; it answers with a challenge ACK, the client resets it and sends its SYN again (drop reason {reason})",
                e.drops,
                if e.drops == 1 { "" } else { "s" },
                e.remote,
                state_name(e.rx_state),
            )
        } else {
            format!(
                "dropped {} SYN{} from {} ({reason})",
                e.drops,
                if e.drops == 1 { "" } else { "s" },
                e.remote,
            )
        };
        let since = if start == e.syn_ns {
            "the first drop"
        } else {
            "the first dropped data"
        };
        let outcome = if completed {
            format!("the handshake completed {} after {since}", ms(cost))
        } else {
            format!(
                "no handshake followed while watched; the drops spanned {}",
                ms(cost)
            )
        };
        f.explanation = format!("{} ({server}) {what}; {outcome}.", e.local);
        f.fix = if overflow {
            "the server application accepts too slowly for the connections coming in: accept() faster (more threads or an event loop), raise the listen() backlog and net.core.somaxconn, and watch nstat ListenOverflows/ListenDrops; not loss on the path".into()
        } else if stale_socket {
            "find why the earlier connection's close never reached this host (a lost, dropped or filtered RST or FIN; an SO_LINGER {1,0} reset is sent once and never retransmitted); close gracefully or keep the path from dropping resets".into()
        } else if timewait {
            "this side closes first and holds TIME-WAIT: keep TCP timestamps on at both ends (net.ipv4.tcp_timestamps=1) so TIME-WAIT accepts a newer SYN; let clients close first or reuse connections (keep-alive, pooling) so a client port is not reused within 60 s; leave net.ipv4.tcp_rfc1337=0 (with 1 such a SYN waits for TIME-WAIT to end, about a minute)".into()
        } else if reason == "NETFILTER_DROP" {
            "a firewall rule on this host drops these SYNs: find it (iptables -L -v -n / nft list ruleset, counters) and accept the service's port".into()
        } else {
            format!("this host drops these SYNs ({reason}): see the kernel's drop reason; the client waits for its SYN retry timer (1 s, doubling) each time")
        };
        f.evidence = json!({
            "side": "server",
            "drops": e.drops,
            "drop_reason": reason,
            "met_state": state_name(e.rx_state),
            "first_drop_to_last_ms": e.last_syn_ns.saturating_sub(e.syn_ns) as f64 / 1e6,
            "completed": completed,
        });
        if overflow {
            f.evidence["data_dropped"] = json!(e.data_drop_ns != 0);
            f.evidence["synack_resent"] = json!(e.synack_ns != 0);
        }
        Some(f)
    }

    /// A stall on a zero window, from the ACK that closed it to the one that opened it. Both
    /// are known to a jiffy: a stall of one jiffy or less may be far shorter (any brief shut
    /// window that crosses a tick), so it is not priced.
    fn zero_window_finding(&self, e: &Event) -> Option<WatchFinding> {
        let hz = u64::from(self.hz?.max(1));
        if e.idle_jiffies < 2 {
            return None;
        }
        let cost = u64::from(e.idle_jiffies) * 1_000_000_000 / hz;
        let start = e.ts_ns.saturating_sub(cost);
        let recovered = e.newstate != TCP_CLOSE;
        let mut f = finding("zero-window", e, (start, e.ts_ns), cost);
        f.explanation = format!(
            "{} -> {} ({}): the peer advertised a zero window for {}: its application was not reading, and this side could send nothing but window probes {}.",
            e.local,
            e.remote,
            who(&f.process),
            ms(cost),
            if recovered {
                "until the window opened again"
            } else {
                "until the socket closed (the window never opened again)"
            },
        );
        f.fix = "make the receiving application read faster (or larger receive buffers if it reads in bursts)".into();
        f.evidence = json!({
            "stall_ms": cost as f64 / 1e6,
            "recovered": recovered,
            "srtt_ms": f64::from(e.srtt_us) / 1e3,
        });
        Some(f)
    }

    /// A burst that met a window restart (`r`, the restarting write's event), when the
    /// restart cost it time: measured when the burst's end was seen (`end`), else estimated.
    ///
    /// Measured as analyze measures it: the time from the restarting write to the burst's last
    /// data sent (jiffies), against what the window the connection had would have taken. The
    /// kernel does not know the path's rate (a delivery rate sample of a window-limited flight
    /// is the window's rate, not the path's), so that is taken at the window's rate, one
    /// window per smoothed round trip: segments / cwnd * srtt, which is never less than the
    /// burst's time on the wire when the window limits it (and so does not inflate the cost).
    /// The window kept is the larger of the one the connection had and the one the restarted
    /// burst reached by its end (read at `end`): kept, the window would have grown from more,
    /// as analyze prices it. The cost is also never more than the round trips the restart adds
    /// by the slow-start model (a burst the application wrote slowly is not a restart's cost).
    fn restart_finding(&self, r: &Event, end: Option<&Event>) -> Option<WatchFinding> {
        let hz = u64::from(self.hz?.max(1));
        let jiffies_ns = |j: u32| u64::from(j) * 1_000_000_000 / hz;
        let mss = u64::from(r.mss.max(1));
        let bytes = u64::from(r.bytes.max(end.map_or(0, |b| b.bytes)));
        let segments = bytes.div_ceil(mss);
        let restarted = restarted_cwnd(r.cwnd, r.idle_jiffies, r.rto_jiffies, INITIAL_CWND);
        // tcp_cwnd_restart keeps ssthresh at least 3/4 of the window it had.
        let ssthresh = r.ssthresh.max((r.cwnd >> 1) + (r.cwnd >> 2));
        let with = rounds(segments, restarted, ssthresh);
        let kept = r.cwnd.max(end.map_or(0, |b| b.cwnd)).max(1);
        let without = segments.div_ceil(u64::from(kept));
        let srtt_ns = u64::from(r.srtt_us) * 1000;
        let model = with.saturating_sub(without) * srtt_ns;
        let measured = end.map(|b| {
            let took = jiffies_ns(b.idle_jiffies);
            let would = u128::from(segments) * u128::from(srtt_ns) / u128::from(kept);
            (took, u64::try_from(would).unwrap_or(u64::MAX))
        });
        let cost = match measured {
            Some((took, would)) => took.saturating_sub(would).min(model),
            None => model,
        };
        // Worth naming: half a round trip, and a millisecond (a loopback's restart costs
        // microseconds), as analyze.
        if cost == 0 || cost < (srtt_ns / 2).max(1_000_000) {
            return None;
        }
        let mut f = finding("slow-start-restart", r, (r.ts_ns, r.ts_ns + cost), cost);
        let kb = |n: u64| format!("{:.1} kB", n as f64 / 1000.0);
        let how = match measured {
            Some((took, would)) => format!(
                "the burst took {} from the write to its last data sent, against about {} at the window kept (one window of {} segments per round trip of {}: {}): {} lost",
                ms(took),
                ms(would),
                kept,
                ms(srtt_ns),
                if kept > r.cwnd {
                    "the window the restarted burst reached, above the one it had"
                } else {
                    "the window it had"
                },
                ms(cost),
            ),
            None => format!(
                "its {segments} segments take {with} round trips instead of {without}: about {} lost (estimated: the burst's end was not seen while watched)",
                ms(cost),
            ),
        };
        f.explanation = format!(
            "{} -> {} ({}) sent a {} burst after {} idle (longer than its RTO, {}): the kernel restarted its congestion window from {} to {} segments (net.ipv4.tcp_slow_start_after_idle=1); {how}.",
            r.local,
            r.remote,
            who(&f.process),
            kb(bytes),
            ms(jiffies_ns(r.idle_jiffies)),
            ms(jiffies_ns(r.rto_jiffies)),
            r.cwnd,
            restarted,
        );
        f.fix = "set net.ipv4.tcp_slow_start_after_idle=0 in the sending host's (or namespace's) sysctls, or keep the connection busy below the RTO, or use BBR on the sender".into();
        f.evidence = json!({
            "idle_ms": jiffies_ns(r.idle_jiffies) as f64 / 1e6,
            "rto_ms": jiffies_ns(r.rto_jiffies) as f64 / 1e6,
            "cwnd_before": r.cwnd,
            "cwnd_restarted": restarted,
            "cwnd_kept": kept,
            "burst_bytes": bytes,
            "segments": segments,
            "round_trips": with,
            "round_trips_without_restart": without,
            "took_ms": measured.map(|(t, _)| t as f64 / 1e6),
            "would_take_ms": measured.map(|(_, w)| w as f64 / 1e6),
            "measured": measured.is_some(),
            "srtt_ms": f64::from(r.srtt_us) / 1e3,
            "mss": r.mss,
        });
        Some(f)
    }

    fn reason(&self, n: u32) -> String {
        self.reset_reasons
            .get(&n)
            .cloned()
            .unwrap_or_else(|| format!("reason {n}"))
    }

    fn connect(&self, e: &Event) -> Connect {
        Connect {
            start_ns: e.syn_ns,
            end_ns: e.ts_ns.max(e.syn_ns),
            netns: e.netns,
            process: process(e),
            local: e.local,
            remote: e.remote,
            established: e.newstate == TCP_ESTABLISHED,
            syn_retransmits: e.syn_retx,
            resets_sent: e.rst_sent,
            resets_received: e.rst_recv,
        }
    }

    fn opening_finding(&self, e: &Event, c: &Connect) -> Option<WatchFinding> {
        let took = c.end_ns - c.start_ns;
        // The last SYN's round trip: what the handshake costs when nothing goes wrong.
        let last_trip = c.end_ns.saturating_sub(e.last_syn_ns.max(c.start_ns));
        let evidence = json!({
            "side": "client",
            "connect_ms": took as f64 / 1e6,
            "syn_retransmits": e.syn_retx,
            "resets_sent": e.rst_sent,
            "resets_received": e.rst_recv,
            "reset_reason": (e.rst_sent > 0).then(|| self.reason(e.rst_reason)),
            "last_syn_to_end_ms": last_trip as f64 / 1e6,
            "srtt_ms": f64::from(e.srtt_us) / 1e3,
        });
        if c.established && e.rst_sent > 0 {
            let mut f = finding("syn-stale-state", e, (c.start_ns, c.end_ns), took);
            let reset_after = e.rst_sent_ns.saturating_sub(c.start_ns);
            f.explanation = format!(
                "connect() by {} to {} took {} instead of one round trip: the answer to its SYN acknowledged other sequence numbers (state left on this 4-tuple by an earlier connection: TIME-WAIT, or a stale socket), this host reset it {} after the SYN ({}) and sent the SYN again ({} SYN retransmission{}); the handshake then completed {} after the last SYN.",
                who(&c.process),
                e.remote,
                ms(took),
                ms(reset_after),
                self.reason(e.rst_reason),
                e.syn_retx,
                if e.syn_retx == 1 { "" } else { "s" },
                ms(last_trip),
            );
            f.fix = "keep TCP timestamps on at both ends (net.ipv4.tcp_timestamps=1) so TIME-WAIT accepts a newer SYN; reuse connections (pooling) or widen net.ipv4.ip_local_port_range so a port is not reused within 60 s; leave net.ipv4.tcp_rfc1337=0".into();
            f.evidence = evidence;
            return Some(f);
        }
        if e.rst_recv > 0 && !c.established {
            let mut f = finding("syn-refused", e, (c.start_ns, c.end_ns), took);
            f.explanation = format!(
                "connect() by {} to {} was refused: a reset answered its SYN ({} SYN retransmission{} before), {} after the first SYN.",
                who(&c.process),
                e.remote,
                e.syn_retx,
                if e.syn_retx == 1 { "" } else { "s" },
                ms(took),
            );
            f.fix = "nothing listens on that port (or a firewall rejects): check the service is up and bound to this address and port".into();
            f.evidence = evidence;
            return Some(f);
        }
        if e.syn_retx > 0 && e.rst_sent == 0 && e.rst_recv == 0 {
            let cost = if c.established {
                e.last_syn_ns.saturating_sub(c.start_ns)
            } else {
                took
            };
            let mut f = finding("syn-unanswered", e, (c.start_ns, c.end_ns), cost);
            f.explanation = if c.established {
                format!(
                    "connect() by {} to {}: {} SYN{} went unanswered; the SYN sent {} after the first was answered (the handshake took {} in all).",
                    who(&c.process),
                    e.remote,
                    e.syn_retx,
                    if e.syn_retx == 1 { "" } else { "s" },
                    ms(cost),
                    ms(took),
                )
            } else {
                format!(
                    "connect() by {} to {}: no SYN was answered ({} retransmission{}); the attempt ended after {}.",
                    who(&c.process),
                    e.remote,
                    e.syn_retx,
                    if e.syn_retx == 1 { "" } else { "s" },
                    ms(took),
                )
            };
            f.fix = "the server side dropped SYNs: check its accept queue (nstat ListenOverflows/ListenDrops, the listen() backlog and net.core.somaxconn) and that it accepts fast enough; then SYN flood limits and firewalls on the path".into();
            f.evidence = evidence;
            return Some(f);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn kernel() -> Judge {
        Judge::new(Kernel {
            hz: Some(250),
            reset_reasons: [(2, "TCP_INVALID_ACK_SEQUENCE".to_string())].into(),
            drop_reasons: [
                (2, "NOT_SPECIFIED".to_string()),
                (12, "NETFILTER_DROP".to_string()),
                (40, "TCP_LISTEN_OVERFLOW".to_string()),
            ]
            .into(),
        })
    }

    /// A connect() from curl (pid 77) that left SYN-SENT 12.1 ms after its first SYN.
    fn opening() -> Event {
        Event {
            kind: EV_CONNECT,
            ts_ns: 1_000 * MS + 12_100_000,
            syn_ns: 1_000 * MS,
            last_syn_ns: 1_000 * MS,
            newstate: TCP_ESTABLISHED,
            tgid: 77,
            comm: "curl".into(),
            netns: 4_026_531_840,
            local: "10.0.0.1:41001".parse().unwrap(),
            remote: "10.0.0.2:80".parse().unwrap(),
            srtt_us: 60,
            ..Event::default()
        }
    }

    #[test]
    fn a_clean_connect_is_a_record_and_no_finding() {
        let (c, f) = kernel().judge(&opening());
        let c = c.unwrap();
        assert!(c.established);
        assert!((c.ms() - 12.1).abs() < 1e-9);
        assert_eq!(c.process.command, "curl");
        assert!(f.is_none());
    }

    #[test]
    fn a_reset_in_syn_sent_then_a_retry_is_a_stale_state_collision() {
        // The lab's stale-syn-timewait shape: SYN at 0, the stale ACK reset at 0.06 ms, the
        // same SYN again at 12.0 ms (as in fixtures/lab/stale-syn-timewait-broken.pcap.gz),
        // SYN-ACK at 12.1 ms. Cost: the whole opening, 12.1 ms, as analyze prices it.
        let e = Event {
            syn_retx: 1,
            last_syn_ns: 1_000 * MS + 12 * MS,
            rst_sent: 1,
            rst_reason: 2,
            rst_sent_ns: 1_000 * MS + 60_000,
            ..opening()
        };
        let f = kernel().judge(&e).1.unwrap();
        assert_eq!(f.id, "syn-stale-state");
        assert_eq!(f.cost_ns, 12_100_000);
        assert!(f.explanation.contains("took 12.1 ms"), "{}", f.explanation);
        assert!(f.explanation.contains("TCP_INVALID_ACK_SEQUENCE"));
        assert!(f.explanation.contains("0.1 ms after the last SYN"));
        assert_eq!(f.evidence["syn_retransmits"], 1);
        // A reason this kernel's format does not list is given by number.
        let f = kernel()
            .judge(&Event {
                rst_reason: 99,
                ..e
            })
            .1
            .unwrap();
        assert!(f.explanation.contains("(reason 99)"));
    }

    #[test]
    fn unanswered_syns_cost_until_the_answered_one() {
        // Two SYNs lost: the third, sent 3 s after the first (1 s, then 2 s: the linear
        // timeouts of tcp_syn_linear_timeouts), was answered 0.5 ms later.
        let e = Event {
            syn_retx: 2,
            last_syn_ns: 1_000 * MS + 3_000 * MS,
            ts_ns: 1_000 * MS + 3_000 * MS + MS / 2,
            ..opening()
        };
        let f = kernel().judge(&e).1.unwrap();
        assert_eq!(f.id, "syn-unanswered");
        assert_eq!(f.cost_ns, 3_000 * MS);
        // Never answered: the attempt's whole time.
        let e = Event {
            newstate: TCP_CLOSE,
            ts_ns: 1_000 * MS + 7_000 * MS,
            ..e
        };
        let (c, f) = kernel().judge(&e);
        assert!(!c.unwrap().established);
        let f = f.unwrap();
        assert_eq!((f.id, f.cost_ns), ("syn-unanswered", 7_000 * MS));
        assert!(f.explanation.contains("no SYN was answered"));
    }

    #[test]
    fn a_reset_received_in_syn_sent_is_a_refusal() {
        let e = Event {
            newstate: TCP_CLOSE,
            rst_recv: 1,
            ts_ns: 1_000 * MS + MS / 10,
            ..opening()
        };
        let f = kernel().judge(&e).1.unwrap();
        assert_eq!((f.id, f.cost_ns), ("syn-refused", MS / 10));
    }

    /// A timeout's finding, once its wait for a D-SACK is over (nothing else is pending).
    fn resend(j: &mut Judge, e: &Event) -> Option<WatchFinding> {
        assert_eq!(j.judge(e), (None, None));
        let mut f = j.due(u64::MAX);
        assert!(f.len() <= 1);
        f.pop()
    }

    /// The lab's tail-loss shape at HZ=250: a tail loss probe at 10 s on a socket whose
    /// smoothed round trip is 20 ms and whose last ACK came 56 jiffies (224 ms) before.
    fn tail_probe() -> Event {
        Event {
            kind: EV_PROBE,
            sk: 7,
            ts_ns: 10_000 * MS,
            rcv_tstamp: 1_000,
            rcv_age: 56,
            srtt_us: 20_000,
            rto_jiffies: 55,
            tgid: 0,
            comm: String::new(),
            ..opening()
        }
    }

    #[test]
    fn a_resend_the_receiver_d_sacks_is_not_a_finding() {
        // The tail-loss probe, then a D-SACK from the receiver 25 ms later (it had the data:
        // the probe was not needed, as in a zero-window stall on loopback where the sender's
        // timer fired while the receiver's window was shut).
        let mut j = kernel();
        let probe = tail_probe();
        assert_eq!(j.judge(&probe), (None, None));
        // Held four round trips (80 ms) but at least a second.
        assert!(j.due(10_000 * MS + RESEND_WAIT_MIN_NS - 1).is_empty());
        let dsack = Event {
            kind: EV_DSACK,
            sk: 7,
            ts_ns: 10_025 * MS,
            ..Event::default()
        };
        assert_eq!(j.judge(&dsack), (None, None));
        assert!(j.due(u64::MAX).is_empty());
        assert_eq!(j.spurious_resends, 1);
        // A D-SACK on another socket, or before the resend, proves nothing about it.
        let mut j = kernel();
        j.judge(&probe);
        j.judge(&Event {
            sk: 8,
            ..dsack.clone()
        });
        j.judge(&Event {
            ts_ns: 9_000 * MS,
            ..dsack
        });
        assert_eq!(j.due(u64::MAX).len(), 1);
        assert_eq!(j.spurious_resends, 0);
    }

    #[test]
    fn timeouts_cost_from_the_lost_data_to_each_resend() {
        // The lost tail left with the data the last ACK covered, one smoothed round trip
        // (20 ms) before that ACK, itself 224 ms before the probe: 244 ms.
        let mut j = kernel();
        let probe = tail_probe();
        let f = resend(&mut j, &probe).unwrap();
        assert_eq!((f.id, f.cost_ns), ("rto-retransmission", 244 * MS));
        assert_eq!(f.start_ns, 10_000 * MS - 244 * MS);
        assert_eq!(f.evidence["timer"], "tail loss probe");
        assert!(f.explanation.contains("connect() was not seen"));
        assert!(f
            .explanation
            .contains("224 ms after the last acknowledgement"));
        // The probe was lost too: the RTO fires 480 ms later with no ACK between. Back-off:
        // 480 ms more, not 704 ms counted again from the ACK.
        let rto = Event {
            kind: EV_LOSS,
            ts_ns: 10_480 * MS,
            rcv_age: 176,
            ..probe.clone()
        };
        let f = resend(&mut j, &rto).unwrap();
        assert_eq!(f.cost_ns, 480 * MS);
        assert_eq!(f.evidence["backoff"], true);
        assert!(f.explanation.contains("RTO 220 ms"), "{}", f.explanation);
        // An ACK came (rcv_tstamp moved): the next timeout is a new episode.
        let later = Event {
            ts_ns: 20_000 * MS,
            rcv_tstamp: 3_000,
            rcv_age: 50,
            ..rto.clone()
        };
        let f = resend(&mut j, &later).unwrap();
        assert_eq!(f.cost_ns, 220 * MS);
        assert_eq!(f.evidence["backoff"], false);
        // Another socket with the same ACK time is its own episode.
        let other = Event { sk: 8, ..later };
        assert_eq!(resend(&mut j, &other).unwrap().cost_ns, 220 * MS);
        // Without CONFIG_HZ the jiffies cannot be priced: no finding rather than a guess.
        let mut k = Judge::new(Kernel {
            hz: None,
            ..Kernel::default()
        });
        assert!(resend(&mut k, &probe).is_none());
    }

    /// The server's view of the stale-state opening above (10.0.0.2:80 <- 10.0.0.1:41001):
    /// its TIME-WAIT socket dropped the SYN at 1000 ms, the retry completed the handshake on
    /// the server at 1012.05 ms.
    fn server_drop() -> Event {
        Event {
            kind: EV_DROP,
            ts_ns: 1_000 * MS,
            syn_ns: 1_000 * MS,
            last_syn_ns: 1_000 * MS,
            drops: 1,
            drop_reason: 2,
            rx_state: TCP_TIME_WAIT,
            netns: 4_026_532_000,
            local: "10.0.0.2:80".parse().unwrap(),
            remote: "10.0.0.1:41001".parse().unwrap(),
            ..Event::default()
        }
    }

    fn server_accept() -> Event {
        Event {
            kind: EV_ACCEPT,
            ts_ns: 1_012_050_000,
            ..server_drop()
        }
    }

    #[test]
    fn a_syn_dropped_at_time_wait_is_stale_state_seen_from_the_server() {
        let mut j = kernel();
        assert_eq!(j.judge(&server_drop()), (None, None));
        assert_eq!(j.judge(&server_accept()), (None, None));
        // Held for the client's own finding, then released.
        assert!(j.due(1_012_050_000 + FOLD_WAIT_NS - 1).is_empty());
        let f = j.due(1_012_050_000 + FOLD_WAIT_NS);
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!((f.id, f.cost_ns), ("syn-stale-state", 12_050_000));
        assert_eq!(f.local.to_string(), "10.0.0.2:80");
        assert_eq!(f.evidence["side"], "server");
        assert_eq!(f.evidence["met_state"], "TIME-WAIT");
        assert!(
            f.explanation.contains("a server socket"),
            "{}",
            f.explanation
        );
        assert!(f
            .explanation
            .contains("completed 12.1 ms after the first drop"));
        assert!(j.due(u64::MAX).is_empty());
    }

    #[test]
    fn one_connection_seen_from_both_ends_is_one_finding() {
        let client = Event {
            syn_retx: 1,
            last_syn_ns: 1_000 * MS + 12 * MS,
            rst_sent: 1,
            rst_reason: 2,
            rst_sent_ns: 1_000 * MS + 60_000,
            ..opening()
        };
        // The server's handshake ends first (the client's one way later): the client's
        // finding takes the server's in.
        let mut j = kernel();
        j.judge(&server_drop());
        j.judge(&server_accept());
        assert_eq!(j.judge(&client).1.unwrap().id, "syn-stale-state");
        assert!(j.due(u64::MAX).is_empty());
        assert_eq!(j.folded, 1);
        // The other order (the client's event read first).
        let mut j = kernel();
        assert!(j.judge(&client).1.is_some());
        j.judge(&server_drop());
        j.judge(&server_accept());
        assert!(j.due(u64::MAX).is_empty());
        assert_eq!(j.folded, 1);
    }

    #[test]
    fn a_final_ack_dropped_by_a_full_accept_queue_names_the_listener() {
        // The client's handshake ACK at 1000 ms and its request at 1000.5 ms are dropped
        // (TCP_LISTEN_OVERFLOW); its timer resends the request at 1200 ms (dropped again) and
        // at 1600 ms, which makes the connection. The request waited from 1000.5 ms.
        let mut j = kernel();
        // A 4-tuple's drops, then its handshake's end at `accept_ns`: the findings.
        let mut accepted = |drop: &Event, accept_ns: u64| {
            j.judge(drop);
            j.judge(&Event {
                kind: EV_ACCEPT,
                ts_ns: accept_ns,
                ..drop.clone()
            });
            j.due(u64::MAX)
        };
        let drop = Event {
            drop_reason: 40,
            rx_state: TCP_LISTEN,
            tgid: 900,
            comm: "nginx".into(),
            drops: 3,
            last_syn_ns: 1_200 * MS,
            data_drop_ns: 1_000 * MS + 500_000,
            ..server_drop()
        };
        let f = accepted(&drop, 1_600 * MS);
        assert_eq!(
            (f[0].id, f[0].cost_ns),
            ("accept-queue-full", 599 * MS + 500_000)
        );
        assert!(f[0].explanation.contains("nginx (pid 900)"));
        assert!(f[0].explanation.contains("3 times"));
        assert!(f[0].explanation.contains("after the first dropped data"));
        assert_eq!(f[0].process.pid, 900);
        assert_eq!(f[0].evidence["data_dropped"], true);

        // A client that sends nothing until the server speaks: only its handshake ACK is
        // dropped (1000 ms); the listener resends its SYN-ACK at 2000 ms, and the client's
        // answer to it makes the connection at 2000.2 ms. It waited from the drop.
        let banner = Event {
            drops: 1,
            last_syn_ns: 1_000 * MS,
            data_drop_ns: 0,
            synack_ns: 2_000 * MS,
            remote: "10.0.0.1:41005".parse().unwrap(),
            ..drop.clone()
        };
        let f = accepted(&banner, 2_000 * MS + 200_000);
        assert_eq!(
            (f[0].id, f[0].cost_ns),
            ("accept-queue-full", 1_000 * MS + 200_000)
        );
        assert!(f[0].explanation.contains("after the first drop."));
        assert_eq!(f[0].evidence["synack_resent"], true);

        // Only the handshake ACK dropped, and the client's request 5 ms later (its own
        // schedule, not a resend) found room and made the connection: nobody waited.
        let own_time = Event {
            data_drop_ns: 0,
            synack_ns: 0,
            remote: "10.0.0.1:41006".parse().unwrap(),
            ..banner
        };
        assert!(accepted(&own_time, 1_005 * MS).is_empty());
    }

    #[test]
    fn a_full_queue_names_the_client_timeouts_it_caused() {
        // As in the lab's syn-backlog-full (skb:kfree_skb traced there): the listener's
        // accept queue holds 2 against a backlog of 1, so the client's handshake ACK (1000 ms)
        // and its request (1000.1 ms) find no socket (NO_SOCKET, queue full). The client's
        // retransmission timer resends the request at 1212 ms; the queue has room by then and
        // the handshake ends on the server at 1212.2 ms. One wait of 212.2 ms, caused by the
        // queue: one accept-queue-full, not an rto-retransmission beside it.
        let mut j = kernel();
        j.kernel.drop_reasons.insert(3, "NO_SOCKET".to_string());
        // Its SYN had been dropped too (the queue was full then): the client's connect()
        // waited for a SYN retry and ended at 990 ms, before the drops: another wait, which
        // the server's finding is not folded into.
        let connect = Event {
            syn_retx: 1,
            syn_ns: 0,
            last_syn_ns: 980 * MS,
            ts_ns: 990 * MS,
            ..opening()
        };
        assert_eq!(j.judge(&connect).1.unwrap().id, "syn-unanswered");
        let drop = Event {
            drop_reason: 3,
            queue_full: true,
            rx_state: TCP_LISTEN,
            drops: 2,
            last_syn_ns: 1_000 * MS + 100_000,
            ts_ns: 1_000 * MS + 100_000,
            data_drop_ns: 1_000 * MS + 100_000,
            ..server_drop()
        };
        j.judge(&drop);
        // The client's resend (local 10.0.0.1:41001), and one of another connection.
        let resend = Event {
            kind: EV_LOSS,
            sk: 7,
            ts_ns: 1_212 * MS,
            rcv_tstamp: 1_000,
            rcv_age: 53,
            srtt_us: 100,
            rto_jiffies: 53,
            ..opening()
        };
        let other = Event {
            sk: 8,
            local: "10.0.0.1:41002".parse().unwrap(),
            ..resend.clone()
        };
        assert_eq!(j.judge(&resend), (None, None));
        assert_eq!(j.judge(&other), (None, None));
        j.judge(&Event {
            kind: EV_ACCEPT,
            ts_ns: 1_212 * MS + 200_000,
            ..drop.clone()
        });
        let f = j.due(u64::MAX);
        let ids: Vec<(&str, u64)> = f.iter().map(|f| (f.id, f.cost_ns)).collect();
        assert_eq!(
            ids,
            [
                ("accept-queue-full", 212 * MS + 100_000),
                ("rto-retransmission", 212 * MS + 100_000)
            ]
        );
        let full = &f[0];
        assert_eq!(full.local.to_string(), "10.0.0.2:80");
        assert_eq!(f[1].local.to_string(), "10.0.0.1:41002");
        assert_eq!(full.evidence["client_timeouts_folded"], 1);
        assert_eq!(j.folded, 0);
        // Another client's handshake ACK dropped, and its request 0.2 ms behind it made the
        // connection (room again): nobody waited, nothing is reported.
        let quick = Event {
            drops: 1,
            data_drop_ns: 0,
            remote: "10.0.0.1:41003".parse().unwrap(),
            ..drop.clone()
        };
        j.judge(&quick);
        j.judge(&Event {
            kind: EV_ACCEPT,
            ts_ns: quick.ts_ns + 200_000,
            ..quick
        });
        assert!(j.due(u64::MAX).is_empty());
        assert_eq!(full.evidence["drop_reason"], "NO_SOCKET");
        assert!(
            full.explanation
                .contains("no socket could be made for it while the queue was full"),
            "{}",
            full.explanation
        );
    }

    #[test]
    fn drops_with_no_handshake_are_reported_when_given_up_on() {
        let mut j = kernel();
        // A firewall dropped three SYNs over 3 s; nothing followed.
        let drop = Event {
            drop_reason: 12,
            rx_state: 0,
            drops: 3,
            last_syn_ns: 4_000 * MS,
            ts_ns: 4_000 * MS,
            ..server_drop()
        };
        j.judge(&drop);
        assert!(j.due(4_000 * MS + DROP_TTL_NS - 1).is_empty());
        // Reported after DROP_TTL_NS, held FOLD_WAIT_NS for a client's finding.
        let f = j.due(u64::MAX);
        assert_eq!((f[0].id, f[0].cost_ns), ("syn-unanswered", 3_000 * MS));
        assert!(f[0].explanation.contains("NETFILTER_DROP"));
        assert!(f[0].fix.contains("firewall"));
        assert_eq!(f[0].evidence["completed"], false);
        // One drop and nothing after: no wait can be priced; counted.
        let mut j = kernel();
        j.judge(&server_drop());
        assert!(j.due(u64::MAX).is_empty());
        assert_eq!(j.unresolved_drops, 1);
    }

    #[test]
    fn a_flood_of_dropped_syns_is_followed_up_to_kept_then_counted() {
        // KEPT 4-tuples waiting (one per client port, 65 536 of them), then one more: not
        // kept, counted as unresolved; another drop of a kept 4-tuple still updates it.
        let mut j = kernel();
        for port in 0..=u16::MAX {
            let mut e = server_drop();
            e.remote.set_port(port);
            j.judge(&e);
        }
        assert_eq!(j.pending.len(), KEPT);
        let other = Event {
            remote: "10.0.0.9:1".parse().unwrap(),
            ..server_drop()
        };
        j.judge(&other);
        assert_eq!((j.pending.len(), j.unresolved_drops), (KEPT, 1));
        j.judge(&Event {
            drops: 2,
            ..server_drop()
        });
        assert_eq!(j.unresolved_drops, 1);
        let key = (
            server_drop().netns,
            (server_drop().remote, server_drop().local),
        );
        assert_eq!(j.pending[&key].drops, 2);
    }

    #[test]
    fn the_restarted_window_follows_tcp_cwnd_restart() {
        // RTO 51 jiffies: 100 idle -> one halving (100 - 51 > 0), 300 idle -> down to 10.
        assert_eq!(restarted_cwnd(40, 100, 51, 10), 20);
        assert_eq!(restarted_cwnd(40, 300, 51, 10), 10);
        // Any idle past the RTO (the kernel restarts only then) halves at least once.
        assert_eq!(restarted_cwnd(40, 52, 51, 10), 20);
        // A window below the initial one stays.
        assert_eq!(restarted_cwnd(6, 1000, 51, 10), 6);
        // 30 segments from 10 (ssthresh 30): 10 then 20.
        assert_eq!(rounds(30, 10, 30), 2);
        assert_eq!(rounds(30, 40, 30), 1);
        assert_eq!(rounds(0, 10, 30), 0);
    }

    #[test]
    fn a_burst_after_idle_costs_its_measured_time_beyond_the_window_it_had() {
        // The lab's slow-start-after-idle shape (HZ 250): cwnd 732 (ssthresh 400), 3052 ms
        // idle against an RTO of 252 ms: restarted to 10. The server writes 64 kB, then more:
        // 1 048 576 bytes in all, 725 segments at MSS 1448.
        let restart = Event {
            kind: EV_RESTART,
            sk: 9,
            ts_ns: 5_000 * MS,
            cwnd: 732,
            ssthresh: 400,
            idle_jiffies: 763,
            rto_jiffies: 63,
            bytes: 65_536,
            mss: 1448,
            srtt_us: 50_600,
            ..opening()
        };
        let mut j = kernel();
        assert_eq!(j.judge(&restart), (None, None));
        // The burst ended after 76 jiffies (304 ms) to its last data. At the window it had, its
        // 725 segments take 725 / 732 * 50.6 = 50.116 ms. The model's bound: 10, 20, 40, 80,
        // 160, 320, then 549 at ssthresh 3/4 of 732 = 549: 7 round trips against 1,
        // 6 * 50.6 = 303.6 ms; lost: min(304 - 50.116, 303.6) = 253.884 ms.
        let end = Event {
            kind: EV_BURST_END,
            sk: 9,
            ts_ns: 8_000 * MS,
            bytes: 1_048_576,
            idle_jiffies: 76,
            ..opening()
        };
        let f = j.judge(&end).1.unwrap();
        assert_eq!(f.id, "slow-start-restart");
        assert_eq!(f.cost_ns, 304 * MS - 725 * 50_600_000 / 732);
        assert_eq!(f.cost_ns, 253_883_880);
        assert_eq!(f.evidence["round_trips"], 7);
        assert_eq!(f.evidence["segments"], 725);
        assert_eq!(f.evidence["measured"], true);
        assert!(
            f.explanation.contains("from 732 to 10 segments"),
            "{}",
            f.explanation
        );
        assert!(j.due(u64::MAX).is_empty());
        // A window of 400 before: 725 / 400 * 50.6 = 91.7125 ms with it; the restarted burst's
        // last data left 70 jiffies (280 ms) after the write: 188.2875 ms lost (the model allows
        // 10, 20, .. 160, then 300 at ssthresh 3/4 of 400: 7 round trips against 2,
        // 5 * 50.6 = 253 ms).
        // (`end_cwnd`: the window the restarted burst had reached by its end.)
        let from_400 = |end_cwnd: u32| {
            let mut j = kernel();
            j.judge(&Event {
                cwnd: 400,
                ssthresh: 100,
                ..restart.clone()
            });
            j.judge(&Event {
                idle_jiffies: 70,
                cwnd: end_cwnd,
                ..end.clone()
            })
            .1
            .unwrap()
        };
        let f = from_400(end.cwnd);
        assert_eq!(f.cost_ns, 188_287_500);
        assert_eq!(f.evidence["would_take_ms"], 91.7125);
        // The same, but the restarted burst's window reached 700 segments by its end (read at
        // the end): kept, the window would have grown from 400 to at least that. At 700 its
        // 725 segments take 725 / 700 * 50.6 = 52.407142 ms (integer ns): 280 - 52.407142 =
        // 227.592858 ms lost (the model: 7 round trips against 2, 253 ms).
        let f = from_400(700);
        assert_eq!(f.cost_ns, 227_592_858);
        assert_eq!(f.evidence["cwnd_kept"], 700);
        assert_eq!(f.evidence["cwnd_before"], 400);
        assert!(f.explanation.contains("reached"), "{}", f.explanation);
        // An application that wrote its burst slowly (10 s from the first write to its last):
        // the cost is bounded by what the restart can add, 6 round trips.
        let mut j = kernel();
        j.judge(&restart);
        let slow = Event {
            idle_jiffies: 2_500,
            ..end.clone()
        };
        assert_eq!(j.judge(&slow).1.unwrap().cost_ns, 6 * 50_600_000);
        // No end seen while watched: estimated from the model at the end.
        let mut j = kernel();
        j.judge(&restart);
        assert!(j.due(5_000 * MS + BURST_WAIT_NS - 1).is_empty());
        let f = j.due(u64::MAX);
        // The first write alone: 46 segments, 10 + 20 + 40: 3 round trips against 1.
        assert_eq!(f[0].cost_ns, 2 * 50_600_000);
        assert_eq!(f[0].evidence["measured"], false);
        // A burst the restarted window sends in one round trip costs nothing: no finding.
        let mut j = kernel();
        j.judge(&Event {
            bytes: 10 * 1448,
            ..restart
        });
        assert!(j
            .judge(&Event {
                bytes: 10 * 1448,
                idle_jiffies: 13,
                ..end
            })
            .1
            .is_none());
    }

    #[test]
    fn a_zero_window_costs_its_stall() {
        // 125 jiffies at HZ 250: 500 ms from the ACK that closed the window to the one that
        // opened it.
        let e = Event {
            kind: EV_ZERO_WINDOW,
            ts_ns: 9_000 * MS,
            idle_jiffies: 125,
            ..opening()
        };
        let f = kernel().judge(&e).1.unwrap();
        assert_eq!((f.id, f.cost_ns), ("zero-window", 500 * MS));
        assert_eq!(f.start_ns, 8_500 * MS);
        assert!(
            f.explanation.contains("zero window for 500 ms"),
            "{}",
            f.explanation
        );
        assert_eq!(f.evidence["recovered"], true);
        // The same stall, but the socket closed while the window was still zero (the kernel
        // program's close path): 500 ms to the close, not recovered.
        let f = kernel()
            .judge(&Event {
                newstate: TCP_CLOSE,
                ..e
            })
            .1
            .unwrap();
        assert_eq!((f.id, f.cost_ns), ("zero-window", 500 * MS));
        assert_eq!(f.evidence["recovered"], false);
        assert!(
            f.explanation.contains("until the socket closed"),
            "{}",
            f.explanation
        );
    }
}
