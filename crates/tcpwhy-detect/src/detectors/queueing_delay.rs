//! # queueing-delay: a standing queue on the path inflates the round trip
//!
//! **Signal.** The connection's round trip, measured again and again (the handshake, then the
//! far side's data -> ACK times with the capture point's near share added), grows from its
//! minimum to many times it: the median at least twice the minimum and 20 ms above it, over
//! at least 8 samples. The path did not get longer; packets waited in a queue (a bottleneck's
//! oversized buffer: bufferbloat), filled by this connection or by others sharing it.
//!
//! Only prompt samples make the median: data followed within 10 ms by another segment of at
//! least 536 bytes, so that the receiver held more than a full segment, which it acknowledges
//! at once (RFC 5681 section 4.2). The ACK of a lone segment waits for the receiver's
//! delayed-ACK timer (40 ms to 500 ms) or rides on its application's answer, and a queue is
//! not what held it.
//!
//! **Evidence.** The connection; details: the minimum, median and maximum round trip, the
//! samples.
//!
//! **Cost.** The queue's delay (median less minimum) once per request/response exchange (or
//! once for a connection without them): each waited through the queue.
//!
//! Not named when the receiver's window held the sender (stalls at the window: a receiver
//! that drains slowly makes its ACKs late itself; `rwnd-limited` names it).
//!
//! **Known false positives.** A receiver that is slow to acknowledge even two full segments
//! (a busy host, a stretch-ACK policy) inflates the prompt samples too. The samples come from the side whose data crosses the far
//! part of the path: captured near the receiver of a bulk transfer, the queue in front of it
//! is not measured.
//!
//! **References.** Gettys and Nichols, "Bufferbloat: Dark Buffers in the Internet" (2011);
//! RFC 8289 (CoDel), RFC 8290 (fq_codel); docs/tcp-signatures.md section 7.

use super::{server_delay, ConnState, MS};
use crate::finding::{ms, ms_f};
use crate::{Detector, Finding, Info};
use tcpwhy_track::Connection;

pub static INFO: Info = Info {
    id: "queueing-delay",
    title: "a standing queue on the path inflates the round trip (bufferbloat)",
    doc: include_str!("queueing_delay.rs"),
};

const MIN_SAMPLES: u32 = 8;
const MIN_EXTRA: i64 = 20 * MS;

/// The connection's round trip, if the samples show a standing queue: (min, median, max,
/// samples).
pub(crate) fn queue(c: &Connection) -> Option<(i64, i64, i64, u32)> {
    let (min, median, max, n) = c.prompt_rtt_summary()?;
    (n >= MIN_SAMPLES && min > 0 && median >= 2 * min && median - min >= MIN_EXTRA)
        .then_some((min, median, max, n))
}

#[derive(Default)]
pub struct QueueingDelay {}

impl Detector for QueueingDelay {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn finished(&mut self, cs: &mut ConnState, c: &Connection, out: &mut Vec<Finding>) {
        // A receiver whose window held the sender makes its ACKs late itself: no queue.
        if cs.exchange_has & super::RECEIVER_HELD != 0 {
            return;
        }
        let Some((min, median, max, n)) = queue(c) else {
            return;
        };
        let exchanges = server_delay::exchanges(cs).max(1);
        let mut f = Finding::new(INFO.id, c);
        f.cost_ns = (median - min) * i64::from(exchanges);
        f.frames = vec![c.first.frame(), c.last.frame()];
        f.frames.dedup();
        f.explanation = format!(
            "The round trip grew from {} (its minimum) to {} (median of {n} samples, at most {}): packets waited about {} in a queue on the path; {} lost over {} exchange{}.",
            ms(min),
            ms(median),
            ms(max),
            ms(median - min),
            ms(f.cost_ns),
            exchanges,
            if exchanges == 1 { "" } else { "s" }
        );
        f.fix = "find the queue: a bottleneck link's oversized buffer (bufferbloat), often at the access link or a VPN; enable AQM there (fq_codel or cake: `tc qdisc replace dev IF root cake bandwidth RATE`), shape just below the link rate, or use a delay-based sender (BBR)".into();
        f.details = QueueingDelayDetails {
            exchanges,
            rtt_max_ms: ms_f(max),
            rtt_median_ms: ms_f(median),
            rtt_min_ms: ms_f(min),
            samples: n,
        }
        .into();
        out.push(f);
    }
}

/// queueing-delay: the round trip samples' spread.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct QueueingDelayDetails {
    pub exchanges: u32,
    pub rtt_max_ms: f64,
    pub rtt_median_ms: f64,
    pub rtt_min_ms: f64,
    pub samples: u32,
}
