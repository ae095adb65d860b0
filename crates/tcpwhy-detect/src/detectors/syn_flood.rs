//! # syn-flood: many connection attempts at one service that no client meant to complete
//!
//! **Signal.** One service (address and port) received at least 100 half-open attempts
//! (4-tuples whose client sent SYNs and never completed a handshake nor sent data) that no
//! client's TCP stack would make, at least 10 a second: the server's SYN-ACK was never
//! acknowledged (the source is spoofed and never saw it, or the sender ignores answers), or a
//! single SYN went unanswered and was never sent again although the capture went on 3 s (a
//! stack sends its SYN again after 1 s, 3 s on old ones). A capture-level finding: one for the
//! whole capture, about the most attempted service (the others that qualify are listed).
//!
//! **Evidence.** The first 10 SYNs at the service. Details: the attempts, how many no stack
//! would make, how they were answered (SYN-ACK, reset, other, nothing), how many were sent
//! again, the distinct sources (exact up to 65 536 (source, target) pairs of half-open
//! attempts in the capture, else estimated over all of them), the span and rate, and the
//! other services that qualify. Not detected among more than 65 536 targets of half-open
//! attempts (a scan of a larger network beside it): they can no longer be ranked.
//!
//! **Cost.** None: the attempts are nobody's connections, so nothing waited on them. A
//! flood's cost falls on the server (a full SYN backlog, SYN cookies instead of options) and
//! shows on the real clients' connections, as syn-unanswered (their SYNs dropped) or slow
//! handshakes (path-latency): those findings carry the time lost.
//!
//! **Thresholds.** A client retrying is one attempt (one 4-tuple: syn-unanswered), and its
//! stack sends its SYN again, so it is never counted; browsers open up to 6 connections per
//! host; a pool reconnecting to a dead service retries each attempt. 100 attempts that no
//! stack made need a tool that sends SYNs without a socket behind them (hping3, a botnet,
//! spoofed sources). 10 a second keeps out a slow health check with a connect timeout under
//! 1 s, which abandons its single SYN like a tool does.
//!
//! **Known false positives.** A capture that misses the clients' ACKs (asymmetric routing)
//! shows SYN-ACKs never acknowledged; their data would still show (those connections are
//! not half-open). Clients that abandon connects in under 1 s, at 10 a second or more. A
//! flood whose SYNs are each sent again by a real stack (a connect() flood) is not named
//! here: it cannot be told from real clients of an unreachable server, and syn-unanswered
//! names each of its connections.
//!
//! **References.** RFC 4987 (TCP SYN flooding attacks and common mitigations); RFC 6298
//! (initial RTO 1 s); Linux net.ipv4.tcp_syncookies, tcp_max_syn_backlog.

use crate::finding::{ms, ms_f};
use crate::half_open::{HalfOpen, Sample, Tally};
use crate::{Finding, Info};
use std::cmp::Reverse;
use std::net::IpAddr;

pub static INFO: Info = Info {
    id: "syn-flood",
    title: "SYN flood: many half-open attempts at one service (capture-wide)",
    doc: include_str!("syn_flood.rs"),
};

/// Attempts no client stack makes, at one target or from one source, before they are a
/// flood or a scan (see the documentation above).
pub(crate) const MIN_CRAFTED: u32 = 100;
/// ... and how many a second at least.
pub(crate) const MIN_PER_S: f64 = 10.0;

/// Targets listed besides the one the finding is about.
const OTHERS: usize = 5;

/// An estimate rounded to the 3 significant digits it has (the sketch's error is about 2%).
pub(crate) fn rounded(n: u64) -> u64 {
    let mut unit = 1u64;
    while n / unit >= 1000 {
        unit *= 10;
    }
    (n + unit / 2) / unit * unit
}

