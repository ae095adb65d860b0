//! # fast-retransmit: data sent again after duplicate ACKs or SACK
//!
//! **Signal.** A segment is sent again after the peer sent three duplicate ACKs or SACK blocks
//! since its last new ACK: loss detected by the ACK clock, recovered in about one round trip.
//!
//! **Evidence.** The original transmission and the retransmission. Details: how many, and
//! how many of them had first been sent past the right edge of the window the receiver
//! advertised (its last ACK plus its window): when most had, the receiver dropped them for
//! want of room and the fix names the sender that overran the window, not the path.
//!
//! **Cost.** From the original transmission to the retransmission (about one RTT each).
//!
//! **Whose wait.** A sender that closed its side (FIN) after the lost data left and before
//! its resend, and then answered the peer's next packet with a reset (a socket closed for
//! good), waited for nothing after its close: nobody on its side waited for the resends
//! (details `sender_closed_first`, confidence `low`). The same holds for
//! `rto-retransmission`. A sender that only half-closed and later reset a silent peer gave
//! up waiting on its own timer: that wait was real.
//!
//! **Known false positives.** Reordering beyond the duplicate-ACK threshold triggers spurious
//! fast retransmits (D-SACK then shows them).
//!
//! **References.** RFC 5681 section 3.2, RFC 6675, RFC 8985; docs/tcp-signatures.md section 5.

use super::resend::{evidence, sender_closed_first, where_lost, Retx};
use super::side_name;
use crate::finding::ms;
use crate::{Finding, Info};
use tcpwhy_track::{Connection, Side};

pub static INFO: Info = Info {
    id: "fast-retransmit",
    title: "retransmission after duplicate ACKs or SACK (fast retransmit)",
    doc: include_str!("fast_retransmit.rs"),
};

const KEEP: usize = 8;

/// One sender's fast retransmissions (classified once, in `retx::Retransmissions`).
#[derive(Default, Debug)]
pub(super) struct FastRetransmits {
    seen: Vec<Retx>,
    count: u32,
    /// Resends of data first sent past the receiver's advertised window.
    beyond_window: u32,
    total_ns: i64,
    /// The last resend's time (the evidence keeps the first `KEEP`).
    last_ns: i64,
}

impl FastRetransmits {
    /// Add `r`, whose wait adds `added_ns` to what the sender's losses cost so far.
    pub fn add(&mut self, r: Retx, added_ns: i64) {
        self.count += 1;
        self.beyond_window += u32::from(r.beyond_window);
        self.total_ns += added_ns;
        self.last_ns = r.at.ts_ns;
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
        let Some(first) = self.seen.first() else {
            return;
        };
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.from_ns;
        f.end_ns = self.last_ns.max(first.at.ts_ns);
        f.cost_ns = self.total_ns;
        f.frames = evidence(&self.seen);
        // Most of what was resent had first gone past the receiver's window: the receiver
        // dropped it, the path did not.
        let overran = self.beyond_window * 2 > self.count;
        f.explanation = format!(
            "{} resent {} lost segment{} by fast retransmit (after duplicate ACKs or SACK){}; {} lost.",
            side_name(c, side),
            self.count,
            if self.count == 1 { "" } else { "s" },
            if overran {
                format!(
                    ", {} of them first sent past the window the receiver advertised",
                    self.beyond_window
                )
            } else {
                String::new()
            },
            ms(self.total_ns)
        );
        let closed = sender_closed_first(&mut f, c, side, first);
        f.fix = if overran {
            format!(
                "the sender overran the receiver's window and the receiver ({}) dropped what had no room: not loss on the path. Find why the sender ignores the advertised window (its TCP stack, a middlebox rewriting windows or stripping window scaling) or why the receiver's buffer stays full (an application not reading)",
                c.endpoint(side.other()).addr
            )
            .into()
        } else {
            where_lost(c, side, self.seen.iter().any(|r| r.upstream)).into()
        };
        f.details = FastRetransmitDetails {
            beyond_window: self.beyond_window,
            retransmissions: self.count,
            sender: side.name(),
            sender_closed_first: closed,
        }
        .into();
        out.push(f);
    }
}

/// fast-retransmit: the sender, its resends, those first sent past the receiver's window.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FastRetransmitDetails {
    pub beyond_window: u32,
    pub retransmissions: u32,
    pub sender: &'static str,
    /// The sender closed its side before the first resend, then reset the peer's next packet.
    pub sender_closed_first: bool,
}
