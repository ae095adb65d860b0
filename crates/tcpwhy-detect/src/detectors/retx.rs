//! Retransmissions, classified once for `rto-retransmission`, `fast-retransmit` and
//! `spurious-retransmission`: when each segment was first sent, what the peer's ACKs said
//! before it was sent again, and whether the peer had it already.
//!
//! - fast: the first resend of a range within a round trip and a half of the ACK that
//!   announced the loss (the third duplicate ACK, a SACK block, or a partial ACK during fast
//!   recovery); that bounds the time between that ACK at the capture point and the resend
//!   there, from any vantage point;
//! - timeout: any other resend, every resend of a range resent before (backoff), and the
//!   resends that partial ACKs release after a timeout until everything outstanding then is
//!   acknowledged (the timeout's recovery);
//! - spurious: the peer had the data: acknowledged at the capture point before the resend,
//!   reported twice by a D-SACK (RFC 2883), or, captured at the resending side of a path of
//!   2 ms or more, acknowledged sooner than half a round trip after the resend (no ACK of the
//!   resend can come back that soon: the ACK answered the original, delayed or reordered;
//!   Eifel's reasoning, RFC 3522, from timing; on a shorter path or loopback the hosts'
//!   scheduling outweighs the path). Not loss;
//! - a resend of a segment lost before the capture point (the tracker's judgement,
//!   `SegmentEvent::lost_wait_ns`: a hole filled late, or an IPv4 ID skipped before a lost
//!   tail's resend), timed from when the capture last saw the original's flight;
//! - data resent after a SYN-ACK that did not accept it in the SYN (TCP Fast Open fallback)
//!   is not loss either, and is not counted;
//! - nor is data sent again less than 2 ms after its previous send (or, that send unseen, after
//!   the sender's latest segment) with no ACK releasing it: no timer fires that soon
//!   (`TIMER_MIN_NS`), so it is a copy of one write, overlapping segments a tool wrote, or a
//!   clock that stepped back; nor data in a SYN sent again (a handshake retry, named by the
//!   handshake detectors).

use super::accept_queue_full;
use super::fast_retransmit::{self, FastRetransmits};
use super::rto_retransmission::{self, Timeouts};
use super::spurious_retransmission::{self, Spurious};
use super::resend::Retx;
use super::{rtt_ns, ConnState, Recycle, MS, TIMER_MIN_NS};
use crate::{Detector, Finding, Info};
use std::collections::VecDeque;
use tcpwhy_track::{At, Connection, SegmentEvent, Side, Vantage};
use tcpwhy_wire::Seq;

/// A direction's retransmissions: a part of the connection's `Extra` (most connections
/// retransmit nothing, and every open one holds a State per side). Each waits in `list` to be
/// classified, so that a D-SACK that comes after it can still call it spurious: when the
/// connection ends, or when `LIST` of them wait (a D-SACK comes within a round trip or two
/// of the resend; a list that fills sooner is classified with what is known then).
#[derive(Default, Debug)]
pub(crate) struct Losses {
    /// The server's SYN-ACK sent again after the client had acknowledged it (the first such):
    /// its accept queue was full (`accept-queue-full`).
    synack_again: Option<At>,
    synacks_again: u32,
    list: Vec<Retx>,
    /// Ranges the peer reported receiving twice (D-SACK), at most `LIST`.
    dsacked: Vec<(Seq, Seq)>,
    /// The first `judged` of `list` have met the first ACK covering them.
    judged: usize,
    fast: FastRetransmits,
    timeouts: Timeouts,
    spurious: Spurious,
    /// The waits already counted, by either class.
    covered: Covered,
    /// Data this sender sent past the peer's window: from the lowest edge overrun to the end
    /// of the furthest such segment.
    overrun: Option<(Seq, Seq)>,
}

/// Retransmissions waiting to be classified, per direction.
const LIST: usize = 256;

impl Losses {
    fn add(&mut self, r: Retx) {
        if self.list.len() == LIST {
            self.classify_waiting();
        }
        self.list.push(r);
    }

    fn dsack(&mut self, block: (Seq, Seq)) {
        if self.dsacked.len() < LIST && !self.dsacked.contains(&block) {
            self.dsacked.push(block);
        }
    }

