//! # rto-retransmission: data sent again after a timeout (RTO, tail loss probe)
//!
//! **Signal.** A segment is sent again with no three duplicate ACKs and no SACK since the
//! peer's last new ACK: the retransmission timer (at least 200 ms on Linux) or the tail loss
//! probe (about 2 x SRTT, plus 200 ms when one packet is in flight) fired. When the segment was
//! the last one sent, the loss was at the tail, where no later segment could trigger fast
//! retransmit. A retransmission of a retransmission doubles the wait (backoff).
//!
//! **Evidence.** The original transmission and the retransmission. Details: how many, tail or
//! not, the largest backoff, the waits.
//!
//! **Cost.** From the original transmission to the last retransmission of the same data (the
//! backoff waits are not added twice).
//!
//! **Known false positives.** A capture that missed the duplicate ACKs (capture loss) makes a
//! fast retransmit look like a timeout; spurious timeouts (delay spikes) look the same.
//!
//! **Whose wait.** A receiver that sent nothing through the last resends stopped answering
//! (details `receiver_silent`; unknown, so false, when the capture holds not one packet of
//! the receiver although the sender acknowledges its SYN or data: one direction captured);
//! a first resend 10 s or more after the original, past any
//! first timer, is the sender's own stall (details `sender_stalled`): the fix then names that
//! host, not the path. A receiver that closed its side (its FIN, or the sender's ACK of a FIN
//! the capture missed) after the first resent data left and before the first resend had most
//! likely given up on the transfer (an HTTP client closing mid-response): nobody may have
//! waited for the resends (details `receiver_closed_first`, confidence `low`); had it only
//! half-closed and kept reading, the cost is its wait. A sender that closed its side after
//! the lost data left and before the first resend, and then answered the peer's next packet
//! with a reset (a socket closed for good), waited for nothing after its close (details
//! `sender_closed_first`, confidence `low`).
//!
//! **References.** RFC 6298, RFC 8985 (RACK-TLP); docs/tcp-signatures.md section 5.

use super::resend::{evidence, sender_closed_first, where_lost, Retx};
use super::side_name;

use crate::finding::{ms, ms_f, Level};
use crate::{Finding, Info};
use tcpwhy_track::{Connection, Side};

pub static INFO: Info = Info {
    id: "rto-retransmission",
    title: "retransmission after a timeout (RTO or tail loss probe)",
    doc: include_str!("rto_retransmission.rs"),
};

const KEEP: usize = 8;

/// The confidence reason of resends after the receiver closed its side.
const CLOSED_FIRST: &str = "the receiver closed its side (FIN) while the resent data was in flight and before the first resend: if it was giving up on the transfer, nobody waited for the resends";

/// One sender's retransmissions after timeouts (classified once, in `retx::Retransmissions`).
#[derive(Default, Debug)]
pub(super) struct Timeouts {
    seen: Vec<Retx>,
    count: u32,
    tail: u32,
    /// Segments lost before the capture point (their resend filled a hole), and of those the
    /// ones judged from a loss probe's timing alone.
    upstream: u32,
    by_timing: u32,
    max_backoff: u32,
    /// The last two resends' times (0: none).
    last_ns: i64,
    before_last_ns: i64,
    total_ns: i64,
    /// The longest wait before a first resend (no timeout of the same data before it), in ns.
    longest_first_wait_ns: i64,
}

/// A first retransmission timeout fires within a few seconds (RFC 6298: 1 s before any
/// round trip is measured, at least 200 ms on Linux, 3 s in old stacks; large only after
/// backoff). A first resend this long after the original means the sender did not send: its
/// host or process stalled, or the capture missed the resends before it.
const STALLED_FIRST_WAIT_NS: i64 = 10_000_000_000;

impl Timeouts {
    /// Add `r`, whose wait adds `added_ns` to what the sender's losses cost so far.
    pub fn add(&mut self, r: Retx, added_ns: i64) {
        self.count += 1;
        self.before_last_ns = self.last_ns;
        self.last_ns = r.at.ts_ns;
        self.tail += u32::from(r.tail);
        self.upstream += u32::from(r.upstream);
        self.by_timing += u32::from(r.by_timing);
        self.max_backoff = self.max_backoff.max(r.backoff);
        if r.backoff == 0 && r.original.is_some() {
            self.longest_first_wait_ns = self.longest_first_wait_ns.max(r.at.ts_ns - r.from_ns);
        }
        self.total_ns += added_ns;
        if self.seen.len() < KEEP {
            self.seen.push(r);
        }
    }

    /// (count, time lost, evidence frames, first wait's start, last resend), for a finding
    /// that names these resends otherwise (`accept-queue-full`).
    pub fn summary(&self) -> (u32, i64, Vec<u64>, Option<i64>, Option<i64>) {
        (
            self.count,
            self.total_ns,
            evidence(&self.seen),
            self.seen.first().map(|r| r.from_ns),
            (self.count > 0).then_some(self.last_ns),
        )
    }

