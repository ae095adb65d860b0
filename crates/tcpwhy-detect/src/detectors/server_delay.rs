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
//! **Known false positives.** Protocols where the server speaks on its own schedule (server
//! push, streaming, long polling) look like slow answers. The capture point's share of the
//! round trip comes from the handshake; without a handshake the whole gap is counted.
//!
//! **References.** tcp-signatures.md section 7.

use super::{rtt_ns, side_name, ConnState, MS, WHOLE};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use serde_json::json;
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "server-delay",
    title: "the server took long to answer (application time, not network)",
    doc: include_str!("server_delay.rs"),
};

const MIN_DELAY: i64 = 50 * MS;
const KEEP: usize = 8;

#[derive(Default, Debug)]
pub(crate) struct State {
    /// The last segment of the request now waiting for an answer.
    request_last: Option<At>,
    /// The server's pure ACK of it, if one came before the response.
    acked: Option<At>,
    // The exchanges seen so far are `ConnState::server_delay_exchanges` (in padding there;
    // here they made the state 8 bytes longer).
}

/// The slow answers (a part of the connection's `Extra`): most connections have none.
#[derive(Default, Debug)]
pub(crate) struct Found {
    slow: Vec<(At, Option<At>, At, i64)>,
    count: u32,
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
        if ev.seg.flags.syn() || ev.seg.flags.rst() || c.role.inferred() {
            return;
        }
        let st = cs.server_delay.get(&mut cs.used);
        match ev.from {
            Side::Client if ev.seg.payload_len > 0 && ev.new_data => {
                st.request_last = Some(ev.at);
                st.acked = None;
            }
            // The request sent again: the server could not answer before it had it (the wait
            // before is the retransmission's, reported by the retransmission detectors).
            Side::Client
                if ev.seg.payload_len > 0 && ev.retransmission && st.request_last.is_some() =>
            {
                st.request_last = Some(ev.at);
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
                cs.server_delay_exchanges += 1;
                // The capture point's round trip to the server, from the handshake split.
                let far = c.syn_to_syn_ack_ns().unwrap_or(0);
                let rtt = rtt_ns(c).unwrap_or(0);
                let server_time = ev.at.ts_ns - req.ts_ns - far;
                if server_time >= MIN_DELAY && server_time >= 4 * rtt {
                    let acked = st.acked;
                    let f = cs.extra.get::<Found>(WHOLE);
                    f.count += 1;
                    f.total_ns += server_time;
                    if f.slow.len() < KEEP {
                        f.slow.push((req, acked, ev.at, server_time));
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
        let exchanges = cs.server_delay_exchanges;
        let Some(st) = cs.extra.take::<Found>(WHOLE) else {
            return;
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
            "{} took {} (median) to start answering {} of {} requests, beyond the {} round trip{}; {} lost in the server.",
            side_name(c, Side::Server),
            ms(times[(times.len() - 1) / 2]),
            st.count,
            exchanges,
            rtt_ns(c).map_or("unknown".into(), ms),
            if prompt_acks > 0 { "; its TCP stack acknowledged the requests at once, the application answered late" } else { "" },
            ms(st.total_ns)
        );
        f.fix = "the time is spent in the server application (or what it waits for: a database, a lock, a full accept queue, a slow disk): profile it; the network is not the cause".into();
        f.details = json!({
            "slow_exchanges": st.count,
            "exchanges": exchanges,
            "server_time_ms": times.iter().map(|t| ms_f(*t)).collect::<Vec<_>>(),
            "acked_before_answer": prompt_acks,
        });
        out.push(f);
    }
}
