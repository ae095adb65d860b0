//! # sender-limited: the sender paused in the middle of its answer
//!
//! **Signal.** A response (data that follows the peer's request) stops in the middle of a
//! transfer: at least one full segment of it sent, every byte acknowledged, the receiver's
//! window open to at least a segment, nothing retransmitted, and the sender sends nothing
//! until, well beyond a round trip later (at least 50 ms and 4 round trips more), it resumes
//! with new data. TCP was ready; the sender had no data to give it. Classified from the
//! transfer's stalls (gaps without progress, TAPO's "data unavailable").
//!
//! An application's own schedule is not a finding: a sender that pauses again and again (a
//! stream written in pieces, periodic uploads, a person typing) shows its cadence in the
//! pauses themselves. With two pauses or more in a direction, only those at least four times
//! the median pause (the lower middle) are named (a one-off stall in a cadence); a single
//! pause is named. A pause after
//! a message smaller than one segment (a protocol's reply line, a typed line) is the end of a
//! message, not a pause inside a transfer; so is a pause of a second or more followed by a
//! message smaller than a segment (the sender's next message on its own timer: sf23_3's
//! 4-byte poll every 5 s after an upload; a Tor relay's 586-byte cells, nDPI's tor.pcap).
//!
//! A client's pause is `low` confidence: the client is the side that asks, so its data are
//! requests and uploads and a pause between them its own schedule (nDPI's reddit, webex,
//! anydesk-2 and vnc captures: a browser's new requests, a push channel's uploads, a remote
//! desktop's screen changes, a user's pointer; all four checked by hand false). The pause
//! inside one upload that the finding means (the real-world corpus's sf23_3: an IoT device's
//! upload, checked true) cannot be told from those without the application's framing, so it
//! is listed, among the low ones.
//!
//! **Evidence.** The ACK that left nothing in flight (or the last data segment) and the data
//! that resumed, for each pause named. Details: pauses, their lengths, bytes sent before them,
//! the median pause of the direction.
//!
//! **Cost.** Each pause named, less one round trip.
//!
//! **Not made** on one subflow of a Multipath TCP connection (its SYN-ACK or later segments
//! carry the MPTCP option): the application's data may travel on the other subflows, so one
//! subflow's requests, replies and pauses are not the application's.
//!
//! Nor between the peers of BGP, LDP, MSDP or BMP (either side on port 179, 646, 639 or
//! 11019): each peer sends when its own routes, labels or timers change, so no message
//! answers another and a pause owes nothing.
//!
//! **Known false positives.** The wire cannot tell the application from the sender's own
//! stack: a pacing rate collapsed after a loss (BBR after a timeout sends about one segment per
//! RTT-sized interval) or a send buffer drained by a slow producer look the same, and so does a
//! server that streams on its own schedule after a request (long polling, server push). A
//! stream that never follows a request is not checked, nor a pause within 3 s after the sender
//! retransmitted (after a timeout BBR's collapsed bandwidth estimate paces data out slowly:
//! seen in the lab's tail-loss capture, frames 140-142; the retransmission findings own it),
//! nor a pause while the receiver's window was below a segment (that is the receiver's pace:
//! `rwnd-limited`).
//!
//! **References.** Zhou et al., "Demystifying and Mitigating TCP Stalls at the Server Side"
//! (TAPO, CoNEXT 2015); docs/tcp-signatures.md section 7.

use super::{rtt_ns, send_mss, side_name, ConnState, MS};
use crate::finding::{ms, ms_f, Level};
use crate::model::stall::{Stall, StallClass};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{Connection, Side};

pub static INFO: Info = Info {
    id: "sender-limited",
    title: "the sender paused in the middle of its answer (nothing in flight, window open)",
    doc: include_str!("sender_limited.rs"),
};

const MIN_PAUSE: i64 = 50 * MS;

/// Why a client's pause is low confidence.
const CLIENT_PAUSE: &str = "the client is the side that asks: its data are requests and uploads, and a pause between them is its own schedule (a user, a browser finding resources, a remote desktop's screen changes); without the application's framing the capture cannot show a pause inside one upload";
const KEEP: usize = 16;
/// Pause lengths kept per direction for the median (later pauses are not compared).
const LENGTHS: usize = 256;
/// Pauses this soon after the sender's last retransmission may be its pacing, not its data.
const AFTER_LOSS: i64 = 3_000 * MS;
/// A pause at least this many times the direction's median pause stands out of its cadence.
const OUTLIER: i64 = 4;

