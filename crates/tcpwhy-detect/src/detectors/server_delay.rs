//! # server-delay: the server took long to answer a request
//!
//! **Signal.** In request/response traffic (HTTP/1, Redis, databases, RPC) the client's
//! request ends, and the server's first response byte comes long after: longer than the round
//! trip between the capture point and the server by at least 50 ms and 4 round trips. That is
//! the server's own time: the application (or what it waits for) was slow, not the network.
//!
//! **Evidence.** The last request segment, the server's ACK of it if it came first, the first
//! response segment. Details: exchanges affected, server time per exchange, whether the
//! server's TCP stack acknowledged the request promptly (the host was alive, the application
//! was not answering).
//!
//! **Cost.** The server time of each slow exchange (the wait less the round trip).
//!
//! **Round trip.** The handshake's, unless it was slowed by something other than the path (a
//! late SYN-ACK: a first contact's address resolution, a server or firewall slow with SYNs):
//! no exchange is faster than the path's round trip, so an exchange (a request's last byte to
//! its answer, never timed from a resent request) shorter than half the SYN -> SYN-ACK leg
//! bounds both the round trip and the capture point's leg to the server (`bounded_rtt`, as
//! path-latency does). Only where the path's typical round trip (the medians of each side's
//! data-to-ACK times, added) is as short, since on a path whose round trip swings the
//! fastest exchange is its best moment, and not behind a relay that acknowledges for the
//! server. Exchanges within four handshake round trips are kept aside and judged again by the
//! bounded one when the connection ends.
//!
//! A server that speaks first (SMTP, FTP, POP3, IMAP, MySQL, SSH on their ports) owes its
//! greeting once the handshake completes: a greeting withheld is the server's time too.
//!
//! The answer is data whose acknowledgment covers the request: data that acknowledges less
//! left the server before the request reached it (messages crossing, or a request lost on
//! the way and sent again into a blackout), so it is no answer, and the request is dropped
//! (what the server sends later is its next message, not an answer).
//!
//! Not counted, as a careful reader of the packets would not: a reply that is not the server
//! working but someone's timer or a person, to a request that began after a second or more of
//! quiet from the server (a turn a person or a timer started, not a machine asking right after
//! connecting or after the last answer): a message under 100 bytes answering a message under
//! 100 bytes a second or more later (a person typing in a chat, a device's status message),
//! and a reply exactly as long as a request of at most 200 bytes (keepalives or heartbeats
//! that both sides send on their own timers, crossing).
//!
//! A side can show that it sends on its own schedule, not in turns:
//! - the server sent more after a pause inside its answer, with nothing in flight and no
//!   request since (a stream, server push, a timer, or an answer given in parts): what looks
//!   like an answer later may be its next scheduled message, and the "request" the client's
//!   reaction to the last one (an HTTP/2 WINDOW_UPDATE, a chat's receipt);
//! - the client sent more after a pause while its request was unanswered, with everything it
//!   had sent acknowledged (messages on its own timer, or a request in parts): the server may
//!   have waited for the rest, and an answer may follow either message.
//!
//! The packets cannot tell these from a slow server, so a finding with a slow exchange
//! counted after either sign is `low`, with the reason; exchanges before it keep their
//! level. A pause here is at least 200 ms and four round trips, beyond the capture point's
//! way to the server.
//!
//! **Not made** on one subflow of a Multipath TCP connection (its SYN-ACK or later segments
//! carry the MPTCP option): the application's data may travel on the other subflows, so one
//! subflow's requests, replies and pauses are not the application's.
//!
//! Nor between the peers of BGP, LDP, MSDP or BMP (either side on port 179, 646, 639 or
//! 11019): each peer sends when its own routes, labels or timers change, so no message
//! answers another and a pause owes nothing.
//!
//! A connection begun before the capture is judged too where the server is the side on a
//! well-known or non-ephemeral port (`RoleSource::Port`; not where only the first packet told
//! the roles), for answers that begin with a full segment after the server's pure ACK of the
//! request: its TCP had the whole request, and the answer is a work product, not a status
//! message or a message on its own schedule (without a handshake the turns show no more).
//! Its capture point's share of the round trip is then the fastest the server acknowledged
//! the client's data, and the finding is `low`, as every finding on such a connection
//! (`confidence`).
//!
//! **Known false positives.** Protocols where the server speaks on its own schedule (server
//! push, streaming, long polling) look like slow answers. The capture point's share of the
//! round trip comes from the handshake, else from the server's ACKs of the client's data.
//!
//! **References.** docs/tcp-signatures.md section 7.

use super::{rtt_ns, side_name, to_sender, ConnState, MS, WHOLE};
use crate::model::bounded_rtt;
use crate::model::exchange::{self, own_pause};
use crate::finding::{ms, ms_f, Level};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, RoleSource, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "server-delay",
    title: "the server took long to answer (application time, not network)",
    doc: include_str!("server_delay.rs"),
};

