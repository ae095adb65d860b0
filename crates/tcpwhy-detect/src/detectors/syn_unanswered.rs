//! # syn-unanswered: SYNs sent again because nothing answered them
//!
//! **Signal.** The client sent the same SYN (same ISN) more than once, with no answer at all
//! in between (no ACK, no RST): a full listen backlog (ListenOverflows/ListenDrops), SYN flood
//! protection, a firewall, or loss.
//!
//! Or the server answered and the answer did not arrive (captured between the server and the
//! loss, or at the server): the client sent its SYN again after the SYN-ACK, or the server sent
//! its SYN-ACK again (same ISN) with no ACK in between, and the handshake completed later (the
//! client's ACK, or the server sending as an open connection does). The SYN-ACK or the
//! client's ACK of it was lost between the capture point and the client; the server's backlog
//! is not the cause (`answer_lost`). A SYN-ACK sent again after the client's ACK is
//! `accept-queue-full`; SYN-ACKs that a scanner never completes are not counted. Where the
//! client's ACK echoes the TCP timestamp of an earlier SYN-ACK than the last one sent again,
//! that earlier one reached the client late: held on the way, not lost (`answer_held`,
//! cost from the first SYN-ACK to the ACK less the client's fastest answer to the server's
//! data as the capture point sees it, when that is more).
//!
//! **Evidence.** Every SYN and the SYN-ACK if one came. Details: the retry ladder (the gaps),
//! its shape and the stacks known to send it: 1 s apart, then doubling after five retries is
//! Linux >= 6.5 (tcp_syn_linear_timeouts=4: retries at 1, 2, 3, 4, 5 s, then 7, 11 ...) and
//! macOS alike; 1, 3, 7, 15 s (doubling from 1 s) older Linux, FreeBSD and Windows; a first
//! gap of 3 s old Windows, Solaris or Linux < 3.1. `client_stack` names one only when the
//! shape is known from one stack alone, "unknown" otherwise.
//!
//! **Cost.** The time lost against a first SYN answered at once: from the first SYN to the last
//! SYN before the answer (the answer then comes one server leg after it instead of one after
//! the first: the round trip itself is not the drop's), plus, where the answer was lost, the
//! wait from the first SYN-ACK to the one the client answered (at least the first SYN to the
//! last SYN). Never answered: from the first SYN to the last.
//!
//! A SYN less than 2 ms after the one before it (`TIMER_MIN_NS`: sooner than any TCP timer
//! fires) is not counted as sent again: no stack retries that soon for want of an answer, so
//! it is a tool's packet or a copy the capture could not tell apart.
//!
//! **Confidence.** `low` when the client closed the connection without a byte sent either
//! way: opened ahead of use, or the loser of a race between connections (a browser's or an
//! app's), its handshake may have kept nobody waiting.
//!
//! **Known false positives.** A capture that misses the SYN-ACKs (asymmetric routing, capture
//! loss) shows the same retries. A capture that holds only the server's packets cannot tell a
//! lost SYN-ACK from a client that never answered until later (confidence low). SYNs answered by a stale ACK are `syn-stale-state` instead.
//!
//! **References.** docs/tcp-signatures.md section 2; RFC 6298 (initial RTO 1 s); Linux
//! tcp_syn_linear_timeouts (6.5).

use super::{ConnState, TIMER_MIN_NS, WHOLE};
use crate::finding::{ms, ms_f};

use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side, ANSWER_LOST_MIN_NS};

pub static INFO: Info = Info {
    id: "syn-unanswered",
    title: "SYNs retransmitted without an answer (full backlog, drops, a lost SYN-ACK)",
    doc: include_str!("syn_unanswered.rs"),
};

/// Why a finding on a connection that carried no data is `low`.
const UNUSED_REASON: &str = "the connection carried no data before the client closed it: it was opened ahead of use or lost a race with another the application used, so its handshake may have kept nobody waiting";

