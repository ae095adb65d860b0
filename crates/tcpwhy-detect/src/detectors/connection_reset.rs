//! # connection-reset: the connection was aborted by a reset with work outstanding
//!
//! **Signal.** An established connection ends with an RST (RFC 9293 section 3.10.7) while
//! something was still owed: a request without its response, a response still being sent, or
//! data sent and not yet acknowledged. The request never completed: whoever waited for it got
//! an error instead (ECONNRESET), and usually retries.
//!
//! A reset of a connection with nothing outstanding (an idle connection closed by RST after
//! its last exchange, as browsers and load balancers do) is a close, not a finding; so is a
//! reset answering the peer's FIN, a reset from a side that had already closed with its own
//! FIN, everything it sent delivered or its FIN less than a round trip old (it answers data
//! the peer sent after that close, or that crossed it: the close ended the connection), a
//! reset of a handshake never completed (a refused or scanned port: `syn-refused`), and a
//! client resetting its own acknowledged request within a second with nothing in flight (it
//! sent and dropped on purpose; after a second or more it gave up waiting, and that is
//! named).
//!
//! **Evidence.** The open request's first segment (if any), the first RST, the last RST (a
//! peer that keeps sending into a reset connection draws one reset per segment). Details: who
//! reset, what was outstanding (the open request, bytes each side had in flight), how long
//! after the connection began and after its last data, how many resets.
//!
//! An RST that acknowledges (RST,ACK) every byte the peer sent shows none of the peer's data
//! was in flight: a close with unread data (a TLS close_notify) after a complete response.
//!
//! **Who sent it.** A firewall, IPS, load balancer or SYN proxy that cuts a connection sends
//! the reset in the host's name, from its own IP stack: its TTL (IPv6 hop limit) is its own
//! initial value less its own distance, not the host's. A reset whose TTL differs by more than
//! `PATH_DEVICE_HOPS` from the TTL of the same side's last ordinary segment (neither SYN, FIN
//! nor RST) came from another device (a route that changes mid-connection moves TTLs by a
//! hop or two): the explanation and the fix name that device, with both TTLs and the hops
//! they suggest, instead of the host's application.
//!
//! A client that resets its request after the server's stack acknowledged it and nothing was
//! answered for a second or more gave up waiting (its timeout): the explanation and the fix
//! name the server that did not answer, not the client's abort.
//!
//! **Cost.** From the open request's first byte (or, with only data in flight, the last
//! data before the reset) to the reset, or to the resetter's own FIN when it closed first
//! (it gave up there; its reset answers late data): time spent on work that never
//! completed, less the time in it that retransmission findings on the connection already
//! count (a sender that resets after its resends went unanswered for a minute has lost that
//! minute once, not twice).
//!
//! **Not made** on one subflow of a Multipath TCP connection (its SYN-ACK or later segments
//! carry the MPTCP option): the application's data may travel on the other subflows, so one
//! subflow's requests, replies and pauses are not the application's.
//!
//! **Confidence.** `low` when only an open request was outstanding (nothing in flight) and
//! one side had shown before it that it sends on its own schedule: the server went on with
//! an answer after a pause with nothing asked and nothing in flight (a stream, server push, a
//! timer), or the client sent more after a pause while its request was unanswered (a
//! stream's messages, a request in parts; as server-delay sees it, so not with server-delay
//! disabled). The client's last message may then be its reaction to the server's (an HTTP/2
//! WINDOW_UPDATE, a receipt) or a message that asks for nothing, not a request, and nothing
//! was owed when the connection was reset; the packets cannot tell which.
//!
//! **Known false positives.** An application that aborts on purpose (SO_LINGER {1, 0} to
//! skip TIME-WAIT) with data still unacknowledged looks alike; the reset is then deliberate,
//! yet the data in flight was still thrown away.
//!
//! **References.** RFC 9293 section 3.10.7.3; docs/tcp-signatures.md section 1 (a lost RST).

