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
//! **Cost.** The time the sender sat with a full window (from filling it to its next segment,
//! when that wait exceeds a quarter of the RTT).
//!
//! **Known false positives.** Needs the handshake (window scale); a sender that is also
//! application-limited right at the edge looks alike now and then, hence at least 3 waits.
//!
//! **References.** RFC 7323 (window scale), RFC 9293 section 3.8.6; tcp-signatures.md
//! section 6.

use super::{rtt_ns, side_name, ConnState, MS};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use serde_json::json;
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
/// per direction, each padded its 28 bytes to 32.
#[derive(Default, Debug)]
pub(crate) struct State {
    /// When the sender filled the window.
    full: [Option<At>; 2],
    /// The right edge of the window the peer last advertised (ack + scaled window); valid
    /// once `max_window` is above 0 (both are set together, by a window above 0).
    edge: [Seq; 2],
    /// The last and the largest window the peer advertised (scaled).
    window: [u32; 2],
    max_window: [u32; 2],
}

/// The waits for the window, a part of the connection's `Extra`: most directions never wait.
#[derive(Default, Debug)]
pub(crate) struct Found {
    first: Option<(At, At)>,
    waits: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct RwndLimited {}

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
                st.window[i] = w;
                st.max_window[i] = st.max_window[i].max(w);
            }
        }
        if seg.payload_len == 0 || !ev.new_data {
            return;
        }
        let st = cs.rwnd_limited.get(&mut cs.used);
        let i = ev.from as usize;
        if let Some(full) = st.full[i].take() {
            let wait = ev.at.ts_ns - full.ts_ns;
            if wait > (rtt_ns(c).unwrap_or(0) / 4).max(MS) {
                let f = cs.extra.get::<Found>(ev.from);
                f.waits += 1;
                f.total_ns += wait;
                f.first.get_or_insert((full, ev.at));
            }
        }
        let end = seg.seq + seg.payload_len;
        if st.max_window[i] > 0 {
            let mss = u32::from(c.endpoint(ev.from).mss().unwrap_or(1460));
            if end >= st.edge[i] - mss / 2 {
                st.full[i] = Some(ev.at);
            }
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
            if found.waits < MIN_WAITS {
                continue;
            }
            let rtt = rtt_ns(c).unwrap_or(0);
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = full.ts_ns;
            f.end_ns = c.last.ts_ns;
            f.cost_ns = found.total_ns;
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
                found.waits,
                ms(found.total_ns),
                ms(rtt),
                rate
            );
            f.fix = "let the receiver's buffer grow (net.ipv4.tcp_rmem maximum, no fixed SO_RCVBUF in the receiving application, window scaling on) to at least the bandwidth-delay product".into();
            f.details = json!({
                "sender": side.name(),
                "waits": found.waits,
                "max_window_bytes": st.max_window[i],
                "last_window_bytes": st.window[i],
                "rtt_ms": ms_f(rtt),
            });
            out.push(f);
        }
    }
}
