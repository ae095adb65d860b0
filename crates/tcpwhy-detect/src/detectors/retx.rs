//! Shared bookkeeping of `rto-retransmission` and `fast-retransmit`: when each segment was
//! first sent, and what the peer's ACKs said before a retransmission.

use std::collections::VecDeque;
use tcpwhy_track::{At, Connection, SegmentEvent, Side};
use tcpwhy_wire::Seq;

/// Segments remembered per sender (the newest); older ones age out.
const RING: usize = 128;

#[derive(Default, Debug)]
pub(crate) struct Sender {
    sent: VecDeque<(Seq, Seq, At)>,
    /// The peer's highest ACK, duplicate ACKs since it advanced, SACK seen since.
    last_ack: Option<Seq>,
    dupacks: u32,
    sacked: bool,
    /// The last retransmitted sequence and how often it was sent again (backoff).
    last_retx: Option<(Seq, u32)>,
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

impl Sender {
    /// Feed an event seen from `me`'s side of the connection; returns the retransmission if
    /// this event is one of `me`'s.
    pub fn on_event(&mut self, c: &Connection, me: Side, ev: &SegmentEvent<'_>) -> Option<Retx> {
        let seg = ev.seg;
        if ev.from != me {
            // The peer's ACKs about our data.
            if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() {
                match self.last_ack {
                    Some(a) if seg.ack == a && seg.payload_len == 0 && !seg.flags.fin() => {
                        self.dupacks += 1;
                    }
                    Some(a) if seg.ack <= a => {}
                    _ => {
                        self.last_ack = Some(seg.ack);
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
            if self.sent.len() == RING {
                self.sent.pop_front();
            }
            self.sent.push_back((start, end, ev.at));
            return None;
        }
        if !ev.retransmission {
            return None;
        }
        let original = self
            .sent
            .iter()
            .rev()
            .find(|(a, b, _)| *a <= start && start < *b)
            .map(|x| x.2);
        let attempt = match self.last_retx {
            Some((s, n)) if s == start => n + 1,
            _ => 1,
        };
        self.last_retx = Some((start, attempt));
        let highest = c.endpoint(me).next_seq.unwrap_or(end);
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
        .flat_map(|r| r.original.map(|o| o.frame).into_iter().chain([r.at.frame]))
        .collect();
    frames.sort_unstable();
    frames.dedup();
    frames
}
