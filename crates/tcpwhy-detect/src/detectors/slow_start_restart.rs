//! # slow-start-restart: a burst after an idle gap restarts from the initial window
//!
//! **Signal.** On a persistent connection the sender goes quiet for longer than its
//! retransmission timeout (about RTT + 200 ms on Linux); when its next burst of queued data
//! (a response: it ends at the peer's next data, or at the next idle gap) has more bytes than
//! its first flight, that first flight is at most half the window the sender had reached
//! before the gap (since its last loss: a loss cuts the window), and the rest of the burst
//! follows one round trip later, clocked by the ACKs, growing as slow start does (the next
//! round trip carries 1.5 times the first flight or more), released by the ACKs of the first
//! flight (a peer's ACK of the burst's bytes is seen before it, by at least three quarters
//! of the round trip between the capture point and the sender: the time the ACK takes to
//! reach the sender and what it releases to come back), the congestion window
//! restarted (tcp_slow_start_after_idle=1, RFC 2861: down to the initial window, halved once
//! per RTO of idle). Everything is measured in bytes and in time at
//! the capture point, so it holds from any vantage point and with offloaded super-segments:
//! the first flight is the bytes within half a round trip of the burst's first byte; the
//! window the sender reached is the most bytes it sent in one round trip (in quarter
//! round-trip bins), doubled, or the bytes acknowledged since the restart added to it, when it
//! was still growing like slow start as the burst ended (that round trip carried 1.5 times the
//! one before or more; congestion avoidance adds one segment per round trip).
//!
//! **Evidence.** The last data segment before the gap, the burst's first segment, the first
//! segment after its first flight, its last segment. Details: for each restarted burst, its
//! bytes, the first flight's bytes, the window before the gap, how long it took and how long
//! the same bytes would have taken with that window.
//!
//! **Cost.** Time, per burst: how long it took at the capture point against how long the same
//! bytes take with the window kept (the larger of the one reached before the gap and the one
//! this burst reached from its restart: kept, the window would have grown from more; within
//! the largest window the receiver advertised during the burst, which grows as data comes):
//! the round trips that window still needs, plus the bytes at the fastest
//! rate the sender reached (a quarter round trip's worth of its densest data). The sum over
//! the bursts it happened to.
//!
//! **Known false positives.** An application that writes a response's first part, then the
//! rest one round trip later, after the first part's ACK, looks alike (the gap must follow
//! the first flight by 0.6 to 1.5 round trips, as the ACK clock does). Not counted: a first
//! flight under two full segments (no stack restarts below that: a smaller one is what the
//! application wrote; RFC 3390, RFC 5681), a burst whose rest left before any ACK of it
//! could reach the sender, a burst whose first flight the receiver's window held (a window
//! under twice the first flight), a burst after a retransmission (the window was cut by
//! loss), bursts without a
//! known round trip, connections whose handshake the capture missed (the receiver's window
//! scale is unknown: its window cannot be ruled out). The earlier window is taken within
//! the receiver's window at the burst's start.
//!
//! **References.** RFC 5681 section 4.1, RFC 2861, RFC 7661; Linux tcp_cwnd_restart;
//! docs/tcp-signatures.md section 3.

use super::{rtt_ns, send_mss, side_name, to_sender, ConnState, Extras, MS};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "slow-start-restart",
    title: "congestion window reset after idle (slow start restart)",
    doc: include_str!("slow_start_restart.rs"),
};

/// Restarts whose bursts are shown in the finding.
const KEEP: usize = 4;

/// A burst after an idle gap, as a finding shows it: a part of the connection's `Extra` for
/// the direction's latest such burst (allocated at its first idle gap, written over at the
/// next).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AfterIdle {
    /// The last data segment before the gap, the burst's first segment, the first segment
    /// after its first flight, and its last segment so far.
    before_gap: At,
    first: At,
    second: Option<At>,
    last: At,
    /// When the capture point first saw the peer acknowledge bytes of this burst.
    acked_ns: Option<i64>,
}

