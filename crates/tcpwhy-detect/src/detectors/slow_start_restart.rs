//! # slow-start-restart: a flight after an idle gap restarts from the initial window
//!
//! **Signal.** On a persistent connection the sender goes quiet for longer than its
//! retransmission timeout (about RTT + 200 ms on Linux); its next burst starts with a flight
//! of at most about ten segments (the initial window) although earlier flights were larger,
//! then doubles every round trip: 10, 20, 40 ... (tcp_slow_start_after_idle=1, RFC 2861).
//!
//! **Evidence.** The last data segment before the gap, the first and the last segment of the
//! first flight after it. Details: the flights (segments per round trip), the largest earlier
//! flight, the round trips the burst took and would have taken with the earlier window.
//!
//! **Cost.** The extra round trips times the RTT, for every burst it happened to.
//!
//! **Known false positives.** An application that writes a response in pieces one round trip
//! apart looks alike; so does a receiver window that shrank. A window cut by a retransmission
//! timeout is not counted (the burst after a loss is skipped). Flights are counted from gaps at
//! the capture point, so the RTT must be known (the handshake was captured).
//!
//! **References.** RFC 5681 section 4.1, RFC 2861, RFC 7661; Linux tcp_cwnd_restart;
//! tcp-signatures.md section 3; seed 002.

use super::{rtt_ns, side_name, ConnState, Rare, MS};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use serde_json::json;
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "slow-start-restart",
    title: "congestion window reset after idle (slow start restart)",
    doc: include_str!("slow_start_restart.rs"),
};

/// A first flight this small (in segments) after idle is a restart from the initial window.
const RESTART_MAX_SEGMENTS: u32 = 12;
const KEEP: usize = 4;
/// Flights remembered per burst; a burst of more round trips is a long transfer, not a
/// response after idle (later flights are folded into the last one: bounded memory).
const MAX_FLIGHTS: usize = 64;

/// Segments and bytes per flight (round trip): the first two inline (most bursts, a request or
/// a response, are one or two flights: no allocation), the rest on the heap.
#[derive(Default, Debug, Clone)]
struct Flights {
    n: u32,
    inline: [(u32, u64); 2],
    more: Rare<Vec<(u32, u64)>>,
}

impl Flights {
    fn len(&self) -> usize {
        self.n as usize
    }
    fn push(&mut self, segments: u32, bytes: u64) {
        let n = self.len();
        match self.inline.get_mut(n) {
            Some(slot) => *slot = (segments, bytes),
            None => self.more.get().push((segments, bytes)),
        }
        self.n += 1;
    }
    fn get(&self, i: usize) -> (u32, u64) {
        match i {
            0 | 1 => self.inline[i],
            _ => self
                .more
                .peek()
                .and_then(|m| m.get(i - 2))
                .copied()
                .unwrap_or_default(),
        }
    }
    fn last_mut(&mut self) -> Option<&mut (u32, u64)> {
        match self.n {
            0 => None,
            1 | 2 => self.inline.get_mut(self.n as usize - 1),
            _ => self.more.peek_mut().and_then(|m| m.last_mut()),
        }
    }
    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
    /// Segments per flight.
    fn segments(&self) -> Vec<u32> {
        self.iter().map(|f| f.0).collect()
    }
}

#[derive(Default, Debug, Clone)]
struct Burst {
    flights: Flights,
    bytes: u64,
    first: Option<At>,
    first_flight_last: Option<At>,
    before_gap: Option<At>,
    /// The sender retransmitted since the previous burst began: a small window now is loss
    /// recovery (cwnd cut by a timeout), not a restart after idle.
    after_loss: bool,
}

#[derive(Default, Debug)]
pub(crate) struct State {
    last_data: Option<At>,
    /// The largest flight of the bursts before the current one, and the window (bytes) the
    /// sender had reached then.
    largest_flight: u32,
    largest_flight_bytes: u64,
    burst: Burst,
    loss_seen: bool,
    /// The restarts: most directions have none.
    found: Rare<Found>,
}

#[derive(Default, Debug)]
struct Found {
    /// Restarts found: (burst, round trips needed with the earlier window).
    restarts: Vec<(Burst, u32)>,
    count: u32,
    total_extra_rounds: u32,
}

impl Burst {
    /// The silence before the burst (none before the first).
    fn idle_ns(&self) -> i64 {
        match (self.before_gap, self.first) {
            (Some(b), Some(f)) => f.ts_ns - b.ts_ns,
            _ => 0,
        }
    }
}

#[derive(Default)]
pub struct SlowStartRestart {}