use super::{server_delay, side_name, ConnState, WHOLE};
use crate::finding::{ms, ms_f, Level};
use crate::model::exchange::SERVER_OWN;
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "connection-reset",
    title: "the connection was aborted by a reset with a request or data outstanding",
    doc: include_str!("connection_reset.rs"),
};

/// The first reset with something outstanding, and the resets after it (a part of the
/// connection's `Extra`: most connections are never reset).
#[derive(Debug)]
pub(crate) struct Reset {
    rst: At,
    last_rst: At,
    resets: u32,
    by: Side,
    /// The open request's first segment, and whether its response had begun.
    request: Option<(At, bool)>,
    /// Bytes each side (client, server) had sent and the other had not acknowledged.
    in_flight: [u64; 2],
    /// Only the open request was outstanding, and a side had shown before it that it sends
    /// on its own schedule (the exchange model's `SERVER_OWN`, server-delay's `CLIENT_OWN`).
    own_schedule: bool,
    /// The reset's TTL and the TTL of the resetter's last ordinary segment (0: none).
    ttl: (u8, u8),
}

#[derive(Default)]
pub struct ConnectionReset {}

/// The findings whose cost is retransmission time.
const RETRANSMISSIONS: [&str; 2] = ["rto-retransmission", "fast-retransmit"];

/// Why a reset whose only outstanding work is an open request, on a connection whose server
/// sends on its own schedule, is `low`.
const OWN_SCHEDULE_REASON: &str = "the open request may not be one: before it the server went on with its answer after a pause with nothing asked and nothing in flight, or the client sent more after a pause while its request was unanswered (a side that sends on its own schedule: a stream, push, a timer), so the client's last message may be a reaction or a message that asks for nothing, with nothing owed when the connection was reset";

/// A client that resets its own acknowledged request after this long gave up waiting for the
/// answer (client timeouts are seconds); sooner, it meant to abort.
const GAVE_UP_NS: i64 = 1_000_000_000;

/// A reset whose TTL differs from its sender's own segments by more than this many hops came
/// from another device: a route change moves TTLs by a hop or two, while a middlebox's reset
/// differs by its distance from the host or, far more often, by a different initial TTL
/// (255 against Linux's 64: 245 against 54 on real captures).
const PATH_DEVICE_HOPS: u8 = 3;

/// The initial TTL a received `ttl` most likely started from (the common ones: 64 for Linux
/// and macOS, 128 for Windows, 255 for network equipment, 32 for old stacks), and the hops
/// it crossed since.
fn hops(ttl: u8) -> (u8, u8) {
    let start = [32u8, 64, 128, 255]
        .into_iter()
        .find(|&s| ttl <= s)
        .unwrap_or(255);
    (start, start - ttl)
}

/// The reset's TTL `rst` came from another device than the side's own segments (`own`).
fn other_device((rst, own): (u8, u8)) -> bool {
    own != 0 && rst.abs_diff(own) > PATH_DEVICE_HOPS
}

/// Bytes of data `side` sent that its peer has not acknowledged (as far as the capture saw;
/// its FIN is no data).
fn unacked(c: &Connection, side: Side) -> u64 {
    let e = c.endpoint(side);
    match (e.next_seq(), c.endpoint(side.other()).max_ack()) {
        (Some(n), Some(a)) if n > a => {
            u64::from(n.diff(a).unsigned_abs()).saturating_sub(u64::from(e.fin.is_some()))
        }
        _ => 0,
    }
}

