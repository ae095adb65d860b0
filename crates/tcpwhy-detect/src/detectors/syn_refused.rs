//! # syn-refused: the SYN was answered by a reset
//!
//! **Signal.** The server side answers the client's SYN with RST|ACK acknowledging it: no
//! listener on the port (or a firewall rejecting with a reset).
//!
//! **Evidence.** The SYN and the RST. Details: how many SYNs were refused.
//!
//! **Cost.** From the first SYN to the last reset: one round trip when the client gives up at
//! once, seconds when it sends the same SYN again with backoff and is refused each time. When
//! a SYN sent again after the resets is answered (the service came up; Windows retries a
//! refused connect() after about 0.5 s), from the first SYN to that SYN.
//!
//! **Known false positives.** A listener whose accept queue is full with
//! net.ipv4.tcp_abort_on_overflow=1 also answers with resets.
//!
//! **References.** RFC 9293 section 3.10.7.1; docs/tcp-signatures.md section 2.

use super::{side_name, ConnState, WHOLE};
use crate::finding::ms;
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "syn-refused",
    title: "SYN answered by RST (connection refused)",
    doc: include_str!("syn_refused.rs"),
};

/// Set at the first reset answering the SYN (most connections get none): a part of the
/// connection's `Extra`.
#[derive(Default, Debug)]
pub(crate) struct Refused {
    refusals: u32,
    first_rst: Option<At>,
    last_rst: Option<At>,
}

#[derive(Default)]
pub struct SynRefused {}

impl Detector for SynRefused {
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
        let f = ev.seg.flags;
        if c.handshake.syn_ack.is_some() {
            return;
        }
        if ev.from == Side::Server
            && f.rst()
            && f.ack()
            && c.client.isn().is_some_and(|isn| ev.seg.ack == isn + 1)
        {
            let st = cs.extra.get::<Refused>(WHOLE);
            st.refusals += 1;
            st.first_rst.get_or_insert(ev.at);
            st.last_rst = Some(ev.at);
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(st) = cs.extra.take::<Refused>(WHOLE) else {
            return;
        };
        let (Some(syn), Some(rst), Some(last)) = (cs.first_syn(c), st.first_rst, st.last_rst)
        else {
            return;
        };
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = syn.ts_ns;
        // The client tried until the last refusal: the whole ladder is lost.
        f.end_ns = last.ts_ns;
        f.cost_ns = last.ts_ns - syn.ts_ns;
        f.frames = vec![syn.frame(), rst.frame()];
        if last != rst {
            f.frames.push(last.frame());
        }
        // Refused, then the SYN sent again after the reset was answered (Windows tries again
        // after half a second): the time until that SYN is lost, and the connection opened.
        let answered = c
            .handshake
            .syn_ack
            .and(c.syn())
            .filter(|retry| retry.ts_ns > last.ts_ns);
        if let Some(retry) = answered {
            f.end_ns = retry.ts_ns;
            f.cost_ns = retry.ts_ns - syn.ts_ns;
            f.frames.push(retry.frame());
            f.explanation = format!(
                "{} refused the first SYN with a reset; the client sent it again {} after the reset and was answered: {} lost.",
                capitalized(side_name(c, Side::Server)),
                ms(retry.ts_ns - last.ts_ns),
                ms(f.cost_ns)
            );
        }
        f.explanation = if answered.is_some() {
            std::mem::take(&mut f.explanation)
        } else if st.refusals > 1 {
            format!(
                "{} refused the connection with a reset {} times; the client tried for {} from its first SYN to the last reset.",
                capitalized(side_name(c, Side::Server)),
                st.refusals,
                ms(f.cost_ns)
            )
        } else {
            format!(
                "{} refused the connection with a reset {} after the SYN.",
                capitalized(side_name(c, Side::Server)),
                ms(f.cost_ns)
            )
        };
        f.fix = "nothing listens on that port (or a firewall rejects): check the service is up and bound to this address and port".into();
        f.details = SynRefusedDetails {
            refusals: st.refusals,
        }
        .into();
        out.push(f);
    }
}

/// `s` with its first letter upper case.
fn capitalized(s: String) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => s,
    }
}

/// syn-refused: how many SYNs were refused.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynRefusedDetails {
    pub refusals: u32,
}
