//! # tfo-fallback: the request rode the SYN, the server did not take it
//!
//! **Signal.** The client sent data in its SYN (TCP Fast Open, RFC 7413), the server's SYN-ACK
//! acknowledged the SYN but not that data, and the client sent the data again once the
//! handshake completed. The request waited one round trip it was meant to save: the server has
//! Fast Open off (Linux: `net.ipv4.tcp_fastopen` without bit 0x2, or no `TCP_FASTOPEN` on the
//! listening socket), rejected the cookie, or had its Fast Open queue full; or a middlebox
//! stripped the option.
//!
//! **Evidence.** The SYN with its data, the SYN-ACK, the data sent again. Details: the bytes
//! in the SYN, the bytes the SYN-ACK took (0 unless it took part of them), whether the SYN
//! carried a Fast Open cookie.
//!
//! **Cost.** From the SYN to the data sent again: at any capture point, the time the request
//! reached the server later than it would have with Fast Open accepted (one round trip).
//!
//! The data sent again is not a retransmission finding (`rto-retransmission` and the others
//! leave it out): nothing was lost.
//!
//! **Known false positives.** None known: the three packets say it. A client that sends data
//! in its SYN without Fast Open (a tool, or a SYN sent with data by mistake) looks the same;
//! the fix is then on the client.
//!
//! **References.** RFC 7413 (TCP Fast Open); Linux `Documentation/networking/ip-sysctl.rst`
//! (tcp_fastopen).

use super::{side_name, MS};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use rustc_hash::FxHashMap;
use tcpwhy_track::{At, Connection, SegmentEvent, Side};
use tcpwhy_wire::Seq;

pub static INFO: Info = Info {
    id: "tfo-fallback",
    title: "TCP Fast Open data in the SYN not taken: the request waited for the handshake",
    doc: include_str!("tfo_fallback.rs"),
};

/// A SYN that carried data, until the data is taken or sent again.
#[derive(Debug)]
struct SynData {
    syn: At,
    isn: Seq,
    bytes: u32,
    cookie: bool,
    /// The SYN-ACK that did not take all of it, and how many bytes it took.
    syn_ack: Option<(At, u32)>,
}

/// The detector keeps its own state: only connections whose SYN carries data have any, so it
/// is a map by connection id here rather than a field of every connection's `ConnState`.
#[derive(Default)]
pub struct TfoFallback {
    pending: FxHashMap<u64, SynData>,
}

impl Detector for TfoFallback {
    fn info(&self) -> &'static Info {
        &INFO
    }

    #[inline(always)]
    fn segment(
        &mut self,
        _cs: &mut super::ConnState,
        c: &Connection,
        ev: &SegmentEvent<'_>,
        out: &mut Vec<Finding>,
    ) {
        let f = ev.seg.flags;
        let syn_data = f.syn() && !f.ack() && ev.from == Side::Client && ev.seg.payload_len > 0;
        if self.pending.is_empty() && !syn_data {
            return;
        }
        if syn_data {
            if c.handshake.syn_ack.is_none() {
                // A SYN sent again replaces the one before: the SYN-ACK answers the last.
                self.pending.insert(
                    c.id(),
                    SynData {
                        syn: ev.at,
                        isn: ev.seg.seq,
                        bytes: ev.seg.payload_len,
                        cookie: ev.seg.options.tfo_cookie,
                        syn_ack: None,
                    },
                );
            }
            return;
        }
        let Some(p) = self.pending.get_mut(&c.id()) else {
            return;
        };
        match (ev.from, p.syn_ack) {
            (Side::Server, None) if f.syn() && f.ack() => {
                // The SYN-ACK acknowledges the SYN (ISN + 1) and the data it took.
                let took = ev.seg.ack.diff(p.isn + 1);
                if took >= 0 && took as u32 >= p.bytes {
                    self.pending.remove(&c.id());
                } else {
                    p.syn_ack = Some((ev.at, took.max(0) as u32));
                }
            }
            (Side::Client, Some((syn_ack, took)))
                if ev.seg.payload_len > 0 && ev.seg.seq == p.isn + 1 + took =>
            {
                out.push(finding(c, p, syn_ack, took, ev.at));
                self.pending.remove(&c.id());
            }
            _ => {}
        }
    }

    fn finished(&mut self, _cs: &mut super::ConnState, c: &Connection, _out: &mut Vec<Finding>) {
        if !self.pending.is_empty() {
            self.pending.remove(&c.id());
        }
    }
}

/// A wait as `ms` writes it, with microseconds below a millisecond (a round trip on one host).
fn wait(ns: i64) -> String {
    if ns < MS {
        format!("{:.3} ms", ms_f(ns))
    } else {
        ms(ns)
    }
}

fn finding(c: &Connection, p: &SynData, syn_ack: At, took: u32, again: At) -> Finding {
    let mut f = Finding::new(INFO.id, c);
    f.start_ns = p.syn.ts_ns;
    f.end_ns = again.ts_ns;
    f.cost_ns = (again.ts_ns - p.syn.ts_ns).max(0);
    f.frames = vec![p.syn.frame(), syn_ack.frame(), again.frame()];
    f.frames.sort_unstable();
    f.explanation = format!(
        "{} sent {} bytes in its SYN (TCP Fast Open{}), {} acknowledged the SYN but {}, and the data went again after the handshake: the request reached the server {} later than Fast Open would have had it.",
        side_name(c, Side::Client),
        p.bytes,
        if p.cookie { ", with a cookie" } else { ", without a cookie" },
        side_name(c, Side::Server),
        if took == 0 {
            "not the data".to_string()
        } else {
            format!("only {took} bytes of the data")
        },
        wait(f.cost_ns)
    );
    f.fix = "turn Fast Open on at the server (Linux: net.ipv4.tcp_fastopen with bit 0x2, e.g. 3, and setsockopt TCP_FASTOPEN with a queue length on the listening socket; nginx: listen ... fastopen=N), or find the middlebox that strips the option; if the server is not meant to do Fast Open, the client loses nothing against a plain handshake".into();
    f.details = TfoFallbackDetails {
        cookie: p.cookie,
        syn_data_bytes: p.bytes,
        taken_bytes: took,
        wait_ms: ms_f(f.cost_ns),
    }
    .into();
    f
}

/// tfo-fallback: the data in the SYN, how much the SYN-ACK took, the wait.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TfoFallbackDetails {
    pub cookie: bool,
    pub syn_data_bytes: u32,
    pub taken_bytes: u32,
    pub wait_ms: f64,
}
