//! # path-latency: the network round trip itself dominates
//!
//! **Signal.** The round trip between client and server is long (30 ms or more) and the
//! request/response exchanges take about one or two round trips each: nothing is broken, the
//! distance (or a queue on the path) is the latency. Every extra round trip an application
//! protocol makes costs one RTT.
//!
//! **Evidence.** The handshake and the first exchange. Details: the RTT, the exchanges and
//! their latencies in round trips.
//!
//! A round trip of a second or more (a satellite hop, a congested mobile link, a tunnel) is
//! named whatever the exchanges look like: then each exchange longer than three round trips
//! counts one.
//!
//! **Cost.** The round trips: for each exchange, its latency rounded to whole RTTs (at most
//! the latency; an exchange longer than three round trips, slowed by something else than the
//! path, counts the median exchange's round trips), plus the handshake. An exchange whose
//! answer began half a round trip or more after the server's TCP acknowledged the request
//! waited for the server's application (where both carry TCP timestamps, the answer must not
//! carry the ACK's TSval: with it, it left the server with the ACK and came late through the
//! network): it counts at most the round trips its segments need
//! (`path_cap`; a one-segment answer to a one-segment request needs one), or as many as the
//! capture shows it waiting for ACKs, if more (a request segment sent as the server's ACK of
//! the request so far reached the client: Nagle; an answer segment sent, after a pause, as the
//! client's ACK reached the server: slow start). Without that ACK
//! the capture cannot tell the server's time from delay on the path, and the latency is
//! rounded as it is. The first 64 exchanges are listed; those after them
//! count their latencies, at most the median listed exchange's round trips each
//! (`unlisted_exchanges`, `unlisted_ms` and `unlisted_cost_ms` in the details). An exchange
//! the client gave up on (it reset the connection while the answer was still coming: a
//! browser that closed a TLS handshake it no longer needed) costs at most the time the client
//! waited for it, to its FIN or its reset.
//!
//! **Round trip.** The connection's (the handshake's), except that an exchange faster than half
//! the handshake's SYN -> SYN-ACK leg bounds that leg: a SYN-ACK more than twice as slow as a
//! whole exchange was late for another reason than the path (the handshake's extra time is not
//! counted).
//!
//! **Known false positives.** A RTT inflated by a deep queue (bufferbloat) is reported as path
//! latency; its cure is on the path, not in the end hosts.
//!
//! **References.** docs/tcp-signatures.md section 7.

use super::{ConnState, Extras, MS, WHOLE};
use crate::model::bounded_rtt;
use crate::model::exchange::SYN_DATA_AGAIN;
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "path-latency",
    title: "the network round trip dominates (distance or a queue on the path)",
    doc: include_str!("path_latency.rs"),
};

const MIN_RTT: i64 = 30 * MS;
/// A round trip this long is named even when the exchanges are long transfers.
const LONG_RTT: i64 = 1_000 * MS;
const KEEP: usize = 64;

#[derive(Default, Debug)]
pub(crate) struct State {
    request_first: Option<At>,
    /// The last response segment so far; set once a response has begun.
    response_last: Option<At>,
    /// The first exchange (its first request and last response segments); the latencies of
    /// the ones after it are a part of the connection's `Extra` (`Later`): most connections
    /// have one, whose latency is that of `first_exchange` (a list of all of them was an
    /// allocation per connection, and an empty list inline 24 bytes of every state).
    first_exchange: Option<(At, At)>,
}

/// The latencies (first request byte to last response byte) of the exchanges after the
/// first, at most `KEEP - 1`, each with the round trips its segments need (`path_cap`).
#[derive(Default, Debug)]
pub(crate) struct Later(Vec<(i64, u8)>, Rest);

/// The exchanges beyond the first `KEEP`: how many, and their latencies summed.
#[derive(Default, Debug)]
pub(crate) struct Rest {
    count: u32,
    sum_ns: i64,
}

