//! Frames in, connections out, with every skipped or malformed frame counted.

use crate::config::Config;
use crate::endpoint::At;
use crate::retry::RetryWatch;
use crate::sink::Sink;
use crate::table::Tracker;
use std::collections::BTreeMap;
use tcpwhy_wire::{decode_into, LinkType, Malformed, Skip, TcpSegment};

/// What the analyzer saw, for the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets: u64,
    pub tcp_packets: u64,
    /// Sum of the frames' wire lengths.
    pub bytes: u64,
    /// Frames skipped by reason name (see `tcpwhy_wire::Skip::name`).
    pub skipped: BTreeMap<&'static str, u64>,
    /// Frames of link types tcpwhy does not decode, by link type number.
    pub skipped_link_types: BTreeMap<u32, u64>,
    /// Malformed frames by kind (see `tcpwhy_wire::Malformed::name`).
    pub malformed: BTreeMap<&'static str, u64>,
    /// First IP fragments whose TCP header was used (payload counted for that fragment only).
    pub first_fragments: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
}

/// Frames to TCP segments, with every frame counted: what comes before the tracker. A caller
/// that shares the tracking among threads runs one `Frontend` where the capture is read.
#[derive(Default)]
pub struct Frontend {
    stats: Stats,
    /// Skips and malformed frames are rare; count them in small arrays and fold into maps only
    /// when asked, so the hot path never touches a map.
    skip_counts: [u64; 5],
    malformed_counts: [u64; 9],
}

fn skip_index(s: Skip) -> usize {
    match s {
        Skip::LinkType(_) => 0,
        Skip::NotIp => 1,
        Skip::NotTcp => 2,
        Skip::Fragment => 3,
        Skip::Ipv6Opaque => 4,
    }
}

const MALFORMED: [Malformed; 9] = [
    Malformed::LinkTruncated,
    Malformed::IpTruncated,
    Malformed::IpVersion,
    Malformed::IpHeaderLength,
    Malformed::IpLengthTooShort,
    Malformed::IpLengthExceedsFrame,
    Malformed::Ipv6ExtensionHeader,
    Malformed::TcpTruncated,
    Malformed::TcpDataOffset,
];
const SKIPS: [Skip; 5] = [
    Skip::LinkType(0),
    Skip::NotIp,
    Skip::NotTcp,
    Skip::Fragment,
    Skip::Ipv6Opaque,
];

impl Frontend {
    pub fn new() -> Frontend {
        Frontend::default()
    }

    /// Count one captured frame and decode it: if it is a TCP segment, the segment is written
    /// into `seg` and the frame's length on the wire returned (otherwise `seg` holds nothing
    /// usable).
    pub fn frame(
        &mut self,
        ts_ns: i64,
        link: LinkType,
        data: &[u8],
        orig_len: u32,
        seg: &mut TcpSegment,
    ) -> Option<u32> {
        let st = &mut self.stats;
        st.packets += 1;
        let wire_len = orig_len.max(data.len() as u32);
        st.bytes += u64::from(wire_len);
        if st.first_ts.is_none_or(|t| ts_ns < t) {
            st.first_ts = Some(ts_ns);
        }
        if st.last_ts.is_none_or(|t| ts_ns > t) {
            st.last_ts = Some(ts_ns);
        }
        match decode_into(link, data, orig_len, seg) {
            Ok(None) => {
                st.tcp_packets += 1;
                if seg.first_fragment {
                    st.first_fragments += 1;
                }
                return Some(wire_len);
            }
            Ok(Some(skip)) => {
                self.skip_counts[skip_index(skip)] += 1;
                if let Skip::LinkType(t) = skip {
                    *st.skipped_link_types.entry(t).or_insert(0) += 1;
                }
            }
            Err(m) => {
                if let Some(i) = MALFORMED.iter().position(|x| *x == m) {
                    self.malformed_counts[i] += 1;
                }
            }
        }
        None
    }

    pub fn stats(&mut self) -> &Stats {
        for (i, s) in SKIPS.iter().enumerate() {
            if self.skip_counts[i] > 0 {
                self.stats.skipped.insert(s.name(), self.skip_counts[i]);
            }
        }
        for (i, m) in MALFORMED.iter().enumerate() {
            if self.malformed_counts[i] > 0 {
                self.stats
                    .malformed
                    .insert(m.name(), self.malformed_counts[i]);
            }
        }
        &self.stats
    }
}

/// Frames in, connections out: a [`Frontend`] and one [`Tracker`] on one thread.
pub struct Analyzer {
    front: Frontend,
    tracker: Tracker,
    /// Later attempts linked to refused ones, given to the tracker before their segment.
    retries: RetryWatch,
    /// Where each frame is decoded.
    seg: TcpSegment,
}

impl Analyzer {
    pub fn new(cfg: Config) -> Analyzer {
        Analyzer {
            front: Frontend::new(),
            retries: RetryWatch::new(&cfg),
            tracker: Tracker::new(cfg),
            seg: TcpSegment::EMPTY,
        }
    }

    /// Feed one captured frame. `frame` is its 1-based number in the capture.
    pub fn frame(
        &mut self,
        frame: u64,
        ts_ns: i64,
        link: LinkType,
        data: &[u8],
        orig_len: u32,
        sink: &mut dyn Sink,
    ) {
        if let Some(wire_len) = self.front.frame(ts_ns, link, data, orig_len, &mut self.seg) {
            // The watch sees capture time that never steps back, as the tracker does.
            let now = At::new(frame, ts_ns.max(self.tracker.now()));
            for l in self.retries.segment(&self.seg, now) {
                self.tracker.link(l, sink);
            }
            self.tracker
                .segment(&self.seg, At::new(frame, ts_ns), wire_len, sink);
        }
    }

    /// Move capture time to `ts_ns` without a packet (a live capture's clock while the wire is
    /// quiet): connections whose linger or idle timeout ran out by then go to the sink.
    pub fn advance_to(&mut self, ts_ns: i64, sink: &mut dyn Sink) {
        self.tracker.advance_to(ts_ns, sink);
    }

    /// End of input: every connection still open goes to the sink.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        self.tracker.finish_all(sink);
    }

    pub fn stats(&mut self) -> &Stats {
        self.front.stats()
    }

    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }
}
