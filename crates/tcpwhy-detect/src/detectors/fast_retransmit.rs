//! # fast-retransmit: data sent again after duplicate ACKs or SACK
//!
//! **Signal.** A segment is sent again after the peer sent three duplicate ACKs or SACK blocks
//! since its last new ACK: loss detected by the ACK clock, recovered in about one round trip.
//!
//! **Evidence.** The original transmission and the retransmission. Details: how many.
//!
//! **Cost.** From the original transmission to the retransmission (about one RTT each).
//!
//! **Known false positives.** Reordering beyond the duplicate-ACK threshold triggers spurious
//! fast retransmits (D-SACK then shows them).
//!
//! **References.** RFC 5681 section 3.2, RFC 6675, RFC 8985; tcp-signatures.md section 5.

use super::retx::{evidence, Retx, Sender};
use super::{side_name, PerConn};
use crate::finding::ms;
use crate::{Detector, Finding, Info};
use serde_json::json;
use tcpwhy_track::{Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "fast-retransmit",
    title: "retransmission after duplicate ACKs or SACK (fast retransmit)",
    doc: include_str!("fast_retransmit.rs"),
};

const KEEP: usize = 8;

#[derive(Default, Debug)]
struct State {
    sender: Sender,
    seen: Vec<Retx>,
    count: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct FastRetransmit {
    conns: PerConn<State>,
}

impl Detector for FastRetransmit {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>, _out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let st = self.conns.get(c, side);
            if let Some(r) = st.sender.on_event(c, side, ev) {
                if r.fast {
                    st.count += 1;
                    st.total_ns += r.original.map_or(0, |o| r.at.ts_ns - o.ts_ns);
                    if st.seen.len() < KEEP {
                        st.seen.push(r);
                    }
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
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = first.original.map_or(first.at.ts_ns, |o| o.ts_ns);
            f.end_ns = st.seen.last().map_or(first.at.ts_ns, |r| r.at.ts_ns);
            f.cost_ns = st.total_ns;
            f.frames = evidence(&st.seen);
            f.explanation = format!(
                "{} recovered {} lost segments by fast retransmit (duplicate ACKs or SACK); {} lost.",
                side_name(c, side),
                st.count,
                ms(st.total_ns)
            );
            f.fix =
                "find the loss on the path (interface drops, a policer, a congested queue)".into();
            f.details = json!({"sender": side.name(), "retransmissions": st.count});
            out.push(f);
        }
    }
}
