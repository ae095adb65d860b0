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
//! - packets captured twice (set aside as copies): noted, the level unchanged;
//! - one direction of the connection only (one side acknowledges the other's SYN or data and
//!   not one packet of that side is in the capture: a capture filter or asymmetric routing):
//!   `medium`, since its ACKs, answers and close are unseen;
//! - a relay near the capture point ends the client's connection and speaks for the server
//!   over a leg the capture cannot see (a VPN or capture app's own TCP stack, a virtual
//!   machine's NAT, a split-TCP middlebox). Its sign: the server's side acknowledges the
//!   client's data within 10 ms and sooner than its SYN-ACK came, where nothing at the
//!   server's distance can acknowledge faster than the round trip to it. Then the ACK clock
//!   is the relay's, so findings read from the server's flights, pauses and holds (and from
//!   its round-trip samples) are `low`. When the SYN-ACK came without the MSS option the
//!   client's SYN carried (operating systems' stacks always send it; minimal user-space
//!   stacks do not), the relay answered the SYN itself, so the handshake does not measure the
//!   server's round trip either and the server's turns (`server-delay`, `path-latency`) are
//!   `low` too. Otherwise the sign must be strong (the ACKs in under a quarter of the
//!   SYN-ACK's time and at least 1 ms sooner, seen away from the server), and the turns keep
//!   their level: such a relay (a virtual machine's NAT) answers the SYN only once its own
//!   connection to the server is up, so the handshake took the server's round trip. The
//!   10 ms keeps out a SYN-ACK that was late on a long path (sent again): the data's ACKs
//!   then take that path's round trip. A relay that answered the SYN itself is the capture
//!   point's own stack (a capture app reading a phone's tun device): it stamps the client's
//!   packets as it reads them, in batches (nDPI's Android captures: every 50 ms), so a
//!   `client-delay` within twice the client's slowest acknowledgement of server data (which
//!   the batches delay too), or with none seen, is `low`.

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
pub const ONE_WAY: &str = "the capture holds one direction of this connection only (one side acknowledges the other's SYN or data, and not one packet of that side is in the capture: a capture filter, asymmetric routing): its ACKs are not seen, so a fast retransmit can look like a timeout, and whether it answered or closed is unknown";
pub const PROBE_TIMING: &str =
    "a loss before the capture point is inferred from a silence as long as Linux's loss probe (no IPv4 IDs to count): a sender pausing that long would look the same";

pub const RELAY: &str = "the server's side acknowledged the client's data sooner than its SYN-ACK came: a relay near the capture point acknowledges for the server, so the server's flights and pauses are timed by the relay";
pub const RELAY_READS: &str = "a relay at the capture point answered the SYN itself (a capture or VPN app's own stack): it times the client's packets as it reads them, in batches, and this wait is within twice the client's slowest acknowledgement (or none was seen), so it can be those batches";
pub const RELAY_SYN: &str = "a SYN-ACK without the MSS option the SYN carried, and the client's data acknowledged sooner than it came: a relay near the capture point answered for the server, so the server's turns include a leg the capture cannot see";

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

/// Findings that time the server's turns (the server's round trip comes from the handshake).
const SERVER_TURNS: [&str; 2] = ["server-delay", "path-latency"];
/// Findings read from the server's flights, pauses and round-trip samples: the server's when
/// it is the sender (`queueing-delay` has no sender detail).
const SENDER_TIMED: [&str; 4] = [
    "sender-limited",
    "nagle-delayed-ack",
    "slow-start-restart",
    "rwnd-limited",
];

/// What a relay near the capture point takes from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// The relay acknowledges the client's data: the ACK clock is the relay's.
    Acks,
    /// The relay also answered the SYN itself: the handshake is the relay's as well.
    AnswersSyn,
}

/// Whether a relay near the capture point acknowledges for the server, and how much of the
/// server's timing it takes (the module's doc says how it shows).
pub fn relay(c: &Connection) -> Option<Relay> {
    use crate::model::MS;
    let syn_ack = c.syn_to_syn_ack_ns()?;
    let ack = c.client.ack_rtt.median_ns()?;
    if ack >= syn_ack || ack > 10 * MS {
        return None;
    }
    if c.server.mss().is_none() && c.client.mss().is_some() {
        return Some(Relay::AnswersSyn);
    }
    // Near the server its own ACKs come at once: "far sooner" means something only away
    // from it.
    let away = matches!(c.vantage(), Vantage::NearClient | Vantage::Middle);
    (away && ack * 4 < syn_ack && syn_ack - ack >= MS).then_some(Relay::Acks)
}

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
    let clocked = f.id == "queueing-delay"
        || (SENDER_TIMED.contains(&f.id) && f.details.sender() == Some("server"));
    if clocked || SERVER_TURNS.contains(&f.id) {
        match relay(c) {
            Some(Relay::AnswersSyn) => conf.lower(Level::Low, RELAY_SYN),
            Some(Relay::Acks) if clocked => conf.lower(Level::Low, RELAY),
            _ => {}
        }
    }
    if f.id == "client-delay" && relay(c) == Some(Relay::AnswersSyn) {
        let slowest_ack = (c.server.ack_rtt.count() > 0).then_some(c.server.ack_rtt.max_ns);
        if slowest_ack.is_none_or(|a| f.cost_ns <= 2 * a) {
            conf.lower(Level::Low, RELAY_READS);
        }
    }
    if c.unseen_side().is_some() {
        conf.lower(Level::Medium, ONE_WAY);
    }
    if c.client.duplicates() + c.server.duplicates() > 0 {
        conf.lower(Level::High, DUPLICATES);
    }
}