/// How the attempts were answered, in words: "none was answered", "the server answered 3
/// with a SYN-ACK that was never acknowledged and 5 with a reset; 10 got no answer".
pub(crate) fn answers_text(t: &Tally) -> String {
    let parts: Vec<String> = [
        (t.syn_ack, "with a SYN-ACK that was never acknowledged"),
        (t.rst, "with a reset"),
        (t.other, "with other packets (an ACK for other numbers)"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let answered = match parts.split_last() {
        None => return "none was answered".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    };
    match t.none {
        0 => format!("the server answered {answered}"),
        n => format!("the server answered {answered}; {n} got no answer"),
    }
}

/// `n` over `span_ns`, a second at least, per second.
pub(crate) fn per_s(n: u32, span_ns: i64) -> f64 {
    f64::from(n) / (span_ns.max(1_000_000_000) as f64 / 1e9)
}

pub(crate) fn answered(t: &Tally) -> Answered {
    Answered {
        none: t.none,
        other: t.other,
        rst: t.rst,
        syn_ack: t.syn_ack,
    }
}

/// `addr:port`, IPv6 in brackets.
pub(crate) fn service(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

/// The finding, if a target was flooded (none when the capture held more targets with
/// half-open attempts than the summary keeps: it cannot rank them).
pub(crate) fn finding(h: &HalfOpen) -> Option<Finding> {
    let targets = h.targets.entries()?;
    let mut flooded: Vec<(&(IpAddr, u16), &Tally, &Sample)> = targets
        .iter()
        .map(|(k, (t, s))| (k, t, s))
        .filter(|(_, t, _)| t.crafted >= MIN_CRAFTED && t.crafted_per_s() >= MIN_PER_S)
        .collect();
    flooded.sort_by_key(|(k, t, _)| (Reverse(t.crafted), Reverse(t.attempts), **k));
    let (&(addr, port), t, sample) = *flooded.first()?;
    let target = service(addr, port);
    // Distinct sources at the target: exact from the pairs, else estimated over the capture.
    let (sources, estimated) = match h.pairs.entries() {
        Some(p) => {
            let n = p
                .keys()
                .filter(|(_, d, dp)| (*d, *dp) == (addr, port))
                .count();
            (n as u64, false)
        }
        None => (rounded(h.distinct_sources.estimate()), true),
    };
    let span = t.last_ns - t.first_ns;
    let mut f = Finding::capture(INFO.id);
    f.start_ns = t.first_ns;
    f.end_ns = t.last_ns;
    f.frames = sample.ids().to_vec();
    let from = if estimated {
        format!(
            "from about {sources} source addresses (estimated over all the capture's half-open \
             attempts)"
        )
    } else {
        format!(
            "from {sources} source address{}",
            if sources == 1 { "" } else { "es" }
        )
    };
    let others = if flooded.len() > 1 {
        format!(
            " {} other service{} received such a flood too (details).",
            flooded.len() - 1,
            if flooded.len() == 2 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    f.explanation = format!(
        "{} connection attempts to {target} in {} ({:.0} a second) {from} never completed a \
         handshake: {}. {} of them no client's TCP stack would make (a SYN-ACK ignored, or a \
         single SYN never sent again though the capture went on 3 s): a SYN flood from a tool, \
         the sources likely spoofed. They cost no connection time themselves: a flood costs \
         the server (its SYN backlog, SYN cookies), which shows on real clients' connections \
         as syn-unanswered or slow handshakes.{others}",
        t.attempts,
        ms(span),
        per_s(t.attempts, span),
        answers_text(t),
        t.crafted,
    );
    f.fix = "if it is an attack: keep SYN cookies on (net.ipv4.tcp_syncookies=1, the default) and the SYN backlog large (net.ipv4.tcp_max_syn_backlog, the listen() backlog, net.core.somaxconn), and filter or rate-limit upstream (spoofed sources cannot be blocked one by one); if it is a load test, nothing to fix. Look at the real clients' connections for what it cost them".into();
    f.details = SynFloodDetails {
        answered: answered(t),
        attempts: t.attempts,
        capture_attempts: h.attempts(),
        crafted: t.crafted,
        crafted_per_second: (t.crafted_per_s() * 10.0).round() / 10.0,
        duration_ms: ms_f(span),
        other_targets: flooded
            .iter()
            .skip(1)
            .take(OTHERS)
            .map(|((a, p), o, _)| OtherTarget {
                attempts: o.attempts,
                crafted: o.crafted,
                target: service(*a, *p),
            })
            .collect::<Vec<_>>(),
        per_second: (per_s(t.attempts, span) * 10.0).round() / 10.0,
        retried: t.retried,
        sources,
        sources_estimated: estimated,
        target,
    }
    .into();
    Some(f)
}

/// How the attempts were answered.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Answered {
    pub none: u32,
    pub other: u32,
    pub rst: u32,
    pub syn_ack: u32,
}

/// Another target flooded.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OtherTarget {
    pub attempts: u32,
    pub crafted: u32,
    pub target: String,
}

/// syn-flood: the target, the attempts and how they were answered, the other targets.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynFloodDetails {
    pub answered: Answered,
    pub attempts: u32,
    pub capture_attempts: u64,
    pub crafted: u32,
    pub crafted_per_second: f64,
    pub duration_ms: f64,
    pub other_targets: Vec<OtherTarget>,
    pub per_second: f64,
    pub retried: u32,
    pub sources: u64,
    pub sources_estimated: bool,
    pub target: String,
}
