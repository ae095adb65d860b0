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

/// The connection's round trip (`rtt_ns`) bounded by its fastest exchange: no exchange is
/// faster than the trip from the capture point to the server and back, which the handshake's
/// SYN -> SYN-ACK leg measures, so an exchange of `fastest_ns` (a request to its answer) that
/// is shorter than half that leg (beyond any jitter of round trips) shows the leg was slowed
/// by something other than the path (a server or firewall slow to answer SYNs, a first
/// contact's address resolution), and that leg is taken as `fastest_ns`. Returns the round
/// trip and the capture point's leg to the server, each bounded.
pub(crate) fn bounded_rtt(c: &Connection, fastest_ns: i64) -> Option<(i64, i64)> {
    let rtt = rtt_ns(c)?;
    let leg = c.syn_to_syn_ack_ns();
    match (c.handshake_rtt_ns(), leg) {
        (Some(hs), Some(leg)) if hs == rtt && 2 * fastest_ns < leg => {
            Some((rtt - leg + fastest_ns, fastest_ns))
        }
        _ => Some((rtt, leg.unwrap_or(0))),
    }
}
