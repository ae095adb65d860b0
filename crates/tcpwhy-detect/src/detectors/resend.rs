//! A retransmission as the retransmission detectors share it: classified once by
//! `retx::Retransmissions`, then reported by the timeout, fast, spurious and accept-queue
//! findings. It depends on none of them, so none of them depends on another through it.

use crate::Finding;
use tcpwhy_track::{At, Connection, Side, Vantage};
use tcpwhy_wire::Seq;

/// A retransmission, classified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retx {
    /// The range's last transmission before this one (the original, or the resend before).
    pub original: Option<At>,
    pub at: At,
    /// When the wait began: the original transmission, or, for a segment lost before the
    /// capture point, when the capture saw the hole it left.
    pub from_ns: i64,
    pub start: Seq,
    pub end: Seq,
    /// Resent within about a round trip of the ACK that announced the loss.
    pub fast: bool,
    /// The peer had the data already (acknowledged before the resend; `dsack`: reported twice).
    pub spurious: bool,
    pub dsack: bool,
    /// ... shown by the ACK that covered it coming, at the sender's side of the path, sooner
    /// than half a round trip after it: that ACK answered the original.
    pub acked_too_soon: bool,
    /// ... shown by the first ACK that covered it echoing a timestamp the sender sent before
    /// this resend (RFC 3522, Eifel): that ACK answered the original.
    pub echoed_original: bool,
    /// This resend's TCP timestamp (TSval), if it carried one.
    pub tsval: Option<u32>,
    /// The capture never saw the original: lost before the capture point.
    pub upstream: bool,
    /// ... judged from the silence's length alone (a Linux loss probe's timing, no IDs).
    pub by_timing: bool,
    /// It was the last segment sent so far (tail loss).
    pub tail: bool,
    /// The peer had acknowledged nothing of this sender's data yet (after its SYN-ACK, for a
    /// client: silent since the handshake).
    pub peer_silent: bool,
    /// Timeouts of this sequence before this resend (each doubled the timer).
    pub backoff: u32,
    pub len: u32,
    /// Part of it was first sent past the window the receiver advertised (the receiver
    /// dropped it for want of room, not the path).
    pub beyond_window: bool,
}

/// Evidence frames of some retransmissions: each original and its retransmission, ascending.
pub(crate) fn evidence(seen: &[Retx]) -> Vec<u64> {
    let mut frames: Vec<u64> = seen
        .iter()
        .flat_map(|r| {
            r.original
                .map(|o| o.frame())
                .into_iter()
                .chain([r.at.frame()])
        })
        .collect();
    frames.sort_unstable();
    frames.dedup();
    frames
}

/// The confidence reason of resends of data whose sender had closed and then reset.
const SENDER_CLOSED: &str = "the sender closed its side (FIN) before the first resend and answered the peer's next packet with a reset (a socket closed for good): it waited for nothing after its close, so nobody on its side waited for the resends";

/// Slack on the round trip within which a reset answers the peer's last packet.
const ANSWERED_SLACK_NS: i64 = 10_000_000;

/// Whether `sender` closed its side after the first resent data left (`first.from_ns`) and
/// before that data's resend (`first.at`), and then reset the connection in answer to the
/// peer: its first reset came within a round trip of the peer's last packet, which came
/// after the close. A socket closed for good (close(), not a half-close) answers data that
/// arrives with a reset (Linux counts it as TCPAbortOnData), so it had finished with the
/// connection and nobody on its side waited for what the resends delivered: `f` says so and
/// is `low`. (A sender that half-closed and later reset a silent peer gave up waiting on its
/// own timer: its wait was real.)
pub(crate) fn sender_closed_first(
    f: &mut Finding,
    c: &Connection,
    sender: Side,
    first: &Retx,
) -> bool {
    let e = c.endpoint(sender);
    let (Some(fin), Some(rst), Some(rtt)) = (e.fin, e.rst(), crate::model::rtt_ns(c)) else {
        return false;
    };
    let (fin, resent) = (fin.ts_ns, first.at.ts_ns);
    let peer_last = c.endpoint(sender.other()).last_ts;
    let answered = peer_last > fin
        && peer_last <= rst.ts_ns
        && rst.ts_ns - peer_last <= rtt + ANSWERED_SLACK_NS;
    if !(fin > first.from_ns && fin <= resent && answered) {
        return false;
    }
    f.explanation.push_str(&format!(
        " The sender closed its side {} before the first resend and answered the peer's next packet with a reset (a socket closed for good): it waited for nothing after its close, so nobody on its side waited for the resends.",
        crate::finding::ms(resent - fin)
    ));
    f.confidence.lower(crate::Level::Low, SENDER_CLOSED);
    true
}

/// Where to look for the loss of `sender`'s data on `c`, as the capture tells it: both ends
/// on the capturing host, the originals seen passing a capture point next to the receiver
/// (the handshake's split; `upstream`: some were lost before the capture point), or the path.
pub(crate) fn where_lost(c: &Connection, sender: Side, upstream: bool) -> String {
    let receiver = c.endpoint(sender.other()).addr;
    match (c.vantage(), sender, upstream) {
        (Vantage::Local, _, _) => "both ends are on the capturing host, so the host itself dropped the data: a firewall rule, a full receive queue or backlog (nstat TcpExtTCPBacklogDrop, TCPRcvQDrop), a qdisc limit".to_string(),
        (Vantage::NearClient, Side::Server, false) | (Vantage::NearServer, Side::Client, false) => format!(
            "the originals passed the capture point next to the receiver ({receiver}): they were lost on the last stretch to it (its access link, e.g. Wi-Fi, or the host itself: a firewall rule, a full receive queue or backlog, nstat TcpExtTCPRcvQDrop, TCPBacklogDrop) or its ACKs were lost on the way back; look there before the wider path"
        ),
        _ => "find the loss on the path (interface drops, a policer, a congested queue)".to_string(),
    }
}
