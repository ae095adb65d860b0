//! Models: what the detectors read beside the packets, built from every segment of a
//! connection. `exchange` splits each request/response exchange's latency into its parts;
//! `stall` finds the gaps without progress in a transfer and classifies them. They keep their
//! state in the connection's slots (`crate::slots`), reached through a trait each
//! (`exchange::Place`, `stall::Place`) that `detectors::ConnState` implements: a model names
//! no detector.

pub mod exchange;
pub mod stall;

use tcpwhy_track::{Connection, Side};

/// A millisecond in nanoseconds.
pub(crate) const MS: i64 = 1_000_000;

/// The connection's round trip as well as the capture tells it: the handshake, else the
/// smallest full-path sample, else (no handshake: a connection that began before the capture)
/// the sum of each side's smallest data -> ACK time. The capture point splits the path in
/// two; each side's data -> ACK time covers the part beyond the capture point and back, so
/// together they cover the whole round trip once, from any vantage point.
pub(crate) fn rtt_ns(c: &Connection) -> Option<i64> {
    c.handshake_rtt_ns()
        .or_else(|| c.rtt_summary().map(|r| r.0))
        .or_else(|| {
            let min = |side: Side| {
                let r = &c.endpoint(side).ack_rtt;
                (r.count() > 0).then_some(r.min_ns)
            };
            match (min(Side::Client), min(Side::Server)) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        })
        .filter(|r| *r > 0)
}
