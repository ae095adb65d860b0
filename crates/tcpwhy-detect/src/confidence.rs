//! How sure each finding is. Every finding starts `high`; what the capture leaves uncertain
//! about its connection lowers it, with the reason:
//!
//! - the capture missed packets of the connection (ACKs for data it never saw) near the
//!   finding (from a second before it to three seconds after it, since an ACK reveals a miss
//!   up to a few round trips late): `medium`, and `low` for findings read from gaps and
//!   resends (a missed packet can be the gap); a miss far from the finding says nothing of it;
//! - the connection began before the capture (no handshake: client, server, round trip and
//!   window scale inferred): `medium`, and `low` for findings that time turns or windows;
//! - no complete handshake (where the capture sat is unknown, so the round trip is not split
//!   between the two sides): `medium` for findings that take the capture point's share of it;
//! - a loss before the capture point inferred from the sender's IPv4 IDs (its first
//!   transmission never seen): `medium`; from a silence as long as Linux's loss probe alone
//!   (IPv6: no IDs): `low`;
//! - packets captured twice (set aside as copies): noted, the level unchanged.

use crate::finding::Level;
use crate::Finding;
use tcpwhy_track::{Connection, Vantage};

pub const CAPTURE_LOSS: &str = "the capture missed packets of this connection";
pub const MID_STREAM: &str =
    "the connection began before the capture: client, server, round trip and window scale are inferred";
pub const VANTAGE: &str =
    "no complete handshake: where the capture sat is unknown, so the round trip is not split";
pub const INFERRED_LOSS: &str =
    "a loss before the capture point is inferred from the sender's IPv4 IDs (the first transmission was never seen)";
pub const DUPLICATES: &str = "some packets were captured twice (set aside as copies)";
pub const PROBE_TIMING: &str =
    "a loss before the capture point is inferred from a silence as long as Linux's loss probe (no IPv4 IDs to count): a sender pausing that long would look the same";

/// How long before a finding an ACK revealing a capture miss still concerns it (the miss
/// happened before the ACK), and how long after it (an ACK reveals a miss a few round trips,
/// or a retransmission timeout, late).
const MISS_BEFORE: i64 = 1_000_000_000;
const MISS_AFTER: i64 = 3_000_000_000;

/// Findings read from gaps, resends and windows: a packet the capture missed can be what they
/// saw.
const FROM_GAPS: [&str; 6] = [
    "rto-retransmission",
    "fast-retransmit",
    "spurious-retransmission",
    "sender-limited",
    "rwnd-limited",
    "slow-start-restart",
];

/// Findings that time request/response turns, windows or flights: they need the roles, the
/// round trip and the window scale the handshake gives.
const TIMED: [&str; 8] = [
    "server-delay",
    "client-delay",
    "path-latency",
    "sender-limited",
    "slow-start-restart",
    "rwnd-limited",
    "nagle-delayed-ack",
    "queueing-delay",
];

/// Findings that take the capture point's share of the round trip off a wait.
const SPLIT: [&str; 3] = ["server-delay", "client-delay", "path-latency"];

/// Lower `f`'s confidence for what the capture leaves uncertain about `c`.
pub fn assess(c: &Connection, f: &mut Finding) {
    if f.id == "capture-loss" {
        return;
    }
    let near = |span: Option<(i64, i64)>| {
        span.is_some_and(|(first, last)| {
            first <= f.end_ns.saturating_add(MISS_AFTER)
                && last >= f.start_ns.saturating_sub(MISS_BEFORE)
        })
    };
    let missed = (c.client.unseen_acked_bytes() + c.server.unseen_acked_bytes()) > 0
        && (near(c.client.unseen_acked_span()) || near(c.server.unseen_acked_span()))
        && !c.client.ip_fragments()
        && !c.server.ip_fragments();
    let conf = &mut f.confidence;
    if missed {
        let level = if FROM_GAPS.contains(&f.id) {
            Level::Low
        } else {
            Level::Medium
        };
        conf.lower(level, CAPTURE_LOSS);
    }
    if c.role.inferred() {
        let level = if TIMED.contains(&f.id) {
            Level::Low
        } else {
            Level::Medium
        };
        conf.lower(level, MID_STREAM);
    } else if c.vantage() == Vantage::Unknown && SPLIT.contains(&f.id) {
        conf.lower(Level::Medium, VANTAGE);
    }
    if let crate::Details::RtoRetransmission(d) = &f.details {
        if d.inferred_from_probe_timing > 0 {
            conf.lower(Level::Low, PROBE_TIMING);
        } else if d.lost_before_capture_point > 0 {
            conf.lower(Level::Medium, INFERRED_LOSS);
        }
    }
    if c.client.duplicates() + c.server.duplicates() > 0 {
        conf.lower(Level::High, DUPLICATES);
    }
}
