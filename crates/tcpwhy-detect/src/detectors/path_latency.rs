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
//! path, counts the median exchange's round trips), plus the handshake. The first 64 exchanges are listed; those after them
//! count their latencies, at most the median listed exchange's round trips each
//! (`unlisted_exchanges`, `unlisted_ms` and `unlisted_cost_ms` in the details).
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
/// first, at most `KEEP - 1`.
#[derive(Default, Debug)]
pub(crate) struct Later(Vec<i64>, Rest);

/// The exchanges beyond the first `KEEP`: how many, and their latencies summed.
#[derive(Default, Debug)]
pub(crate) struct Rest {
    count: u32,
    sum_ns: i64,
}

impl State {
    fn close_exchange(&mut self, extra: &mut Extras) {
        if let (Some(q), Some(r)) = (self.request_first, self.response_last) {
            if self.first_exchange.is_none() {
                self.first_exchange = Some((q, r));
            } else {
                let later = extra.get::<Later>(WHOLE);
                if later.0.len() + 1 < KEEP {
                    later.0.push(r.ts_ns - q.ts_ns);
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
        if ev.seg.payload_len == 0 || !(ev.new_data || again) {
            return;
        }
        if again {
            cs.exchange_has &= !SYN_DATA_AGAIN;
        }
        let st = cs.path_latency.get(&mut cs.used);
        match ev.from {
            Side::Client => {
                // A response has begun (its last segment so far is known): a new request.
                if st.response_last.is_some() {
                    st.close_exchange(&mut cs.extra);
                }
                if again {
                    st.request_first = Some(ev.at);
                } else {
                    st.request_first.get_or_insert(ev.at);
                }
            }
            Side::Server => {
                if st.request_first.is_some() {
                    st.response_last = Some(ev.at);
                }
            }
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(mut st) = cs.path_latency.take(&mut cs.used) else {
            return;
        };
        st.close_exchange(&mut cs.extra);
        let Some((q, r)) = st.first_exchange else {
            return;
        };
        let exchanges: Vec<i64> = std::iter::once(r.ts_ns - q.ts_ns)
            .chain(
                cs.extra
                    .peek::<Later>(WHOLE)
                    .into_iter()
                    .flat_map(|l| l.0.iter().copied()),
            )
            .collect();
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
        let rounds: Vec<i64> = raw
            .iter()
            .map(|&n| match n {
                n if n <= 3 => n,
                _ if long_path => 1,
                _ => typical,
            })
            .collect();
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
        let cost = hs
            + rest_cost
            + exchanges
                .iter()
                .zip(&rounds)
                .map(|(l, n)| (n * rtt).min(*l))
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
        let took = match (exchanges.len(), all_exchanges) {
            (1, _) => format!("its one exchange took {} ({trips})", ms(median)),
            (KEEP, n) if n > KEEP => format!(
                "{n} exchanges, the first {KEEP} of them took {} each (median, {trips})",
                ms(median)
            ),
            (n, _) => format!("{n} exchanges took {} each (median, {trips})", ms(median)),
        };
        let slow_handshake = match handshake {
            Some(h) if h > rtt => format!(
                " (the handshake took {}, but an exchange came back sooner than its SYN-ACK did: the SYN-ACK was late, not the path)",
                ms(h)
            ),
            _ => String::new(),
        };
        f.explanation = format!(
            "The round trip between client and server is {}{slow_handshake}; {took}: {} of the connection's time is the path itself.",
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
