//! # syn-stale-state: a SYN met leftover state of an earlier connection on the same 4-tuple
//!
//! **Signal.** Before the handshake completes, the server side answers the client's SYN with an
//! ACK that does not acknowledge it (an ACK carrying the numbers of an earlier connection), the
//! client resets it (RST, seq = that ACK number) and sends the same SYN again.
//!
//! **Evidence.** The first SYN, the stale ACK, the client's RST, the SYN that was answered and
//! the SYN-ACK. Details: the earlier connection on the tuple and how it closed, the time since,
//! the peer state it implies (TIME-WAIT after a clean close, else a stale full socket answering
//! with a challenge ACK), whether the new ISN went below the old rcv_nxt, whether timestamps
//! were in use, and the retry gap (2-8 ms on Linux >= 5.6, about 1 s or 3 s elsewhere).
//!
//! **Cost.** From the first SYN to the SYN-ACK that completed the handshake, or to the last
//! SYN sent again when none did: every SYN with the same ISN is the same attempt, however
//! long the ladder (under tcp_rfc1337=1 a TIME-WAIT ignores the resets: about 67 s).
//!
//! **Known false positives.** A capture that misses the earlier connection cannot tell
//! TIME-WAIT from a stale socket (the peer state is then "unknown"). Middleboxes that answer
//! SYNs with ACKs (some SYN-proxy firewalls) show the same exchange.
//!
//! **References.** docs/tcp-signatures.md section 1; Linux tcp_timewait_state_process
//! (net/ipv4/tcp_minisocks.c), RFC 5961 section 4.2 (challenge ACK), commit 9603d47bad46
//! (2-jiffy retry).

use super::{ConnState, MS, WHOLE};
use crate::finding::ms;
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Close, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "syn-stale-state",
    title: "SYN met TIME-WAIT or a stale socket of an earlier connection on the same port",
    doc: include_str!("syn_stale_state.rs"),
};

/// Set once the server answered the first SYN with a stale ACK (most connections never do):
/// a part of the connection's `Extra`.
#[derive(Default, Debug)]
pub(crate) struct Stale {
    /// The stale ACK and its acknowledgment number.
    ack: (Option<At>, u32),
    rst: Option<At>,
    retry_syn: Option<At>,
    /// The latest SYN sent again after a reset, and how many were (a ladder when the stale
    /// state outlives the resets: a TIME-WAIT under tcp_rfc1337=1).
    last_syn: Option<At>,
    retries: u32,
}

#[derive(Default)]
pub struct SynStaleState {}

