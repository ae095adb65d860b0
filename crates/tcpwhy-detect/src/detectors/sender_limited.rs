//! # sender-limited: the sender paused in the middle of its answer
//!
//! **Signal.** A response (data that follows the peer's request) stops in the middle: every
//! byte sent so far is acknowledged, the receiver's window is open, nothing is retransmitted,
//! and the sender sends nothing until, well beyond a round trip later (at least 50 ms and 4
//! round trips more), it resumes with new data. TCP was ready; the sender had no data to give
//! it. Classified from the transfer's stalls (gaps without progress, TAPO's "data
//! unavailable").
//!
//! **Evidence.** The ACK that left nothing in flight (or the last data segment) and the data
//! that resumed, for each pause. Details: pauses, their lengths, bytes sent before them.
//!
//! **Cost.** Each pause less one round trip.
//!
//! **Known false positives.** The wire cannot tell the application from the sender's own
//! stack: a pacing rate collapsed after a loss (BBR after a timeout sends about one segment per
//! RTT-sized interval) or a send buffer drained by a slow producer look the same, and so does a
//! server that streams on its own schedule after a request (long polling, server push). A
//! stream that never follows a request is not checked, nor a pause within 3 s after the sender
//! retransmitted (after a timeout BBR's collapsed bandwidth estimate paces data out slowly:
//! seen in the lab's tail-loss capture, frames 140-142; the retransmission findings own it).
//!
//! **References.** Zhou et al., "Demystifying and Mitigating TCP Stalls at the Server Side"
//! (TAPO, CoNEXT 2015); tcp-signatures.md section 7.

use super::{rtt_ns, side_name, ConnState, MS};
use crate::finding::{ms, ms_f};
use crate::stall::{Stall, StallClass};
use crate::{Detector, Finding, Info};
use serde_json::json;
use tcpwhy_track::{Connection, Side};

pub static INFO: Info = Info {
    id: "sender-limited",
    title: "the sender paused in the middle of its answer (nothing in flight, window open)",
    doc: include_str!("sender_limited.rs"),
};

const MIN_PAUSE: i64 = 50 * MS;
const KEEP: usize = 16;
/// Pauses this soon after the sender's last retransmission may be its pacing, not its data.
const AFTER_LOSS: i64 = 3_000 * MS;

/// A direction's pauses: a part of the connection's `Extra` (most directions have none).
#[derive(Default, Debug)]
pub(crate) struct State {
    pauses: Vec<Stall>,
    count: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct SenderLimited {}

impl Detector for SenderLimited {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn stall(&mut self, cs: &mut ConnState, c: &Connection, s: &Stall, _out: &mut Vec<Finding>) {
        let rtt = rtt_ns(c).unwrap_or(0);
        if s.class != StallClass::SenderLimited
            || !s.responding
            || s.cost_ns < MIN_PAUSE
            || s.cost_ns < 4 * rtt
            || s.last_retransmission_ns
                .is_some_and(|t| s.end.ts_ns - t < AFTER_LOSS)
        {
            return;
        }
        let st = cs.extra.get::<State>(s.sender);
        st.count += 1;
        st.total_ns += s.cost_ns;
        if st.pauses.len() < KEEP {
            st.pauses.push(s.clone());
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Server, Side::Client] {
            let Some(st) = cs.extra.take::<State>(side) else {
                continue;
            };
            let (Some(first), Some(last)) = (st.pauses.first(), st.pauses.last()) else {
                continue;
            };
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = first.start.ts_ns;
            f.end_ns = last.end.ts_ns;
            f.cost_ns = st.total_ns;
            f.frames = st
                .pauses
                .iter()
                .flat_map(|p| [p.start.frame(), p.end.frame()])
                .collect();
            f.frames.dedup();
            f.explanation = format!(
                "{} paused {} time{} in the middle of its answer with everything acknowledged and the window open (longest {}, {} after {} bytes); {} lost waiting for its data, not for TCP.",
                side_name(c, side),
                st.count,
                if st.count == 1 { "" } else { "s" },
                ms(st.pauses.iter().map(|p| p.gap_ns).max().unwrap_or(0)),
                if st.pauses.len() > 1 { "the first" } else { "it came" },
                first.run_bytes,
                ms(st.total_ns)
            );
            f.fix = format!(
                "find what the {} application waits for between writes (a database, a disk, a lock, a slow producer, logging); if it follows a loss, the sender's pacing (BBR) may be holding the data: check its host with `ss -ti`",
                side.name()
            )
            .into();
            f.details = json!({
                "sender": side.name(),
                "pauses": st.count,
                "pause_ms": st.pauses.iter().map(|p| ms_f(p.gap_ns)).collect::<Vec<_>>(),
                "bytes_before": st.pauses.iter().map(|p| p.run_bytes).collect::<Vec<_>>(),
            });
            out.push(f);
        }
    }
}