    pub fn report(&self, c: &Connection, side: Side, out: &mut Vec<Finding>) {
        let st = self;
        let Some(first) = st.seen.first() else { return };
        let waits: Vec<f64> = st
            .seen
            .iter()
            .filter(|r| r.original.is_some() || r.upstream)
            .map(|r| ms_f(r.at.ts_ns - r.from_ns))
            .collect();
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.from_ns;
        f.end_ns = st.last_ns.max(first.at.ts_ns);
        f.cost_ns = st.total_ns;
        f.frames = evidence(&st.seen);
        f.explanation = format!(
            "{} sent data again after a timeout {} times ({} of them the last segment in flight: tail loss{}); {}; {} lost.",
            side_name(c, side),
            st.count,
            st.tail,
            if st.max_backoff > 0 { format!(", backed off {} times", st.max_backoff) } else { String::new() },
            if waits.is_empty() {
                // The original transmissions had left the ring of recent segments (a wide
                // window): the wait is the gap before the retransmission, counted in the cost.
                "the original transmissions were too far back to time each wait".to_string()
            } else {
                format!("waits {} ms", waits.iter().map(|w| format!("{w:.0}")).collect::<Vec<_>>().join(", "))
            },
            ms(st.total_ns)
        );
        // Nothing at all came back from the receiver through the last two resends and after:
        // it stopped answering (hung, gone, unplugged), which no path loss explains better.
        // (Unknown when the capture holds none of the receiver's packets at all: one direction
        // captured.)
        let silent = st.before_last_ns > c.endpoint(side.other()).last_ts
            && c.unseen_side() != Some(side.other());
        // A receiver that answered is alive: a long first wait is then the sender's. (A silent
        // one explains any wait: the sender backs off resend after resend.)
        let stalled = !silent && st.longest_first_wait_ns >= STALLED_FIRST_WAIT_NS;
        // The receiver closed between the first resent data's departure and its resend.
        let closed_first = c
            .endpoint(side.other())
            .closed_ns()
            .filter(|&t| t > first.from_ns && t <= first.at.ts_ns);
        if let Some(t) = closed_first {
            f.explanation.push_str(&format!(
                " The receiver ({}) had closed its side {} before the first resend, with this data in flight: a receiver that closes mid-transfer is most likely abandoning it (then nobody waited for these resends); had it only half-closed and kept reading, this was its wait.",
                c.endpoint(side.other()).addr,
                ms(first.at.ts_ns - t),
            ));
            f.confidence.lower(Level::Low, CLOSED_FIRST);
        }
        let sender_closed = sender_closed_first(&mut f, c, side, first);
        f.fix = if silent {
            format!(
                "the receiver ({}) sent nothing through the last resends ({} silent to the connection's end): check that host and its application (hung, restarted, gone, a device stuck); loss on the path is the other possibility only if its packets were lost too",
                c.endpoint(side.other()).addr,
                ms(c.last.ts_ns - c.endpoint(side.other()).last_ts)
            )
            .into()
        } else if stalled {
            format!(
                "the sender ({}) first resent lost data {} after sending it, far past any first retransmission timer (200 ms to 3 s): it stopped sending (a suspended process or virtual machine, a stalled host or interface) or the capture missed its earlier resends. The path lost the original; the wait is the sender's: look at that host at the time of the finding",
                c.endpoint(side).addr,
                ms(st.longest_first_wait_ns)
            )
            .into()
        } else {
            format!(
                "{}; for tail loss keep SACK and tail loss probes on (net.ipv4.tcp_sack=1, tcp_early_retrans=3) so recovery takes 2 RTTs rather than an RTO",
                where_lost(c, side, st.upstream > 0)
            )
            .into()
        };
        f.details = RtoRetransmissionDetails {
            bytes_first_retransmissions: st.seen.iter().map(|r| u64::from(r.len)).sum::<u64>(),
            inferred_from_probe_timing: st.by_timing,
            lost_before_capture_point: st.upstream,
            max_backoff: st.max_backoff,
            receiver_closed_first: closed_first.is_some(),
            receiver_silent: silent,
            retransmissions: st.count,
            sender: side.name(),
            sender_closed_first: sender_closed,
            sender_stalled: stalled,
            tail: st.tail,
            waits_ms: waits,
        }
        .into();
        out.push(f);
    }
}

/// rto-retransmission: the sender, its timeouts and how long each waited.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RtoRetransmissionDetails {
    pub bytes_first_retransmissions: u64,
    pub inferred_from_probe_timing: u32,
    pub lost_before_capture_point: u32,
    pub max_backoff: u32,
    pub receiver_closed_first: bool,
    pub receiver_silent: bool,
    pub retransmissions: u32,
    pub sender: &'static str,
    /// The sender closed its side before the first resend, then reset the peer's next packet.
    pub sender_closed_first: bool,
    pub sender_stalled: bool,
    pub tail: u32,
    pub waits_ms: Vec<f64>,
}
