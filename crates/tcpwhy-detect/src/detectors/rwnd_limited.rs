//! # rwnd-limited: the receiver's window, not the network, paced the sender
//!
//! **Signal.** The sender fills the receive window the peer advertised (its data reaches the
//! window's right edge, the ACK plus the window) and then waits until an ACK moves the edge,
//! again and again, with the window open (not zero). The receive buffer is smaller than the
//! bandwidth-delay product, so throughput is window / RTT whatever the path could carry.
//!
//! **Evidence.** The first segment that filled the window and the next one sent after the
//! wait. Details: how often, the advertised windows, the RTT.
//!
//! **Cost.** The time the sender sat with a full window: from filling it to the ACK that
//! reopened it by a segment (or to the sender's next segment, if that came first), when that
//! wait exceeds a quarter of the RTT; or, where the receiver held the sender far longer than a
//! round trip, the transfer's stalls at the window beyond a round trip, if they add up to more.
//!
//! **Known false positives.** Needs the handshake (window scale); a sender that is also
//! application-limited right at the edge looks alike now and then, hence at least 3 waits.
//!
//! **References.** RFC 7323 (window scale), RFC 9293 section 3.8.6; docs/tcp-signatures.md
//! section 6.

use super::{rtt_ns, side_name, ConnState, MS};
use crate::finding::{ms, ms_f};
use crate::model::stall::{Stall, StallClass};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};
use tcpwhy_wire::Seq;

pub static INFO: Info = Info {
    id: "rwnd-limited",
    title:
        "sender paced by the receiver's window (receive buffer below the bandwidth-delay product)",
    doc: include_str!("rwnd_limited.rs"),
};

const MIN_WAITS: u32 = 3;

/// Both directions side by side, each indexed by its sender (`Side as usize`): as one state
/// per direction, each padded its 28 bytes to 32. When a sender filled the window is a part
/// of the connection's `Extra` (`Found::full`): most directions never fill it, and inline it
/// would be 32 bytes of every connection.
#[derive(Default, Debug)]
pub(crate) struct State {
    /// The right edge of the window the peer last advertised (ack + scaled window); valid
    /// once `max_window` is above 0 (both are set together, by a window above 0).
    edge: [Seq; 2],
    /// How long the sender waited at the full window before the window reopened, in
    /// microseconds (0: not reopened yet): the wait counts if the sender sends again.
    reopened_us: [u32; 2],
    /// The largest window the peer advertised (scaled).
    max_window: [u32; 2],
}

/// The waits for the window, a part of the connection's `Extra`: most directions never fill
/// the window, nor wait.
#[derive(Default, Debug)]
pub(crate) struct Found {
    /// When the sender filled the window (the wait for it to reopen runs from there).
    full: Option<At>,
    first: Option<(At, At)>,
    waits: u32,
    total_ns: i64,
    /// The transfer's stalls at the receiver's window (gaps beyond two round trips with the
    /// window full or below one segment): their number and their time beyond a round trip.
    stalls: u32,
    stall_ns: i64,
}

#[derive(Default)]
pub struct RwndLimited {}

/// `sender` filled the window at `full`, waited `wait` for it to reopen, and sent again at
/// `next`.
fn add_wait(cs: &mut ConnState, c: &Connection, sender: Side, full: At, next: At, wait: i64) {
    if wait > (rtt_ns(c).unwrap_or(0) / 4).max(MS) {
        let f = cs.extra.get::<Found>(sender);
        f.waits += 1;
        f.total_ns += wait;
        f.first.get_or_insert((full, next));
    }
}