/// A direction's pauses: a part of the connection's `Extra` (most directions have none).
#[derive(Default, Debug)]
pub(crate) struct State {
    /// The first pauses, for evidence.
    pauses: Vec<Stall>,
    /// Every pause's (gap, cost) in microseconds, the first `LENGTHS`.
    lengths: Vec<(u32, u32)>,
    count: u32,
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
        // A message smaller than a segment before the pause: the end of a message.
        let mss = u64::from(send_mss(c, s.sender));
        if s.run_bytes < mss {
            return;
        }
        // What comes after a second or more is a message smaller than a segment: the
        // sender's next message on its own timer (a device's poll, a Tor cell), not the rest
        // of the transfer.
        if s.gap_ns >= 1_000 * MS && u64::from(s.resumed_bytes) < mss {
            return;
        }
        let st = cs.extra.get::<State>(s.sender);
        st.count += 1;
        if st.lengths.len() < LENGTHS {
            let us = |ns: i64| u32::try_from(ns / 1000).unwrap_or(u32::MAX);
            st.lengths.push((us(s.gap_ns), us(s.cost_ns)));
        }
        if st.pauses.len() < KEEP {
            st.pauses.push(s.clone());
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Server, Side::Client] {
            let Some(st) = cs.extra.take::<State>(side) else {
                continue;
            };
            let mut gaps: Vec<u32> = st.lengths.iter().map(|l| l.0).collect();
            gaps.sort_unstable();
            let median_us = gaps
                .get(gaps.len().saturating_sub(1) / 2)
                .copied()
                .unwrap_or(0);
            // Two pauses or more are a cadence: only those standing out of it count.
            let floor_us = if st.count >= 2 {
                i64::from(median_us) * OUTLIER
            } else {
                0
            };
            let named = |gap_us: i64| gap_us >= floor_us;
            let count = st.lengths.iter().filter(|l| named(i64::from(l.0))).count();
            let total_ns: i64 = st
                .lengths
                .iter()
                .filter(|l| named(i64::from(l.0)))
                .map(|l| i64::from(l.1) * 1000)
                .sum();
            let shown: Vec<&Stall> = st
                .pauses
                .iter()
                .filter(|p| named(p.gap_ns / 1000))
                .collect();
            let (Some(first), Some(last)) = (shown.first(), shown.last()) else {
                continue;
            };
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = first.start.ts_ns;
            f.end_ns = last.end.ts_ns;
            f.cost_ns = total_ns;
            f.frames = shown
                .iter()
                .flat_map(|p| [p.start.frame(), p.end.frame()])
                .collect();
            f.frames.dedup();
            f.explanation = format!(
                "{} paused {} time{} in the middle of its answer with everything acknowledged and the window open (longest {}, {} after {} bytes{}); {} lost waiting for its data, not for TCP.",
                side_name(c, side),
                count,
                if count == 1 { "" } else { "s" },
                ms(shown.iter().map(|p| p.gap_ns).max().unwrap_or(0)),
                if shown.len() > 1 { "the first" } else { "it came" },
                first.run_bytes,
                if st.count >= 2 {
                    format!(
                        "; its {} pauses have a median of {}",
                        st.count,
                        ms(i64::from(median_us) * 1000)
                    )
                } else {
                    String::new()
                },
                ms(total_ns)
            );
            f.fix = format!(
                "find what the {} application waits for between writes (a database, a disk, a lock, a slow producer, logging); if it follows a loss, the sender's pacing (BBR) may be holding the data: check its host with `ss -ti`",
                side.name()
            )
            .into();
            f.details = SenderLimitedDetails {
                all_pauses: st.count,
                bytes_before: shown.iter().map(|p| p.run_bytes).collect::<Vec<_>>(),
                median_pause_ms: ms_f(i64::from(median_us) * 1000),
                pause_ms: shown.iter().map(|p| ms_f(p.gap_ns)).collect::<Vec<_>>(),
                pauses: count,
                sender: side.name(),
            }
            .into();
            if side == Side::Client {
                f.confidence.lower(Level::Low, CLIENT_PAUSE);
            }
            out.push(f);
        }
    }
}

/// sender-limited: the sender's pauses with the window open and data owed.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SenderLimitedDetails {
    pub all_pauses: u32,
    pub bytes_before: Vec<u64>,
    pub median_pause_ms: f64,
    pub pause_ms: Vec<f64>,
    pub pauses: usize,
    pub sender: &'static str,
}