/// `ConnState::path_latency_segs`: the exchange under way's request and response in segments
/// of the receiver's MSS (4 bits each, counting stops at 15), the first exchange's cap in
/// round trips (2 bits, 1 to 3; 0 before it closed), two flags of the exchange under way:
/// `ACK_HELD` (`State::response_last` holds the server's pure ACK of the whole request, not
/// a response segment: its time, and in place of its frame number its TCP timestamp,
/// `held_ack`) and `APP_LATE` (its answer began half a handshake round trip or more
/// after that ACK), and its round trips waited for ACKs: request segments released by the
/// server's ACK (`REQ_ROUNDS`) and answer segments by the client's (`RESP_ROUNDS`), 2 bits
/// each (counting stops at 3).
#[derive(Clone, Copy)]
struct Segs(u16);

impl Segs {
    const REQ: u32 = 0;
    const RESP: u32 = 4;
    const FIRST_CAP: u32 = 8;
    const ACK_HELD: u16 = 1 << 10;
    const APP_LATE: u16 = 1 << 11;
    const REQ_ROUNDS: u32 = 12;
    const RESP_ROUNDS: u32 = 14;

    /// The field of `width` bits at `shift`.
    fn get(self, shift: u32, width: u32) -> u16 {
        (self.0 >> shift) & ((1 << width) - 1)
    }

    /// Add `n` to the field of `width` bits at `shift`, stopping at its largest value.
    fn add(&mut self, shift: u32, width: u32, n: u32) {
        let max = (1u16 << width) - 1;
        let v = (u32::from(self.get(shift, width)) + n).min(u32::from(max)) as u16;
        self.0 = (self.0 & !(max << shift)) | (v << shift);
    }

    fn count(self, shift: u32) -> u16 {
        self.get(shift, 4)
    }

    fn rounds(self, shift: u32) -> u8 {
        self.get(shift, 2) as u8
    }

    /// The exchange under way's cap in round trips: when its answer came late after the
    /// server's ACK of the request (`APP_LATE`), `path_cap` or the round trips it was seen
    /// waiting for ACKs, whichever is more; else 3 (none). Its counts and flags are cleared
    /// for the next one.
    fn take_cap(&mut self) -> u8 {
        let cap = if self.0 & Self::APP_LATE != 0 {
            let waited = 1 + self.rounds(Self::REQ_ROUNDS) + self.rounds(Self::RESP_ROUNDS);
            path_cap(self.count(Self::REQ), self.count(Self::RESP))
                .max(waited)
                .min(3)
        } else {
            3
        };
        self.0 &= !(0xff | Self::ACK_HELD | Self::APP_LATE) & !(0xf << Self::REQ_ROUNDS);
        cap
    }

    fn first_cap(self) -> u8 {
        self.get(Self::FIRST_CAP, 2) as u8
    }

    fn set_first_cap(&mut self, cap: u8) {
        self.0 = (self.0 & !(3 << Self::FIRST_CAP)) | (u16::from(cap.min(3)) << Self::FIRST_CAP);
    }
}

/// The round trips the path can account for in an exchange of `req` request and `resp`
/// response segments: each direction's flights, the request's last flight and the response's
/// first sharing one round trip, at most 3 (the most an exchange counts). A flight is what
/// slow start sends in one round trip from an initial window of 2 segments (RFC 3390's
/// smallest) growing by half each round trip (a receiver that ACKs every other segment):
/// 2, then 3, then 4 or more, so 1-2 segments take one flight, 3-5 two, more three.
fn path_cap(req: u16, resp: u16) -> u8 {
    let flights = |n: u16| match n {
        0..=2 => 1u8,
        3..=5 => 2,
        _ => 3,
    };
    (flights(req) + flights(resp) - 1).min(3)
}