impl Detector for SynStaleState {
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
        if c.handshake.syn_ack.is_some() || c.client.isn().is_none() {
            return;
        }
        let f = ev.seg.flags;
        let first_syn = cs.first_syn(c);
        let st = &mut cs.extra;
        match ev.from {
            // A SYN after the first: the retry, once the client reset the stale ACK.
            Side::Client if f.syn() && !f.ack() => {
                if let Some(s) = st.peek_mut::<Stale>(WHOLE) {
                    if s.rst.is_some() {
                        s.retry_syn.get_or_insert(ev.at);
                        s.last_syn = Some(ev.at);
                        s.retries += 1;
                    }
                }
            }
            // The pattern's ACK answers a SYN seen before it (found by fuzzing: an ACK before
            // the client's first plain SYN made the opening's cost negative).
            Side::Server
                if f.ack()
                    && !f.syn()
                    && !f.rst()
                    && first_syn.is_some()
                    && st.peek::<Stale>(WHOLE).is_none()
                    && c.client.isn().is_some_and(|isn| ev.seg.ack != isn + 1) =>
            {
                st.get::<Stale>(WHOLE).ack = (Some(ev.at), ev.seg.ack.0);
            }
            Side::Client if f.rst() => {
                if let Some(s) = st.peek_mut::<Stale>(WHOLE) {
                    if s.rst.is_none() {
                        s.rst = Some(ev.at);
                    }
                }
            }
            _ => {}
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let Some(st) = cs.extra.take::<Stale>(WHOLE) else {
            return;
        };
        let (Some(first), (Some(ack_at), ack_no)) = (cs.first_syn(c), st.ack) else {
            return;
        };
        // The client's reset is what shows the ACK was for numbers it never used: a client
        // that goes on with its data instead had a SYN-ACK the capture missed or could not
        // read, and the "old" ACK acknowledges that data.
        if st.rst.is_none() {
            return;
        }
        // To the SYN-ACK that completed the attempt, or to its last retry when none did.
        let end = c
            .handshake
            .syn_ack
            .or(st.last_syn)
            .or(st.rst)
            .unwrap_or(ack_at);
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.ts_ns;
        f.end_ns = end.ts_ns;
        // Without the stale state the first SYN would have been answered as the last one was:
        // the SYN-ACK one SYN-to-SYN-ACK interval after it. So the time lost is the first SYN
        // to the SYN that was answered, the same from any vantage point (the interval after
        // it, a round trip at the client and nearly nothing at the server, would have been
        // spent anyway). Without an answered retry, the whole span.
        f.cost_ns = match (c.handshake.syn_ack, st.last_syn) {
            (Some(_), Some(last)) => last.ts_ns - first.ts_ns,
            _ => end.ts_ns - first.ts_ns,
        };
        f.frames = [
            Some(first),
            Some(ack_at),
            st.rst,
            st.retry_syn,
            st.last_syn,
            c.handshake.syn_ack,
        ]
        .into_iter()
        .flatten()
        .map(|a| a.frame())
        .collect();
        f.frames.dedup();
        let prev = c.prev().copied();
        let (peer_state, fix) = match prev.map(|p| p.close) {
            Some(Close::Fin { .. }) => (
                "TIME-WAIT",
                "keep TCP timestamps on at both ends (net.ipv4.tcp_timestamps=1) so TIME-WAIT accepts a newer SYN; reuse connections (pooling) or widen net.ipv4.ip_local_port_range so a port is not reused within 60 s; leave net.ipv4.tcp_rfc1337=0",
            ),
            Some(_) => (
                "a stale socket (challenge ACK)",
                "find why the earlier connection's close never reached the peer (a lost, dropped or filtered RST or FIN; an SO_LINGER {1,0} reset is sent once and never retransmitted); close gracefully or keep the path from dropping resets",
            ),
            None => (
                "earlier state not in the capture",
                "keep TCP timestamps on, avoid reusing the same source port within 60 s (pooling, a wider net.ipv4.ip_local_port_range), and check that resets reach the peer",
            ),
        };
        let isn_below = match (prev, c.client.isn()) {
            (Some(p), Some(isn)) if p.same_client => p.client_next_seq.map(|old| isn < old),
            _ => None,
        };
        let old_ack_matches = prev.and_then(|p| p.client_next_seq).map(|s| s.0 == ack_no);
        let retry_gap = match (st.rst, st.retry_syn) {
            (Some(r), Some(s)) => Some(s.ts_ns - r.ts_ns),
            _ => None,
        };
        let retry_stack = retry_gap.map(|g| match g {
            g if g < 20 * MS => "Linux >= 5.6 (retry after 2 jiffies)",
            g if g < 2_000 * MS => "initial RTO of about 1 s (older Linux, BSD)",
            _ => "initial RTO of about 3 s (old Windows, Solaris)",
        });
        let prev_text = match prev {
            Some(p) => {
                let close = match (p.close, p.close.by()) {
                    (Close::Open, _) | (_, None) => "never closed in the capture".to_string(),
                    (k, Some(by)) => format!("{} by {}", k.kind(), by.name()),
                };
                format!(
                    "connection #{} ({close}, last packet {} earlier)",
                    p.id,
                    ms(first.ts_ns - p.last_ts)
                )
            }
            None => "an earlier connection".to_string(),
        };
        // What the capture shows, and only that.
        let after = match (st.rst, st.retry_syn) {
            (Some(_), Some(_)) if st.retries > 1 => format!(
                ", the client reset it and sent the same SYN again {} later, {} times in all",
                retry_gap.map(ms).unwrap_or_default(),
                st.retries
            ),
            (Some(_), Some(_)) => format!(
                ", the client reset it and sent the same SYN again {} later",
                retry_gap.map(ms).unwrap_or_default()
            ),
            (Some(_), None) | (None, _) => ", the client reset it".to_string(),
        };
        let took = if c.handshake.syn_ack.is_some() {
            format!(
                "opening took {} instead of one round trip: {} lost",
                ms(f.end_ns - f.start_ns),
                ms(f.cost_ns)
            )
        } else {
            format!(
                "no SYN-ACK came in the capture ({} from the first SYN to the last)",
                ms(f.cost_ns)
            )
        };
        f.explanation = format!(
            "The SYN from port {} met {peer_state} of {prev_text}: the server answered with an ACK for old sequence numbers{after}; {took}.",
            c.client.port,
        );
        f.fix = fix.into();
        f.details = SynStaleStateDetails {
            answered: c.handshake.syn_ack.is_some(),
            isn_below_old_rcv_nxt: isn_below,
            peer_state,
            previous_close: prev.map(|p| PreviousClose {
                by: p.close.by().map(|s| s.name()),
                kind: p.close.kind(),
            }),
            previous_connection: prev.map(|p| p.id),
            retry_gap_ms: retry_gap.map(crate::finding::ms_f),
            retry_stack,
            since_previous_ms: prev.map(|p| crate::finding::ms_f(first.ts_ns - p.last_ts)),
            stale_ack_is_old_rcv_nxt: old_ack_matches,
            syns_again: st.retries,
            timestamps: prev.map(|p| p.timestamps),
        }
        .into();
        out.push(f);
    }
}

/// How the connection before it on the 4-tuple closed.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PreviousClose {
    pub by: Option<&'static str>,
    pub kind: &'static str,
}

/// syn-stale-state: what the stale answer was and the connection it was left from.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynStaleStateDetails {
    pub answered: bool,
    pub isn_below_old_rcv_nxt: Option<bool>,
    pub peer_state: &'static str,
    pub previous_close: Option<PreviousClose>,
    pub previous_connection: Option<u64>,
    pub retry_gap_ms: Option<f64>,
    pub retry_stack: Option<&'static str>,
    pub since_previous_ms: Option<f64>,
    pub stale_ack_is_old_rcv_nxt: Option<bool>,
    pub syns_again: u32,
    pub timestamps: Option<bool>,
}