const MIN_DELAY: i64 = 50 * MS;
const KEEP: usize = 8;
/// Messages smaller than this are lines or status words, not work products.
const TINY: u64 = 100;
/// A reply this long, exactly as long as its request, is a keepalive crossing another.
const KEEPALIVE_MAX: u64 = 200;

/// `ConnState::server_delay_exchanges` bit: the request now waiting began after a second or
/// more of quiet from the server (a person or a timer starting a turn, not a machine asking
/// right after connecting or right after the last answer).
const QUIET: u32 = 1 << 31;
/// `Found::after_own` bit: the server sent more after a pause inside its answer, with nothing
/// in flight and no request since (the exchange model's `SERVER_OWN`; module documentation).
const SERVER_OWN: u32 = 1 << 30;
/// `ConnState::server_delay_exchanges` bit: the client sent more after a pause while its
/// request was unanswered and all it had sent was acknowledged (module documentation). Read
/// by connection-reset too.
pub(crate) const CLIENT_OWN: u32 = 1 << 29;
/// `ConnState::server_delay_exchanges` bit: the request's last segment so far was sent again
/// (Karn: the answer may be the original's, so the exchange times no round trip).
const RESENT: u32 = 1 << 28;
/// The bits of `ConnState::server_delay_exchanges` that are not the count.
const FLAGS: u32 = QUIET | CLIENT_OWN | RESENT;

/// The request/response exchanges server-delay has seen on the connection.
pub(crate) fn exchanges(cs: &ConnState) -> u32 {
    cs.server_delay_exchanges & !FLAGS
}

/// Why a finding with a slow exchange after `CLIENT_OWN` is `low`.
const CLIENT_OWN_REASON: &str = "before a slow answer the client sent more after a pause while its request was unanswered (all it had sent acknowledged): it sends on its own schedule or in parts, so the server may have waited for the rest, and the capture cannot tell which message an answer answers";
/// Why a finding with a slow exchange after `SERVER_OWN` is `low`.
const SERVER_OWN_REASON: &str = "before a slow answer the server sent more after a pause with nothing asked and nothing in flight: it sends on its own schedule (a stream, push, a timer) or answers in parts, so what looks like a late answer may be its next message";

/// Ports of protocols whose server speaks first: FTP, SSH, SMTP (25, 465, 587), POP3 (110,
/// 995), NNTP, IMAP (143, 993), MySQL, VNC.
pub(crate) const SERVER_FIRST: [u16; 13] = [
    21, 22, 25, 110, 119, 143, 465, 587, 993, 995, 3306, 5900, 2525,
];

/// The round trip between the capture point and the server: the handshake's share of it, or,
/// for a connection begun before the capture, the fastest the server acknowledged the
/// client's data (0 before any).
fn server_leg(c: &Connection) -> i64 {
    if c.role.inferred() {
        let r = &c.client.ack_rtt;
        if r.count() > 0 {
            r.min_ns
        } else {
            0
        }
    } else {
        to_sender(c, Side::Server)
    }
}

/// The server speaks first on `c`'s port.
pub(crate) fn server_speaks_first(c: &Connection) -> bool {
    SERVER_FIRST.contains(&c.server.port)
}

#[derive(Default, Debug)]
pub(crate) struct State {
    /// The last segment of the request now waiting for an answer.
    request_last: Option<At>,
    /// The server's pure ACK of it, if one came before the response.
    acked: Option<At>,
    // The exchanges seen so far are `ConnState::server_delay_exchanges` (in padding there;
    // here they made the state 8 bytes longer), its top bit `QUIET`.
}

