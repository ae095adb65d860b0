//! # syn-refused: the SYN was answered by a reset
//!
//! **Signal.** The server side answers the client's SYN with RST|ACK acknowledging it: no
//! listener on the port (or a firewall rejecting with a reset).
//!
//! **Evidence.** The SYN and the RST, and the next attempt when one is linked. Details: how
//! many SYNs were refused; the frame of the next attempt and who made it (`linked_frame`,
//! `linked_by`: `client` or `server`).
//!
//! **Cost.** From the first SYN to the last reset: one round trip when the client gives up at
//! once, seconds when it sends the same SYN again with backoff and is refused each time. When
//! a SYN sent again after the resets is answered (the service came up; Windows retries a
//! refused connect() after about 0.5 s), from the first SYN to that SYN.
//!
//! An application that tries again opens a new connection, from a new port (a reconnect
//! loop: an OpenFlow switch every few seconds, a service started before the one it needs).
//! When one of the client's later attempts to the same service is answered, the client got
//! through: each refused attempt of the loop is then linked to the SYN of the attempt after
//! it (the reading thread's `RetryWatch`, which sees every connection), and costs the time
//! from its first SYN to that SYN, so the loop's findings add up to the time the client could
//! not connect. Such a finding is `medium`: the service may have begun listening any time
//! before the next try, so this is the most the refusal lost. A loop that never gets through
//! in the capture links nothing (tries minutes apart, all refused, may be a periodic check:
//! nobody is shown waiting), nor does a client that sent SYNs to other ports of the same
//! host meanwhile (a scan probing ports is nobody's retry). Linked only within the refused
//! attempt's linger time (135 s) and 16 refusals back.
//!
//! Where either side may open the session (BGP peers), the refused client's peer may connect
//! to it instead, on the port it was refused on: then nobody is shown waiting on the refusal,
//! and the finding is `low`.
//!
//! **Known false positives.** A listener whose accept queue is full with
//! net.ipv4.tcp_abort_on_overflow=1 also answers with resets.
//!
//! **References.** RFC 9293 section 3.10.7.1; docs/tcp-signatures.md section 2.

use super::{side_name, ConnState, WHOLE};
use crate::finding::{ms, Level};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, Link, SegmentEvent, Side};

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
    /// The next attempt linked to the refusal (`Detector::linked`).
    next: Option<Link>,
}

const AT_MOST: &str = "the service may have begun listening any time before the client's next attempt: the cost is the most the refusal lost";
const PEER_CONNECTED: &str = "the refused client's peer connected to it on the same port afterwards (either side opens the session, as BGP peers do): nobody is shown waiting on the refusal";

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

    fn linked(&mut self, cs: &mut ConnState, c: &Connection, link: &Link) {
        if c.handshake.syn_ack.is_some() {
            return;
        }
        if let Some(st) = cs.extra.peek_mut::<Refused>(WHOLE) {
            st.next.get_or_insert(*link);
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
        let refused = if st.refusals > 1 {
            format!(
                "{} refused the connection with a reset {} times",
                capitalized(side_name(c, Side::Server)),
                st.refusals
            )
        } else {
            format!(
                "{} refused the connection with a reset {} after the SYN",
                capitalized(side_name(c, Side::Server)),
                ms(last.ts_ns - syn.ts_ns)
            )
        };
        let next = st.next.filter(|_| answered.is_none());
        if let Some(n) = next {
            f.frames.push(n.at.frame());
        }
        f.explanation = match next {
            None if answered.is_some() => std::mem::take(&mut f.explanation),
            None if st.refusals > 1 => format!(
                "{refused}; the client tried for {} from its first SYN to the last reset.",
                ms(f.cost_ns)
            ),
            None => format!("{refused}."),
            Some(n) if !n.reverse => {
                let after = n.at.ts_ns - last.ts_ns;
                f.end_ns = n.at.ts_ns;
                f.cost_ns = n.at.ts_ns - syn.ts_ns;
                f.confidence.lower(Level::Medium, AT_MOST);
                format!(
                    "{refused}; the client tried again from port {} {} after the reset (frame {}) and, then or on a later try, got through: {} lost, at most (the service may have begun listening any time before that try).",
                    n.from_port,
                    ms(after),
                    n.at.frame(),
                    ms(f.cost_ns)
                )
            }
            Some(n) => {
                f.confidence.lower(Level::Low, PEER_CONNECTED);
                format!(
                    "{refused}; {} later {} connected to {} port {} itself (frame {}): where either side opens the session (BGP peers), nobody is shown waiting on the refusal.",
                    ms(n.at.ts_ns - last.ts_ns),
                    n.server.0,
                    n.client.0,
                    n.server.1,
                    n.at.frame()
                )
            }
        };
        f.fix = "nothing listens on that port (or a firewall rejects): check the service is up and bound to this address and port".into();
        f.details = SynRefusedDetails {
            linked_by: next.map(|n| if n.reverse { "server" } else { "client" }),
            linked_frame: next.map(|n| n.at.frame()),
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

/// syn-refused: how many SYNs were refused, and the later attempt linked to the refusal.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynRefusedDetails {
    /// Who made the later attempt: `client` (from a new port) or `server` (its peer connected
    /// to the client); none when none was linked.
    pub linked_by: Option<&'static str>,
    /// The later attempt's SYN.
    pub linked_frame: Option<u64>,
    pub refusals: u32,
}
