//! # client-delay: the client waited before sending its request
//!
//! **Signal.** The handshake completed, the server said nothing, and the client's first
//! request came much later: at least 50 ms and four round trips after the client's ACK of the
//! SYN-ACK. The client application (or what it waited for: name resolution of the next step,
//! a pool handing out a pre-opened connection, a lock) spent that time, not the network.
//!
//! **Evidence.** The client's handshake ACK and its first data segment.
//!
//! **Cost.** The wait.
//!
//! Not counted: protocols where the server speaks first (its greeting comes first; on their
//! well-known ports a client that speaks first waited for a greeting withheld, which is the
//! server's time, `server-delay`), and a first message under 100 bytes a second or more after
//! the handshake (a person typing the first line of a chat, a device's first status message:
//! nobody was waiting on the client).
//!
//! **Not made** on one subflow of a Multipath TCP connection (its SYN-ACK or later segments
//! carry the MPTCP option): the application's data may travel on the other subflows, so one
//! subflow's requests, replies and pauses are not the application's.
//!
//! Nor between the peers of BGP, LDP, MSDP or BMP (either side on port 179, 646, 639 or
//! 11019): each peer sends when its own routes, labels or timers change, so no message
//! answers another and a pause owes nothing.
//!
//! **Known false positives.** Connection pools and browsers (pre-connect) open connections
//! ahead of use; their first request is naturally later and the wait costs nothing to the
//! user. A wait of a second or more is that more often than not (a real client stalls for
//! tens or hundreds of milliseconds): its confidence is low.
//!
//! **References.** docs/tcp-signatures.md section 7.

use super::{rtt_ns, ConnState, MS, WHOLE};
use crate::finding::{ms, ms_f, Level};
use crate::{Detector, Finding, Info};
use tcpwhy_track::{At, Connection, SegmentEvent, Side};

pub static INFO: Info = Info {
    id: "client-delay",
    title: "the client waited after the handshake before its request",
    doc: include_str!("client_delay.rs"),
};

const MIN_DELAY: i64 = 50 * MS;

/// A wait this long after the handshake is most often a connection opened ahead of use.
const AHEAD_OF_USE: i64 = 1_000 * MS;
const OPENED_AHEAD: &str = "a wait of a second or more is most often a connection opened ahead of use (a browser's pre-connect, a pool): nobody may have waited";

/// Nothing: whether the first data segment after the handshake has been looked at is the
/// state's "looked at" bit (`Lazy::looked`).
pub(crate) type State = ();

/// The handshake's ACK and the late request, when the wait was long (rare): a part of the
/// connection's `Extra`.
#[derive(Debug)]
pub(crate) struct Late(pub(crate) At, pub(crate) At);

#[derive(Default)]
pub struct ClientDelay {}

impl Detector for ClientDelay {
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
        let Some(hs_ack) = c.handshake.ack else {
            return;
        };
        if ev.seg.payload_len == 0 || !hs_ack.before(&ev.at) {
            return;
        }
        if cs.client_delay.looked(cs.used) {
            return; // decided at the first data segment after the handshake
        }
        cs.client_delay.get(&mut cs.used);
        if ev.from != Side::Client {
            return; // the server spoke first
        }
        let wait = ev.at.ts_ns - hs_ack.ts_ns;
        let person_or_timer = ev.seg.payload_len < 100 && wait >= 1_000 * MS;
        if wait >= MIN_DELAY
            && wait >= 4 * rtt_ns(c).unwrap_or(0)
            && !person_or_timer
            && !super::server_delay::server_speaks_first(c)
        {
            cs.extra.set(WHOLE, Late(hs_ack, ev.at));
        }
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        if cs.client_delay.take(&mut cs.used).is_none() {
            return;
        }
        let Some(late) = cs.extra.take::<Late>(WHOLE) else {
            return;
        };
        let Late(ack, req) = *late;
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = ack.ts_ns;
        f.end_ns = req.ts_ns;
        f.cost_ns = req.ts_ns - ack.ts_ns;
        f.frames = vec![ack.frame(), req.frame()];
        f.explanation = format!(
            "The client waited {} after the handshake before sending its request (round trip {}).",
            ms(f.cost_ns),
            rtt_ns(c).map_or("unknown".into(), ms)
        );
        f.fix = "the time is in the client application between connect() and its first write: profile it (or, for a connection pool, it is idle time, not latency)".into();
        f.details = ClientDelayDetails {
            wait_ms: ms_f(f.cost_ns),
        }
        .into();
        if f.cost_ns >= AHEAD_OF_USE {
            f.confidence.lower(Level::Low, OPENED_AHEAD);
        }
        out.push(f);
    }
}

/// client-delay: the wait.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClientDelayDetails {
    pub wait_ms: f64,
}