/// How long the client waited for the exchange whose request began at `q` and whose answer's
/// last segment came at `r`, when it gave up on it: it reset the connection before that last
/// segment (the answer kept coming to a socket already gone). Its wait ends at its FIN when it
/// closed first (a closed socket answers data with a reset), else at the reset. A client that
/// only half-closed and read the answer to its end sends no reset before it.
fn abandoned_wait(c: &Connection, q: At, r: At) -> Option<i64> {
    let rst = c.client.rst().filter(|x| x.ts_ns < r.ts_ns && q.before(x))?;
    let end = c
        .client
        .closed_ns()
        .filter(|&f| f >= q.ts_ns && f <= rst.ts_ns)
        .unwrap_or(rst.ts_ns);
    Some(end - q.ts_ns)
}

/// The server's pure ACK of the request as `State::response_last` holds it while no answer has
/// come (`Segs::ACK_HELD`): its time, and its TSval + 2 where the frame number goes (1: none;
/// the frame is not needed, the TSval tells whether the answer left with it).
fn held_ack(ev: &SegmentEvent<'_>) -> At {
    let tsval = ev.seg.options.timestamp.map_or(1, |(v, _)| u64::from(v) + 2);
    At::new(tsval, ev.at.ts_ns)
}

/// The TSval of the ACK `held_ack` made.
fn held_tsval(a: At) -> Option<u32> {
    a.frame().checked_sub(2).and_then(|v| u32::try_from(v).ok())
}

/// Whether a segment `sender` sent, seen here at `sent_ns`, left as the peer's ACK seen here at
/// `acked_ns` reached it: the ACK's way from the capture point to the sender and back (the
/// sender's share of the handshake, `to_sender`), give or take a quarter of the round trip
/// (at least 2 ms).
fn released_by(c: &Connection, sender: Side, acked_ns: i64, sent_ns: i64) -> bool {
    let Some(rtt) = c.handshake_rtt_ns() else {
        return false;
    };
    let way = super::to_sender(c, sender);
    let slack = (rtt / 4).max(2 * MS);
    let after = sent_ns - acked_ns;
    after >= way - slack && after <= way + slack
}

impl State {
    fn close_exchange(&mut self, extra: &mut Extras, segs: &mut Segs) {
        if segs.0 & Segs::ACK_HELD != 0 {
            // No answer yet: what `response_last` holds is the server's ACK.
            self.response_last = None;
        }
        if let (Some(q), Some(r)) = (self.request_first, self.response_last) {
            let cap = segs.take_cap();
            if self.first_exchange.is_none() {
                self.first_exchange = Some((q, r));
                segs.set_first_cap(cap);
            } else {
                let later = extra.get::<Later>(WHOLE);
                if later.0.len() + 1 < KEEP {
                    later.0.push((r.ts_ns - q.ts_ns, cap));
                } else {
                    later.1.count += 1;
                    later.1.sum_ns += r.ts_ns - q.ts_ns;
                }
            }
        }
        self.request_first = None;
        self.response_last = None;
    }
}

#[derive(Default)]
pub struct PathLatency {}