    /// The peer's ACK `ack` at `now`, echoing `tsecr`: the waiting resends it covers for the
    /// first time (in the order they were sent, up to the first it does not cover) are
    /// spurious if, seen at this sender's side of the path, it came less than `soon` after
    /// them, or if it echoes a timestamp sent before them (RFC 3522: a receiver echoes the
    /// TSval of the segment that filled its sequence space up to the ACK, so an older echo
    /// means the original did; Linux undoes a timeout on the same test).
    fn acked(&mut self, ack: Seq, now: i64, soon: Option<i64>, tsecr: Option<u32>) {
        while let Some(r) = self.list.get_mut(self.judged) {
            if ack < r.end {
                break;
            }
            if !r.spurious {
                if soon.is_some_and(|s| now - r.at.ts_ns < s) {
                    r.spurious = true;
                    r.acked_too_soon = true;
                } else if let (Some(echo), Some(sent)) = (tsecr.filter(|e| *e != 0), r.tsval) {
                    // Serial arithmetic: the echo is older than the resend's stamp.
                    if (sent.wrapping_sub(echo) as i32) > 0 {
                        r.spurious = true;
                        r.echoed_original = true;
                    }
                }
            }
            self.judged += 1;
        }
    }

    /// Every waiting retransmission into its class, in the order they were sent.
    fn classify_waiting(&mut self) {
        self.judged = 0;
        for mut r in self.list.drain(..) {
            if self.dsacked.iter().any(|&(a, b)| a < r.end && r.start < b) {
                r.spurious = true;
                r.dsack = true;
            }
            if r.spurious {
                self.spurious.add(r);
                continue;
            }
            // One union of waits for both classes: a moment of a sender's loss counts once,
            // in the finding of the resend that ended it first.
            let added = self.covered.add(r.from_ns, r.at.ts_ns);
            if r.fast {
                self.fast.add(r, added);
            } else {
                self.timeouts.add(r, added);
            }
        }
    }

    /// The classes, once the connection ended.
    fn classify(mut self) -> (FastRetransmits, Timeouts, Spurious) {
        self.classify_waiting();
        (self.fast, self.timeouts, self.spurious)
    }
}

impl Recycle for State {
    fn recycle(&mut self) {
        let mut sent = std::mem::take(&mut self.sent);
        sent.clear();
        *self = State::default();
        self.sent = sent;
    }
}

/// A sent segment: its sequence range and when it was sent.
type SentSeg = (Seq, Seq, At);

/// The segments a sender sent, newest last, at most `RING`: the first inline (most senders,
/// a request or a small response, have one segment at a time in a connection), more in a
/// queue allocated at the second (one segment cost a 24-byte allocation per direction of
/// every connection). A queue the slot kept from an earlier connection is used from the start.
#[derive(Default, Debug)]
struct Sent {
    one: Option<SentSeg>,
    /// Boxed on purpose: 8 bytes inline instead of a queue's 32.
    #[allow(clippy::box_collection)]
    more: Option<Box<VecDeque<SentSeg>>>,
}

impl Sent {
    /// Empty, keeping the queue for the slot's next connection unless a bulk sender grew it
    /// past `KEEP_SENT` (then it is given back).
    fn clear(&mut self) {
        self.one = None;
        self.more = self.more.take().filter(|m| m.capacity() <= KEEP_SENT);
        if let Some(m) = &mut self.more {
            m.clear();
        }
    }

    fn push(&mut self, s: SentSeg) {
        match (&mut self.more, self.one) {
            (Some(m), _) => {
                if m.len() == RING {
                    m.pop_front();
                }
                m.push_back(s);
            }
            (None, None) => self.one = Some(s),
            (None, Some(first)) => {
                self.more = Some(Box::new(VecDeque::from([first, s])));
                self.one = None;
            }
        }
    }

    /// The newest segment containing `seq`.
    fn find(&self, seq: Seq) -> Option<SentSeg> {
        let hit = |&(a, b, _): &SentSeg| a <= seq && seq < b;
        match &self.more {
            Some(m) => m.iter().rev().copied().find(hit),
            None => self.one.filter(hit),
        }
    }

