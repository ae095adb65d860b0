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

use super::{rtt_ns, side_name, ConnState, Extras, MS};
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

/// A burst after an idle gap, as a finding shows it: a part of the connection's `Extra` for
/// the direction's latest such burst (allocated at its first idle gap and written over at
/// the next, keeping its list's buffer).
#[derive(Debug, Clone)]
pub(crate) struct AfterIdle {
    /// The last data segment before the gap, the burst's first segment and the last segment
    /// of its first flight.
    before_gap: At,
    first: At,
    first_flight_last: At,
    /// The largest flight before the burst and the window (bytes) it showed.
    earlier: (u32, u64),
    /// Segments per flight (the closed ones).
    flights: Vec<u32>,
}

impl AfterIdle {
    /// The silence before the burst.
    fn idle_ns(&self) -> i64 {
        self.first.ts_ns - self.before_gap.ts_ns
    }
}

/// One direction: the window it reached and the burst being sent, its flights (round trips)
/// counted as they close, without a list. What a restart needs shown (when the burst began,
/// its flights, the window before it) is kept only for a burst after an idle gap, the only
/// kind that can be one (`AfterIdle`); the first burst of a direction only sets the window
/// the sender reached (the list and the times of every burst took 112 bytes per direction of
/// every connection).
#[derive(Default, Debug)]
pub(crate) struct State {
    last_data: Option<At>,
    /// The largest flight so far (closed flights), and the window (bytes) the sender had
    /// reached then.
    largest_flight: u32,
    largest_flight_bytes: u64,
    /// The burst: flights so far (at most `MAX_FLIGHTS`: later segments join the last one),
    /// the one being sent (segments and bytes), the segments of the one before it, and the
    /// burst's bytes.
    flights: u8,
    cur_segments: u32,
    cur_bytes: u64,
    prev_segments: u32,
    burst_bytes: u64,
    /// The sender retransmitted since the previous burst began: a small window now is loss
    /// recovery (cwnd cut by a timeout), not a restart after idle.
    after_loss: bool,
    loss_seen: bool,
}

/// The restarts, a part of the connection's `Extra`: most directions have none.
#[derive(Default, Debug)]
pub(crate) struct Found {
    /// Restarts found: (burst, round trips needed with the earlier window).
    restarts: Vec<(AfterIdle, u32)>,
    count: u32,
    total_extra_rounds: u32,
}

#[derive(Default)]
pub struct SlowStartRestart {}

impl State {
    /// The current flight is complete: is it the largest yet? (`extra` holds the direction's
    /// `AfterIdle`, `side` is the direction.)
    fn close_flight(&mut self, extra: &mut Extras, side: Side) {
        if self.flights == 0 {
            return;
        }
        let (n, bytes) = (self.cur_segments, self.cur_bytes);
        if n > self.largest_flight {
            // Still doubling (slow start) when the burst ran out of data: the window had grown
            // to about twice this flight by then.
            let growing =
                self.flights > 1 && u64::from(n) * 10 >= u64::from(self.prev_segments) * 18;
            self.largest_flight = n;
            self.largest_flight_bytes = if growing { bytes * 2 } else { bytes };
        }
        self.prev_segments = n;
        if let Some(idle) = extra.peek_mut::<AfterIdle>(side) {
            idle.flights.push(n);
        }
    }

    /// A new flight starts with a segment of `len` bytes.
    fn push(&mut self, len: u64, extra: &mut Extras, side: Side) {
        self.close_flight(extra, side);
        self.flights += 1;
        self.cur_segments = 1;
        self.cur_bytes = len;
    }

