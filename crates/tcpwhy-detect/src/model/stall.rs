//! Stalls: in a bulk or streaming transfer (one side sending, the other only acknowledging),
//! a gap without progress longer than max(2 x RTT, 30 ms). Progress is new data from the
//! sender or a cumulative ACK that moves forward; a gap ends at the first sign of life. When
//! the peer sends data of its own the run ends: that turn belongs to the exchange model, not
//! to a stall. Each stall is classified by what the capture shows at its start and end, after
//! TAPO (Zhou et al., CoNEXT 2015):
//!
//! - `retransmission`: it ended with a retransmission (a timeout, or a loss repaired late);
//! - `zero-window`: the receiver advertised a zero window;
//! - `receive-window`: the data in flight filled the receiver's open window, or the receiver
//!   advertised a window below one segment (the sender's silly-window avoidance waits for a
//!   larger one: the receiver paced it, not the sender's application);
//! - `delayed-ack`: one small segment in flight, released by the peer's (delayed) ACK;
//! - `ack-delay`: data in flight, window open, nothing retransmitted, and the ACKs simply
//!   came late (queueing on the path, lost ACKs, a receiver descheduled). Also a gap with
//!   nothing in flight at the capture point whose data resumes echoing (TCP timestamps) an
//!   ACK older than the one that acknowledged everything: that ACK had not reached the sender
//!   yet, whose data was still in flight (a capture near the receiver of a queued path);
//! - `sender-limited`: nothing in flight and the window open, yet the sender sent nothing:
//!   its application had no data (TAPO's "data unavailable"), or its own stack held the data
//!   (pacing with a collapsed bandwidth estimate after a loss, as BBR does; a send buffer
//!   the application fills late). The wire cannot tell these apart; the sender's host can.
//!
//! A gap the capture lost (the sender's data resumes beyond what was seen, or the receiver
//! acknowledges bytes never seen) is nobody's stall: the sender was busy, the capture missed it.
//!
//! A stall costs the gap minus the one round trip a healthy transfer would have spent there.

use super::{rtt_ns, MS};
use crate::slots::{Extras, Part};
use tcpwhy_track::{At, Connection, SegmentEvent, Side, Ts};
use tcpwhy_wire::Seq;

/// The floor of the stall threshold: a capture of a sub-millisecond path would otherwise call
/// every scheduling hiccup a stall. 30 ms is below the shortest delayed-ACK timer (40 ms).
pub const FLOOR_NS: i64 = 30 * MS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallClass {
    Retransmission,
    ZeroWindow,
    ReceiveWindow,
    DelayedAck,
    AckDelay,
    SenderLimited,
}