impl State {
    /// Close the current burst: was it a restart?
    fn end_burst(&mut self) {
        let b = std::mem::take(&mut self.burst);
        if b.flights.len() == 0 {
            return;
        }
        let first_flight = b.flights.get(0).0;
        if b.before_gap.is_some()
            && !b.after_loss
            && b.flights.len() >= 2
            && first_flight <= RESTART_MAX_SEGMENTS
            && self.largest_flight >= 2 * first_flight
            && self.largest_flight_bytes > 0
        {
            let needed = b.bytes.div_ceil(self.largest_flight_bytes).max(1) as u32;
            let actual = b.flights.len() as u32;
            if actual > needed {
                let f = self.found.get();
                f.count += 1;
                f.total_extra_rounds += actual - needed;
                if f.restarts.len() < KEEP {
                    f.restarts.push((b.clone(), needed));
                }
            }
        }
        for (i, (n, bytes)) in b.flights.iter().enumerate() {
            if n > self.largest_flight {
                self.largest_flight = n;
                // Still doubling (slow start) when the burst ran out of data: the window had
                // grown to about twice this flight by then.
                let growing = i > 0 && u64::from(n) * 10 >= u64::from(b.flights.get(i - 1).0) * 18;
                self.largest_flight_bytes = if growing { bytes * 2 } else { bytes };
            }
        }
    }
}

impl Detector for SlowStartRestart {
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
        if ev.retransmission {
            cs.slow_start_restart.get(&mut cs.used, ev.from).loss_seen = true;
            return;
        }
        if ev.seg.payload_len == 0 || !ev.new_data {
            return;
        }
        let Some(rtt) = rtt_ns(c) else { return };
        // Flights are separated by at least half a round trip of silence at the capture point;
        // idle means longer than Linux's minimum RTO plus the round trip.
        let flight_gap = (rtt / 2).max(MS);
        let idle = rtt + 200 * MS;
        let st = cs.slow_start_restart.get(&mut cs.used, ev.from);
        let gap = st.last_data.map_or(i64::MAX, |t| ev.at.ts_ns - t.ts_ns);
        let len = u64::from(ev.seg.payload_len);
        if gap > idle {
            st.end_burst();
            st.burst.after_loss = std::mem::take(&mut st.loss_seen);
            st.burst.before_gap = st.last_data.filter(|_| gap != i64::MAX);
            st.burst.first = Some(ev.at);
            st.burst.first_flight_last = Some(ev.at);
            st.burst.flights.push(1, len);
        } else if gap > flight_gap && st.burst.flights.len() < MAX_FLIGHTS {
            st.burst.flights.push(1, len);
        } else {
            if let Some((n, bytes)) = st.burst.flights.last_mut() {
                *n += 1;
                *bytes += len;
            }
            if st.burst.flights.len() == 1 {
                st.burst.first_flight_last = Some(ev.at);
            }
        }
        st.burst.bytes += len;
        st.last_data = Some(ev.at);
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let Some(mut st) = cs.slow_start_restart.take(&mut cs.used, side) else {
                continue;
            };
            st.end_burst();
            let largest_flight = st.largest_flight;
            let Some(st) = st.found.into_inner() else {
                continue;
            };
            let Some((b, needed)) = st.restarts.first().cloned() else {
                continue;
            };
            let rtt = rtt_ns(c).unwrap_or(0);
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = b.first.map_or(c.first.ts_ns, |a| a.ts_ns);
            f.end_ns = st
                .restarts
                .last()
                .and_then(|r| r.0.first)
                .map_or(c.last.ts_ns, |a| a.ts_ns);
            f.cost_ns = i64::from(st.total_extra_rounds) * rtt;
            f.frames = [b.before_gap, b.first, b.first_flight_last]
                .into_iter()
                .flatten()
                .map(|a| a.frame())
                .collect();
            f.frames.dedup();
            f.explanation = format!(
                "After {} idle, {} restarted from a {}-segment flight although earlier flights reached {} segments; the burst took {} round trips instead of {} (flights {:?}), {} extra at {} RTT; {} bursts like it, {} lost.",
                ms(b.idle_ns()),
                side_name(c, side),
                b.flights.get(0).0,
                largest_flight,
                b.flights.len(),
                needed,
                b.flights.segments(),
                b.flights.len() as u32 - needed,
                ms(rtt),
                st.count,
                ms(f.cost_ns)
            );
            f.fix = "set net.ipv4.tcp_slow_start_after_idle=0 in the sending host's (or namespace's) sysctls, or keep the connection busy below the RTO, or use BBR on the sender".into();
            f.details = json!({
                "sender": side.name(),
                "bursts": st.count,
                "first_flight_segments": b.flights.get(0).0,
                "largest_earlier_flight_segments": largest_flight,
                "flights": b.flights.segments(),
                "round_trips": b.flights.len(),
                "round_trips_with_earlier_window": needed,
                "extra_round_trips_total": st.total_extra_rounds,
                "idle_ms": ms_f(b.idle_ns()),
                "rtt_ms": ms_f(rtt),
                "restarts": st.restarts.iter().map(|(r, need)| json!({
                    "start_ns": r.first.map(|a| a.ts_ns),
                    "frame": r.first.map(|a| a.frame()),
                    "idle_ms": ms_f(r.idle_ns()),
                    "flights": r.flights.segments(),
                    "round_trips_with_earlier_window": need,
                })).collect::<Vec<_>>(),
            });
            out.push(f);
        }
    }
}