/// At most this many SYN times are kept per connection (a Linux client gives up after 7).
const MAX_SYNS: usize = 16;

#[derive(Default, Debug)]
pub(crate) struct State {
    answered_otherwise: bool,
}

/// The SYNs after the first (`ConnState::first_syn()`), a part of the connection's `Extra`: most
/// connections send one (a Vec of them all was a 64-byte allocation per connection).
/// Also when the last SYN of all was seen (counted or not), in ns; the TSval of the last
/// SYN-ACK the server sent again; and whether the client's ACK completing the handshake
/// echoed an older one (`held`).
#[derive(Default, Debug)]
pub(crate) struct SynsAgain(Vec<At>, Option<i64>, Option<u32>, bool);

/// The shape of a SYN retry ladder (its gaps), and the stacks known to send it. A ladder names
/// the client's stack only when exactly one is known to send it; most shapes are shared
/// (Linux >= 6.5 with tcp_syn_linear_timeouts=4 and macOS both send 1, 1, 1, 1, 1, 2, 4 s).
pub(crate) fn ladder(gaps_ms: &[f64]) -> (&'static str, &'static [&'static str]) {
    let near = |x: f64, t: f64| (x - t).abs() <= t * 0.25 + 50.0;
    match gaps_ms {
        [] => ("one SYN", &[]),
        [g, ..] if near(*g, 3000.0) => (
            "first retry after 3 s, then doubling",
            &["Windows XP/2003", "Solaris", "Linux < 3.1"],
        ),
        [a, b, ..] if near(*a, 1000.0) && near(*b, 1000.0) => (
            "retries 1 s apart (then doubling after five)",
            &["Linux >= 6.5 (tcp_syn_linear_timeouts=4)", "macOS"],
        ),
        [a, b, ..] if near(*a, 1000.0) && near(*b, 2000.0) => {
            ("doubling from 1 s", &["Linux < 6.5", "FreeBSD", "Windows"])
        }
        [a] if near(*a, 1000.0) => (
            "one retry after 1 s (RFC 6298's initial RTO)",
            &["Linux", "FreeBSD", "macOS", "Windows"],
        ),
        _ => (
            "irregular (application retries, or a stack with its own timer)",
            &[],
        ),
    }
}

/// " once", " twice", " N times".
fn times(n: usize) -> String {
    match n {
        1 => " once".into(),
        2 => " twice".into(),
        n => format!(" {n} times"),
    }
}

/// The client's stack when the ladder names exactly one, else "unknown".
pub(crate) fn stack_of(stacks: &[&'static str]) -> &'static str {
    match stacks {
        [one] => one,
        _ => "unknown",
    }
}

/// With the server's SYN-ACK sent again: note the TSval of each SYN-ACK sent again, and
/// whether the client's ACK completing the handshake echoes an older TSval than the last one's.
/// It then answered an earlier SYN-ACK, which reached it late: held on the way, not lost (a
/// client in SYN-SENT takes the first SYN-ACK to arrive and echoes its TSval, RFC 7323
/// section 4.3).
fn echoes(cs: &mut ConnState, c: &Connection, ev: &SegmentEvent<'_>) {
    let f = ev.seg.flags;
    match ev.from {
        Side::Server if f.syn() && f.ack() && c.handshake.ack.is_none() => {
            if let Some((tsval, _)) = ev.seg.options.timestamp {
                cs.extra.get::<SynsAgain>(WHOLE).2 = Some(tsval);
            }
        }
        Side::Client if c.handshake.ack == Some(ev.at) => {
            if let (Some((_, tsecr)), Some(again)) = (
                ev.seg.options.timestamp,
                cs.extra.peek_mut::<SynsAgain>(WHOLE),
            ) {
                // Older in sequence-number arithmetic (the clock wraps).
                again.3 = again.2.is_some_and(|last| (last.wrapping_sub(tsecr) as i32) > 0);
            }
        }
        _ => {}
    }
}

#[derive(Default)]
pub struct SynUnanswered {}

impl Detector for SynUnanswered {
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
        // After the SYN-ACK only the client's SYNs sent again before its ACK matter here (the
        // SYN-ACK lost on its way); the tracker counts the server's SYN-ACKs sent again.
        if (!f.syn() || f.ack() || c.handshake.ack.is_some()) && c.first_syn_ack().is_some() {
            if c.handshake.syn_acks_again().is_some() {
                echoes(cs, c, ev);
            }
            return;
        }
        let first = cs.first_syn(c);
        let st = cs.syn_unanswered.get(&mut cs.used);
        match ev.from {
            // The first SYN is `first_syn` itself (set before the detectors run).
            Side::Client if f.syn() && !f.ack() && first != Some(ev.at) => {
                let again = cs.extra.get::<SynsAgain>(WHOLE);
                // Sooner than any timer after the SYN before it: not sent again for want of an
                // answer (a tool's packets, or a copy the capture could not tell apart).
                let previous = again.1.or(first.map(|a| a.ts_ns));
                again.1 = Some(ev.at.ts_ns);
                // After the server's answer, sooner than a retransmission timer: not the
                // client's timer for a SYN-ACK that never came (a relay's or tool's packets).
                let min = if c.first_syn_ack().is_some() {
                    ANSWER_LOST_MIN_NS
                } else {
                    TIMER_MIN_NS
                };
                if previous.is_some_and(|p| ev.at.ts_ns - p < min) {
                    return;
                }
                if again.0.len() + 1 < MAX_SYNS {
                    again.0.push(ev.at);
                }
            }
            // Any answer other than a SYN-ACK (a stale ACK, a reset) is another detector's case.
            Side::Server if !f.syn() => st.answered_otherwise = true,
            _ => {}
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let st = cs.syn_unanswered.take(&mut cs.used).unwrap_or_default();
        let more = cs.extra.take::<SynsAgain>(WHOLE).unwrap_or_default();
        let syn_acks_again = c.handshake.syn_acks_again();
        if (more.0.is_empty() && syn_acks_again.is_none()) || st.answered_otherwise {
            return;
        }
        // The first SYN, or (a capture that holds only the server's packets) the first SYN-ACK.
        let Some(first) = cs.first_syn(c).or(c.first_syn_ack()) else {
            return;
        };
        let syns: Vec<At> = cs
            .first_syn(c)
            .into_iter()
            .chain(more.0.iter().copied())
            .collect();
        let first_answer = c.first_syn_ack();
        // SYNs the client sent again after the server's answer: told in the explanation only,
        // as one can cross a slow answer on the way.
        let after_answer =
            first_answer.map_or(0, |a| syns.iter().filter(|s| s.ts_ns > a.ts_ns).count());
        // The server's answer was lost between the capture point and the client (or the
        // client's ACK of it was): the handshake completed (the client's ACK, or the server
        // sending as an open connection does; a scanner leaves SYN-ACKs unanswered on purpose)
        // on a SYN-ACK sent at least `ANSWER_LOST_MIN_NS` after the first.
        let completed = c.handshake.ack.is_some()
            || c.server.closed_ns().is_some()
            || c.server.unique_bytes > 0;
        let answer_lost = completed && c.answer_lost();
        let answered_by = if answer_lost {
            c.handshake.answered_syn_ack()
        } else {
            first_answer
        };
        let before: Vec<At> = match first_answer {
            Some(a) => syns.iter().copied().filter(|s| s.ts_ns <= a.ts_ns).collect(),
            None => syns.clone(),
        };
        if !answer_lost && before.len() < 2 {
            return; // the SYN-ACKs sent again lost nothing, and no SYN went unanswered
        }
        let last_syn = *syns.last().unwrap_or(&first);
        let last_before = *before.last().unwrap_or(&first);
        // The time lost against a first SYN answered at once: the answer to the last SYN comes
        // one server leg after it instead of one after the first (the round trip itself would
        // have been spent anyway); a lost SYN-ACK adds the wait from the first SYN-ACK to the
        // one the client answered.
        let lost_answer_ns = match (answer_lost, first_answer, answered_by) {
            (true, Some(a), Some(b)) => b.ts_ns - a.ts_ns,
            _ => 0,
        };
        // The client's ACK echoed an older SYN-ACK than the last sent again: that one reached
        // it late (held on the way, not lost), and the client waited from the first SYN-ACK
        // to its ACK, less the time the client's answer takes anyway as the capture point
        // sees it (its fastest ACK of the server's data: a round trip captured at the server,
        // next to nothing at the client; 0 when the server sent no data).
        let held = answer_lost && more.3;
        let client_leg = (c.server.ack_rtt.count() > 0).then_some(c.server.ack_rtt.min_ns);
        let held_ns = match (held, first_answer, c.handshake.ack) {
            (true, Some(a), Some(ack)) => (ack.ts_ns - a.ts_ns - client_leg.unwrap_or(0)).max(0),
            _ => 0,
        };
        let cost = (last_before.ts_ns - first.ts_ns + lost_answer_ns)
            .max(if answer_lost { last_syn.ts_ns - first.ts_ns } else { 0 })
            .max(held_ns);
        let end = answered_by.unwrap_or(last_syn);
        let gaps: Vec<f64> = syns
            .windows(2)
            .map(|w| ms_f(w[1].ts_ns - w[0].ts_ns))
            .collect();
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.ts_ns;
        f.end_ns = end.ts_ns.max(last_syn.ts_ns);
        f.cost_ns = cost;
        f.frames = syns
            .iter()
            .map(|a| a.frame())
            .chain(first_answer.map(|a| a.frame()))
            .chain(answered_by.filter(|_| answer_lost).map(|a| a.frame()))
            .chain(c.handshake.ack.filter(|_| held).map(|a| a.frame()))
            .collect();
        f.frames.sort_unstable();
        f.frames.dedup();
        let (shape, stacks) = ladder(&gaps);
        let ladder_text = format!(
            "{} retr{}, gaps {} ms: {shape}{}",
            syns.len().saturating_sub(1),
            if syns.len() == 2 { "y" } else { "ies" },
            gaps.iter()
                .map(|g| format!("{g:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            if stacks.is_empty() {
                String::new()
            } else {
                format!(", as {} do", stacks.join(", "))
            },
        );
        let sa_again = syn_acks_again.map_or(0, |(n, _)| n);
        f.explanation = if held {
            format!(
                "The server's SYN-ACK to port {} (frame {}) reached the client late: the server sent it again{}, yet the client's ACK (frame {}) echoes the timestamp of an earlier SYN-ACK than the last, so an earlier one arrived and was answered: held on the way between the capture point and the client for about {} (or its ACK was), not lost; {} lost{}.",
                c.client.port,
                first_answer.map_or(0, |a| a.frame()),
                times(sa_again as usize),
                c.handshake.ack.map_or(0, |a| a.frame()),
                ms(held_ns),
                ms(cost),
                if syns.len() > 1 { format!(" ({ladder_text})") } else { String::new() },
            )
        } else if answer_lost {
            let how = match (after_answer, sa_again) {
                (0, n) => format!(
                    "the server sent its SYN-ACK again{} without an ACK in between",
                    times(n as usize)
                ),
                (k, 0) => format!("the client sent its SYN again{} after it", times(k)),
                (k, n) => format!(
                    "the client sent its SYN again{} after it and the server its SYN-ACK{}",
                    times(k),
                    times(n as usize)
                ),
            };
            let unseen = if c.client.packets == 0 {
                " (only the server's packets are in the capture)"
            } else {
                ""
            };
            let answered = answered_by.map_or(0, |a| a.frame());
            let completed = if c.handshake.ack.is_some() {
                format!("the client's ACK answered the SYN-ACK of frame {answered}")
            } else {
                format!("the server's later segments show the handshake completed after the SYN-ACK of frame {answered}")
            };
            format!(
                "The server's SYN-ACK to port {} (frame {}) did not complete the handshake: {how}{unseen}, so it, or the client's ACK of it, was lost between the capture point and the client; {completed}: {} lost{}.",
                c.client.port,
                first_answer.map_or(0, |a| a.frame()),
                ms(cost),
                if syns.len() > 1 { format!(" ({ladder_text})") } else { String::new() },
            )
        } else {
            format!(
                "{} from port {} went unanswered ({ladder_text}); {}.",
                match before.len() - usize::from(first_answer.is_some()) {
                    1 => "1 SYN".to_string(),
                    n => format!("{n} SYNs"),
                },
                c.client.port,
                match first_answer {
                    Some(a) => format!(
                        "the SYN-ACK came {} after the first SYN, {} later than an answer to it would have",
                        ms(a.ts_ns - first.ts_ns),
                        ms(cost)
                    ),
                    None => format!("never answered in {}", ms(cost)),
                }
            )
        };
        // A connection that never carried a byte either way was opened ahead of use or lost a
        // race (an application that opens several and uses the first up): its handshake may
        // have kept nobody waiting.
        if first_answer.is_some()
            && c.client.unique_bytes == 0
            && c.server.unique_bytes == 0
            && c.client.packets > 0
            && (c.client.closed_ns().is_some() || c.client.rst().is_some())
        {
            f.confidence.lower(crate::Level::Low, UNUSED_REASON);
        }
        if answer_lost && c.client.packets == 0 {
            f.confidence.lower(
                crate::Level::Low,
                "only the server's packets are in the capture: the client's side of the handshake is inferred",
            );
        }
        f.fix = if held {
            "the server answered at once and its SYN-ACK was held, not dropped, between the capture point and the client: look for a queue that holds packets for that long (Wi-Fi power save or a congested radio link, a bufferbloated access link, a driver or virtual switch stalling); SYN and SYN-ACK retries do not help against a hold".into()
        } else if answer_lost {
            "the server answered, so its backlog did not drop the SYN: find the loss between the capture point and the client (interface and qdisc drops, a firewall or NAT that drops the SYN-ACK or the ACK, asymmetric routing); each loss costs the client's SYN retry timer (1 s on current stacks, 3 s on old ones)".into()
        } else {
            "the server side dropped SYNs: check its accept queue (nstat ListenOverflows/ListenDrops, the listen() backlog and net.core.somaxconn) and that it accepts fast enough; then SYN flood limits and firewalls on the path".into()
        };
        f.details = SynUnansweredDetails {
            answered: first_answer.is_some(),
            answer_held: held,
            answer_lost,
            client_stack: stack_of(stacks),
            gaps_ms: gaps,
            ladder: shape,
            stacks,
            syn_acks: first_answer.map_or(0, |_| 1 + sa_again as usize),
            syns: syns.len(),
        }
        .into();
        out.push(f);
    }
}

/// syn-unanswered: the SYNs, their retry ladder and the stacks known to send it.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynUnansweredDetails {
    pub answered: bool,
    /// The SYN-ACK was not lost but held on the way: the client's ACK echoed an earlier
    /// SYN-ACK's TSval than the last one sent again (`answer_lost` is then true too).
    pub answer_held: bool,
    /// The server answered, and its SYN-ACK (or the client's ACK of it) was lost on the way.
    pub answer_lost: bool,
    pub client_stack: &'static str,
    pub gaps_ms: Vec<f64>,
    pub ladder: &'static str,
    pub stacks: &'static [&'static str],
    /// SYN-ACKs the server sent before the client's ACK (0: none seen).
    pub syn_acks: usize,
    pub syns: usize,
}