    /// When the newest segment was sent (the sender's latest data the capture saw).
    fn newest(&self) -> Option<At> {
        match &self.more {
            Some(m) => m.back().map(|s| s.2),
            None => self.one.map(|s| s.2),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.more
            .as_ref()
            .map_or(usize::from(self.one.is_some()), |m| m.len())
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.more.as_ref().map_or(0, |m| m.capacity())
    }
}

/// Sent segments whose buffer a slot keeps for its next connection (a bulk sender's full
/// ring is given back).
const KEEP_SENT: usize = 16;

/// The detector behind the three ids: one pass over the segments, one ring per sender.
pub struct Retransmissions {
    fast_on: bool,
    timeouts_on: bool,
    spurious_on: bool,
    accept_on: bool,
}

impl Default for Retransmissions {
    fn default() -> Self {
        Retransmissions {
            fast_on: true,
            timeouts_on: true,
            spurious_on: true,
            accept_on: true,
        }
    }
}

impl Detector for Retransmissions {
    fn info(&self) -> &'static Info {
        &rto_retransmission::INFO
    }

    fn also(&self) -> &'static [&'static Info] {
        static ALSO: [&Info; 3] = [
            &fast_retransmit::INFO,
            &spurious_retransmission::INFO,
            &accept_queue_full::INFO,
        ];
        &ALSO
    }

    fn disable(&mut self, id: &str) {
        if id == fast_retransmit::INFO.id {
            self.fast_on = false;
        } else if id == rto_retransmission::INFO.id {
            self.timeouts_on = false;
        } else if id == spurious_retransmission::INFO.id {
            self.spurious_on = false;
        } else if id == accept_queue_full::INFO.id {
            self.accept_on = false;
        }
    }

    #[inline(always)]
    fn segment(
        &mut self,
        cs: &mut ConnState,
        c: &Connection,
        ev: &SegmentEvent<'_>,
        _out: &mut Vec<Finding>,
    ) {
        // The sender's own segments, and the peer's ACKs about them.
        for side in [ev.from, ev.from.other()] {
            let st = cs.retx.get(&mut cs.used, side);
            match st.on_event(c, side, ev) {
                Some(Event::Retx(mut r)) => {
                    let l = cs.extra.get::<Losses>(side);
                    r.beyond_window = l.overrun.is_some_and(|(a, b)| r.end > a && r.start < b);
                    l.add(r);
                }
                Some(Event::Overrun(a, b)) => {
                    let l = cs.extra.get::<Losses>(side);
                    l.overrun = Some(match l.overrun {
                        Some((from, to)) => (from.min(a), to.max(b)),
                        None => (a, b),
                    });
                }
                Some(Event::Dsack(block)) => {
                    if let Some(l) = cs.extra.peek_mut::<Losses>(side) {
                        l.dsack(block);
                    }
                }
                Some(Event::SynAckAgain(at)) => {
                    let l = cs.extra.get::<Losses>(side);
                    l.synack_again.get_or_insert(at);
                    l.synacks_again += 1;
                }
                None => {}
            }
            // The peer's ACK, captured at this sender's side of the path.
            if side != ev.from && ev.seg.flags.ack() {
                let Some(l) = cs.extra.peek_mut::<Losses>(side) else {
                    continue;
                };
                if l.judged == l.list.len() {
                    continue;
                }
                let near = match c.vantage() {
                    Vantage::NearServer => side == Side::Server,
                    Vantage::NearClient => side == Side::Client,
                    Vantage::Local | Vantage::Middle | Vantage::Unknown => false,
                };
                // The shortest round trip seen: the handshake's, or a data sample of this
                // sender's, as the capture at its side measures it (a late SYN-ACK makes the
                // handshake's too long). Under 2 ms (a LAN, loopback) the host's scheduling
                // outweighs the path. The timestamp echo needs no vantage.
                let soon = near
                    .then(|| {
                        let samples = &c.endpoint(side).ack_rtt;
                        let data = (samples.count() > 0).then_some(samples.min_ns);
                        rtt_ns(c).into_iter().chain(data).min()
                    })
                    .flatten()
                    .filter(|r| *r >= 2 * MS)
                    .map(|r| r / 2);
                let tsecr = ev.seg.options.timestamp.map(|(_, echo)| echo);
                if soon.is_some() || tsecr.is_some() {
                    l.acked(ev.seg.ack, ev.at.ts_ns, soon, tsecr);
                }
            }
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            if cs.retx.finish(&mut cs.used, side).is_none() {
                continue;
            }
            let Some(l) = cs.extra.take::<Losses>(side) else {
                continue;
            };
            let synack_again = l.synack_again.map(|a| (a, l.synacks_again));
            // The resends the server's host dropped with the handshake's ACK: those sent while
            // it had acknowledged nothing of the client's data. A resend after it took some
            // (a later segment lost on the path) is the path's.
            let queue_resends = l.list.iter().filter(|r| r.peer_silent).count();
            // The client's first data resent again and again while the server, its handshake
            // completed at the client, sent nothing at all, until it took a resend: dropped by
            // the server's host (its accept queue full) until the application accepted, not by
            // the path (a lost segment's resends get through long before a third try; on
            // loopback, where no path loses anything, one resend tells). A server that never
            // takes the data (silent until the client gives up, or closing without having
            // acknowledged a byte: its application had accepted the socket) shows a path
            // that drops the connection's data, which the timeout findings name. A SYN-ACK
            // sent again makes the queue certain.
            let loopback = c.client.addr.is_loopback() && c.server.addr.is_loopback();
            let took_data = match (c.server.max_ack(), c.client.isn()) {
                (Some(a), Some(isn)) => a > isn + 1,
                _ => false,
            };
            let silent_server = side == Side::Client
                && c.handshake.ack.is_some()
                && took_data
                && l.list.len() >= if loopback { 1 } else { 2 }
                && l.list.iter().all(|r| r.peer_silent);
            let accept = self.accept_on
                && side == Side::Client
                && queue_resends > 0
                && (synack_again.is_some() || silent_server);
            let (fast, timeouts, spurious) = if accept {
                let (queue, path): (Vec<Retx>, Vec<Retx>) =
                    l.list.iter().partition(|r| r.peer_silent);
                let q = Losses {
                    list: queue,
                    dsacked: l.dsacked.clone(),
                    ..Losses::default()
                };
                let mut rest = l;
                rest.list = path;
                let (qf, qt, qs) = q.classify();
                accept_queue_full::report(c, synack_again, &qf, &qt, out);
                let (fast, timeouts, mut spurious) = rest.classify();
                spurious.merge(qs);
                (fast, timeouts, spurious)
            } else {
                l.classify()
            };
            if self.timeouts_on {
                timeouts.report(c, side, out);
            }
            if self.fast_on {
                fast.report(c, side, out);
            }
            if self.spurious_on {
                spurious.report(c, side, out);
            }
        }
    }
}