impl StallClass {
    pub const ALL: [StallClass; 6] = [
        StallClass::Retransmission,
        StallClass::ZeroWindow,
        StallClass::ReceiveWindow,
        StallClass::DelayedAck,
        StallClass::AckDelay,
        StallClass::SenderLimited,
    ];
    pub fn name(self) -> &'static str {
        match self {
            StallClass::Retransmission => "retransmission",
            StallClass::ZeroWindow => "zero-window",
            StallClass::ReceiveWindow => "receive-window",
            StallClass::DelayedAck => "delayed-ack",
            StallClass::AckDelay => "ack-delay",
            StallClass::SenderLimited => "sender-limited",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stall {
    pub connection: u64,
    /// The side sending the data that stalled.
    pub sender: Side,
    /// The last progress before the gap, and the event that ended it.
    pub start: At,
    pub end: At,
    pub gap_ns: i64,
    /// The gap minus one round trip (what a healthy transfer would have spent).
    pub cost_ns: i64,
    pub class: StallClass,
    /// Bytes sent but not acknowledged when the gap began.
    pub in_flight: u64,
    /// The receiver's last advertised window (scaled) when the gap began.
    pub window: Option<u32>,
    /// The sender's new bytes in this run before the gap.
    pub run_bytes: u64,
    /// The run answers the peer's data (a response), rather than a stream of its own.
    pub responding: bool,
    /// When the sender last retransmitted anything before the gap ended (capture time).
    pub last_retransmission_ns: Option<i64>,
    /// The payload of the segment that ended the gap (0 for an ACK).
    pub resumed_bytes: u32,
}

#[derive(Default, Debug)]
pub(crate) struct Dir {
    /// The sender's new bytes in this run (saturating: compared with the MSS and shown).
    run_bytes: u32,
    /// The TSval of the receiver's last ACK that acknowledged new data (0: none, or no
    /// timestamps): a sender's data that echoes an older one left before that ACK reached it.
    ack_tsval: u32,
    last_progress: Option<At>,
    /// The sender's next sequence number, the highest ACK from the receiver and the receiver's
    /// window, each valid once its flag is set (as Options they took 8 bytes more per
    /// direction of every connection): read them through `snd_nxt()`, `snd_una()`,
    /// `window()`.
    snd_nxt_v: Seq,
    snd_una_v: Seq,
    window_v: u32,
    /// The last new segment's length, saturating: it is only compared with the MSS, which
    /// a 16-bit number holds, so the comparison gives what the full length would.
    last_len: u16,
    /// `ACTIVE`, `HAS_NXT`, `HAS_UNA`, `HAS_WINDOW`, `ZERO_SEEN`, `PEER_DATA`, `RESPONDING`,
    /// `SMALL_SEEN`
    /// (as seven bools, with the length as 32 bits, each direction took 8 bytes more).
    flags: u8,
    // When the sender last retransmitted is a part of the connection's `Extra` (`LastRetx`):
    // most directions never retransmit, and inline it would be 8 bytes of every direction.
}

/// When a direction's sender last retransmitted anything (capture time): a part of the
/// connection's `Extra`, written at its first retransmission.
#[derive(Debug)]
pub(crate) struct LastRetx(Ts);

// Bits of `Dir::flags`.
/// The sender has sent data since the peer last did.
const ACTIVE: u8 = 1;
const HAS_NXT: u8 = 2;
const HAS_UNA: u8 = 4;
const HAS_WINDOW: u8 = 8;
/// The receiver advertised a zero window since the last progress.
const ZERO_SEEN: u8 = 16;
/// The receiver advertised a window below one segment (of the sender's MSS) since the last
/// progress.
const SMALL_SEEN: u8 = 128;
/// The peer has sent data on this connection.
const PEER_DATA: u8 = 32;
/// This run began after the peer sent data (it answers it).
const RESPONDING: u8 = 64;

enum Resume {
    NewData,
    Retransmission,
    Ack,
}

/// Where the model keeps a connection's transfers: each direction's `Dir` (a slot marked when
/// looked at) and the connection's rare parts, where `LastRetx` lives.
/// `detectors::ConnState` is the one implementation.
pub(crate) trait Place {
    /// The holder of the connection's rare parts.
    type Extra: Default;
    /// The direction sent by `side` (marked looked at), and the rare parts.
    fn stall(&mut self, side: Side) -> (&mut Dir, &mut Extras<Self::Extra>);
    /// The connection is finished: both directions emptied, their marks cleared.
    fn stall_done(&mut self);
}

/// Follows every connection's transfers, both directions.
#[derive(Default)]
pub(crate) struct Stalls;

impl Stalls {
    #[inline(always)]
    pub fn segment<P: Place>(
        &mut self,
        cs: &mut P,
        c: &Connection,
        ev: &SegmentEvent<'_>,
        out: &mut Vec<Stall>,
    ) where
        LastRetx: Part<P::Extra>,
    {
        let seg = ev.seg;
        if seg.flags.syn() || seg.flags.rst() {
            return;
        }
        // As the sender of its own data.
        if seg.payload_len > 0 {
            let (d, extra) = cs.stall(ev.from);
            let end = seg.seq + seg.payload_len;
            if !d.is(ACTIVE) {
                let peer_data = d.is(PEER_DATA);
                *d = Dir {
                    snd_una_v: d.snd_una().unwrap_or(seg.seq),
                    window_v: d.window_v,
                    flags: ACTIVE
                        | HAS_UNA
                        | (d.flags & HAS_WINDOW)
                        | if peer_data { PEER_DATA | RESPONDING } else { 0 },
                    ..Dir::default()
                };
            } else if d.snd_nxt().is_some_and(|n| seg.seq > n) {
                // Data beyond what the capture saw sent: the sender was not silent, the
                // capture missed its packets (a gap the capture lost is nobody's pause).
                d.last_progress = Some(ev.at);
            } else if ev.new_data || ev.retransmission {
                let how = if ev.new_data && !ev.retransmission {
                    Resume::NewData
                } else {
                    Resume::Retransmission
                };
                d.check(extra, c, ev.from, ev.from, ev, how, out);
            }
            if ev.retransmission {
                extra.set(ev.from, LastRetx(ev.at.into()));
            }
            if ev.new_data {
                d.run_bytes = d.run_bytes.saturating_add(seg.payload_len);
                d.last_progress = Some(ev.at);
                d.flags &= !(ZERO_SEEN | SMALL_SEEN);
                d.last_len = u16::try_from(seg.payload_len).unwrap_or(u16::MAX);
                if d.snd_nxt().is_none_or(|n| end > n) {
                    d.snd_nxt_v = end;
                    d.flags |= HAS_NXT;
                }
            }
        }
        // As the receiver of the other side's data.
        let peer = ev.from.other();
        let spoke = seg.payload_len > 0;
        // The tracker has accounted this segment: its window, scaled when scaling is on.
        let window = c.endpoint(ev.from).window_scaled();
        let (d, extra) = cs.stall(peer);
        if spoke {
            // The peer's turn: the run of `peer` is over (request/response).
            d.flags = (d.flags & !ACTIVE) | PEER_DATA;
        }
        if seg.flags.ack() {
            let advanced = d.snd_una().is_none_or(|u| seg.ack > u);
            // An ACK for data the capture never saw: the gap before it was the capture's.
            let unseen = d.snd_nxt().is_some_and(|n| seg.ack > n);
            if d.is(ACTIVE) && advanced && !unseen {
                d.check(extra, c, peer, ev.from, ev, Resume::Ack, out);
            }
            if advanced {
                d.snd_una_v = seg.ack;
                d.flags |= HAS_UNA;
                d.ack_tsval = seg.options.timestamp.map_or(0, |(v, _)| v);
                if d.is(ACTIVE) {
                    d.last_progress = Some(ev.at);
                    d.flags &= !(ZERO_SEEN | SMALL_SEEN);
                }
            }
        }
        if let Some(w) = window {
            d.window_v = w;
            d.flags |= HAS_WINDOW;
            if w == 0 {
                d.flags |= ZERO_SEEN;
            } else if w < u32::from(c.endpoint(ev.from).mss().unwrap_or(536)) {
                d.flags |= SMALL_SEEN;
            }
        }
    }

    pub fn finished<P: Place>(&mut self, cs: &mut P) {
        cs.stall_done();
    }
}

impl Dir {
    #[inline]
    fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn snd_nxt(&self) -> Option<Seq> {
        self.is(HAS_NXT).then_some(self.snd_nxt_v)
    }

    fn snd_una(&self) -> Option<Seq> {
        self.is(HAS_UNA).then_some(self.snd_una_v)
    }

    fn window(&self) -> Option<u32> {
        self.is(HAS_WINDOW).then_some(self.window_v)
    }

    /// Whether `ev`'s segment echoes a TSval sent before that of the receiver's last ACK of new
    /// data (serial arithmetic, RFC 7323 section 5.2).
    fn echoes_older_ack(&self, ev: &SegmentEvent<'_>) -> bool {
        self.ack_tsval != 0
            && ev
                .seg
                .options
                .timestamp
                .is_some_and(|(_, ecr)| ecr != 0 && (ecr.wrapping_sub(self.ack_tsval) as i32) < 0)
    }

    fn in_flight(&self) -> u64 {
        match (self.snd_nxt(), self.snd_una()) {
            (Some(n), Some(u)) if n > u => u64::from(n.diff(u).unsigned_abs()),
            _ => 0,
        }
    }

    /// A gap since the last progress longer than the threshold, max(2 x RTT, `FLOOR_NS`), is
    /// a stall of `sender`'s data (the MSS the classes compare with is `mss_of`'s, the side
    /// of the segment at hand; `extra`, the connection's, says when `sender` last
    /// retransmitted). The round trip and the MSS are looked up only for a gap past the
    /// floor: most segments come sooner.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn check<E: Default>(
        &mut self,
        extra: &Extras<E>,
        c: &Connection,
        sender: Side,
        mss_of: Side,
        ev: &SegmentEvent<'_>,
        how: Resume,
        out: &mut Vec<Stall>,
    ) where
        LastRetx: Part<E>,
    {
        let now = ev.at;
        let Some(lp) = self.last_progress else { return };
        let gap = now.ts_ns - lp.ts_ns;
        if gap <= FLOOR_NS {
            return;
        }
        let rtt = rtt_ns(c).unwrap_or(0);
        if gap <= 2 * rtt {
            return;
        }
        let mss = u64::from(c.endpoint(mss_of).mss().unwrap_or(536));
        let in_flight = self.in_flight();
        let class = match how {
            Resume::Retransmission => StallClass::Retransmission,
            _ if self.is(ZERO_SEEN) || self.window() == Some(0) => StallClass::ZeroWindow,
            _ if self.is(SMALL_SEEN) => StallClass::ReceiveWindow,
            // Nothing in flight at the capture point, but the data that resumed echoes an ACK
            // older than the one that acknowledged everything: that ACK had not reached the
            // sender, which still had data in flight and sent as the older ACKs came (a queue
            // on the way back holding them, seen near the receiver), so the sender was waiting
            // for ACKs, not for its application.
            Resume::NewData if in_flight == 0 && self.echoes_older_ack(ev) => StallClass::AckDelay,
            Resume::NewData if in_flight == 0 => StallClass::SenderLimited,
            _ if in_flight == 0 => return, // an ACK of nothing: not a transfer
            _ if self
                .window()
                .map(u64::from)
                .is_some_and(|w| in_flight + mss > w && 2 * in_flight >= w) =>
            {
                StallClass::ReceiveWindow
            }
            Resume::Ack if u64::from(self.last_len) < mss && in_flight < mss => {
                StallClass::DelayedAck
            }
            _ => StallClass::AckDelay,
        };
        out.push(Stall {
            connection: c.id(),
            sender,
            start: lp,
            end: now,
            gap_ns: gap,
            cost_ns: (gap - rtt).max(0),
            class,
            in_flight,
            window: self.window(),
            run_bytes: u64::from(self.run_bytes),
            responding: self.is(RESPONDING),
            last_retransmission_ns: extra.peek::<LastRetx>(sender).and_then(|t| t.0.get()),
            resumed_bytes: match how {
                Resume::Ack => 0,
                _ => ev.seg.payload_len,
            },
        });
        // The stall is over: the next one is measured from here.
        self.last_progress = Some(now);
        self.flags &= !(ZERO_SEEN | SMALL_SEEN);
    }
}
