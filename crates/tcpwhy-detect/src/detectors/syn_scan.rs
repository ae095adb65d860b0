//! # syn-scan: one source sent SYNs to many ports or hosts and completed no handshake
//!
//! **Signal.** One source address made half-open attempts (SYNs, never a completed
//! handshake, no data) that no client's TCP stack would make at 100 distinct services
//! (address and port) or more, at least 10 attempts a second: a SYN-ACK it never acknowledged,
//! or a single SYN never sent again though the capture went on 3 s. That is a port scan
//! (nmap -sS, masscan: one SYN per port, the answer ignored or reset). A capture-level
//! finding: one for the whole capture, about the source that probed the most services (the
//! others that qualify are listed).
//!
//! **Evidence.** The scanner's first SYNs to its first 10 targets. Details: its attempts, the services, hosts and
//! ports it probed, which answered with a SYN-ACK (open), a reset (closed) or nothing
//! (filtered, or dropped), the span and rate. The refusals are also syn-refused findings.
//!
//! **Cost.** None: a scan's attempts are nobody's connections. What it shows is exposure:
//! the open ports are reachable from the scanner.
//!
//! **Thresholds.** A client that tries several servers retries each unanswered SYN with its
//! stack, and completes the handshakes that are answered; a browser falling back from IPv6
//! abandons one SYN per host, at human pace. 100 services probed by attempts that no stack
//! made, at 10 a second, is a tool (see syn-flood for the attempts counted).
//!
//! **Known false positives.** Peer-to-peer clients try many addresses, but their stacks retry
//! and complete; a capture that misses a client's ACKs (asymmetric routing) shows SYN-ACKs
//! never acknowledged. Not detected: a scan among more than 65 536 sources or (source,
//! target) pairs of half-open attempts (a spoofed flood beside it): the summary then no
//! longer counts per source.
//!
//! **References.** nmap's SYN scan (-sS); RFC 9293 section 3.10.7.1 (a reset answers a SYN to
//! a closed port).

use super::syn_flood::{answered, per_s, service, MIN_CRAFTED, MIN_PER_S};
use crate::finding::{ms, ms_f};
use crate::half_open::HalfOpen;
use crate::{Finding, Info};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub static INFO: Info = Info {
    id: "syn-scan",
    title: "SYN scan: one source probed many ports or hosts (capture-wide)",
    doc: include_str!("syn_scan.rs"),
};

/// Open and closed services listed at most.
const LISTED: usize = 20;
/// Other scanners listed.
const OTHERS: usize = 5;

/// What one source probed: per target (address, port), whether it answered with a SYN-ACK
/// or a reset, and whether any attempt there was one no stack makes.
#[derive(Default)]
struct Probed {
    targets: BTreeMap<(IpAddr, u16), (bool, bool)>,
    crafted_targets: u32,
    /// The first attempt's frame at each target.
    first_ids: Vec<u64>,
}

/// The services in `set`, as ports when they are all on one host, else as address:port;
/// at most `LISTED`, in order.
fn listed(set: &BTreeSet<(IpAddr, u16)>, one_host: bool) -> Vec<String> {
    set.iter()
        .take(LISTED)
        .map(|&(a, p)| {
            if one_host {
                p.to_string()
            } else {
                service(a, p)
            }
        })
        .collect()
}