/// A restarted burst, as the finding reports it.
#[derive(Debug, Clone, Copy)]
struct Restart {
    burst: AfterIdle,
    bytes: u64,
    first_flight: u32,
    window_before: u32,
    took_ns: i64,
    would_take_ns: i64,
}

impl Restart {
    fn cost_ns(&self) -> i64 {
        self.took_ns - self.would_take_ns
    }
}

/// The restarts, a part of the connection's `Extra`: most directions have none.
#[derive(Default, Debug)]
pub(crate) struct Found {
    shown: Vec<Restart>,
    count: u32,
    total_ns: i64,
}

/// Quarter round-trip bins of a burst: the bytes of the last four.
const BINS: usize = 4;

/// One direction: the burst being sent (its bytes in quarter round-trip bins, its first
/// flight) and what the sender reached before it. Its flags are
/// `ConnState::slow_start_restart_flags` (in padding there; here they would pad the state by
/// 7 bytes): the two are read together as a `Dir`.
#[derive(Default, Debug)]
pub(crate) struct State {
    /// The last new data segment, and how long after the burst's first byte it came
    /// (microseconds): the burst began at `t0()`.
    last_data: Option<At>,
    last_since_us: u32,
    /// The burst's bytes (saturating).
    burst_bytes: u32,
    /// Bytes within half a round trip of `t0`, and when (microseconds after `t0`) the first
    /// byte after them came (0: not yet).
    first_flight: u32,
    second_us: u32,
    /// The bin width (microseconds: a quarter of the round trip when the burst began), the
    /// current bin's index since `t0`, the last four bins' bytes (`bins[bin % 4]` is the
    /// current one).
    bin_us: u32,
    bin: u32,
    bins: [u32; BINS],
    /// The most bytes in four consecutive bins (one round trip) in this burst; the last
    /// round-trip sum (bins 4k..4k+3).
    window: u32,
    rtt_sum: u32,
    /// The most bytes in one bin (the densest quarter round trip) in this burst and before it.
    dense: u32,
    dense_before: u32,
    /// The window the sender reached before this burst (bytes), and the receiver's window
    /// (scaled): when the burst began until its first flight is over (whether the receiver
    /// held that flight), then the largest it advertised during the burst (a receiver's
    /// window grows as data comes: it would have let a kept window through).
    window_before: u32,
    rwnd: u32,
}

/// A direction's `State` and its flags.
struct Dir<'a> {
    st: &'a mut State,
    flags: &'a mut u8,
}

// Bits of a direction's flags (`Dir::flags`).
/// The burst follows an idle gap.
const AFTER_IDLE: u8 = 1;
/// The sender retransmitted since the burst before began: a small window now is loss recovery.
const AFTER_LOSS: u8 = 2;
const LOSS_SEEN: u8 = 4;
/// The peer sent data since this side's last data: the next data is a new burst (a response).
const PEER_SPOKE: u8 = 8;
/// The receiver's window at the burst's start is known.
const RWND: u8 = 16;
/// The round trip that set `window` carried 1.5 times the one before it (slow start).
const GROWING: u8 = 32;
/// The round trip after the first flight carried 1.5 times it (`close_bin`).
const DOUBLED: u8 = 64;
/// The peer acknowledged bytes of this burst: what the sender sends after that can have been
/// released by the ACK.
const PEER_ACKED: u8 = 128;

/// The smallest initial window of any stack, in full segments (RFC 3390, RFC 5681: two to
/// four segments; RFC 6928: ten): a restart sends at least this much at once when that much
/// is queued, so a smaller first flight is the application's write, not the window.
const MIN_IW_SEGMENTS: u32 = 2;

#[derive(Default)]
pub struct SlowStartRestart {}

