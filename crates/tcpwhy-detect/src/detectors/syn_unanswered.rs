//! # syn-unanswered: SYNs sent again because nothing answered them
//!
//! **Signal.** The client sent the same SYN (same ISN) more than once, with no answer at all
//! in between (no ACK, no RST): a full listen backlog (ListenOverflows/ListenDrops), SYN flood
//! protection, a firewall, or loss.
//!
//! **Evidence.** Every SYN and the SYN-ACK if one came. Details: the retry ladder (the gaps),
//! its shape and the stacks known to send it: 1 s apart, then doubling after five retries is
//! Linux >= 6.5 (tcp_syn_linear_timeouts=4: retries at 1, 2, 3, 4, 5 s, then 7, 11 ...) and
//! macOS alike; 1, 3, 7, 15 s (doubling from 1 s) older Linux, FreeBSD and Windows; a first
//! gap of 3 s old Windows, Solaris or Linux < 3.1. `client_stack` names one only when the
//! shape is known from one stack alone, "unknown" otherwise.
//!
//! **Cost.** From the first SYN to the SYN-ACK (or to the last SYN, when never answered).
//!
//! A SYN less than 2 ms after the one before it (`TIMER_MIN_NS`: sooner than any TCP timer
//! fires) is not counted as sent again: no stack retries that soon for want of an answer, so
//! it is a tool's packet or a copy the capture could not tell apart.
//!
//! **Known false positives.** A capture that misses the SYN-ACKs (asymmetric routing, capture
//! loss) shows the same retries. SYNs answered by a stale ACK are `syn-stale-state` instead.
//!
//! **References.** docs/tcp-signatures.md section 2; RFC 6298 (initial RTO 1 s); Linux
//! tcp_syn_linear_timeouts (6.5).

use super::{ConnState, TIMER_MIN_NS, WHOLE};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "syn-unanswered",
    title: "SYNs retransmitted without an answer (full backlog, drops)",
    doc: include_str!("syn_unanswered.rs"),
};

/// At most this many SYN times are kept per connection (a Linux client gives up after 7).
const MAX_SYNS: usize = 16;

#[derive(Default, Debug)]
pub(crate) struct State {
    answered_otherwise: bool,
}

/// The SYNs after the first (`ConnState::first_syn()`), a part of the connection's `Extra`: most
/// connections send one (a Vec of them all was a 64-byte allocation per connection).
/// Also when the last SYN of all was seen (counted or not), in ns.
#[derive(Default, Debug)]
pub(crate) struct SynsAgain(Vec<At>, Option<i64>);

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

/// The client's stack when the ladder names exactly one, else "unknown".
pub(crate) fn stack_of(stacks: &[&'static str]) -> &'static str {
    match stacks {
        [one] => one,
        _ => "unknown",
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
        if c.handshake.syn_ack.is_some() && !(ev.seg.flags.syn() && ev.seg.flags.ack()) {
            return;
        }
        let f = ev.seg.flags;
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
                if previous.is_some_and(|p| ev.at.ts_ns - p < TIMER_MIN_NS) {
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
        let Some(st) = cs.syn_unanswered.take(&mut cs.used) else {
            return;
        };
        let (Some(first), Some(more)) = (cs.first_syn(c), cs.extra.take::<SynsAgain>(WHOLE)) else {
            return; // one SYN at most
        };
        if more.0.is_empty() || st.answered_otherwise {
            return;
        }
        let syns: Vec<At> = std::iter::once(first)
            .chain(more.0.iter().copied())
            .collect();
        let answer = c.handshake.syn_ack;
        let end = answer.unwrap_or(*syns.last().unwrap_or(&first));
        let gaps: Vec<f64> = syns
            .windows(2)
            .map(|w| ms_f(w[1].ts_ns - w[0].ts_ns))
            .collect();
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.ts_ns;
        f.end_ns = end.ts_ns;
        f.cost_ns = end.ts_ns - first.ts_ns;
        f.frames = syns
            .iter()
            .map(|a| a.frame())
            .chain(answer.map(|a| a.frame()))
            .collect();
        let (shape, stacks) = ladder(&gaps);
        f.explanation = format!(
            "{} SYNs from port {} went unanswered ({} retries, gaps {} ms: {shape}{}); {}.",
            syns.len() - usize::from(answer.is_some()),
            c.client.port,
            syns.len() - 1,
            gaps.iter()
                .map(|g| format!("{g:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            if stacks.is_empty() {
                String::new()
            } else {
                format!(", as {} do", stacks.join(", "))
            },
            match answer {
                Some(_) => format!(
                    "the handshake completed {} after the first SYN",
                    ms(f.cost_ns)
                ),
                None => format!("never answered in {}", ms(f.cost_ns)),
            }
        );
        f.fix = "the server side dropped SYNs: check its accept queue (nstat ListenOverflows/ListenDrops, the listen() backlog and net.core.somaxconn) and that it accepts fast enough; then SYN flood limits and firewalls on the path".into();
        f.details = SynUnansweredDetails {
            answered: answer.is_some(),
            client_stack: stack_of(stacks),
            gaps_ms: gaps,
            ladder: shape,
            stacks,
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
    pub client_stack: &'static str,
    pub gaps_ms: Vec<f64>,
    pub ladder: &'static str,
    pub stacks: &'static [&'static str],
    pub syns: usize,
}