/// Segments remembered per sender (the newest); older ones age out.
const RING: usize = 128;


/// One sender's segments and what the peer's ACKs said about them (its retransmissions are
/// the connection's `Losses`). 48 bytes: times and counts are as narrow as their use allows.
#[derive(Default, Debug)]
pub(crate) struct State {
    sent: Sent,
    /// The peer's highest ACK (valid under `ACKED`).
    last_ack: Seq,
    /// When the latest ACK that announced a loss came (the third duplicate, a SACK block, a
    /// partial ACK in recovery), in microseconds of capture time modulo 2^32 (valid under
    /// `TRIGGERED`): only compared with a time at most seconds later.
    trigger_us: u32,
    /// The last retransmitted sequence and how often it was sent again (backoff; 0: none
    /// yet; saturating).
    last_retx_seq: Seq,
    last_retx_n: u16,
    /// `ACKED`, `SACKED` (SACK seen since the ACK last advanced), `RECOVERING` (a fast
    /// retransmit happened and data is still outstanding: a partial ACK announces the next
    /// loss), `TRIGGERED`.
    flags: u8,
    /// Duplicate ACKs since the ACK last advanced (saturating: only "three or more" matters).
    dupacks: u8,
}

const ACKED: u8 = 1;
const SACKED: u8 = 2;
const RECOVERING: u8 = 4;
const TRIGGERED: u8 = 8;
/// The first resend of `last_retx_seq` was fast: the timeouts after it count their backoff
/// from the second resend.
const FIRST_FAST: u8 = 16;
/// A timeout fired and data is still outstanding: the resends that partial ACKs release now
/// are that timeout's recovery (Linux's Loss state), not fast retransmits.
const RTO_RECOVERY: u8 = 32;

/// Capture time in microseconds modulo 2^32, as `State::trigger_us` keeps it.
fn us32(ts_ns: i64) -> u32 {
    (ts_ns / 1000) as u32
}