impl Dir<'_> {
    fn is(&self, f: u8) -> bool {
        *self.flags & f != 0
    }

    /// When the burst began.
    fn t0(&self) -> Option<i64> {
        self.st
            .last_data
            .map(|l| l.ts_ns - i64::from(self.st.last_since_us) * 1000)
    }

    /// Move the bins on to bin `b` (closing the ones before it).
    fn advance(&mut self, b: u32) {
        while self.st.bin < b {
            self.close_bin();
            self.st.bin += 1;
            self.st.bins[self.st.bin as usize % BINS] = 0;
            if b - self.st.bin > BINS as u32 {
                // Four empty bins: nothing to add up in between.
                self.st.bins = [0; BINS];
                self.st.bin = b;
            }
        }
    }

    /// The current bin is complete: the round trip ending with it, and the densest bin.
    fn close_bin(&mut self) {
        let cur = self.st.bins[self.st.bin as usize % BINS];
        self.st.dense = self.st.dense.max(cur);
        let sum = self.st.bins.iter().fold(0u32, |a, b| a.saturating_add(*b));
        if sum > self.st.window {
            // Growing like slow start: this round trip carried 1.5 times the one before.
            let growing =
                u64::from(sum) * 10 >= u64::from(self.st.rtt_sum) * 15 && self.st.rtt_sum > 0;
            *self.flags = (*self.flags & !GROWING) | if growing { GROWING } else { 0 };
            self.st.window = sum;
        }
        if self.st.bin % BINS as u32 == BINS as u32 - 1 {
            self.st.rtt_sum = sum;
        }
        // A round trip after the first flight's (bins 5-8: past the first flight's bins)
        // carrying 1.5 times the first flight: the window grew as its ACKs came back.
        if (5..=8).contains(&self.st.bin)
            && u64::from(sum) * 2 >= u64::from(self.st.first_flight) * 3
        {
            *self.flags |= DOUBLED;
        }
    }

    /// The window the sender reached by the end of this burst (bytes): the most it sent in a
    /// round trip; still growing like slow start, twice that, or the bytes acknowledged in
    /// slow start since the burst's first flight added to it.
    fn reached(&self) -> u32 {
        if self.is(GROWING) {
            self.st
                .burst_bytes
                .saturating_add(self.st.first_flight)
                .max(self.st.window.saturating_mul(2))
        } else {
            self.st.window
        }
    }

    /// The burst is over: was it a restart? Returns it if so. Leaves what the next burst
    /// compares with.
    fn end_burst(&mut self, extra: &mut Extras, side: Side, rtt: i64, mss: u32) -> Option<Restart> {
        let t0 = self.t0()?;
        let last = self.st.last_data?.ts_ns;
        self.close_bin();
        let burst = extra.peek::<AfterIdle>(side).copied();
        let mut found = None;
        if let (Some(b), true) = (burst, self.is(AFTER_IDLE) && !self.is(AFTER_LOSS)) {
            let bytes = u64::from(self.st.burst_bytes);
            let rwnd = if self.is(RWND) {
                u64::from(self.st.rwnd)
            } else {
                u64::MAX
            };
            // The restart is judged against the window reached before the gap.
            let w = u64::from(self.st.window_before).min(rwnd);
            // The window a sender that kept its window would have used, within the receiver's:
            // at least the one it reached before the gap, and at least the one it reached in
            // this burst from the restarted window (kept, it would have grown from more).
            let kept = self.st.window_before.max(self.reached());
            let w_kept = u64::from(kept).min(rwnd);
            let second = i64::from(self.st.second_us) * 1000;
            let dense = self.st.dense.max(self.st.dense_before);
            if w > 0
                && rtt > 0
                && bytes > u64::from(self.st.first_flight)
                && self.st.first_flight >= MIN_IW_SEGMENTS * mss
                && u64::from(self.st.first_flight) * 2 <= w
                && second * 10 >= rtt * 6
                && second * 2 <= rtt * 3
                && self.is(DOUBLED)
                && dense > 0
            {
                let took = last - t0;
                let rounds = bytes.div_ceil(w_kept).max(1) as i64;
                // The bytes at the densest rate the sender reached: `dense` bytes a bin.
                let serial =
                    (bytes as f64 * f64::from(self.st.bin_us) * 1000.0 / f64::from(dense)) as i64;
                let would = (rounds - 1) * rtt + serial.min(took);
                // Worth naming: half a round trip, and a millisecond (a loopback's restart
                // costs microseconds).
                if took - would >= (rtt / 2).max(MS) {
                    found = Some(Restart {
                        burst: b,
                        bytes,
                        first_flight: self.st.first_flight,
                        window_before: kept,
                        took_ns: took,
                        would_take_ns: would,
                    });
                }
            }
        }
        if !self.is(AFTER_LOSS) {
            self.st.window_before = self.st.window_before.max(self.reached());
        }
        self.st.dense_before = self.st.dense_before.max(self.st.dense);
        found
    }

    /// A new burst begins with a segment of `len` bytes at `at`.
    fn begin(&mut self, at: At, len: u32, rtt: i64, after_idle: bool, rwnd: Option<u32>) {
        let after_loss = self.is(LOSS_SEEN);
        *self.st = State {
            last_data: Some(at),
            burst_bytes: len,
            first_flight: len,
            bin_us: u32::try_from((rtt / 4 / 1000).max(1)).unwrap_or(u32::MAX),
            bins: [len, 0, 0, 0],
            window_before: self.st.window_before,
            dense_before: self.st.dense_before,
            rwnd: rwnd.unwrap_or(0),
            ..State::default()
        };
        *self.flags = if after_idle { AFTER_IDLE } else { 0 }
            | if after_loss { AFTER_LOSS } else { 0 }
            | if rwnd.is_some() { RWND } else { 0 };
    }

    /// A segment of `len` new bytes at `at` within the burst; `to_sender`: the round trip
    /// from the capture point to the sender and back (its share of the handshake).
    fn add(&mut self, at: At, len: u32, rtt: i64, to_sender: i64, extra: &mut Extras, side: Side) {
        let Some(t0) = self.t0() else { return };
        let since = at.ts_ns - t0;
        if since * 2 < rtt {
            self.st.first_flight = self.st.first_flight.saturating_add(len);
        } else if self.st.second_us == 0 {
            // The rest of a restarted burst waits for the first flight's ACKs. An ACK seen here
            // reaches the sender after half of `to_sender`, and what it releases comes back
            // after the other half: data seen sooner after the first ACK (3/4 of it, for a
            // handshake slower than the path) or before any ACK left the sender before the
            // ACK came, and the application wrote it later: nothing held it.
            let b = extra.peek_mut::<AfterIdle>(side);
            let acked = b.as_ref().and_then(|b| b.acked_ns);
            let released = self.is(PEER_ACKED)
                && acked.is_none_or(|a| at.ts_ns.saturating_sub(a).saturating_mul(4) >= to_sender.saturating_mul(3));
            // The receiver's window, not the sender's, made the first flight small; or it is
            // not known (no handshake: the window scale is unknown), and cannot be ruled out.
            let held_by_receiver = !self.is(RWND) || self.st.rwnd / 2 < self.st.first_flight;
            if !released || held_by_receiver {
                *self.flags &= !AFTER_IDLE;
            }
            self.st.second_us = u32::try_from((since / 1000).max(1)).unwrap_or(u32::MAX);
            if let Some(b) = b {
                b.second = Some(at);
            }
        }
        let b = u32::try_from(since / 1000 / i64::from(self.st.bin_us.max(1))).unwrap_or(u32::MAX);
        self.advance(b);
        let i = self.st.bin as usize % BINS;
        self.st.bins[i] = self.st.bins[i].saturating_add(len);
        self.st.burst_bytes = self.st.burst_bytes.saturating_add(len);
        self.st.last_data = Some(at);
        self.st.last_since_us = u32::try_from(since / 1000).unwrap_or(u32::MAX);
        if self.is(AFTER_IDLE) {
            if let Some(b) = extra.peek_mut::<AfterIdle>(side) {
                b.last = at;
            }
        }
    }
}

