//! # nagle-delayed-ack: a small segment held until the peer's delayed ACK
//!
//! **Signal.** A sender without TCP_NODELAY sends a small segment A; the peer acknowledges it
//! with a pure ACK only after its delayed-ACK timer (about 40 ms on Linux, up to 200 ms;
//! 100 ms FreeBSD, 200 ms Windows), unrelated to the round trip; within microseconds of that
//! ACK the sender's next segment B leaves: Nagle held B while A was unacknowledged.
//!
//! **Evidence.** A, the late ACK, B. Details: how many exchanges, the ACK delays, the RTT.
//!
//! **Cost.** A to B, on every exchange it happens to: B was written with A (the write, write,
//! read pattern Nagle stalls) and held until the ACK reached the sender: the ACK's delay and
//! the ACK's way to the sender (near it, microseconds).
//!
//! B is smaller than a full segment too (the MSS, less the timestamp option's 12 bytes when
//! the segment carries one): Nagle never holds a full one, so a full segment or more
//! released by the late ACK was held by the congestion window.
//!
//! B must be seen within 2 ms of the ACK and, but for a millisecond, no sooner than half the
//! round trip between the capture point and the sender (its share of the handshake): sooner,
//! B left before the ACK reached the sender and came late by the path (nDPI's netflix.pcap:
//! B 1.9 ms after the ACK, 24 ms from the sender, sent with A). Further from the sender, B
//! comes back a round trip after the ACK, as the data a window releases does: there B must
//! echo the late ACK's timestamp (its TSecr is the ACK's TSval, RFC 7323: it left after the
//! ACK reached the sender) and be seen within two of the capture point's round trips to the
//! sender (the handshake's; jitter can double it) and 2 ms. Without timestamps or a handshake
//! Nagle is named only by a capture within about 6 ms of the sender.
//!
//! **Confidence.** `low` when the peer answered none of the held segments: no data or FIN
//! from it that acknowledges B within a second after B (a client that asks again, or closes
//! once it has the whole response, was waiting for B). The hold then delayed a message nobody was
//! waiting for (a keepalive, an end-of-updates marker) or one the peer acted on elsewhere;
//! the packets of this connection cannot tell.
//!
//! **Known false positives.** An application that really writes B only when the ACK arrives
//! (rare). The delay must exceed 30 ms and three round trips to count, and B must not follow
//! data from the peer sent after the ACK (then B answers that data: a new request).
//!
//! **References.** RFC 896 (Nagle), RFC 1122 4.2.3.2 (delayed ACK), Linux tcp_nagle_check and
//! tcp_minshall_check; docs/tcp-signatures.md section 4.

use super::{rtt_ns, side_name, to_sender, ConnState, MS};
use crate::finding::{ms, ms_f, Level};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};
use tcpwhy_wire::Seq;

pub static INFO: Info = Info {
    id: "nagle-delayed-ack",
    title: "small segment held by Nagle until the peer's delayed ACK",
    doc: include_str!("nagle_delayed_ack.rs"),
};

/// Delayed-ACK timers: 40 ms minimum on Linux to 200 ms (and 500 ms allowed by RFC 1122).
const MIN_DELAY: i64 = 30 * MS;
const MAX_DELAY: i64 = 500 * MS;
/// B must follow the ACK this closely to have been waiting for it (at the sender).
const RELEASE: i64 = 2 * MS;

/// Whether B, seen `after` ns after the late ACK, left the sender as that ACK arrived: within
/// `RELEASE` of it, and not sooner than half of `to_sender` less `RELEASE / 2` (the ACK
/// travels half of it to reach the sender and B the other half back; half, for a handshake
/// slower than the path, and a millisecond of the hosts' own scheduling on short paths):
/// seen sooner, B left before the ACK arrived and came late by the path. Captured further
/// than about `3 * RELEASE` from the sender, no B qualifies: there the release is blurred by
/// the path (a B one round trip after the ACK is also what a window-limited sender does).
fn released(after: i64, to_sender: i64) -> bool {
    (after + RELEASE / 2) * 2 >= to_sender && after <= RELEASE
}