/// What an event tells a sender's state: one of its retransmissions, or a D-SACK block from
/// its peer.
pub(crate) enum Event {
    Retx(Retx),
    Dsack((Seq, Seq)),
    /// The server's SYN-ACK again after the client acknowledged it (`me` is the client).
    SynAckAgain(At),
    /// New data sent past the peer's window: the part beyond its right edge.
    Overrun(Seq, Seq),
}

impl State {
    fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn trigger(&mut self, at: At) {
        self.trigger_us = us32(at.ts_ns);
        self.flags |= TRIGGERED;
    }

    /// Feed an event seen from `me`'s side of the connection.
    #[inline]
    pub fn on_event(&mut self, c: &Connection, me: Side, ev: &SegmentEvent<'_>) -> Option<Event> {
        let seg = ev.seg;
        if ev.from != me {
            // The same SYN-ACK (the server's ISN): another ISN is another handshake's (a
            // middlebox answering SYNs, a second backend), not the listener sending it again.
            if seg.flags.syn()
                && seg.flags.ack()
                && me == Side::Client
                && c.handshake.ack.is_some_and(|a| a.before(&ev.at))
                && c.server.isn() == Some(seg.seq)
            {
                return Some(Event::SynAckAgain(ev.at));
            }
            // The peer's ACKs about our data.
            if !seg.flags.ack() || seg.flags.syn() || seg.flags.rst() {
                return None;
            }
            match self.is(ACKED).then_some(self.last_ack) {
                Some(a) if seg.ack == a && seg.payload_len == 0 && !seg.flags.fin() => {
                    // From the second duplicate on, each is one the sender's loss detection
                    // acts on (three by RFC 5681; two or one by early retransmit, RFC 5827,
                    // and RACK, RFC 8985, with few segments in flight): a resend within a
                    // round trip of the latest one is recovery, not a timer's.
                    self.dupacks = self.dupacks.saturating_add(1);
                    if self.dupacks >= 2 {
                        self.trigger(ev.at);
                    }
                }
                Some(a) if seg.ack <= a => {}
                _ => {
                    self.last_ack = seg.ack;
                    self.flags = (self.flags | ACKED) & !SACKED;
                    self.dupacks = 0;
                    let outstanding = c.endpoint(me).next_seq().is_some_and(|n| seg.ack < n);
                    if self.is(RECOVERING) && outstanding {
                        // A partial ACK: the next hole is resent at once (RFC 6582).
                        self.trigger(ev.at);
                    } else {
                        self.flags &= !RECOVERING;
                    }
                    if !outstanding {
                        self.flags &= !RTO_RECOVERY;
                    }
                }
            }
            let o = &seg.options;
            if o.sack_count > 0 {
                if o.sack_first.1 <= seg.ack {
                    // A D-SACK: data received twice (RFC 2883 section 4).
                    return Some(Event::Dsack(o.sack_first));
                }
                // Every SACK block reports data past a hole: the latest is what a sender in
                // recovery (SACK on, whether or not the capture saw the handshake agree to
                // it) resends after.
                self.flags |= SACKED;
                self.trigger(ev.at);
            }
            return None;
        }
        if seg.payload_len == 0 {
            return None;
        }
        let start = seg.seq;
        let end = seg.seq + seg.payload_len;
        let rtt = rtt_ns(c);
        // The tracker judged it the resend of a segment lost before the capture point.
        let upstream = ev.lost_wait_ns > 0;
        // New data whose first bytes repeat bytes the receiver had already acknowledged: the
        // sender cut its segments anew (after SACK recovery), nothing was lost again.
        let resegmented =
            ev.new_data && !upstream && c.endpoint(me.other()).max_ack().is_some_and(|a| a > start);
        if ev.new_data && (!ev.retransmission || resegmented) {
            self.sent.push((start, end, ev.at));
            // Past the right edge of the window the peer last advertised (RFC 9293 section
            // 3.8.6: SND.UNA + SND.WND): the receiver drops what has no room, and the resend
            // that follows is not loss on the path. (A receiver that shrinks its window could
            // make data sent before the sender saw it look past the edge; RFC 9293 asks
            // receivers not to.)
            let peer = c.endpoint(me.other());
            if let (Some(ack), Some(win)) = (peer.max_ack(), peer.window_scaled()) {
                let edge = ack + win;
                if end > edge {
                    return Some(Event::Overrun(edge.max(start), end));
                }
            }
            return None;
        }
        if !ev.retransmission {
            return None;
        }
        // A SYN sent again with the data it carries is a retry of the handshake (the handshake
        // detectors name it), not data resent after a timeout. Nor is data resent after the
        // peer reset the connection (a sender that ignored the reset as out of its window
        // resends into a connection nobody holds): nobody waits for it.
        if seg.flags.syn() || c.endpoint(me.other()).rst().is_some() {
            return None;
        }
        let original = if upstream {
            None
        } else {
            self.sent.find(start).map(|x| x.2)
        };
        // Data first sent in the SYN, sent again after a SYN-ACK that did not accept it: TCP
        // Fast Open fell back to a normal handshake; nothing was lost.
        if me == Side::Client && original.is_some() && original == c.syn() {
            return None;
        }
        let attempt = if self.last_retx_n > 0 && self.last_retx_seq == start {
            self.last_retx_n.saturating_add(1)
        } else {
            1
        };
        // The ACK that announced the loss reaches the capture point at most about a round
        // trip before the resend does (at the sender, the resend follows it at once).
        // At the receiver, the resend comes a round trip after the ACK that announced the loss
        // was sent, and a sender may wait a little more (RACK's reordering window): a round trip
        // and a half, far below any retransmission timer (at least RTT + 200 ms).
        let window = rtt.map_or(200 * MS, |r| r + r / 2 + 20 * MS);
        let fast = attempt == 1
            && !self.is(RTO_RECOVERY)
            && self.is(TRIGGERED)
            && i64::from(us32(ev.at.ts_ns).wrapping_sub(self.trigger_us)) * 1000 <= window;
        // Sent again sooner after its previous send than any TCP timer fires, and not released
        // by the peer's ACKs: no timer's resend (two copies of one write, overlapping segments
        // a tool wrote, a clock that stepped back). Not classified: it is no loss.
        // (The original's send when the capture saw it, else the sender's latest send: a timer
        // fires only after the sender has been quiet that long.)
        let previous = match original {
            Some(o) => Some(o),
            None if !upstream => self.sent.newest(),
            None => None,
        };
        if !fast && previous.is_some_and(|o| ev.at.ts_ns - o.ts_ns < TIMER_MIN_NS) {
            return None;
        }
        self.last_retx_seq = start;
        self.last_retx_n = attempt;
        if fast {
            self.flags |= RECOVERING;
        } else {
            self.flags = (self.flags & !RECOVERING) | RTO_RECOVERY;
        }
        if attempt == 1 {
            self.flags = (self.flags & !FIRST_FAST) | if fast { FIRST_FAST } else { 0 };
        }
        // Timeouts of this range before this one: each doubled the timer.
        let backoff = u32::from(attempt) - 1 - u32::from(attempt > 1 && self.is(FIRST_FAST));
        // The next resend of this range waits from this one (a backoff ladder's steps).
        self.sent.push((start, end, ev.at));
        let peer_acked = c.endpoint(me.other()).max_ack();
        let highest = c.endpoint(me).next_seq().unwrap_or(end);
        let from_ns = match original {
            Some(o) => o.ts_ns,
            None if upstream => ev.at.ts_ns - ev.lost_wait_ns,
            None => ev.at.ts_ns,
        };
        Some(Event::Retx(Retx {
            original,
            at: ev.at,
            from_ns,
            start,
            end,
            fast,
            spurious: !upstream && peer_acked.is_some_and(|a| a >= end),
            dsack: false,
            acked_too_soon: false,
            echoed_original: false,
            tsval: seg.options.timestamp.map(|(tsval, _)| tsval),
            upstream,
            by_timing: ev.lost_by_timing,
            tail: end >= highest,
            peer_silent: !self.is(ACKED),
            backoff,
            len: seg.payload_len,
            beyond_window: false,
        }))
    }
}