/// The finding, if a source scanned (none when the summary no longer counts per source).
pub(crate) fn finding(h: &HalfOpen) -> Option<Finding> {
    let pairs = h.pairs.entries()?;
    let sources = h.sources.entries()?;
    let mut by_source: BTreeMap<IpAddr, Probed> = BTreeMap::new();
    for (&(src, dst, port), pt) in pairs {
        let p = by_source.entry(src).or_default();
        let e = p.targets.entry((dst, port)).or_default();
        e.0 |= pt.syn_ack > 0;
        e.1 |= pt.rst > 0;
        p.crafted_targets += u32::from(pt.crafted > 0);
        p.first_ids.push(pt.first_id);
    }
    let mut scanners: Vec<(IpAddr, &Probed, &crate::half_open::Tally)> = by_source
        .iter()
        .filter_map(|(src, p)| Some((*src, p, sources.get(src)?)))
        .filter(|(_, p, t)| p.crafted_targets >= MIN_CRAFTED && t.crafted_per_s() >= MIN_PER_S)
        .collect();
    scanners.sort_by_key(|(src, p, t)| (Reverse(p.crafted_targets), Reverse(t.attempts), *src));
    let &(src, p, t) = scanners.first()?;
    let hosts: BTreeSet<IpAddr> = p.targets.keys().map(|k| k.0).collect();
    let ports: BTreeSet<u16> = p.targets.keys().map(|k| k.1).collect();
    let open: BTreeSet<(IpAddr, u16)> = p
        .targets
        .iter()
        .filter(|(_, v)| v.0)
        .map(|(k, _)| *k)
        .collect();
    let closed: BTreeSet<(IpAddr, u16)> = p
        .targets
        .iter()
        .filter(|(_, v)| v.1 && !v.0)
        .map(|(k, _)| *k)
        .collect();
    let silent = p.targets.len() - open.len() - closed.len();
    let one_host = hosts.len() == 1;
    let span = t.last_ns - t.first_ns;
    let what = match (hosts.len(), ports.len()) {
        (1, n) => format!(
            "{n} port{} of {}",
            if n == 1 { "" } else { "s" },
            hosts.iter().next().map_or(String::new(), |h| h.to_string())
        ),
        (n, 1) => format!(
            "port {} of {n} hosts",
            ports.iter().next().copied().unwrap_or(0)
        ),
        (h, _) => format!(
            "{} services ({} ports on {h} hosts)",
            p.targets.len(),
            ports.len()
        ),
    };
    let with_list = |n: usize, what: &str, set: &BTreeSet<(IpAddr, u16)>| {
        let l = listed(set, one_host);
        let more = if n > l.len() { ", ..." } else { "" };
        format!("{n} {what} ({}{more})", l.join(", "))
    };
    let mut answers = Vec::new();
    if !open.is_empty() {
        answers.push(with_list(
            open.len(),
            "answered with a SYN-ACK: open",
            &open,
        ));
    }
    if !closed.is_empty() {
        answers.push(with_list(closed.len(), "with a reset: closed", &closed));
    }
    if silent > 0 {
        answers.push(format!(
            "{silent} not at all (filtered, or the SYN was dropped)"
        ));
    }
    let others = if scanners.len() > 1 {
        format!(
            " {} other source{} scanned too (details).",
            scanners.len() - 1,
            if scanners.len() == 2 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    let mut f = Finding::capture(INFO.id);
    f.start_ns = t.first_ns;
    f.end_ns = t.last_ns;
    // The first SYNs at its first targets (10).
    let mut first: Vec<u64> = p.first_ids.clone();
    first.sort_unstable();
    first.truncate(10);
    f.frames = first;
    f.explanation = format!(
        "{src} sent {} SYNs to {what} in {} ({:.0} a second) and completed no handshake: a SYN \
         scan ({} of its attempts no client's TCP stack would make: a SYN-ACK ignored, or a \
         single SYN never sent again though the capture went on 3 s). Of the {} services, {}. \
         It costs no connection time; it shows which ports are reachable from {src}.{others}",
        t.attempts,
        ms(span),
        per_s(t.attempts, span),
        t.crafted,
        p.targets.len(),
        answers.join("; "),
    );
    f.fix = "if the scan is not yours: find who runs it from its source address, and close or filter the open ports that need not be reachable from there; if it is yours, nothing to fix".into();
    f.details = SynScanDetails {
        answered: answered(t),
        attempts: t.attempts,
        capture_attempts: h.attempts(),
        closed: listed(&closed, one_host),
        closed_count: closed.len(),
        crafted: t.crafted,
        crafted_per_second: (t.crafted_per_s() * 10.0).round() / 10.0,
        duration_ms: ms_f(span),
        hosts: hosts.len(),
        open: listed(&open, one_host),
        open_count: open.len(),
        other_sources: scanners
            .iter()
            .skip(1)
            .take(OTHERS)
            .map(|(s, q, o)| OtherSource {
                attempts: o.attempts,
                source: s.to_string(),
                targets: q.targets.len(),
            })
            .collect::<Vec<_>>(),
        per_second: (per_s(t.attempts, span) * 10.0).round() / 10.0,
        ports: ports.len(),
        silent_count: silent,
        source: src.to_string(),
        targets: p.targets.len(),
    }
    .into();
    Some(f)
}

/// Another source that scanned.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OtherSource {
    pub attempts: u32,
    pub source: String,
    pub targets: usize,
}

/// syn-scan: the source, its targets, which answered.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynScanDetails {
    pub answered: super::syn_flood::Answered,
    pub attempts: u32,
    pub capture_attempts: u64,
    pub closed: Vec<String>,
    pub closed_count: usize,
    pub crafted: u32,
    pub crafted_per_second: f64,
    pub duration_ms: f64,
    pub hosts: usize,
    pub open: Vec<String>,
    pub open_count: usize,
    pub other_sources: Vec<OtherSource>,
    pub per_second: f64,
    pub ports: usize,
    pub silent_count: usize,
    pub source: String,
    pub targets: usize,
}