/// Whether B, seen `after` ns after the late ACK and echoing that ACK's timestamp (`echoes`:
/// B's TSecr is the ACK's TSval, RFC 7323), was released by it at a capture point further
/// from the sender: the echo proves B left after the ACK reached the sender, and B came back
/// within two of the capture point's round trips to the sender (the handshake's, which the
/// path's jitter can double) and `RELEASE`: it left as the ACK arrived.
fn released_far(after: i64, to_sender: i64, echoes: bool) -> bool {
    echoes && to_sender > 0 && after <= 2 * to_sender + RELEASE
}
const KEEP: usize = 8;

/// The peer's data or FIN within this long after B, acknowledging it, answers B: someone
/// waited for it. Later data is the peer's own turn (a timer, a person).
const ANSWER: i64 = 1_000 * MS;

/// Why a finding none of whose held segments the peer answered is `low`.
const UNANSWERED_REASON: &str = "the peer answered none of the held segments (no data or FIN from it within a second after them): they may be messages nobody waited for (a keepalive, an end-of-updates marker), and holding them delayed nothing";

/// Both directions side by side, each indexed by its sender (`Side as usize`): as one state
/// per direction, each padded its 20 bytes to 24.
#[derive(Default, Debug)]
pub(crate) struct State {
    /// The small segment waiting for its ACK, and its end sequence (valid while it waits).
    pending: [Option<At>; 2],
    end: [Seq; 2],
}

/// Late ACKs and what they held, a part of the connection's `Extra`: most directions have
/// none.
#[derive(Default, Debug)]
pub(crate) struct Found {
    /// The late ACK of the pending segment: (A, ACK, delay, the ACK's TSval).
    acked: Option<(At, At, i64, Option<u32>)>,
    /// (A, ACK, B, delay) for every occurrence (the first few kept).
    seen: Vec<(At, At, At, i64)>,
    /// The last held segment B and its end, until the peer's next data: whether the peer
    /// answered it.
    awaiting: Option<(At, Seq)>,
    /// Holds whose B the peer answered with data or its FIN within `ANSWER` (someone waited
    /// for B).
    answered: u32,
    count: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct NagleDelayedAck {}

impl Detector for NagleDelayedAck {
    fn info(&self) -> &'static Info {
        &INFO
    }

