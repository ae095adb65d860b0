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

use crate::event::{Event, EV_CONNECT, EV_LOSS, EV_PROBE, TCP_ESTABLISHED};
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
];

/// What `tcpwhy explain ID` says of watch: how it sees the cause, or why it does not.
pub fn visibility(id: &str) -> String {
    let how = match id {
        "syn-stale-state" => "Seen from the client side: a connect() that sent a reset in SYN-SENT (tcp:tcp_send_reset, reason TCP_INVALID_ACK_SEQUENCE) and then completed; cost from the first SYN (sock:inet_sock_set_state) to the handshake's end. The server side (PAWS and TIME-WAIT drops) is not watched yet.",
        "syn-unanswered" => "Seen: SYN retransmissions (tcp:tcp_retransmit_skb in SYN-SENT) with no reset; cost from the first SYN to the SYN that was answered, or to the attempt's end.",
        "syn-refused" => "Seen: a reset received in SYN-SENT (tcp:tcp_receive_reset); cost from the first SYN to the socket's close.",
        "rto-retransmission" => "Seen: the Loss state (tcp:tcp_cong_state_set) and resends outside Recovery and Loss (tail loss probes, tcp:tcp_retransmit_skb); cost from the lost data's first transmission (the last ACK's time plus one smoothed round trip) to the resend.",
        "slow-start-restart" => "Not seen yet: no tracepoint fires when the congestion window restarts after idle (tcp_cwnd_restart); it needs a program on tcp:tcp_sendmsg_locked reading the socket's idle time and window.",
        "zero-window" => "Not seen yet: the window the peer advertises is in tcp:tcp_probe, which fires on every received segment; watching it costs a program run per packet.",
        "accept-queue-full" => "Not seen yet: the drop is in skb:kfree_skb (reason TCP_LISTEN_OVERFLOW), which fires for every freed packet; `tcpwhy host` names full accept queues from counters and the listeners' queues.",
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
/// episode anyway), checked when the table passes `EPISODES_KEPT` sockets.
const EPISODE_TTL_NS: u64 = 130_000_000_000;
const EPISODES_KEPT: usize = 65_536;

/// Turns events into records and findings, remembering each socket's timeout episode.
#[derive(Debug, Default)]
pub struct Judge {
    pub kernel: Kernel,
    episodes: HashMap<u64, Episode>,
}

impl Judge {
    pub fn new(kernel: Kernel) -> Judge {
        Judge {
            kernel,
            episodes: HashMap::new(),
        }
    }

    /// The connect record and the finding (if any) one event makes.
    pub fn judge(&mut self, e: &Event) -> (Option<Connect>, Option<WatchFinding>) {
        match e.kind {
            EV_CONNECT => {
                let c = self.kernel.connect(e);
                let f = self.kernel.opening_finding(e, &c);
                (Some(c), f)
            }
            EV_LOSS | EV_PROBE => (None, self.timeout(e)),
            _ => (None, None),
        }
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
        if self.episodes.len() >= EPISODES_KEPT {
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

impl Kernel {
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
    use crate::event::TCP_CLOSE;

    const MS: u64 = 1_000_000;

    fn kernel() -> Judge {
        Judge::new(Kernel {
            hz: Some(250),
            reset_reasons: [(2, "TCP_INVALID_ACK_SEQUENCE".to_string())].into(),
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

    #[test]
    fn timeouts_cost_from_the_lost_data_to_each_resend() {
        // The lab's tail-loss shape at HZ=250: the server's smoothed round trip is 20 ms; its
        // last ACK came 56 jiffies (224 ms) before the probe. The lost tail left with the data
        // that ACK covered, 20 ms earlier: 244 ms.
        let mut j = kernel();
        let probe = Event {
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
        };
        let f = j.judge(&probe).1.unwrap();
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
        let f = j.judge(&rto).1.unwrap();
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
        let f = j.judge(&later).1.unwrap();
        assert_eq!(f.cost_ns, 220 * MS);
        assert_eq!(f.evidence["backoff"], false);
        // Another socket with the same ACK time is its own episode.
        let other = Event { sk: 8, ..later };
        assert_eq!(j.judge(&other).1.unwrap().cost_ns, 220 * MS);
        // Without CONFIG_HZ the jiffies cannot be priced: no finding rather than a guess.
        let mut k = Judge::new(Kernel {
            hz: None,
            ..Kernel::default()
        });
        assert!(k.judge(&probe).1.is_none());
    }
}