/// The union of wait intervals (original send -> retransmission), added in order of their
/// ends: the time lost counts each moment once, so it never exceeds the time that passed
/// (found by fuzzing: 37 segments resent after one timeout summed to 16 s in a 3.8 s capture).
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct Covered {
    until: Option<i64>,
}

impl Covered {
    /// Add `[from, to]`; returns the part not covered before.
    pub fn add(&mut self, from: i64, to: i64) -> i64 {
        let start = self.until.map_or(from, |u| from.max(u));
        let added = (to - start).max(0);
        self.until = Some(self.until.map_or(to, |u| u.max(to)));
        added
    }
}

#[cfg(test)]
mod tests {
    use super::super::PerSide;
    use super::{Covered, State};
    use tcpwhy_track::{At, Side};
    use tcpwhy_wire::Seq;

    fn push(st: &mut State, i: u32) {
        let at = At::new(u64::from(i) + 1, i64::from(i));
        st.sent.push((Seq(i * 100), Seq(i * 100 + 100), at));
    }

    #[test]
    fn a_recycled_state_starts_empty_and_keeps_its_buffer() {
        let mut l: PerSide<State, 3> = PerSide::default();
        let side = Side::Server;
        let mut used = 0u32;
        let used = &mut used;
        assert!(
            l.finish(used, side).is_none(),
            "never looked at: nothing to finish"
        );
        for i in 0..10u32 {
            push(l.get(used, side), i);
        }
        l.get(used, side).last_ack = Seq(7);
        l.get(used, side).flags = super::ACKED;
        l.get(used, side).dupacks = 2;
        let cap = {
            let st = l.finish(used, side).expect("looked at");
            assert_eq!(st.sent.len(), 10, "read in place before it is emptied");
            st.sent.capacity()
        };
        assert!(l.finish(used, side).is_none(), "finished once");
        let st = l.get(used, side);
        assert_eq!(st.sent.len(), 0);
        assert!(
            st.flags == 0 && st.dupacks == 0,
            "no fact of the old connection survives"
        );
        assert_eq!(st.sent.capacity(), cap, "the buffer is kept");
        // A bulk sender's full ring is given back rather than kept in the slot.
        for i in 0..100u32 {
            push(l.get(used, side), i);
        }
        drop(l.finish(used, side));
        assert_eq!(l.get(used, side).sent.capacity(), 0);
    }

