//! Retransmissions, classified once for `rto-retransmission` and `fast-retransmit`: when each
//! segment was first sent, and what the peer's ACKs said before it was sent again.

use super::fast_retransmit::{self, FastRetransmits};
use super::rto_retransmission::{self, Timeouts};
use super::{ConnState, Recycle};
use crate::{Detector, Finding, Info};
use std::collections::VecDeque;
use tcpwhy_track::{At, Connection, SegmentEvent, Side};
use tcpwhy_wire::Seq;

/// A direction's retransmissions, classified: a part of the connection's `Extra` (most
/// connections retransmit nothing, and every open one holds a State per side).
#[derive(Default, Debug)]
pub(crate) struct Losses {
    fast: FastRetransmits,
    timeouts: Timeouts,
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

/// The detector behind both ids: one pass over the segments, one ring per sender.
pub struct Retransmissions {
    fast_on: bool,
    timeouts_on: bool,
}

impl Default for Retransmissions {
    fn default() -> Self {
        Retransmissions {
            fast_on: true,
            timeouts_on: true,
        }
    }
}

impl Detector for Retransmissions {
    fn info(&self) -> &'static Info {
        &rto_retransmission::INFO
    }

    fn also(&self) -> &'static [&'static Info] {
        static ALSO: [&Info; 1] = [&fast_retransmit::INFO];
        &ALSO
    }

    fn disable(&mut self, id: &str) {
        if id == fast_retransmit::INFO.id {
            self.fast_on = false;
        } else if id == rto_retransmission::INFO.id {
            self.timeouts_on = false;
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
            if let Some(r) = st.on_event(c, side, ev) {
                let l = cs.extra.get::<Losses>(side);
                if r.fast {
                    l.fast.add(r);
                } else {
                    l.timeouts.add(r);
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
            if self.timeouts_on {
                l.timeouts.report(c, side, out);
            }
            if self.fast_on {
                l.fast.report(c, side, out);
            }
        }
    }
}

/// Segments remembered per sender (the newest); older ones age out.
const RING: usize = 128;

/// One sender's segments and what the peer's ACKs said about them (its retransmissions are
/// the connection's `Losses`).
#[derive(Default, Debug)]
pub(crate) struct State {
    sent: Sent,
    /// The peer's highest ACK (once `acked`), duplicate ACKs since it advanced (saturating:
    /// only "three or more" matters; a byte keeps the state a cache line shorter), SACK seen
    /// since.
    last_ack: Seq,
    acked: bool,
    dupacks: u8,
    sacked: bool,
    /// The last retransmitted sequence and how often it was sent again (backoff; 0: none
    /// yet). Without Options: 8 bytes per direction of every connection.
    last_retx: (Seq, u32),
}

/// A retransmission, classified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retx {
    pub original: Option<At>,
    pub at: At,
    /// Three duplicate ACKs or SACK before it.
    pub fast: bool,
    /// It was the last segment sent so far (tail loss).
    pub tail: bool,
    /// How many times this sequence was sent again so far (1 = first retransmission).
    pub attempt: u32,
    pub len: u32,
}

impl State {
    /// Feed an event seen from `me`'s side of the connection; returns the retransmission if
    /// this event is one of `me`'s.
    #[inline]
    pub fn on_event(&mut self, c: &Connection, me: Side, ev: &SegmentEvent<'_>) -> Option<Retx> {
        let seg = ev.seg;
        if ev.from != me {
            // The peer's ACKs about our data.
            if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() {
                match self.acked.then_some(self.last_ack) {
                    Some(a) if seg.ack == a && seg.payload_len == 0 && !seg.flags.fin() => {
                        self.dupacks = self.dupacks.saturating_add(1);
                    }
                    Some(a) if seg.ack <= a => {}
                    _ => {
                        self.last_ack = seg.ack;
                        self.acked = true;
                        self.dupacks = 0;
                        self.sacked = false;
                    }
                }
                if seg.options.sack_count > 0 {
                    self.sacked = true;
                }
            }
            return None;
        }
        if seg.payload_len == 0 {
            return None;
        }
        let start = seg.seq;
        let end = seg.seq + seg.payload_len;
        if ev.new_data && !ev.retransmission {
            self.sent.push((start, end, ev.at));
            return None;
        }
        if !ev.retransmission {
            return None;
        }
        let original = self.sent.find(start).map(|x| x.2);
        let attempt = match self.last_retx {
            (s, n) if n > 0 && s == start => n + 1,
            _ => 1,
        };
        self.last_retx = (start, attempt);
        let highest = c.endpoint(me).next_seq().unwrap_or(end);
        Some(Retx {
            original,
            at: ev.at,
            fast: self.dupacks >= 3 || self.sacked,
            tail: end >= highest,
            attempt,
            len: seg.payload_len,
        })
    }
}

/// Evidence frames of some retransmissions: each original and its retransmission, ascending.
pub(crate) fn evidence(seen: &[Retx]) -> Vec<u64> {
    let mut frames: Vec<u64> = seen
        .iter()
        .flat_map(|r| {
            r.original
                .map(|o| o.frame())
                .into_iter()
                .chain([r.at.frame()])
        })
        .collect();
    frames.sort_unstable();
    frames.dedup();
    frames
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
        l.get(used, side).acked = true;
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
            !st.acked && st.dupacks == 0,
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

    #[test]
    fn sent_segments_are_found_as_a_bounded_queue_finds_them() {
        // The inline first segment and the queue after it answer like one VecDeque of the
        // newest RING segments searched newest first, for senders of 1 to 300 segments
        // (overlapping ranges: a segment sent again with more data), fresh and recycled.
        use super::{Recycle, RING};
        use std::collections::VecDeque;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u32| super::super::xorshift_below(&mut x, u64::from(m)) as u32;
        let mut st = State::default();
        for n in [1u32, 2, 3, 17, 127, 128, 129, 300, 1, 2] {
            let mut want: VecDeque<(Seq, Seq, At)> = VecDeque::new();
            let mut next = 100 + rnd(1000);
            for i in 0..n {
                let start = next - rnd(2) * 50;
                let s = (Seq(start), Seq(start + 100), At::new(u64::from(i) + 1, 0));
                next = start + 100;
                st.sent.push(s);
                if want.len() == RING {
                    want.pop_front();
                }
                want.push_back(s);
                assert_eq!(st.sent.len(), want.len());
            }
            for _ in 0..200 {
                let q = Seq(rnd(next + 200));
                let expect = want.iter().rev().find(|(a, b, _)| *a <= q && q < *b);
                assert_eq!(st.sent.find(q), expect.copied(), "n {n} seq {q:?}");
            }
            st.recycle();
            assert_eq!(st.sent.len(), 0);
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
