//! # zero-window: the receiver advertised a zero window and the sender stalled
//!
//! **Signal.** A side advertises a receive window of 0: its application is not reading. The
//! peer stops sending and probes (persist timer) until a window update opens it again.
//!
//! A zero window advertised after the peer's FIN is not one: nothing more can come (a closed
//! socket's last ACK).
//!
//! **Evidence.** The first zero-window segment and the window update. Details: how many
//! stalls, whether the last one recovered before the capture ended.
//!
//! **Cost.** The stall: from the zero window to the update, per stall, plus the update's way
//! to the sender and its data's way back to the capture point (the sender's share of the
//! handshake, `to_sender`: 0 at the sender, a round trip at the receiver), as far as the
//! sender's next data came that late (a sender with nothing more to send is charged to the
//! update only).
//!
//! **Known false positives.** None known for the stall itself; its cause is the receiving
//! application (or a receive buffer too small for the rate).
//!
//! **References.** RFC 9293 section 3.8.6.1 (zero-window probing); docs/tcp-signatures.md
//! section 6.

use super::{side_name, ConnState};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "zero-window",
    title: "receiver advertised a zero window (application not reading)",
    doc: include_str!("zero_window.rs"),
};

#[derive(Default, Debug)]
pub(crate) struct State {
    zero_since: Option<At>,
    /// The last window update, until the sender's next data shows when it arrived there.
    reopened: Option<At>,
    first: Option<(At, At)>,
    stalls: u32,
    total_ns: i64,
}

#[derive(Default)]
pub struct ZeroWindow {}

impl Detector for ZeroWindow {
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
        let f = ev.seg.flags;
        if f.syn() || f.rst() {
            return;
        }
        // After the peer's FIN nothing more comes to hold back: a zero window then is a
        // closed socket's last ACK, not a reader that stopped.
        if ev.seg.window == 0 && c.endpoint(ev.from.other()).fin.is_some() {
            return;
        }
        // The sender's first data after an update: the stall lasted until the update reached
        // it, as long as its data took to come back here after that.
        if ev.seg.payload_len > 0 {
            if let Some(st) = cs.extra.peek_mut::<State>(ev.from.other()) {
                if let Some(u) = st.reopened.take() {
                    let way = super::to_sender(c, ev.from);
                    st.total_ns += (ev.at.ts_ns - u.ts_ns).clamp(0, way);
                }
            }
        }
        // A direction gets its state at its first zero window: most never advertise one
        // (their state is never written, nor read when the connection ends).
        if ev.seg.window == 0 {
            let st = cs.extra.get::<State>(ev.from);
            st.zero_since.get_or_insert(ev.at);
        } else if let Some(st) = cs.extra.peek_mut::<State>(ev.from) {
            if let Some(z) = st.zero_since.take() {
                st.stalls += 1;
                st.total_ns += ev.at.ts_ns - z.ts_ns;
                st.first.get_or_insert((z, ev.at));
                st.reopened = Some(ev.at);
            }
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        for side in [Side::Client, Side::Server] {
            let Some(mut st) = cs.extra.take::<State>(side) else {
                continue;
            };
            let open = st.zero_since;
            if let Some(z) = open {
                st.stalls += 1;
                st.total_ns += c.last.ts_ns - z.ts_ns;
                st.first.get_or_insert((z, c.last));
            }
            let Some((z, upd)) = st.first else { continue };
            let mut f = Finding::new(INFO.id, c);
            f.start_ns = z.ts_ns;
            f.end_ns = upd.ts_ns;
            f.cost_ns = st.total_ns;
            f.frames = vec![z.frame(), upd.frame()];
            f.frames.dedup();
            f.explanation = format!(
                "{} advertised a zero window {} times: its application stopped reading; the peer stalled {} in all{}.",
                side_name(c, side),
                st.stalls,
                ms(st.total_ns),
                if open.is_some() { ", the last stall never recovered in the capture" } else { "" }
            );
            f.fix = "make the receiving application read faster (or larger receive buffers if it reads in bursts)".into();
            f.details = ZeroWindowDetails {
                receiver: side.name(),
                recovered: open.is_none(),
                stall_ms_total: ms_f(st.total_ns),
                stalls: st.stalls,
            }
            .into();
            out.push(f);
        }
    }
}

/// zero-window: the receiver, its zero windows and whether it opened again.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ZeroWindowDetails {
    pub receiver: &'static str,
    pub recovered: bool,
    pub stall_ms_total: f64,
    pub stalls: u32,
}