fn record(extra: &mut Extras, side: Side, r: Restart) {
    let f = extra.get::<Found>(side);
    f.count += 1;
    f.total_ns += r.cost_ns();
    if f.shown.len() < KEEP {
        f.shown.push(r);
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
        let peer = ev.from.other();
        if ev.seg.payload_len > 0 {
            // The other direction's burst is answered: its next data is a new burst.
            if cs.slow_start_restart.peek_mut(cs.used, peer).is_some() {
                cs.slow_start_restart_flags[peer as usize] |= PEER_SPOKE;
            }
        }
        if ev.seg.flags.ack() && cs.slow_start_restart_flags[peer as usize] & AFTER_IDLE != 0 {
            // An ACK of the other direction's burst (past its first byte: the burst's bytes
            // are the newest the sender sent).
            if let (Some(st), Some(next)) = (
                cs.slow_start_restart.peek_mut(cs.used, peer),
                c.endpoint(peer).next_seq(),
            ) {
                let start = next.0.wrapping_sub(st.burst_bytes);
                if (ev.seg.ack.0.wrapping_sub(start) as i32) > 0 {
                    if st.second_us != 0 {
                        let w = c.endpoint(ev.from).window_scaled().unwrap_or(0);
                        st.rwnd = st.rwnd.max(w);
                    }
                    cs.slow_start_restart_flags[peer as usize] |= PEER_ACKED;
                    if let Some(b) = cs.extra.peek_mut::<AfterIdle>(peer) {
                        b.acked_ns.get_or_insert(ev.at.ts_ns);
                    }
                }
            }
        }
        if ev.retransmission {
            // A loss cuts the window (to one segment after a timeout): the window reached
            // before it is no longer what the sender has.
            let st = cs.slow_start_restart.get(&mut cs.used, ev.from);
            cs.slow_start_restart_flags[ev.from as usize] |= LOSS_SEEN;
            st.window_before = 0;
            return;
        }
        if ev.seg.payload_len == 0 || !ev.new_data || ev.seg.flags.syn() {
            return;
        }
        let Some(rtt) = rtt_ns(c) else { return };
        // Idle: longer than Linux's minimum RTO plus the round trip.
        let idle = rtt + 200 * MS;
        let mut d = Dir {
            st: cs.slow_start_restart.get(&mut cs.used, ev.from),
            flags: &mut cs.slow_start_restart_flags[ev.from as usize],
        };
        let gap = d.st.last_data.map(|t| ev.at.ts_ns - t.ts_ns);
        let len = ev.seg.payload_len;
        let after_idle = gap.is_some_and(|g| g > idle);
        if gap.is_none() || after_idle || d.is(PEER_SPOKE) {
            let before_gap = d.st.last_data;
            if let Some(r) = d.end_burst(&mut cs.extra, ev.from, rtt, send_mss(c, ev.from)) {
                record(&mut cs.extra, ev.from, r);
            }
            let rwnd = c.endpoint(ev.from.other()).window_scaled();
            d.begin(ev.at, len, rtt, after_idle, rwnd);
            if let (true, Some(before_gap)) = (after_idle, before_gap) {
                cs.extra.set(
                    ev.from,
                    AfterIdle {
                        before_gap,
                        first: ev.at,
                        second: None,
                        last: ev.at,
                        acked_ns: None,
                    },
                );
            }
        } else {
            d.add(ev.at, len, rtt, to_sender(c, ev.from), &mut cs.extra, ev.from);
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let rtt = rtt_ns(c).unwrap_or(0);
        for side in [Side::Client, Side::Server] {
            let Some(mut st) = cs.slow_start_restart.take(&mut cs.used, side) else {
                continue;
            };
            let mut d = Dir {
                st: &mut st,
                flags: &mut cs.slow_start_restart_flags[side as usize],
            };
            if let Some(r) = d.end_burst(&mut cs.extra, side, rtt, send_mss(c, side)) {
                record(&mut cs.extra, side, r);
            }
            let Some(found) = cs.extra.take::<Found>(side) else {
                continue;
            };
            let (Some(first), Some(last)) = (found.shown.first(), found.shown.last()) else {
                continue;
            };
            let b = first.burst;
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = b.first.ts_ns;
            f.end_ns = last.burst.last.ts_ns;
            f.cost_ns = found.total_ns;
            f.frames = [Some(b.before_gap), Some(b.first), b.second, Some(b.last)]
                .into_iter()
                .flatten()
                .map(|a| a.frame())
                .collect();
            f.frames.sort_unstable();
            f.frames.dedup();
            let kb = |n: u64| format!("{:.1} kB", n as f64 / 1000.0);
            f.explanation = format!(
                "After {} idle, {} restarted from a {} first flight although its window had reached {}: the {} burst took {} instead of {} ({} round trip); {} burst{} like it, {} lost.",
                ms(b.first.ts_ns - b.before_gap.ts_ns),
                side_name(c, side),
                kb(u64::from(first.first_flight)),
                kb(u64::from(first.window_before)),
                kb(first.bytes),
                ms(first.took_ns),
                ms(first.would_take_ns),
                ms(rtt),
                found.count,
                if found.count == 1 { "" } else { "s" },
                ms(found.total_ns)
            );
            f.fix = "set net.ipv4.tcp_slow_start_after_idle=0 in the sending host's (or namespace's) sysctls, or keep the connection busy below the RTO, or use BBR on the sender".into();
            f.details = SlowStartRestartDetails {
                burst_bytes: first.bytes,
                bursts: found.count,
                first_flight_bytes: first.first_flight,
                idle_ms: ms_f(b.first.ts_ns - b.before_gap.ts_ns),
                restarts: found
                    .shown
                    .iter()
                    .map(|r| RestartedBurst {
                        burst_bytes: r.bytes,
                        end_ns: r.burst.last.ts_ns,
                        first_flight_bytes: r.first_flight,
                        frame: r.burst.first.frame(),
                        idle_ms: ms_f(r.burst.first.ts_ns - r.burst.before_gap.ts_ns),
                        start_ns: r.burst.first.ts_ns,
                        took_ms: ms_f(r.took_ns),
                        window_before_bytes: r.window_before,
                        would_take_ms: ms_f(r.would_take_ns),
                    })
                    .collect::<Vec<_>>(),
                rtt_ms: ms_f(rtt),
                sender: side.name(),
                took_ms: ms_f(first.took_ns),
                window_before_bytes: first.window_before,
                would_take_ms: ms_f(first.would_take_ns),
            }
            .into();
            out.push(f);
        }
    }
}

/// One burst after idle that restarted from the initial window.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RestartedBurst {
    pub burst_bytes: u64,
    pub end_ns: i64,
    pub first_flight_bytes: u32,
    pub frame: u64,
    pub idle_ms: f64,
    pub start_ns: i64,
    pub took_ms: f64,
    pub window_before_bytes: u32,
    pub would_take_ms: f64,
}

/// slow-start-restart: the sender, its restarted bursts (the first one's numbers at the top).
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SlowStartRestartDetails {
    pub burst_bytes: u64,
    pub bursts: u32,
    pub first_flight_bytes: u32,
    pub idle_ms: f64,
    pub restarts: Vec<RestartedBurst>,
    pub rtt_ms: f64,
    pub sender: &'static str,
    pub took_ms: f64,
    pub window_before_bytes: u32,
    pub would_take_ms: f64,
}