    /// Close the current burst: was it a restart (then recorded in `extra` for `side`, this
    /// state's direction)? Leaves an empty burst (keeping the after-idle record's allocation
    /// for the next one).
    fn end_burst(&mut self, extra: &mut Extras, side: Side) {
        if self.flights == 0 {
            return;
        }
        self.close_flight(extra, side);
        let mut restart = None;
        if let Some(idle) = extra.peek::<AfterIdle>(side) {
            let first_flight = idle.flights.first().copied().unwrap_or(0);
            let (largest, largest_bytes) = idle.earlier;
            if !self.after_loss
                && self.flights >= 2
                && first_flight <= RESTART_MAX_SEGMENTS
                && largest >= 2 * first_flight
                && largest_bytes > 0
            {
                let needed = self.burst_bytes.div_ceil(largest_bytes).max(1) as u32;
                let actual = u32::from(self.flights);
                if actual > needed {
                    // The burst is shown for the first few restarts: copied only for those.
                    let shown = extra
                        .peek::<Found>(side)
                        .is_none_or(|f| f.restarts.len() < KEEP);
                    restart = Some((needed, actual - needed, shown.then(|| idle.clone())));
                }
            }
        }
        if let Some((needed, extra_rounds, burst)) = restart {
            let f = extra.get::<Found>(side);
            f.count += 1;
            f.total_extra_rounds += extra_rounds;
            if let Some(b) = burst {
                f.restarts.push((b, needed));
            }
        }
        self.flights = 0;
        self.cur_segments = 0;
        self.cur_bytes = 0;
        self.prev_segments = 0;
        self.burst_bytes = 0;
        self.after_loss = false;
        if let Some(idle) = extra.peek_mut::<AfterIdle>(side) {
            idle.flights.clear();
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
            st.end_burst(&mut cs.extra, ev.from);
            st.after_loss = std::mem::take(&mut st.loss_seen);
            if let Some(before_gap) = st.last_data.filter(|_| gap != i64::MAX) {
                // The record (and its list's buffer) of the previous burst after idle is
                // written over.
                let flights = cs
                    .extra
                    .peek_mut::<AfterIdle>(ev.from)
                    .map(|i| std::mem::take(&mut i.flights));
                cs.extra.set(
                    ev.from,
                    AfterIdle {
                        before_gap,
                        first: ev.at,
                        first_flight_last: ev.at,
                        earlier: (st.largest_flight, st.largest_flight_bytes),
                        flights: flights.unwrap_or_default(),
                    },
                );
            }
            st.push(len, &mut cs.extra, ev.from);
        } else if gap > flight_gap && usize::from(st.flights) < MAX_FLIGHTS {
            st.push(len, &mut cs.extra, ev.from);
        } else if st.flights > 0 {
            st.cur_segments += 1;
            st.cur_bytes += len;
            if st.flights == 1 {
                if let Some(i) = cs.extra.peek_mut::<AfterIdle>(ev.from) {
                    i.first_flight_last = ev.at;
                }
            }
        }
        st.burst_bytes += len;
        st.last_data = Some(ev.at);
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let Some(mut st) = cs.slow_start_restart.take(&mut cs.used, side) else {
                continue;
            };
            st.end_burst(&mut cs.extra, side);
            let largest_flight = st.largest_flight;
            let Some(st) = cs.extra.take::<Found>(side) else {
                continue;
            };
            let Some((b, needed)) = st.restarts.first().cloned() else {
                continue;
            };
            let rtt = rtt_ns(c).unwrap_or(0);
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = b.first.ts_ns;
            f.end_ns = st.restarts.last().map_or(b.first, |r| r.0.first).ts_ns;
            f.cost_ns = i64::from(st.total_extra_rounds) * rtt;
            f.frames = [b.before_gap, b.first, b.first_flight_last]
                .map(|a| a.frame())
                .to_vec();
            f.frames.dedup();
            f.explanation = format!(
                "After {} idle, {} restarted from a {}-segment flight although earlier flights reached {} segments; the burst took {} round trips instead of {} (flights {:?}), {} extra at {} RTT; {} bursts like it, {} lost.",
                ms(b.idle_ns()),
                side_name(c, side),
                b.flights.first().copied().unwrap_or(0),
                largest_flight,
                b.flights.len(),
                needed,
                b.flights,
                (b.flights.len() as u32).saturating_sub(needed),
                ms(rtt),
                st.count,
                ms(f.cost_ns)
            );
            f.fix = "set net.ipv4.tcp_slow_start_after_idle=0 in the sending host's (or namespace's) sysctls, or keep the connection busy below the RTO, or use BBR on the sender".into();
            f.details = json!({
                "sender": side.name(),
                "bursts": st.count,
                "first_flight_segments": b.flights.first().copied().unwrap_or(0),
                "largest_earlier_flight_segments": largest_flight,
                "flights": b.flights,
                "round_trips": b.flights.len(),
                "round_trips_with_earlier_window": needed,
                "extra_round_trips_total": st.total_extra_rounds,
                "idle_ms": ms_f(b.idle_ns()),
                "rtt_ms": ms_f(rtt),
                "restarts": st.restarts.iter().map(|(r, need)| json!({
                    "start_ns": r.first.ts_ns,
                    "frame": r.first.frame(),
                    "idle_ms": ms_f(r.idle_ns()),
                    "flights": r.flights,
                    "round_trips_with_earlier_window": need,
                })).collect::<Vec<_>>(),
            });
            out.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window rule as the list-keeping version applied it, over all flights of a burst at
    /// its end: (largest flight, window) after the burst, from the values before it.
    fn by_list(mut largest: (u32, u64), flights: &[(u32, u64)]) -> (u32, u64) {
        for (i, &(n, bytes)) in flights.iter().enumerate() {
            if n > largest.0 {
                let growing = i > 0 && u64::from(n) * 10 >= u64::from(flights[i - 1].0) * 18;
                largest = (n, if growing { bytes * 2 } else { bytes });
            }
        }
        largest
    }

    #[test]
    fn flights_folded_as_they_close_give_the_window_of_the_whole_list() {
        // Random bursts of random flights, the state fed one flight at a time (as segments
        // arrive): after each burst the largest flight and its window equal the rule applied
        // to the burst's list, and an after-idle burst keeps that list and the window before.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| super::super::xorshift_below(&mut x, m);
        for _ in 0..2000 {
            let mut st = State::default();
            let (mut extra, side) = (Extras::default(), Side::Client);
            let mut want = (0u32, 0u64);
            for burst in 0..1 + rnd(4) {
                let flights: Vec<(u32, u64)> = (0..1 + rnd(8))
                    .map(|_| {
                        let n = 1 + rnd(40) as u32;
                        (n, u64::from(n) * (1 + rnd(1448)))
                    })
                    .collect();
                if burst > 0 {
                    extra.set(
                        side,
                        AfterIdle {
                            before_gap: At::new(1, 0),
                            first: At::new(2, 0),
                            first_flight_last: At::new(2, 0),
                            earlier: want,
                            flights: Vec::new(),
                        },
                    );
                }
                for &(n, bytes) in &flights {
                    // The flight opens with a segment; the rest of it joins it.
                    st.push(bytes / u64::from(n), &mut extra, side);
                    st.cur_segments = n;
                    st.cur_bytes = bytes;
                    st.burst_bytes += bytes;
                }
                if burst > 0 {
                    let i = extra.peek::<AfterIdle>(side).expect("after idle");
                    let listed: Vec<u32> =
                        i.flights.iter().copied().chain([st.cur_segments]).collect();
                    let segs: Vec<u32> = flights.iter().map(|f| f.0).collect();
                    assert_eq!(listed, segs);
                    assert_eq!(i.earlier, want);
                }
                want = by_list(want, &flights);
                st.end_burst(&mut extra, side);
                assert_eq!(
                    (st.largest_flight, st.largest_flight_bytes),
                    want,
                    "{flights:?} burst {burst}"
                );
                assert_eq!(st.flights, 0);
            }
        }
    }
}