impl Detector for ConnectionReset {
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
        let flags = ev.seg.flags;
        if !flags.rst() {
            if !flags.syn() && !flags.fin() {
                cs.own_ttl[ev.from as usize] = ev.seg.ttl;
            }
            return;
        }
        if let Some(r) = cs.extra.peek_mut::<Reset>(WHOLE) {
            r.resets += 1;
            r.last_rst = ev.at;
            return;
        }
        // Established (or exchanging data without a captured handshake), and not closed by
        // FINs both ways first.
        let established = c.handshake.ack.is_some()
            || (c.role.inferred() && c.client.unique_bytes + c.server.unique_bytes > 0);
        // A reset answering the peer's FIN closes what the peer finished (an abortive close
        // instead of a FIN of its own): nothing of the peer's is lost. Nor is anything after
        // the peer's own reset (judged when it came; resets crossing on the way): the
        // connection was over.
        let peer_end = c.endpoint(ev.from.other());
        if !established || peer_end.fin.is_some() || peer_end.rst().is_some() {
            return;
        }
        // The RST's own sequence number is not data: in flight is from the tracker's view,
        // except that an RST that acknowledges (RST,ACK) tells what its sender had received:
        // all of the peer's data, when it acknowledges the peer's next sequence (a close with
        // unread data, after a complete response).
        let mut in_flight = [unacked(c, Side::Client), unacked(c, Side::Server)];
        let peer = ev.from.other();
        if ev.seg.flags.ack() && in_flight[peer as usize] > 0 {
            if let Some(next) = c.endpoint(peer).next_seq() {
                // Its FIN takes a sequence number but is no data.
                let fin = i32::from(c.endpoint(peer).fin.is_some());
                if ev.seg.ack.diff(next) >= -fin {
                    in_flight[peer as usize] = 0;
                }
            }
        }
        let request = cs.exchange.peek(cs.used).and_then(|x| x.open_request());
        // A request answered in full with nothing in flight is done: the reset closes an idle
        // connection.
        let outstanding =
            in_flight[0] + in_flight[1] > 0 || request.is_some_and(|(_, responded)| !responded);
        // The client resetting its own acknowledged request, nothing in flight, before any
        // answer could be expected to take long: a deliberate abort (send and drop), not a
        // client that gave up waiting.
        let gave_up = request.is_some_and(|(req, _)| ev.at.ts_ns - req.ts_ns >= GAVE_UP_NS);
        let deliberate = ev.from == Side::Client && in_flight == [0, 0] && !gave_up;
        // The resetting side had closed with its FIN, everything of its own delivered: its
        // reset answers data the peer sent after that close (a closed socket's answer, RFC
        // 9293 section 3.10.7.1; Linux resets instead of sending a FIN when it closes with
        // data unread). The close ended the connection; the peer wrote into it afterwards.
        // Its own last bytes may still be in flight when the peer's data, crossing its FIN,
        // draws the reset: within a round trip of the FIN nothing could have acknowledged
        // them (a TLS close_notify, a protocol's goodbye message sent with the FIN).
        let me = ev.from as usize;
        let crossed = c.endpoint(ev.from).fin.is_some_and(|fin| {
            super::rtt_ns(c).is_some_and(|rtt| ev.at.ts_ns - fin.ts_ns < rtt)
        });
        let closed_before =
            c.endpoint(ev.from).fin.is_some() && (in_flight[me] == 0 || crossed);
        if !outstanding || deliberate || closed_before {
            return;
        }
        let request = request.filter(|(_, responded)| !responded || in_flight[1] > 0);
        let own_schedule = in_flight == [0, 0]
            && request.is_some_and(|(_, responded)| !responded)
            && (cs.exchange_has & SERVER_OWN != 0
                || cs.server_delay_exchanges & server_delay::CLIENT_OWN != 0);
        cs.extra.set(
            WHOLE,
            Reset {
                rst: ev.at,
                last_rst: ev.at,
                resets: 1,
                by: ev.from,
                request,
                in_flight,
                own_schedule,
                ttl: (ev.seg.ttl, cs.own_ttl[ev.from as usize]),
            },
        );
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(r) = cs.extra.take::<Reset>(WHOLE) else {
            return;
        };
        let start = match r.request {
            Some((req, _)) => req,
            None => {
                // Only data in flight: from the last data of the side whose data was lost.
                let side = if r.in_flight[0] >= r.in_flight[1] {
                    Side::Client
                } else {
                    Side::Server
                };
                At::new(r.rst.frame(), c.endpoint(side).last_ts.min(r.rst.ts_ns))
            }
        };
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = start.ts_ns.min(r.rst.ts_ns);
        f.end_ns = r.last_rst.ts_ns;
        // A resetter that had closed with its FIN first gave up there: what came after the
        // FIN (its reset answers the peer's late data) was nobody's wait.
        let gave_up_at = match c.endpoint(r.by).fin {
            Some(fin) if fin.ts_ns < r.rst.ts_ns => fin.ts_ns.max(f.start_ns),
            _ => r.rst.ts_ns,
        };
        let span = (gave_up_at - f.start_ns).max(0);
        // The retransmission findings of this connection (pushed before this one): the time
        // they count inside the span, and whether the resetter's resends met a silent peer.
        let mut counted = 0i64;
        let mut gave_up = false;
        for g in out
            .iter()
            .filter(|g| g.connection == f.connection && RETRANSMISSIONS.contains(&g.id))
        {
            let overlap = (g.end_ns.min(gave_up_at) - g.start_ns.max(f.start_ns)).max(0);
            counted += overlap.min(g.cost_ns);
            gave_up |= matches!(&g.details, crate::Details::RtoRetransmission(d)
                if d.sender == r.by.name() && d.receiver_silent);
        }
        let counted = counted.min(span);
        f.cost_ns = span - counted;
        f.frames = [r.request.map(|q| q.0), Some(r.rst), Some(r.last_rst)]
            .into_iter()
            .flatten()
            .map(|a| a.frame())
            .collect();
        f.frames.sort_unstable();
        f.frames.dedup();
        let flight = match r.in_flight {
            [0, 0] => String::new(),
            [n, 0] => format!("{n} bytes from the client unacknowledged"),
            [0, n] => format!("{n} bytes from the server unacknowledged"),
            [a, b] => format!("{a} bytes from the client and {b} from the server unacknowledged"),
        };
        let what = match (r.request, flight.is_empty()) {
            (Some((_, false)), true) => "a request waiting for its response".to_string(),
            (Some((_, false)), false) => format!("a request waiting for its response, {flight}"),
            (Some((_, true)), _) => format!("a response being sent, {flight}"),
            (None, _) => flight,
        };
        let spent = if counted > 0 {
            format!(
                "{} spent on it, {} of which retransmission findings count: {} more",
                ms(span),
                ms(counted),
                ms(f.cost_ns)
            )
        } else {
            format!("{} spent on it", ms(span))
        };
        // The client reset its request after the server had acknowledged it and answered
        // nothing for a second or more: the client's timeout ended a wait on the server.
        // (Not when the server sends on its own schedule: then the request may not be one.)
        let unanswered = !gave_up
            && !r.own_schedule
            && r.by == Side::Client
            && r.in_flight == [0, 0]
            && matches!(r.request, Some((_, false)))
            && span >= GAVE_UP_NS;
        let what = if unanswered {
            format!(
                "{what}, which {} had acknowledged and not answered in {}",
                side_name(c, Side::Server),
                ms(span)
            )
        } else {
            what
        };
        let device = other_device(r.ttl);
        let after = ms(r.rst.ts_ns - c.first.ts_ns);
        let opening = if device {
            format!(
                "a device on the path reset the connection in the name of {} {after} after it began (the reset came with TTL {}, the {}'s own packets with {})",
                side_name(c, r.by),
                r.ttl.0,
                r.by.name(),
                r.ttl.1
            )
        } else {
            format!("{} reset the connection {after} after it began", side_name(c, r.by))
        };
        f.explanation = format!(
            "{opening}, with {what}{}{}; the work in progress never completed ({spent}).",
            if r.resets > 1 {
                format!(" ({} resets: the peer kept sending)", r.resets)
            } else {
                String::new()
            },
            if gave_up {
                format!(
                    ", giving up after its resends went unanswered by {}",
                    side_name(c, r.by.other())
                )
            } else {
                String::new()
            },
        );
        if r.own_schedule {
            f.confidence.lower(Level::Low, OWN_SCHEDULE_REASON);
        }
        f.fix = if device {
            let ((s1, h1), (s2, h2)) = (hops(r.ttl.0), hops(r.ttl.1));
            let place = match h1.cmp(&h2) {
                std::cmp::Ordering::Equal => format!(
                    " (as far from the capture point as the {} itself: a load balancer, firewall or SYN proxy in front of it)",
                    r.by.name()
                ),
                std::cmp::Ordering::Less => format!(
                    " (between the capture point and the {}, about {h1} hops from the capture point)",
                    r.by.name()
                ),
                std::cmp::Ordering::Greater => String::new(),
            };
            format!(
                "the reset did not come from the {}'s host: it came with TTL {} (a stack starting at {s1}: {h1} hops away), the {}'s own packets with {} ({s2}: {h2} hops), so a firewall, IPS, load balancer or proxy sent it{place}; find that device and why it cut the connection (an idle or connection-tracking timeout, an inspection or policy rule, a connection limit)",
                r.by.name(),
                r.ttl.0,
                r.by.name(),
                r.ttl.1,
            )
            .into()
        } else if unanswered {
            "the server's stack acknowledged the request and its application never answered: the client gave up (its timeout) and the reset is the consequence; find why the server did not answer (stuck or overloaded, waiting on a backend, or rejecting the request without a word)".into()
        } else if gave_up {
            format!(
                "the {} gave up on a peer that stopped answering (see its rto-retransmission finding): find why the {} went silent (hung, restarted, gone, or its packets lost on the path); the reset is the consequence",
                r.by.name(),
                r.by.other().name()
            )
            .into()
        } else {
            format!(
                "find why the {} aborted: its application closing with unread data or SO_LINGER {{1,0}}, a crash or restart, an idle or connection-tracking timeout in a firewall or load balancer on the path (which resets on the hosts' behalf), or a protocol error it rejected",
                r.by.name()
            )
            .into()
        };
        f.details = ConnectionResetDetails {
            after_ms: ms_f(r.rst.ts_ns - c.first.ts_ns),
            client_bytes_in_flight: r.in_flight[0],
            counted_as_retransmission_ms: ms_f(counted),
            gave_up_on_silent_peer: gave_up,
            outstanding_ms: ms_f(span),
            path_device: device,
            request_open: r.request.is_some(),
            reset_by: r.by.name(),
            reset_ttl: r.ttl.0,
            resets: r.resets,
            response_begun: r.request.map(|q| q.1),
            sender_ttl: (r.ttl.1 != 0).then_some(r.ttl.1),
            server_bytes_in_flight: r.in_flight[1],
        }
        .into();
        out.push(f);
    }
}

/// connection-reset: who reset, what was outstanding, and the time it cost.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ConnectionResetDetails {
    pub after_ms: f64,
    pub client_bytes_in_flight: u64,
    pub counted_as_retransmission_ms: f64,
    pub gave_up_on_silent_peer: bool,
    pub outstanding_ms: f64,
    /// The reset came from another device than the `reset_by` side's own segments (their
    /// TTLs differ by more than `PATH_DEVICE_HOPS`): a firewall, IPS, load balancer or proxy.
    pub path_device: bool,
    pub request_open: bool,
    pub reset_by: &'static str,
    /// The reset's IP TTL (IPv6 hop limit).
    pub reset_ttl: u8,
    pub resets: u32,
    pub response_begun: Option<bool>,
    /// The TTL of the `reset_by` side's last segment that was neither SYN, FIN nor RST (null:
    /// it sent none).
    pub sender_ttl: Option<u8>,
    pub server_bytes_in_flight: u64,
}
