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
//! **References.** RFC 6298, RFC 8985 (RACK-TLP); tcp-signatures.md section 5.

use super::retx::{evidence, Retx, Sender};
use super::{side_name, PerConn};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use serde_json::json;
use tcpwhy_track::{Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "rto-retransmission",
    title: "retransmission after a timeout (RTO or tail loss probe)",
    doc: include_str!("rto_retransmission.rs"),
};

const KEEP: usize = 8;

#[derive(Default, Debug)]
struct State {
    sender: Sender,
    seen: Vec<Retx>,
    count: u32,
    tail: u32,
    max_attempt: u32,
    total_ns: i64,
    /// The wait already counted for the sequence being retransmitted (backoff: only the
    /// increment of each further attempt adds).
    counted_ns: i64,
}

#[derive(Default)]
pub struct RtoRetransmission {
    conns: PerConn<State>,
}

impl Detector for RtoRetransmission {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>, _out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let st = self.conns.get(c, side);
            if let Some(r) = st.sender.on_event(c, side, ev) {
                if r.fast {
                    continue;
                }
                st.count += 1;
                st.tail += u32::from(r.tail);
                st.max_attempt = st.max_attempt.max(r.attempt);
                let wait = r.original.map_or(0, |o| r.at.ts_ns - o.ts_ns);
                if r.attempt == 1 {
                    st.counted_ns = 0;
                }
                st.total_ns += (wait - st.counted_ns).max(0);
                st.counted_ns = st.counted_ns.max(wait);
                if st.seen.len() < KEEP {
                    st.seen.push(r);
                }
            }
        }
    }

    fn finished(&mut self, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let Some(st) = self.conns.take(c, side) else {
                continue;
            };
            let Some(first) = st.seen.first() else {
                continue;
            };
            let waits: Vec<f64> = st
                .seen
                .iter()
                .filter_map(|r| r.original.map(|o| ms_f(r.at.ts_ns - o.ts_ns)))
                .collect();
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = first.original.map_or(first.at.ts_ns, |o| o.ts_ns);
            f.end_ns = st.seen.last().map_or(first.at.ts_ns, |r| r.at.ts_ns);
            f.cost_ns = st.total_ns;
            f.frames = evidence(&st.seen);
            f.explanation = format!(
                "{} sent data again after a timeout {} times ({} of them the last segment in flight: tail loss{}); waits {} ms; {} lost.",
                side_name(c, side),
                st.count,
                st.tail,
                if st.max_attempt > 1 { format!(", backed off {} times", st.max_attempt - 1) } else { String::new() },
                waits.iter().map(|w| format!("{w:.0}")).collect::<Vec<_>>().join(", "),
                ms(st.total_ns)
            );
            f.fix = "find the loss on the path (interface drops, a policer, a congested queue); for tail loss keep SACK and tail loss probes on (net.ipv4.tcp_sack=1, tcp_early_retrans=3) so recovery takes 2 RTTs rather than an RTO".into();
            f.details = json!({
                "sender": side.name(),
                "retransmissions": st.count,
                "tail": st.tail,
                "max_backoff": st.max_attempt.saturating_sub(1),
                "waits_ms": waits,
                "bytes_first_retransmissions": st.seen.iter().map(|r| u64::from(r.len)).sum::<u64>(),
            });
            out.push(f);
        }
    }
}
