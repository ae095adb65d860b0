//! What the tracker tells its caller: a [`Sink`] of connections and segments, and the
//! [`Moment`] of each report.

use crate::conn::{Connection, Side};
use crate::endpoint::At;
use tcpwhy_wire::{Seq, TcpSegment};

/// Receives every connection once, when the tracker is done with it.
pub trait Sink {
    /// A connection the tracker is done with (closed, expired, superseded, or at the end).
    fn connection(&mut self, c: &Connection);
    /// Every segment, after the tracker accounted it (detectors watch these).
    fn segment(&mut self, _c: &Connection, _ev: &SegmentEvent<'_>) {}
    /// A connection was created (its first packet follows as a `segment`). One that begins
    /// with its client's SYN is kept compact until its peer answers (`crate::embryo`): its
    /// SYNs come as `segment`s then, and `c` here is the connection before its first packet,
    /// in no slot (`u32::MAX`).
    fn started(&mut self, _c: &Connection) {}
    /// A later attempt of the connection's client to its service (or of the service's host to
    /// the client) after the connection was refused: [`crate::RetryWatch`].
    fn linked(&mut self, _c: &Connection, _link: &crate::Link) {}
    /// The tracker is at this moment: whatever it reports next, until the next call, happens
    /// then. Moments only go forward; see [`Moment`].
    fn moment(&mut self, _m: Moment) {}
    /// The capture ended at `ts_ns`, the latest capture time the tracker saw (with sharded
    /// trackers, each told where the capture is: the same for all): the connections still
    /// tracked are finished next, at moments of phase 2.
    fn capture_end(&mut self, _ts_ns: i64) {}
}

/// When the tracker reports something, as a key that orders every report of a run the same
/// way whatever the tracker saw of the rest of the capture: a connection that expires at its
/// deadline, the packet being processed, or the end of the capture. Several trackers that
/// each follow a share of the connections (sharded by [`flow_hash`](crate::flow_hash)) report moments that,
/// merged in order, give exactly the reports of one tracker following them all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment {
    /// Capture time (ns; `i64::MAX` at the end).
    pub ts_ns: i64,
    /// 0: a timer ran out at `ts_ns`; 1: a packet at `ts_ns`; 2: the end of the capture.
    pub phase: u8,
    /// The packet's frame number (phase 1).
    pub frame: u64,
    /// The connection finished (phases 0 and 2).
    pub id: u64,
}

impl Moment {
    pub(crate) fn timer(ts_ns: i64, id: u64) -> Moment {
        Moment {
            ts_ns,
            phase: 0,
            frame: 0,
            id,
        }
    }
    pub(crate) fn packet(at: At) -> Moment {
        Moment {
            ts_ns: at.ts_ns,
            phase: 1,
            frame: at.frame(),
            id: 0,
        }
    }
    pub(crate) fn end(id: u64) -> Moment {
        Moment {
            ts_ns: i64::MAX,
            phase: 2,
            frame: 0,
            id,
        }
    }
}

/// One segment as the tracker saw it, for detectors.
#[derive(Clone, Copy, Debug)]
pub struct SegmentEvent<'a> {
    pub seg: &'a TcpSegment,
    pub at: At,
    /// Which side sent it.
    pub from: Side,
    /// It carried sequence space never seen before.
    pub new_data: bool,
    /// It carried payload already sent (a retransmission; keep-alives excluded).
    pub retransmission: bool,
    /// It resent data lost before the capture point (the capture never saw the original), and
    /// how long before it the original left as far as the capture can tell; 0: not such a
    /// resend. (`retransmission` is then true too.) Two signs: it filled a sequence hole the
    /// capture saw open for more than half a round trip (reordering closes a hole sooner), or
    /// the sender's IPv4 IDs, consecutive until then, skipped one just before this segment,
    /// which carries no new acknowledgment, follows a silence of both sides of one and a half
    /// round trips and at least 100 ms (a loss probe or a timeout fired; nothing from the peer
    /// released it), and starts where the sender's data ended (a lost tail leaves no hole):
    /// the wait then runs from the sender's previous segment.
    pub lost_wait_ns: i64,
    /// That judgement rests on timing alone (no IPv4 IDs to count: IPv6): the silence before
    /// the segment is Linux's loss probe for one segment in flight (2 SRTT + 200 ms, to the
    /// timer's tick), and both sides were quiet through it. Less certain than a skipped ID.
    pub lost_by_timing: bool,
    /// The highest acknowledgement the sender had sent before this segment (RSTs and the
    /// old ACKs a side in SYN-SENT rejects are not acknowledgements); `None` before its
    /// first. The segment acknowledges new data when its ACK is above it.
    pub acked_before: Option<Seq>,
}

impl<F: FnMut(&Connection)> Sink for F {
    fn connection(&mut self, c: &Connection) {
        self(c)
    }
}