    #[inline(always)]
    fn segment(
        &mut self,
        cs: &mut ConnState,
        c: &Connection,
        ev: &SegmentEvent<'_>,
        _out: &mut Vec<Finding>,
    ) {
        let seg = ev.seg;
        if seg.flags.syn() || seg.flags.rst() {
            return;
        }
        let sender = ev.from;
        if seg.payload_len > 0 || seg.flags.fin() {
            if let Some(f) = cs.extra.peek_mut::<Found>(sender.other()) {
                // Data from this side after the peer's late ACK: what the peer sends next
                // answers it (a new request), it was not held for the ACK.
                if seg.payload_len > 0 {
                    f.acked = None;
                }
                // The peer's held B answered: this side's next data or FIN acknowledges it,
                // soon after it (it was waiting for B: it asks again, or it closes having
                // read it all).
                if let Some((b, end)) = f.awaiting.take() {
                    let new = ev.new_data || seg.flags.fin();
                    if new && seg.ack >= end && ev.at.ts_ns - b.ts_ns <= ANSWER {
                        f.answered += 1;
                    }
                }
            }
        }
        let st = cs.nagle_delayed_ack.get(&mut cs.used);
        // The sender's side of the pattern.
        if seg.payload_len > 0 {
            // A full segment: the MSS less the 12 bytes the timestamp option takes from each
            // segment that carries it (RFC 6691; Linux's mss_cache, which its Nagle test
            // compares with): 1448 bytes of a 1460-byte MSS.
            let ts_bytes = if seg.options.timestamp.is_some() { 12 } else { 0 };
            let mss = u32::from(c.endpoint(sender).mss().unwrap_or(1460)).max(536) - ts_bytes;
            if let Some(f) = cs.extra.peek_mut::<Found>(sender) {
                if let Some((a, ack, delay, tsval)) = f.acked.take() {
                    // Nagle holds less than a full segment (a full one leaves at once): a
                    // segment of a full MSS or more released by the ACK was held by the
                    // congestion window (an initial or restarted one), not by Nagle.
                    let after = ev.at.ts_ns - ack.ts_ns;
                    let way = to_sender(c, sender);
                    let echoes = tsval.is_some_and(|v| {
                        seg.options.timestamp.is_some_and(|(_, ecr)| ecr == v)
                    });
                    let by_ack = released(after, way) || released_far(after, way, echoes);
                    if ev.new_data && by_ack && seg.payload_len < mss {
                        f.count += 1;
                        // B left with A but for Nagle: the hold is A to B, the same at
                        // every vantage (both crossed the same path to the capture point).
                        f.total_ns += ev.at.ts_ns - a.ts_ns;
                        if f.seen.len() < KEEP {
                            f.seen.push((a, ack, ev.at, delay));
                        }
                        f.awaiting = Some((ev.at, seg.seq + seg.payload_len));
                    }
                }
            }
            let i = sender as usize;
            if ev.new_data && !ev.retransmission && seg.payload_len < mss {
                st.pending[i] = Some(ev.at);
                st.end[i] = seg.seq + seg.payload_len;
            } else {
                st.pending[i] = None;
            }
        }
        // The peer's side: a pure ACK of the pending small segment, late.
        let peer = sender.other();
        let p = peer as usize;
        if let Some(a) = st.pending[p] {
            if seg.flags.ack() && seg.ack >= st.end[p] {
                st.pending[p] = None;
                let delay = ev.at.ts_ns - a.ts_ns;
                let pure = seg.payload_len == 0 && !seg.flags.fin();
                if pure
                    && (MIN_DELAY..=MAX_DELAY).contains(&delay)
                    && delay > 3 * rtt_ns(c).unwrap_or(0)
                {
                    let tsval = seg.options.timestamp.map(|(v, _)| v);
                    cs.extra.get::<Found>(peer).acked = Some((a, ev.at, delay, tsval));
                }
            }
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        if cs.nagle_delayed_ack.take(&mut cs.used).is_none() {
            return;
        }
        for side in [Side::Client, Side::Server] {
            let Some(st) = cs.extra.take::<Found>(side) else {
                continue;
            };
            let Some(&(a, ack, b, _)) = st.seen.first() else {
                continue;
            };
            let mut delays: Vec<i64> = st.seen.iter().map(|s| s.3).collect();
            delays.sort_unstable();
            let median = delays[(delays.len() - 1) / 2];
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = a.ts_ns;
            f.end_ns = st.seen.last().map_or(b.ts_ns, |s| s.2.ts_ns);
            f.cost_ns = st.total_ns;
            f.frames = vec![a.frame(), ack.frame(), b.frame()];
            f.explanation = format!(
                "{} held a small segment until the peer's delayed ACK {} times (the ACK {} late, median; round trip {}): {} lost.",
                side_name(c, side),
                st.count,
                ms(median),
                rtt_ns(c).map_or("unknown".into(), ms),
                ms(st.total_ns)
            );
            if st.answered == 0 {
                f.confidence.lower(Level::Low, UNANSWERED_REASON);
            }
            f.fix = "set TCP_NODELAY on the sending socket, or write each message in one call (writev, MSG_MORE, TCP_CORK then uncork); on the receiver TCP_QUICKACK or `ip route ... quickack 1`".into();
            f.details = NagleDelayedAckDetails {
                ack_delay_median_ms: ms_f(median),
                ack_delays_ms: delays.iter().map(|d| ms_f(*d)).collect::<Vec<_>>(),
                occurrences: st.count,
                rtt_ms: rtt_ns(c).map(ms_f),
                sender: side.name(),
            }
            .into();
            out.push(f);
        }
    }
}

/// nagle-delayed-ack: the sender, the holds, the peer's ACK delays.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NagleDelayedAckDetails {
    pub ack_delay_median_ms: f64,
    pub ack_delays_ms: Vec<f64>,
    pub occurrences: u32,
    pub rtt_ms: Option<f64>,
    pub sender: &'static str,
}