impl Detector for RwndLimited {
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
        let seg = ev.seg;
        if seg.flags.syn() || seg.flags.rst() || !c.window_scaling() && c.client.isn().is_none() {
            return;
        }
        // The peer's ACK sets the edge for the sender on the other side.
        let sender = ev.from.other();
        if seg.flags.ack() {
            if let Some(w) = c.endpoint(ev.from).window_scaled().filter(|w| *w > 0) {
                let st = cs.rwnd_limited.get(&mut cs.used);
                let i = sender as usize;
                st.edge[i] = seg.ack + w.min(u32::MAX / 2);
                st.max_window[i] = st.max_window[i].max(w);
                // The window reopened: room for a segment (or half the largest window, what a
                // sender avoiding silly windows waits for) beyond what the sender has sent.
                // The wait for it ends here; it counts if the sender sends again (it had more
                // to send).
                let full = cs.extra.peek::<Found>(sender).and_then(|f| f.full);
                if let (Some(full), Some(nxt), 0) =
                    (full, c.endpoint(sender).next_seq(), st.reopened_us[i])
                {
                    let mss = u32::from(c.endpoint(ev.from).mss().unwrap_or(536));
                    let room = i64::from(st.edge[i].diff(nxt));
                    if room >= i64::from(mss.min(st.max_window[i] / 2).max(1)) {
                        let us = ((ev.at.ts_ns - full.ts_ns) / 1000).max(1);
                        st.reopened_us[i] = u32::try_from(us).unwrap_or(u32::MAX);
                    }
                }
            }
        }
        if seg.payload_len == 0 || !ev.new_data {
            return;
        }
        let st = cs.rwnd_limited.get(&mut cs.used);
        let i = ev.from as usize;
        let full = cs
            .extra
            .peek_mut::<Found>(ev.from)
            .and_then(|f| f.full.take());
        if let Some(full) = full {
            // The wait ended when the window reopened, or, with no window update seen (an ACK
            // the capture missed, a sender probing), with this data.
            let wait = match std::mem::take(&mut st.reopened_us[i]) {
                0 => ev.at.ts_ns - full.ts_ns,
                us => i64::from(us) * 1000,
            };
            add_wait(cs, c, ev.from, full, ev.at, wait);
        }
        let st = cs.rwnd_limited.get(&mut cs.used);
        let end = seg.seq + seg.payload_len;
        if st.max_window[i] > 0 {
            let mss = u32::from(c.endpoint(ev.from).mss().unwrap_or(1460));
            if end >= st.edge[i] - mss / 2 {
                cs.extra.get::<Found>(ev.from).full = Some(ev.at);
            }
        }
    }

    fn stall(&mut self, cs: &mut ConnState, _c: &Connection, s: &Stall, _out: &mut Vec<Finding>) {
        if s.class == StallClass::ReceiveWindow {
            let f = cs.extra.get::<Found>(s.sender);
            f.stalls += 1;
            f.stall_ns += s.cost_ns;
            f.first.get_or_insert((s.start, s.end));
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(st) = cs.rwnd_limited.take(&mut cs.used) else {
            return;
        };
        for side in [Side::Client, Side::Server] {
            let i = side as usize;
            let Some(found) = cs.extra.take::<Found>(side) else {
                continue;
            };
            let Some((full, next)) = found.first else {
                continue;
            };
            if found.stalls > 0 {
                cs.exchange_has |= super::RECEIVER_HELD;
            }
            if found.waits < MIN_WAITS && found.stalls < MIN_WAITS {
                continue;
            }
            // The window was not what held the sender when a queue on the path inflated the
            // round trip and the receiver's window never held it long (the waits are the
            // queue's: a larger window would only fill the queue more). queueing-delay names it.
            if found.stalls < MIN_WAITS && super::queueing_delay::queue(c).is_some() {
                continue;
            }
            // The waits at the window edge, or, where the receiver held the sender far longer
            // than a round trip (a receiver that drains slowly: its window shrank below a
            // segment), the stalls' time beyond a round trip: whichever saw more of it (the
            // two measure the same waits, so they are not added).
            let total_ns = found.total_ns.max(found.stall_ns);
            let waits = found.waits.max(found.stalls);
            let rtt = rtt_ns(c).unwrap_or(0);
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = full.ts_ns;
            f.end_ns = c.last.ts_ns;
            f.cost_ns = total_ns;
            f.frames = vec![full.frame(), next.frame()];
            let rate = if rtt > 0 {
                f64::from(st.max_window[i]) * 8.0 / (rtt as f64 / 1e9) / 1e6
            } else {
                0.0
            };
            f.explanation = format!(
                "{} filled the peer's receive window ({} bytes at most) {} times and waited {} in all for it to move; at a {} round trip that window caps the rate near {:.0} Mbit/s.",
                side_name(c, side),
                st.max_window[i],
                waits,
                ms(total_ns),
                ms(rtt),
                rate
            );
            f.fix = "let the receiver's buffer grow (net.ipv4.tcp_rmem maximum, no fixed SO_RCVBUF in the receiving application, window scaling on) to at least the bandwidth-delay product".into();
            f.details = RwndLimitedDetails {
                max_window_bytes: st.max_window[i],
                rtt_ms: ms_f(rtt),
                sender: side.name(),
                waits,
            }
            .into();
            out.push(f);
        }
    }
}

/// rwnd-limited: the sender held by the window, how often, the largest window.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RwndLimitedDetails {
    pub max_window_bytes: u32,
    pub rtt_ms: f64,
    pub sender: &'static str,
    pub waits: u32,
}
