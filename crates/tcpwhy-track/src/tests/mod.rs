//! Tracker tests written as transcripts: each line is one segment at the capture point.

use super::*;
use proptest::prelude::RngExt as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::net::{IpAddr, Ipv4Addr};
use tcpwhy_wire::{Seq, TcpFlags, TcpOptions, TcpSegment};

mod accounting;
mod compact;
mod equivalence;
mod handshake;
mod lifecycle;

const C: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000);

const S: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80);

const MS: i64 = 1_000_000;

const SYN: u8 = TcpFlags::SYN;

const ACK: u8 = TcpFlags::ACK;

const FIN: u8 = TcpFlags::FIN;

const RST: u8 = TcpFlags::RST;

const PSH: u8 = TcpFlags::PSH;

/// The segment template of these tests: `len` bytes from `from` to `to`, window 1000, no
/// options, IP ID 0 (struct update syntax sets anything else).
fn segment(
    from: (IpAddr, u16),
    to: (IpAddr, u16),
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
) -> TcpSegment {
    TcpSegment {
        src: from.0,
        dst: to.0,
        src_port: from.1,
        dst_port: to.1,
        seq: Seq(seq),
        ack: Seq(ack),
        flags: TcpFlags(flags),
        window: 1000,
        payload_len: len,
        options: TcpOptions::default(),
        ip_id: 0,
        ttl: 64,
        first_fragment: false,
    }
}

/// The other end of the test connection.
fn peer(from: (IpAddr, u16)) -> (IpAddr, u16) {
    if from == C {
        S
    } else {
        C
    }
}

struct Run {
    t: Tracker,
    done: Vec<Connection>,
    frame: u64,
}

impl Run {
    fn new() -> Run {
        Run::with(Config::default())
    }
    fn with(cfg: Config) -> Run {
        Run {
            t: Tracker::new(cfg),
            done: Vec::new(),
            frame: 0,
        }
    }
    /// One segment between any two ends.
    #[allow(clippy::too_many_arguments)]
    fn seg_between(
        &mut self,
        ms: i64,
        from: (IpAddr, u16),
        to: (IpAddr, u16),
        flags: u8,
        seq: u32,
        ack: u32,
        len: u32,
    ) {
        let s = segment(from, to, flags, seq, ack, len);
        self.frame += 1;
        let at = At::new(self.frame, ms * MS);
        let done = &mut self.done;
        self.t
            .segment(&s, at, 54 + len, &mut |c: &Connection| done.push(c.clone()));
    }
    /// One segment from `from` at `ms` milliseconds.
    fn seg(&mut self, ms: i64, from: (IpAddr, u16), flags: u8, seq: u32, ack: u32, len: u32) {
        self.seg_opts(ms, from, flags, seq, ack, len, TcpOptions::default());
    }
    #[allow(clippy::too_many_arguments)]
    fn seg_opts(
        &mut self,
        ms: i64,
        from: (IpAddr, u16),
        flags: u8,
        seq: u32,
        ack: u32,
        len: u32,
        options: TcpOptions,
    ) {
        let s = TcpSegment {
            options,
            ..segment(from, peer(from), flags, seq, ack, len)
        };
        self.frame += 1;
        let done = &mut self.done;
        let mut sink = |c: &Connection| done.push(c.clone());
        self.t
            .segment(&s, At::new(self.frame, ms * MS), 54 + len, &mut sink);
    }
    fn finish(mut self) -> Vec<Connection> {
        let done = &mut self.done;
        let mut sink = |c: &Connection| done.push(c.clone());
        self.t.finish_all(&mut sink);
        self.done
    }
    /// The three-way handshake with the capture near the client: the SYN-ACK comes one RTT
    /// (`rtt` ms) after the SYN, the ACK right after.
    fn handshake(&mut self, ms: i64, rtt: i64, cisn: u32, sisn: u32) {
        self.seg(ms, C, SYN, cisn, 0, 0);
        self.seg(ms + rtt, S, SYN | ACK, sisn, cisn.wrapping_add(1), 0);
        self.seg(
            ms + rtt,
            C,
            ACK,
            cisn.wrapping_add(1),
            sisn.wrapping_add(1),
            0,
        );
    }
}

/// What a tracker reports, each with the moment it was reported at.
#[derive(Default)]
struct Reports {
    now: Option<Moment>,
    seq: u32,
    out: Vec<(Moment, u32, String)>,
}

impl Reports {
    fn push(&mut self, what: String) {
        let m = self.now.expect("a moment before any report");
        self.out.push((m, self.seq, what));
        self.seq += 1;
    }
}

impl Sink for Reports {
    fn moment(&mut self, m: Moment) {
        if self.now != Some(m) {
            self.seq = 0;
        }
        self.now = Some(m);
    }
    fn started(&mut self, c: &Connection) {
        self.push(format!("start {}", c.id()));
    }
    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>) {
        self.push(format!(
            "seg {} frame {} at {} {:?} new {} retr {}",
            c.id(),
            ev.at.frame(),
            ev.at.ts_ns,
            ev.from,
            ev.new_data,
            ev.retransmission
        ));
    }
    fn connection(&mut self, c: &Connection) {
        self.push(format!(
            "done {} {:?} {:?} packets {}/{} prev {:?} invalid {}",
            c.id(),
            c.end_reason,
            c.close(),
            c.client.packets,
            c.server.packets,
            c.prev().map(|p| p.id),
            c.handshake.invalid_acks()
        ));
    }
}

/// A segment with an IPv4 ID (and a TTL that differs between copies is not part of it).
#[allow(clippy::too_many_arguments)]
fn seg_id(
    r: &mut Run,
    ms_x10: i64,
    from: (IpAddr, u16),
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
    id: u16,
) {
    let s = TcpSegment {
        ip_id: id,
        ttl: 64,
        ..segment(from, peer(from), flags, seq, ack, len)
    };
    r.frame += 1;
    let done = &mut r.done;
    let mut sink = |c: &Connection| done.push(c.clone());
    r.t.segment(&s, At::new(r.frame, ms_x10 * MS / 10), 54 + len, &mut sink);
}

/// Everything a tracker reports, for comparing two runs: every record except segments in the
/// order made (a finished connection in full, its slot left out), and each connection's
/// segments in the order they came to it.
#[derive(Default)]
struct Everything {
    now: Option<Moment>,
    records: Vec<(Moment, String)>,
    segments: std::collections::BTreeMap<u64, Vec<String>>,
}

impl Sink for Everything {
    fn moment(&mut self, m: Moment) {
        self.now = Some(m);
    }
    fn started(&mut self, c: &Connection) {
        let m = self.now.expect("a moment first");
        self.records.push((m, format!("start {}", c.id())));
    }
    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>) {
        // The connection as the segment left it (its numbers, counts, handshake), slot aside.
        let mut c = c.clone();
        c.slot = 0;
        self.segments.entry(c.id()).or_default().push(format!(
            "{:?} {:?} {} {} {} {:?}",
            ev.at, ev.from, ev.new_data, ev.retransmission, ev.lost_wait_ns, c
        ));
    }
    fn connection(&mut self, c: &Connection) {
        let m = self.now.expect("a moment first");
        let mut c = c.clone();
        c.slot = 0;
        self.records.push((m, format!("done {c:?}")));
    }
}