/// The slow answers (a part of the connection's `Extra`): most connections have none.
#[derive(Default, Debug)]
pub(crate) struct Found {
    slow: Vec<(At, Option<At>, At, i64)>,
    /// Answers 50 ms or more beyond the handshake's round trip but within four of them, with
    /// the `SERVER_OWN`/`CLIENT_OWN` signs seen before each: named at the end if a faster
    /// exchange shows the handshake's round trip was slowed (`bounded_rtt`).
    maybe: Vec<(At, Option<At>, At, u32)>,
    /// Of `slow`, those named by the bounded round trip.
    by_bound: u32,
    count: u32,
    /// `SERVER_OWN` and `CLIENT_OWN`: the signs seen before a slow exchange was counted.
    after_own: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct ServerDelay {}

impl Detector for ServerDelay {
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
        if ev.seg.flags.syn() || ev.seg.flags.rst() || c.role == RoleSource::FirstPacket {
            return;
        }
        let request_bytes = cs.exchange.peek(cs.used).map_or(0, |x| x.request_bytes());
        // A pause long enough to show a side's own schedule (module documentation), beyond
        // the capture point's round trip to the server.
        let schedule_pause = || own_pause(c) + server_leg(c);
        let st = cs.server_delay.get(&mut cs.used);
        if ev.from == Side::Client
            && c.handshake.ack == Some(ev.at)
            && server_speaks_first(c)
            && c.server.unique_bytes == 0
        {
            // The handshake is complete: the server owes its greeting.
            st.request_last = Some(ev.at);
            st.acked = None;
            return;
        }
        match ev.from {
            Side::Client if ev.seg.payload_len > 0 && ev.new_data => {
                if st.request_last.is_some_and(|r| ev.at.ts_ns - r.ts_ns >= schedule_pause())
                    && c.server.max_ack().is_some_and(|a| a >= ev.seg.seq)
                {
                    cs.server_delay_exchanges |= CLIENT_OWN;
                }
                if st.request_last.is_none() {
                    // The request's first segment: how long the server had been quiet.
                    let quiet = ev.at.ts_ns - c.server.last_ts >= 1_000 * MS;
                    let n = &mut cs.server_delay_exchanges;
                    *n = (*n & !QUIET) | if quiet { QUIET } else { 0 };
                }
                st.request_last = Some(ev.at);
                st.acked = None;
                cs.server_delay_exchanges &= !RESENT;
            }
            // The request sent again: the server could not answer before it had it (the wait
            // before is the retransmission's, reported by the retransmission detectors).
            Side::Client
                if ev.seg.payload_len > 0 && ev.retransmission && st.request_last.is_some() =>
            {
                st.request_last = Some(ev.at);
                cs.server_delay_exchanges |= RESENT;
            }
            Side::Server
                if ev.seg.payload_len == 0 && st.request_last.is_some() && st.acked.is_none() =>
            {
                st.acked = Some(ev.at);
            }
            Side::Server if ev.new_data && ev.seg.payload_len > 0 => {
                let Some(req) = st.request_last.take() else {
                    return;
                };
                // Data whose ACK does not cover all the client sent (its FIN aside) left the
                // server before the request reached it: the server speaks on its own
                // (messages crossing) or the request was lost on the way (sent again into a
                // blackout). Either way this is no answer, and what the server sends later
                // is its next message, not one.
                let sent = c.client.next_seq().map(|n| n - u32::from(c.client.fin.is_some()));
                if sent.is_some_and(|n| ev.seg.ack < n) {
                    st.acked = None;
                    return;
                }
                let quiet_before = cs.server_delay_exchanges & QUIET != 0;
                let server_own = cs.exchange_has & exchange::SERVER_OWN != 0;
                let own = (cs.server_delay_exchanges & CLIENT_OWN)
                    | if server_own { SERVER_OWN } else { 0 };
                cs.server_delay_exchanges += 1;
                let rtt = rtt_ns(c).unwrap_or(0);
                // Less the capture point's round trip to the server (the handshake split).
                let server_time = ev.at.ts_ns - req.ts_ns - server_leg(c);
                let reply = u64::from(ev.seg.payload_len);
                let greeting = request_bytes == 0;
                // Someone's timer or a person, not the server working (module documentation).
                let person_or_timer = !greeting
                    && quiet_before
                    && ((request_bytes < TINY && reply < TINY && server_time >= 1_000 * MS)
                        || (reply == request_bytes && reply <= KEEPALIVE_MAX));
                let latency_us = u32::try_from((ev.at.ts_ns - req.ts_ns) / 1000)
                    .unwrap_or(u32::MAX)
                    .max(1);
                let resent = cs.server_delay_exchanges & RESENT != 0;
                let fastest = &mut cs.server_delay_fastest_us;
                if !resent && (*fastest == 0 || latency_us < *fastest) {
                    *fastest = latency_us;
                }
                // Without a handshake the turns are clear only where the server's TCP
                // acknowledged the request before a full-sized answer began (it had the whole
                // request, and answered with a work product, not a status message).
                let turn = !c.role.inferred()
                    || (st.acked.is_some() && reply >= u64::from(super::send_mss(c, Side::Server)));
                if server_time >= MIN_DELAY && !person_or_timer && turn {
                    let acked = st.acked;
                    if server_time >= 4 * rtt {
                        let f = cs.extra.get::<Found>(WHOLE);
                        f.after_own |= own;
                        f.count += 1;
                        f.total_ns += server_time;
                        if f.slow.len() < KEEP {
                            f.slow.push((req, acked, ev.at, server_time));
                        }
                    } else if ev.at.ts_ns - req.ts_ns >= 4 * (rtt - server_leg(c)) {
                        // Kept aside only if some bound could name it: with the fastest
                        // exchange f (under half the handshake's SYN -> SYN-ACK leg) it needs
                        // latency - f >= 4 (rtt - leg + f), so at least latency >= 4 (rtt -
                        // leg). (Most answers within four round trips never qualify.)
                        let f = cs.extra.get::<Found>(WHOLE);
                        if f.maybe.len() < KEEP {
                            f.maybe.push((req, acked, ev.at, own));
                        }
                    }
                }
                st.acked = None;
            }
            _ => {}
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        if cs.server_delay.take(&mut cs.used).is_none() {
            return;
        }
        let exchanges = exchanges(cs);
        let Some(mut st) = cs.extra.take::<Found>(WHOLE) else {
            return;
        };
        // A handshake slowed beyond the path (its SYN-ACK late) raised the bar and the leg
        // taken off each wait: the fastest exchange bounds both, and the answers kept aside
        // are judged again by them.
        // Only where the path's typical round trip (the median time for each side's data to
        // be acknowledged, added: from any vantage) is as short: on a path whose round trip
        // swings (a queue filling and draining, a tunnel), the fastest exchange is its best
        // moment, and the time above it the path's, not the server's.
        let fastest = i64::from(cs.server_delay_fastest_us) * 1000;
        let typical = c
            .client
            .ack_rtt
            .median_ns()
            .zip(c.server.ack_rtt.median_ns())
            .map(|(a, b)| a + b);
        // Nor behind a relay that acknowledges for the server (`confidence::relay`): its ACKs
        // are no round trip to the server.
        let bound = bounded_rtt(c, fastest).filter(|_| {
            fastest > 0
                && typical.is_some_and(|t| t <= 2 * fastest)
                && crate::confidence::relay(c).is_none()
        });
        let rtt = match bound {
            Some((rtt, leg)) if leg < to_sender(c, Side::Server) => {
                // The answers named already had the longer leg taken off.
                let more = to_sender(c, Side::Server) - leg;
                st.total_ns += more * i64::from(st.count);
                for s in &mut st.slow {
                    s.3 += more;
                }
                for &(req, acked, resp, own) in &st.maybe {
                    let server_time = resp.ts_ns - req.ts_ns - leg;
                    if server_time >= MIN_DELAY && server_time >= 4 * rtt {
                        st.after_own |= own;
                        st.count += 1;
                        st.by_bound += 1;
                        st.total_ns += server_time;
                        st.slow.push((req, acked, resp, server_time));
                    }
                }
                st.slow.sort_by_key(|s| s.0.ts_ns);
                st.slow.truncate(KEEP);
                Some(rtt)
            }
            _ => rtt_ns(c),
        };
        let Some(&(req, ack, resp, _)) = st.slow.first() else {
            return;
        };
        let mut times: Vec<i64> = st.slow.iter().map(|s| s.3).collect();
        times.sort_unstable();
        let prompt_acks = st.slow.iter().filter(|s| s.1.is_some()).count();
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = req.ts_ns;
        f.end_ns = st.slow.last().map_or(resp.ts_ns, |s| s.2.ts_ns);
        f.cost_ns = st.total_ns;
        f.frames = [Some(req), ack, Some(resp)]
            .into_iter()
            .flatten()
            .map(|a| a.frame())
            .collect();
        f.explanation = format!(
            "{} took {} (median) to start answering {} of {} requests, beyond the {} round trip{}{}; {} lost in the server.",
            side_name(c, Side::Server),
            ms(times[(times.len() - 1) / 2]),
            st.count,
            exchanges,
            rtt.map_or("unknown".into(), ms),
            match (st.by_bound, c.handshake_rtt_ns()) {
                (0, _) | (_, None) => String::new(),
                (_, Some(hs)) => format!(
                    " (the handshake took {}, but an exchange came back in {}: the SYN-ACK was late, not the path)",
                    ms(hs),
                    ms(fastest)
                ),
            },
            if prompt_acks > 0 { "; its TCP stack acknowledged the requests before the answers began: the application answered late" } else { "" },
            ms(st.total_ns)
        );
        f.fix = "the time is spent in the server application (or what it waits for: a database, a lock, a full accept queue, a slow disk): profile it; the network is not the cause".into();
        f.details = ServerDelayDetails {
            acked_before_answer: prompt_acks,
            exchanges,
            server_time_ms: times.iter().map(|t| ms_f(*t)).collect::<Vec<_>>(),
            slow_exchanges: st.count,
        }
        .into();
        if st.after_own & SERVER_OWN != 0 {
            f.confidence.lower(Level::Low, SERVER_OWN_REASON);
        }
        if st.after_own & CLIENT_OWN != 0 {
            f.confidence.lower(Level::Low, CLIENT_OWN_REASON);
        }
        out.push(f);
    }
}

/// server-delay: the slow exchanges and the server's time in each.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServerDelayDetails {
    pub acked_before_answer: usize,
    pub exchanges: u32,
    pub server_time_ms: Vec<f64>,
    pub slow_exchanges: u32,
}