    proptest::proptest! {
        /// The inline first segment and the queue after it answer like one VecDeque of the
        /// newest RING segments searched newest first, for senders of 1 to 300 segments
        /// (overlapping ranges: a segment sent again with more data), fresh and recycled.
        #[test]
        fn sent_segments_are_found_as_a_bounded_queue_finds_them(
            senders in proptest::collection::vec(
                (
                    100u32..1100,
                    proptest::collection::vec(proptest::bool::ANY, 1..300),
                    proptest::collection::vec(0u32..1 << 20, 200),
                ),
                1..4,
            ),
        ) {
            use super::{Recycle, RING};
            use std::collections::VecDeque;
            let mut st = State::default();
            for (first, overlaps, queries) in senders {
                let mut want: VecDeque<(Seq, Seq, At)> = VecDeque::new();
                let mut next = first;
                for (i, overlap) in overlaps.into_iter().enumerate() {
                    let start = next - u32::from(overlap) * 50;
                    let s = (Seq(start), Seq(start + 100), At::new(i as u64 + 1, 0));
                    next = start + 100;
                    st.sent.push(s);
                    if want.len() == RING {
                        want.pop_front();
                    }
                    want.push_back(s);
                    proptest::prop_assert_eq!(st.sent.len(), want.len());
                }
                for q in queries {
                    let q = Seq(q % (next + 200));
                    let expect = want.iter().rev().find(|(a, b, _)| *a <= q && q < *b);
                    proptest::prop_assert_eq!(st.sent.find(q), expect.copied());
                }
                st.recycle();
                proptest::prop_assert_eq!(st.sent.len(), 0);
            }
        }
    }

    #[test]
    fn overlapping_waits_count_once() {
        let mut c = Covered::default();
        assert_eq!(c.add(0, 10), 10);
        assert_eq!(
            c.add(0, 25),
            15,
            "backoff on the same segment: only the increment"
        );
        assert_eq!(c.add(5, 25), 0, "a segment resent with it: nothing more");
        assert_eq!(c.add(40, 50), 10, "a later, separate wait");
        assert_eq!(c.add(60, 55), 0, "a reversed interval adds nothing");
    }
}