impl Detector for PathLatency {
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
        if c.role.inferred() {
            return;
        }
        // A request that began in the SYN (Fast Open) and that the SYN-ACK did not take (the
        // exchange model marks it) begins where it goes again: the round trip it waited is
        // `tfo-fallback`'s.
        let again = ev.from == Side::Client
            && ev.retransmission
            && cs.exchange_has & SYN_DATA_AGAIN != 0;
        if ev.seg.payload_len == 0 {
            // The server's TCP acknowledging the whole request before any answer: kept (in
            // `response_last`, flagged) to time the answer against.
            let acks_request = ev.from == Side::Server
                && !ev.seg.flags.syn()
                && c.client.next_seq().is_some_and(|n| ev.seg.ack >= n);
            if acks_request {
                if let Some(st) = cs
                    .path_latency
                    .peek_mut(cs.used)
                    .filter(|st| st.request_first.is_some())
                {
                    let mut segs = Segs(cs.path_latency_segs);
                    if st.response_last.is_none() {
                        st.response_last = Some(held_ack(ev));
                        segs.0 |= Segs::ACK_HELD;
                        cs.path_latency_segs = segs.0;
                    }
                }
            }
            return;
        }
        if !(ev.new_data || again) {
            return;
        }
        if again {
            cs.exchange_has &= !SYN_DATA_AGAIN;
        }
        let st = cs.path_latency.get(&mut cs.used);
        let mut segs = Segs(cs.path_latency_segs);
        // The segment in the receiver's MSS (one sent by TSO, or captured after GRO, counts
        // as the segments it was on the wire).
        let mss = u32::from(c.endpoint(ev.from.other()).mss().unwrap_or(1460)).max(536);
        let n = ev.seg.payload_len.div_ceil(mss);
        match ev.from {
            Side::Client => {
                if segs.0 & Segs::ACK_HELD != 0 {
                    // More request after the server's ACK: sent as that ACK reached the client
                    // (held for it: Nagle), a round trip the request waited; and that ACK no
                    // longer covers the request.
                    let acked = st.response_last.map_or(i64::MIN, |a| a.ts_ns);
                    if released_by(c, Side::Client, acked, ev.at.ts_ns) {
                        segs.add(Segs::REQ_ROUNDS, 2, 1);
                    }
                    st.response_last = None;
                    segs.0 &= !Segs::ACK_HELD;
                }
                // A response has begun (its last segment so far is known): a new request.
                if st.response_last.is_some() {
                    st.close_exchange(&mut cs.extra, &mut segs);
                }
                if again {
                    st.request_first = Some(ev.at);
                } else {
                    st.request_first.get_or_insert(ev.at);
                }
                segs.add(Segs::REQ, 4, n);
            }
            Side::Server => {
                if st.request_first.is_some() {
                    if segs.0 & Segs::ACK_HELD != 0 {
                        // The answer's first segment, after the server's ACK of the request:
                        // late by the capture's clock, and not stamped with the ACK's TSval
                        // (with it, it left the server in the same tick, and came late through
                        // the network).
                        let acked = st.response_last.map_or(ev.at.ts_ns, |a| a.ts_ns);
                        let half = c.handshake_rtt_ns().map(|r| r / 2);
                        let same_tick = st
                            .response_last
                            .and_then(held_tsval)
                            .zip(ev.seg.options.timestamp)
                            .is_some_and(|(a, (v, _))| a == v);
                        if !same_tick && half.is_some_and(|h| h > 0 && ev.at.ts_ns - acked >= h) {
                            segs.0 |= Segs::APP_LATE;
                        }
                        segs.0 &= !Segs::ACK_HELD;
                    } else if let Some(last) = st.response_last {
                        // After a pause of half a round trip in the answer, a segment sent as
                        // the client's ACK of the answer so far reached the server: a flight
                        // the answer waited for (slow start, or a window).
                        let half = c.handshake_rtt_ns().map_or(i64::MAX, |r| r / 2);
                        let acked = cs
                            .exchange
                            .peek(cs.used)
                            .and_then(|x| x.client_ack_ns())
                            .filter(|&a| a > last.ts_ns);
                        if let Some(a) = acked {
                            if ev.at.ts_ns - last.ts_ns >= half
                                && released_by(c, Side::Server, a, ev.at.ts_ns)
                            {
                                segs.add(Segs::RESP_ROUNDS, 2, 1);
                            }
                        }
                    }
                    st.response_last = Some(ev.at);
                    segs.add(Segs::RESP, 4, n);
                }
            }
        }
        cs.path_latency_segs = segs.0;
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(mut st) = cs.path_latency.take(&mut cs.used) else {
            return;
        };
        let mut segs = Segs(cs.path_latency_segs);
        // The exchange under way at the end, when the client stopped waiting for it: how long
        // it waited, and where it lands in the list (`abandoned_wait`).
        let answered = segs.0 & Segs::ACK_HELD == 0;
        let waited = st
            .request_first
            .zip(st.response_last.filter(|_| answered))
            .and_then(|(q, r)| abandoned_wait(c, q, r));
        let listed_before = cs.extra.peek::<Later>(WHOLE).map_or(0, |l| l.0.len());
        let was_first = st.first_exchange.is_none();
        st.close_exchange(&mut cs.extra, &mut segs);
        let Some((q, r)) = st.first_exchange else {
            return;
        };
        let listed_after = cs.extra.peek::<Later>(WHOLE).map_or(0, |l| l.0.len());
        // Its index among the listed exchanges (the first, or the last one `Later` took).
        let abandoned = waited.and_then(|w| match (was_first, listed_after > listed_before) {
            (true, _) => Some((0, w)),
            (false, true) => Some((listed_after, w)),
            (false, false) => None,
        });
        let (exchanges, caps): (Vec<i64>, Vec<u8>) = std::iter::once((r.ts_ns - q.ts_ns, segs.first_cap()))
            .chain(
                cs.extra
                    .peek::<Later>(WHOLE)
                    .into_iter()
                    .flat_map(|l| l.0.iter().copied()),
            )
            .unzip();
        let mut sorted = exchanges.clone();
        sorted.sort_unstable();
        let handshake = c.handshake_rtt_ns();
        // The round trip bounded by the fastest exchange (first request byte to last response
        // byte): `bounded_rtt`.
        let Some(rtt) = bounded_rtt(c, sorted[0])
            .map(|b| b.0)
            .filter(|r| *r >= MIN_RTT)
        else {
            return;
        };
        let median = sorted[(sorted.len() - 1) / 2];
        // Dominated by the path: the typical exchange is one to three round trips. A round
        // trip of a second or more is named whatever the exchanges did: every exchange pays at
        // least one (the longer ones are transfers, counted as one round trip each).
        let long_path = rtt >= LONG_RTT;
        if median > 3 * rtt + rtt / 2 && !long_path {
            return;
        }
        // An exchange longer than three round trips was slowed by something other than the
        // path (a resend's timeout, a client that paused, a message sent on the server's own
        // schedule): it counts as many round trips as the median exchange, the path's share of
        // a typical one (on a long path, one: its long exchanges are transfers).
        let raw: Vec<i64> = exchanges.iter().map(|l| (l + rtt / 4) / rtt).collect();
        let mut sorted_raw = raw.clone();
        sorted_raw.sort_unstable();
        let typical = sorted_raw[(sorted_raw.len() - 1) / 2].clamp(1, 3);
        let uncapped: Vec<i64> = raw
            .iter()
            .map(|&n| match n {
                n if n <= 3 => n,
                _ if long_path => 1,
                _ => typical,
            })
            .collect();
        // Then at most the round trips the exchange's segments need (`path_cap`); those
        // capped took longer than that, and the path is a part of their time, not all of it.
        let rounds: Vec<i64> = uncapped
            .iter()
            .zip(&caps)
            .map(|(&n, &cap)| n.min(i64::from(cap)))
            .collect();
        let capped = uncapped.iter().zip(&rounds).filter(|(u, r)| u > r).count();
        // The handshake's share of the path: one round trip (a handshake slowed beyond it, by a
        // late SYN-ACK, lost its time elsewhere).
        let hs = handshake.unwrap_or(0).min(rtt);
        // The exchanges beyond the list: their latencies, at most the median exchange's round
        // trips each (the listed ones are the sample their shape is judged from).
        let rest = cs
            .extra
            .peek::<Later>(WHOLE)
            .map_or((0, 0), |l| (l.1.count, l.1.sum_ns));
        // The listed exchanges' median in round trips as counted (a long path's transfers
        // count one each).
        let mut sorted_rounds = rounds.clone();
        sorted_rounds.sort_unstable();
        let rounds_median = sorted_rounds[(sorted_rounds.len() - 1) / 2];
        let median_rounds = rounds_median.max(1);
        let rest_cost = rest.1.min(i64::from(rest.0) * median_rounds * rtt);
        // An exchange the client gave up on costs at most the time it waited.
        let cost = hs
            + rest_cost
            + exchanges
                .iter()
                .zip(&rounds)
                .enumerate()
                .map(|(i, (l, n))| {
                    let paid = abandoned.filter(|a| a.0 == i).map_or(*l, |a| a.1.min(*l));
                    (n * rtt).min(paid)
                })
                .sum::<i64>();
        let all_exchanges = exchanges.len() + rest.0 as usize;
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = c.syn().map_or(q.ts_ns, |a| a.ts_ns);
        f.end_ns = c.last.ts_ns;
        // Never more than the time the connection took (found by fuzzing: data before the
        // handshake completed let the handshake and the first exchange overlap).
        f.cost_ns = cost.min((f.end_ns - f.start_ns).max(0));
        f.frames = [c.syn(), c.handshake.syn_ack, Some(q), Some(r)]
            .into_iter()
            .flatten()
            .map(|a| a.frame())
            .collect();
        f.frames.sort_unstable();
        f.frames.dedup();
        let trips = match rounds_median {
            0 => "less than a round trip at the capture point".to_string(),
            1 if long_path && (median + rtt / 4) / rtt > 3 => {
                "a transfer, counted as one round trip".to_string()
            }
            1 => "about 1 round trip".to_string(),
            n => format!("about {n} round trips"),
        };
        let round_trips = |n: i64| format!("{n} round trip{}", if n == 1 { "" } else { "s" });
        let took = match (exchanges.len(), all_exchanges) {
            (1, _) if capped > 0 => format!(
                "its one exchange took {}, {} of it the path's (the server's TCP acknowledged the request well before the answer began, and the answer's segments need no more: the rest was the server's)",
                ms(median),
                round_trips(rounds[0])
            ),
            (1, _) => format!("its one exchange took {} ({trips})", ms(median)),
            (KEEP, n) if n > KEEP => format!(
                "{n} exchanges, the first {KEEP} of them took {} each (median, {trips})",
                ms(median)
            ),
            (n, _) => format!("{n} exchanges took {} each (median, {trips})", ms(median)),
        };
        let took = if capped > 0 && exchanges.len() > 1 {
            format!(
                "{took}; {capped} of them, answered well after the server's TCP acknowledged the request, {} only the round trips {} segments need",
                if capped == 1 { "counts" } else { "count" },
                if capped == 1 { "its" } else { "their" },
            )
        } else {
            took
        };
        let slow_handshake = match handshake {
            Some(h) if h > rtt => format!(
                " (the handshake took {}, but an exchange came back sooner than its SYN-ACK did: the SYN-ACK was late, not the path)",
                ms(h)
            ),
            _ => String::new(),
        };
        let gave_up = match abandoned {
            Some((i, w)) if w < (rounds[i] * rtt).min(exchanges[i]) => format!(
                " (the client stopped waiting for {} answer {} after its request: it closed the connection, and reset it when the answer came)",
                if exchanges.len() == 1 { "the" } else { "the last" },
                ms(w)
            ),
            _ => String::new(),
        };
        f.explanation = format!(
            "The round trip between client and server is {}{slow_handshake}; {took}{gave_up}: {} of the connection's time is the path itself.",
            ms(rtt),
            ms(f.cost_ns)
        );
        f.fix = "move the endpoints closer (a nearer server, a CDN, a regional replica), make fewer round trips (pipelining, batching, connection reuse, TLS 1.3 / 0-RTT), or find a queue inflating the RTT (compare the minimum RTT with the typical one)".into();
        f.details = PathLatencyDetails {
            exchange_ms: exchanges.iter().map(|l| ms_f(*l)).collect::<Vec<_>>(),
            exchanges: all_exchanges,
            round_trips: rounds,
            rtt_ms: ms_f(rtt),
            unlisted_cost_ms: ms_f(rest_cost),
            unlisted_exchanges: rest.0,
            unlisted_ms: ms_f(rest.1),
        }
        .into();
        out.push(f);
    }
}

/// path-latency: the round trip, the exchanges and their latencies in round trips.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathLatencyDetails {
    pub exchange_ms: Vec<f64>,
    pub exchanges: usize,
    pub round_trips: Vec<i64>,
    pub rtt_ms: f64,
    pub unlisted_cost_ms: f64,
    pub unlisted_exchanges: u32,
    pub unlisted_ms: f64,
}
