//! # accept-queue-full: the server dropped the handshake's ACK and the request after it
//!
//! **Signal.** The handshake completed at the client (its ACK of the SYN-ACK left), the client
//! sent its request, and the server sent its SYN-ACK again, as if the ACK had never come:
//! the listener's accept queue was full (the application did not accept() in time), so the
//! kernel dropped the ACK (ListenOverflows, ListenDrops) and with it every data segment on
//! the connection, which the client resends with backoff until a place frees and a resent
//! SYN-ACK is answered. (With net.ipv4.tcp_abort_on_overflow=1 the server resets instead.)
//!
//! The SYN-ACK sent again is the same one (the server's ISN): a SYN-ACK with another ISN
//! answers another SYN (a middlebox that answers SYNs, a second backend).
//!
//! Without a SYN-ACK sent again (Linux does not always send it: the lab's full queue shows
//! both), the server's complete silence while the client's first data is resent again and
//! again, until the server takes a resend, tells the same: a path that lost one segment lets
//! one of its resends through; a host that drops everything for the connection until its
//! application accepts does not (confidence medium). A server that never takes the data
//! (silent until the client gives up, or closing the connection without having acknowledged
//! a byte, which shows its application had accepted it) is a path that drops the
//! connection's data: the timeout findings name those resends.
//!
//! **Evidence.** The client's data and its resends, with the server's SYN-ACK sent again.
//! Details: how many resends and SYN-ACKs, the waits.
//!
//! **Cost.** From the request's first transmission to its last resend while the server had
//! acknowledged none of the client's data (the backoff waits counted once): time the request
//! spent being resent, not loss on the path. Resends after the server took some data are the
//! path's (`rto-retransmission`, `fast-retransmit`).
//!
//! **Known false positives.** A SYN-ACK resent because the client's ACK was lost on the path
//! looks alike; then the server's later data ACKs arrive without waiting for an accept().
//!
//! **References.** Linux tcp_check_req / tcp_v4_syn_recv_sock (listen overflow),
//! net.core.somaxconn, tcp_abort_on_overflow; docs/tcp-signatures.md section 2.

use super::fast_retransmit::FastRetransmits;
use super::rto_retransmission::Timeouts;
use super::side_name;
use crate::finding::{ms, ms_f};
use crate::{Finding, Info};
use tcpwhy_track::{At, Connection, Side};

pub static INFO: Info = Info {
    id: "accept-queue-full",
    title: "the server's accept queue was full: it dropped the handshake's ACK and the request",
    doc: include_str!("accept_queue_full.rs"),
};

/// Report the client's resends on `c`, whose server sent its SYN-ACK again at `again.0`
/// (`again.1` times in all) after the client had acknowledged it, or (`None`) sent nothing at
/// all after the handshake while the client resent its first data.
pub(super) fn report(
    c: &Connection,
    again: Option<(At, u32)>,
    fast: &FastRetransmits,
    timeouts: &Timeouts,
    out: &mut Vec<Finding>,
) {
    let (count, cost, mut frames, first_from, last_at) = {
        let (fc, fcost, ff, fstart, fend) = fast.summary();
        let (tc, tcost, tf, tstart, tend) = timeouts.summary();
        let mut frames = ff;
        frames.extend(tf);
        (
            fc + tc,
            fcost + tcost,
            frames,
            fstart.into_iter().chain(tstart).min(),
            fend.into_iter().chain(tend).max(),
        )
    };
    let (Some(start), Some(end)) = (first_from, last_at) else {
        return;
    };
    if let Some((a, _)) = again {
        frames.push(a.frame());
    }
    if let Some(a) = c.handshake.ack {
        frames.push(a.frame());
    }
    frames.sort_unstable();
    frames.dedup();
    let mut f = Finding::new(INFO.id, c);
    f.start_ns = start;
    f.end_ns = again.map_or(end, |a| end.max(a.0.ts_ns));
    f.cost_ns = cost;
    f.frames = frames;
    let why = match again {
        Some((_, n)) => format!(
            "sent its SYN-ACK again {n} time{} after the client had acknowledged it: its accept queue was full, so it dropped the handshake's ACK and the client's data",
            if n == 1 { "" } else { "s" }
        ),
        None => "sent nothing at all after its SYN-ACK while the client's first data went unacknowledged: its accept queue was most likely full (it drops the handshake's ACK and the data after it)".to_string(),
    };
    f.explanation = format!(
        "{} {why}, which {} sent again {} time{}; {} lost waiting for a place in the queue.",
        side_name(c, Side::Server),
        side_name(c, Side::Client),
        count,
        if count == 1 { "" } else { "s" },
        ms(cost)
    );
    if again.is_none() {
        f.confidence.lower(
            crate::Level::Medium,
            "no SYN-ACK sent again: a server host dropping the data is inferred from its silence",
        );
    }
    f.fix = "the server application accepts too slowly for the connections coming in: accept() faster (more threads or an event loop), raise the listen() backlog and net.core.somaxconn, and watch nstat ListenOverflows/ListenDrops; not loss on the path".into();
    f.details = AcceptQueueFullDetails {
        client_resends: count,
        synack_resends: again.map_or(0, |a| a.1),
        wait_ms: ms_f(cost),
    }
    .into();
    out.push(f);
}

/// accept-queue-full: the server's SYN-ACKs sent again, the client's resends, the time lost.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AcceptQueueFullDetails {
    pub client_resends: u32,
    pub synack_resends: u32,
    pub wait_ms: f64,
}
