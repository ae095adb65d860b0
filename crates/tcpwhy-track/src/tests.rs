//! Tracker tests written as transcripts: each line is one segment at the capture point.

use super::*;
use proptest::prelude::RngExt as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::net::{IpAddr, Ipv4Addr};
use tcpwhy_wire::{Seq, TcpFlags, TcpOptions, TcpSegment};

const C: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000);
const S: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80);
const MS: i64 = 1_000_000;
const SYN: u8 = TcpFlags::SYN;
const ACK: u8 = TcpFlags::ACK;
const FIN: u8 = TcpFlags::FIN;
const RST: u8 = TcpFlags::RST;
const PSH: u8 = TcpFlags::PSH;

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
        let s = TcpSegment {
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
            first_fragment: false,
        };
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
        let to = if from == C { S } else { C };
        let s = TcpSegment {
            src: from.0,
            dst: to.0,
            src_port: from.1,
            dst_port: to.1,
            seq: Seq(seq),
            ack: Seq(ack),
            flags: TcpFlags(flags),
            window: 1000,
            payload_len: len,
            options,
            ip_id: 0,
            first_fragment: false,
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

#[test]
fn request_response_with_clean_close() {
    let mut r = Run::new();
    r.handshake(0, 20, 1000, 5000);
    r.seg(21, C, ACK | PSH, 1001, 5001, 100); // request
    r.seg(41, S, ACK, 5001, 1101, 0); // ACK after one RTT: an RTT sample
    r.seg(60, S, ACK | PSH, 5001, 1101, 3000); // response
    r.seg(60, C, ACK, 1101, 8001, 0);
    r.seg(70, C, FIN | ACK, 1101, 8001, 0); // the client closes first
    r.seg(90, S, FIN | ACK, 8001, 1102, 0);
    r.seg(90, C, ACK, 1102, 8002, 0);
    let done = r.finish();
    assert_eq!(done.len(), 1);
    let c = &done[0];
    assert_eq!((c.client.addr, c.client.port), C);
    assert_eq!(c.role, RoleSource::Syn);
    // Client: SYN, ACK, request, ACK, FIN, last ACK; server: SYN-ACK, ACK, response, FIN.
    assert_eq!((c.client.packets, c.server.packets), (6, 4));
    assert_eq!((c.client.unique_bytes, c.server.unique_bytes), (100, 3000));
    assert_eq!(c.client.retrans_bytes() + c.server.retrans_bytes(), 0);
    assert_eq!(
        c.close(),
        Close::Fin {
            first: Side::Client
        }
    );
    assert_eq!(c.end_reason, EndReason::Closed);
    assert_eq!(c.handshake_rtt_ns(), Some(20 * MS));
    assert_eq!(c.vantage(), Vantage::NearClient);
    assert_eq!(c.client.ack_rtt.count(), 1);
    assert_eq!(c.client.ack_rtt.min_ns, 20 * MS);
    assert_eq!(c.rtt_summary(), Some((20 * MS, 20 * MS, 20 * MS, 2)));
    assert_eq!((c.first.frame(), c.last.frame()), (1, 10));
    assert_eq!(c.duration_ns(), 90 * MS);
}

#[test]
fn retransmission_is_counted_and_not_timed() {
    let mut r = Run::new();
    r.handshake(0, 10, 1, 1);
    r.seg(11, C, ACK, 2, 2, 1000);
    r.seg(12, C, ACK, 1002, 2, 1000);
    r.seg(300, C, ACK, 2, 2, 1000); // RTO: the first segment again
    r.seg(310, S, ACK, 2, 2002, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.unique_bytes, 2000);
    assert_eq!(c.client.retrans_bytes(), 1000);
    assert_eq!(c.client.retrans_segments(), 1);
    assert_eq!(c.client.payload_bytes(), 3000);
    // Karn's rule: the ACK after a retransmission gives no sample.
    assert_eq!(c.client.ack_rtt.count(), 0);
}

#[test]
fn an_ack_reporting_a_duplicate_gives_no_round_trip_sample() {
    // The request (1001..1101) was sent twice, the first time before the capture saw it: the
    // server's ACK 3 s later carries a D-SACK block for it (RFC 2883: a first block at or
    // below the cumulative ACK). The 3 s from the captured copy are not a round trip.
    let dsack = TcpOptions {
        sack_count: 1,
        sack_first: (Seq(1001), Seq(1101)),
        ..TcpOptions::default()
    };
    let mut r = Run::new();
    r.handshake(0, 20, 1000, 5000);
    r.seg(21, C, ACK | PSH, 1001, 5001, 100);
    r.seg_opts(3021, S, ACK, 5001, 1101, 0, dsack);
    let c = &r.finish()[0];
    assert_eq!(c.client.ack_rtt.count(), 0);
    // The same ACK without the block: one sample of 3 s.
    let mut r = Run::new();
    r.handshake(0, 20, 1000, 5000);
    r.seg(21, C, ACK | PSH, 1001, 5001, 100);
    r.seg(3021, S, ACK, 5001, 1101, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.ack_rtt.count(), 1);
    assert_eq!(c.client.ack_rtt.min_ns, 3000 * MS);
}

#[test]
fn sequence_numbers_wrap() {
    let mut r = Run::new();
    let isn = 0xFFFF_F000u32;
    r.handshake(0, 1, isn, 0xFFFF_FF00);
    let mut seq = isn.wrapping_add(1);
    for i in 0..10 {
        r.seg(2 + i, C, ACK, seq, 0xFFFF_FF01, 1448);
        seq = seq.wrapping_add(1448);
    }
    // Resend the segment that straddles 2^32.
    r.seg(
        20,
        C,
        ACK,
        isn.wrapping_add(1 + 2 * 1448),
        0xFFFF_FF01,
        1448,
    );
    r.seg(21, S, ACK, 0xFFFF_FF01, seq, 0);
    let c = &r.finish()[0];
    assert!(seq < isn, "the test must cross the wrap");
    assert_eq!(c.client.unique_bytes, 14480);
    assert_eq!(c.client.retrans_bytes(), 1448);
    assert_eq!(c.client.next_seq(), Some(Seq(seq)));
    assert_eq!(c.server.max_ack(), Some(Seq(seq)));
}

#[test]
fn new_isn_after_close_starts_the_next_generation() {
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, ACK, 1001, 9001, 500);
    r.seg(3, S, FIN | ACK, 9001, 1501, 0); // the server closes first: it holds TIME-WAIT
    r.seg(4, C, FIN | ACK, 1501, 9002, 0);
    r.seg(4, S, ACK, 9002, 1502, 0);
    r.handshake(2000, 1, 700, 77); // new ISN below the old client's 1502
    let done = r.finish();
    assert_eq!(done.len(), 2);
    let (old, new) = (&done[0], &done[1]);
    assert_eq!(old.end_reason, EndReason::Superseded);
    assert_eq!(
        old.close(),
        Close::Fin {
            first: Side::Server
        }
    );
    let p = new.prev().expect("predecessor recorded");
    assert_eq!(p.id, old.id());
    assert_eq!(
        p.close,
        Close::Fin {
            first: Side::Server
        }
    );
    assert!(p.same_client);
    assert_eq!(p.client_next_seq, Some(Seq(1502)));
    assert_eq!(p.last_ts, 4 * MS);
    assert!(
        Seq(700) < p.client_next_seq.unwrap(),
        "the new ISN went below the old rcv_nxt"
    );
}

#[test]
fn stale_ack_rst_and_same_syn_stay_one_connection() {
    // Seed 004's exchange: SYN, bare ACK with the old numbers, RST, the same SYN, SYN-ACK.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(3, S, FIN | ACK, 9001, 1001, 0);
    r.seg(4, C, FIN | ACK, 1001, 9002, 0);
    r.seg(4, S, ACK, 9002, 1002, 0);
    r.seg(20_000, C, SYN, 700, 0, 0);
    r.seg(20_000, S, ACK, 9002, 1002, 0); // TIME-WAIT answers with the old numbers
    r.seg(20_000, C, RST, 1002, 0, 0); // RST with seq = that ack
    r.seg(20_010, C, SYN, 700, 0, 0); // same ISN, 10 ms later
    r.seg(20_011, S, SYN | ACK, 123, 701, 0);
    r.seg(20_011, C, ACK, 701, 124, 0);
    r.seg(20_012, C, ACK | PSH, 701, 124, 10);
    let done = r.finish();
    assert_eq!(done.len(), 2, "{done:#?}");
    let c = &done[1];
    assert_eq!(c.client.syn_retransmits(), 1);
    assert_eq!(c.syn().map(|a| a.ts_ns), Some(20_010 * MS));
    assert_eq!(c.handshake_rtt_ns(), Some(MS));
    assert_eq!(c.client.isn(), Some(Seq(700)));
    assert_eq!(
        c.close(),
        Close::Open,
        "the RST in SYN_SENT did not end the connection"
    );
    assert_eq!(c.end_reason, EndReason::CaptureEnd);
    assert_eq!(c.client.unique_bytes, 10);
    assert_eq!(
        c.prev().map(|p| p.close),
        Some(Close::Fin {
            first: Side::Server
        })
    );
    assert_eq!(c.handshake.invalid_acks(), 1);
    assert_eq!(c.handshake.first_invalid_ack().map(|a| a.frame()), Some(8));
    assert_eq!(
        c.server.next_seq(),
        Some(Seq(124)),
        "the SYN-ACK defines the server's sequence space"
    );
    assert_eq!(c.handshake.client_rsts(), 1);
}

#[test]
fn history_survives_expiry_of_the_earlier_connection() {
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, RST | ACK, 1001, 9001, 0);
    // 30 s later (the closed connection lingered 10 s and was finished) a new SYN.
    r.handshake(30_000, 1, 5, 6);
    let done = r.finish();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].end_reason, EndReason::Closed);
    assert_eq!(done[0].close(), Close::Rst { by: Side::Client });
    let p = done[1].prev().expect("from history");
    assert_eq!(
        (p.id, p.close),
        (done[0].id(), Close::Rst { by: Side::Client })
    );
}

#[test]
fn idle_connections_expire_by_capture_time() {
    let cfg = Config {
        idle_timeout_ns: 60_000 * MS,
        ..Config::default()
    };
    let mut r = Run::with(cfg);
    r.handshake(0, 1, 1, 1);
    // Another tuple's packet 61 s later moves capture time on.
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    r.seg(61_000, other, SYN, 1, 0, 0);
    assert_eq!(r.done.len(), 1);
    assert_eq!(r.done[0].end_reason, EndReason::IdleTimeout);
}

#[test]
fn midstream_roles_are_inferred_from_ports() {
    let mut r = Run::new();
    // First packet from the server (port 80) to the ephemeral port.
    r.seg(0, S, ACK | PSH, 500, 100, 200);
    r.seg(1, C, ACK, 100, 700, 0);
    let c = &r.finish()[0];
    assert_eq!((c.client.addr, c.client.port), C);
    assert_eq!(c.role, RoleSource::Port);
    assert!(c.role.inferred());
    assert_eq!(c.server.unique_bytes, 200);
    assert_eq!(c.vantage(), Vantage::Unknown);
}

#[test]
fn eviction_keeps_the_table_under_the_cap() {
    let cfg = Config {
        max_connections: 2,
        ..Config::default()
    };
    let mut r = Run::with(cfg);
    for i in 0..5u16 {
        let c = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 41000 + i);
        r.seg(i64::from(i), c, SYN, 1, 0, 0);
    }
    assert_eq!(r.t.open_connections(), 2);
    assert_eq!(r.t.stats().evicted, 3);
    let done = r.finish();
    assert_eq!(done.len(), 5);
    // The oldest went first.
    assert_eq!(done[0].client.port, 41000);
    assert_eq!(done[0].end_reason, EndReason::Evicted);
}

#[test]
fn keepalives_are_not_retransmissions() {
    let mut r = Run::new();
    r.handshake(0, 1, 1, 1);
    r.seg(2, C, ACK, 2, 2, 10);
    r.seg(3, S, ACK, 2, 12, 0);
    r.seg(60_000, C, ACK, 11, 2, 0); // keep-alive: seq = next - 1, no data
    r.seg(60_001, C, ACK, 11, 2, 1); // keep-alive with one garbage byte
    let c = &r.finish()[0];
    assert_eq!(c.client.keepalives(), 2);
    assert_eq!(c.client.retrans_bytes(), 0);
}

#[test]
fn ack_for_unseen_data_is_capture_loss_and_reorder_is_not_retransmission() {
    let mut r = Run::new();
    r.handshake(0, 1, 1, 1);
    r.seg(2, C, ACK, 2, 2, 100);
    r.seg(3, C, ACK, 202, 2, 100); // 102..202 missing at the capture point
    r.seg(4, C, ACK, 102, 2, 100); // arrives late: out of order, not a retransmission
    r.seg(5, C, ACK, 402, 2, 100); // 302..402 never seen
    r.seg(6, S, ACK, 2, 502, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.out_of_order(), 1);
    assert_eq!(c.client.retrans_bytes(), 0);
    assert_eq!(c.client.unique_bytes, 400);
    assert_eq!(c.client.unseen_acked_bytes(), 100);
}

#[test]
fn timestamp_echo_gives_samples_across_retransmission() {
    let ts = |v: u32, e: u32| TcpOptions {
        timestamp: Some((v, e)),
        ..TcpOptions::default()
    };
    let mut r = Run::new();
    r.handshake(0, 5, 1, 1);
    r.seg_opts(10, C, ACK, 2, 2, 100, ts(1000, 1));
    r.seg_opts(17, S, ACK, 2, 102, 0, ts(2000, 1000)); // echo of 1000, 7 ms later
    let c = &r.finish()[0];
    assert_eq!(c.client.ack_rtt.count(), 1);
    assert_eq!(c.client.ack_rtt.min_ns, 7 * MS);
    assert!(c.client.timestamps() && c.server.timestamps());
}

#[test]
fn reservoir_median_is_exact_for_few_samples() {
    let mut s = RttStats::default();
    for v in [5, 1, 4, 2, 3] {
        s.add(v * 1000 + 7); // microseconds plus 7 ns
    }
    assert_eq!(s.median_ns(), Some(3000), "exact to the microsecond");
    assert_eq!(
        (s.min_ns, s.max_ns, s.count()),
        (1007, 5007, 5),
        "exact in ns"
    );
    for v in 0..10_000 {
        s.add((1000 + v % 7) * 1000);
    }
    let m = s.median_ns().unwrap();
    assert!((1_000_000..1_007_000).contains(&m));
}

#[test]
fn connection_stays_compact() {
    // Memory per open connection is the budget of issue 7 (~1 KB); print it for the record.
    // 416 bytes: each side's IPv4 ID state (`IpIds`) fills the 8-byte word of the
    // connection's small fields, and the predecessor shares the handshake's box of what few
    // connections have (inline or boxed on their own, they take a slot of 448); a side's
    // payload bytes are its unique bytes plus what it sent again or was captured twice (kept
    // with those, in the box of what most sides never do), and the handshake's SYN is a bit
    // when it is the connection's first packet; 448 since the RTT samples' count lives in
    // their reservoir (allocated at the second sample) and each side's MSS and window scale carry a bit of `known` rather than
    // an Option; 480 since each side's unread copy of its first SYN went; 512 before, since what
    // most sides never do (retransmit, reorder, probe, fragment, SACK,
    // advertise a zero window, reset) and the sequence holes are counted in a box allocated
    // at the first, the ISN, next sequence, highest ACK and scaled window carry flags rather
    // than Options, the pending RTT sample and TSval keep their times as `Ts`, the id is the
    // first packet's frame number (not a copy of it), the close time is a `Ts` and a
    // handshake's stale ACKs and client RSTs are boxed (576 before the last three, 768 before
    // that, 944 before the RTT reservoir and the predecessor were boxed): a field added inline
    // shows here. The table keeps `Option<Connection>` per slot (no tag byte) on 32-byte
    // boundaries (13 x 32: each spans 7 cache lines wherever it starts).
    let size = std::mem::size_of::<Connection>();
    eprintln!("size_of::<Connection>() = {size}");
    eprintln!(
        "size_of::<Endpoint>() = {}",
        std::mem::size_of::<Endpoint>()
    );
    assert!(size <= 416, "{size} bytes per connection");
    assert_eq!(std::mem::size_of::<Option<Connection>>(), size);
}

#[test]
fn a_full_table_finishes_closed_connections_before_evicting_open_ones() {
    let cfg = Config {
        max_connections: 2,
        ..Config::default()
    };
    let mut r = Run::with(cfg);
    r.handshake(0, 1, 1, 1);
    r.seg(2, C, RST, 2, 0, 0); // closed: lingers for late packets
    let open = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 41000);
    r.seg(3, open, SYN, 1, 0, 0);
    let third = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 41001);
    r.seg(4, third, SYN, 1, 0, 0);
    assert_eq!(r.t.stats().evicted, 0);
    assert_eq!(r.done.len(), 1);
    assert_eq!(r.done[0].end_reason, EndReason::Closed);
    assert_eq!(r.t.open_connections(), 2);
}

#[test]
fn a_connection_closed_by_fins_is_finished_after_the_linger() {
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, FIN | ACK, 1001, 9001, 0);
    r.seg(3, S, FIN | ACK, 9001, 1002, 0);
    r.seg(4, C, ACK, 1002, 9002, 0);
    // Capture time moves on 11 s (another tuple): the closed connection has lingered 10 s.
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    r.seg(11_000, other, SYN, 1, 0, 0);
    assert_eq!(r.done.len(), 1, "finished before the end of the capture");
    assert_eq!(r.done[0].end_reason, EndReason::Closed);
}

#[test]
fn linger_ends_on_time_even_behind_later_timers() {
    // A closes at 3 ms and sees a last ACK at 4 ms (its timer is pushed again, due 2.004 s);
    // B closes at 1 s (its timer, due 3 s, was queued before A's second one). At 2.5 s A has
    // lingered 2 s and must be finished although B is not due yet (a FIFO queue kept A until
    // B's timer ran out).
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, FIN | ACK, 1001, 9001, 0);
    r.seg(3, S, FIN | ACK, 9001, 1002, 0);
    r.seg(4, C, ACK, 1002, 9002, 0);
    let b = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), 40009);
    r.seg_between(400, b, S, SYN, 50, 0, 0);
    r.seg_between(401, S, b, SYN | ACK, 700, 51, 0);
    r.seg_between(402, b, S, FIN | ACK, 51, 701, 0);
    r.seg_between(1_000, S, b, FIN | ACK, 701, 52, 0);
    r.seg_between(2_003, b, S, ACK, 52, 702, 0); // A's second timer is due at 2.004 s
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    r.seg(2_500, other, SYN, 1, 0, 0);
    assert_eq!(
        r.done.len(),
        1,
        "A finished after its 2 s linger, B still lingering"
    );
    assert_eq!(r.done[0].client.port, C.1);
}

#[test]
fn an_attempt_reset_before_its_handshake_waits_for_the_same_syn_again() {
    // SYN, an ACK with old numbers from earlier state, the client's RST; older stacks send the
    // same SYN again 3 s later. That SYN belongs to the same attempt (one connection), although
    // a connection closed after its handshake lingers only 2 s.
    let mut r = Run::new();
    r.seg(0, C, SYN, 5000, 0, 0);
    r.seg(1, S, ACK, 777, 123_456, 0);
    r.seg(1, C, RST, 123_456, 0, 0);
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    r.seg(2_500, other, SYN, 1, 0, 0); // capture time moves on past 2 s
    assert!(r.done.is_empty(), "the reset attempt still lingers");
    r.handshake(3_001, 1, 5000, 9000);
    let done = r.finish();
    let mine: Vec<&Connection> = done.iter().filter(|c| c.client.port == C.1).collect();
    assert_eq!(mine.len(), 1, "one connection: {mine:?}");
    assert_eq!(mine[0].handshake.invalid_acks(), 1);
    assert_eq!(mine[0].client.syn_retransmits(), 1);
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

/// A deterministic stream of segments on 40 client ports to one server: handshakes, data,
/// FIN and RST closes, ports reused with new ISNs or the same SYN again, idle gaps of up to
/// 7 s (so linger and idle timers run out while other connections go on), timestamps that
/// sometimes step back.
fn random_traffic(n: usize) -> Vec<(TcpSegment, At)> {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let mut out = Vec::new();
    let mut t = 1_000 * MS;
    let mut isn = [0u32; 40];
    for frame in 1..=n as u64 {
        t += match rnd(100) {
            0 => 7_000 * MS,
            1..=3 => 1_500 * MS,
            _ => rnd(3 * MS as u64) as i64,
        };
        let ts = if rnd(50) == 0 { t - 5 * MS } else { t };
        let port = rnd(40) as usize;
        let cl = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000 + port as u16);
        let from_client = rnd(2) == 0;
        let flags = match rnd(20) {
            0 => {
                if rnd(3) > 0 {
                    isn[port] = isn[port].wrapping_add(1 + rnd(1 << 20) as u32);
                }
                SYN
            }
            1 => SYN | ACK,
            2 => FIN | ACK,
            3 => RST,
            _ => ACK | PSH,
        };
        let (src, dst) = if from_client { (cl, S) } else { (S, cl) };
        let seg = TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq: Seq(isn[port].wrapping_add(rnd(5000) as u32)),
            ack: Seq(rnd(5000) as u32),
            flags: TcpFlags(flags),
            window: 1000,
            payload_len: if flags == ACK | PSH {
                rnd(1400) as u32
            } else {
                0
            },
            options: TcpOptions::default(),
            ip_id: frame as u16,
            first_fragment: false,
        };
        out.push((seg, At::new(frame, ts)));
    }
    out
}

#[test]
fn the_end_in_pieces_reports_what_the_end_at_once_does() {
    // The same traffic (its connections left open: no idle timeout within it), finished by
    // `finish_all` and by `finish_some` in pieces of 1 and of 7: the same reports in the same
    // order, and nothing left after the last piece.
    let cfg = Config {
        idle_timeout_ns: i64::MAX / 4,
        ..Config::default()
    };
    let traffic = random_traffic(3_000);
    let fed = || {
        let mut t = Tracker::new(cfg.clone());
        let mut r = Reports::default();
        for (s, at) in &traffic {
            t.segment(s, *at, 60, &mut r);
        }
        (t, r)
    };
    let (mut t, mut all) = fed();
    let open = t.open_connections();
    assert!(open >= 20, "{open} connections open at the end");
    t.finish_all(&mut all);
    assert_eq!(t.open_connections(), 0);
    for piece in [1, 7] {
        let (mut t, mut r) = fed();
        let mut calls = 0;
        while !t.finish_some(piece, &mut r) {
            calls += 1;
        }
        assert_eq!(calls + 1, open.div_ceil(piece), "pieces of {piece}");
        assert_eq!(t.open_connections(), 0);
        assert_eq!(r.out, all.out, "pieces of {piece}");
    }
}

#[test]
fn sharded_trackers_report_exactly_what_one_tracker_reports() {
    let cfg = Config {
        idle_timeout_ns: 5_000 * MS,
        ..Config::default()
    };
    let traffic = random_traffic(20_000);
    // Time never steps back for the trackers: the caller clamps it once for the capture.
    let mut mono = i64::MIN;
    let traffic: Vec<(TcpSegment, At)> = traffic
        .into_iter()
        .map(|(s, at)| {
            mono = mono.max(at.ts_ns);
            (s, At::new(at.frame(), mono))
        })
        .collect();

    let mut one = Tracker::new(cfg.clone());
    let mut r1 = Reports::default();
    for (s, at) in &traffic {
        one.segment(s, *at, 60, &mut r1);
    }
    one.finish_all(&mut r1);
    assert!(
        r1.out
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
        "one tracker reports in moment order"
    );
    let kinds = |want: &str| r1.out.iter().filter(|r| r.2.contains(want)).count();
    assert!(kinds("Superseded") > 50 && kinds("IdleTimeout") > 20 && kinds("Closed") > 50);
    assert!(kinds("prev Some") > 50, "predecessors from history");

    for shards in [2, 3, 7] {
        let mut trackers: Vec<Tracker> = (0..shards).map(|_| Tracker::new(cfg.clone())).collect();
        let mut reports: Vec<Reports> = (0..shards).map(|_| Reports::default()).collect();
        for (i, (s, at)) in traffic.iter().enumerate() {
            let k = shard_of(flow_hash(s), shards);
            trackers[k].segment(s, *at, 60, &mut reports[k]);
            // Every 64 packets all trackers learn where the capture is.
            if i % 64 == 63 {
                for (t, r) in trackers.iter_mut().zip(reports.iter_mut()) {
                    t.advance_to(at.ts_ns, r);
                }
            }
        }
        for (t, r) in trackers.iter_mut().zip(reports.iter_mut()) {
            t.finish_all(r);
        }
        assert!(
            reports.iter().all(|r| !r.out.is_empty()),
            "{shards} shards all used"
        );
        let mut merged: Vec<(Moment, u32, String)> =
            reports.into_iter().flat_map(|r| r.out).collect();
        merged.sort_by_key(|r| (r.0, r.1));
        assert_eq!(merged.len(), r1.out.len(), "{shards} shards");
        for (a, b) in merged.iter().zip(&r1.out) {
            assert_eq!(a, b, "{shards} shards");
        }
    }
}

#[test]
fn every_tracked_connection_has_its_own_slot() {
    // Detectors index their state by `Connection::slot`: two connections alive at once must
    // never share one, and a finished connection's slot is reused.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    let b = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), 40009);
    r.seg_between(5, b, S, SYN, 50, 0, 0);
    // B has sent only its SYN: compact, in no slot yet.
    assert_eq!((r.t.live_slots().len(), r.t.compact_connections()), (1, 1));
    // Its RST makes it a full connection, in a slot of its own.
    r.seg_between(6, b, S, RST, 51, 0, 0);
    let slots: Vec<u32> = r.t.live_slots();
    assert_eq!((slots.len(), r.t.compact_connections()), (2, 0));
    assert_ne!(slots[0], slots[1]);
    r.seg(7, C, RST, 1001, 0, 0);
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    // A and B are finished by now (B, a reset attempt, lingers 135 s), their slots free.
    r.seg_between(140_000, other, S, SYN, 1, 0, 0);
    r.seg_between(140_001, S, other, SYN | ACK, 9000, 2, 0);
    assert_eq!(r.done.len(), 2);
    assert!(
        r.done.iter().any(|c| c.slot == r.t.live_slots()[0]),
        "a freed slot is reused"
    );
}

#[test]
fn the_same_packet_captured_twice_is_not_a_retransmission() {
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    let ts = |v: u32| TcpOptions {
        timestamp: Some((v, 77)),
        ..TcpOptions::default()
    };
    // Captured on both ends of a veth: the same segment twice, microseconds apart (here the
    // same millisecond), identical down to its timestamps.
    r.seg_opts(10, S, ACK | PSH, 9001, 1001, 100, ts(500));
    r.seg_opts(10, S, ACK | PSH, 9001, 1001, 100, ts(500));
    // A real retransmission 300 ms later carries a newer TSval.
    r.seg_opts(310, S, ACK | PSH, 9001, 1001, 100, ts(800));
    // Without an IP ID or timestamps two sends cannot be told from one captured twice: the
    // copy counts as a retransmission (IPv6 without timestamps).
    r.seg(320, S, ACK | PSH, 9101, 1001, 100);
    r.seg(320, S, ACK | PSH, 9101, 1001, 100);
    let c = &r.finish()[0];
    assert_eq!(c.server.duplicates(), 1);
    assert_eq!(c.server.retrans_segments(), 2);
    assert_eq!(c.server.unique_bytes, 200);
    assert_eq!(
        c.server.payload_bytes(),
        500,
        "every copy's payload, as tshark counts it: 200 new, 200 sent again, 100 captured twice"
    );
    assert_eq!(
        c.server.packets, 6,
        "the handshake's SYN-ACK and five data segments"
    );
}

#[test]
fn history_forgets_the_oldest_when_full_and_what_is_past_its_deadline() {
    // Three entries at most (the table's cap), kept 5 s: five connections reset on five
    // ports; the next SYNs find predecessors only for the last three, and none once 5 s have
    // passed since the connection's last packet.
    let cfg = Config {
        max_connections: 3,
        history_ns: 5_000 * MS,
        ..Config::default()
    };
    let mut r = Run::with(cfg);
    let port = |i: u16| (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 41_000 + i);
    for i in 0..5u16 {
        let t = i64::from(i) * 10;
        r.seg_between(t, port(i), S, SYN, 100, 0, 0);
        r.seg_between(t + 1, S, port(i), SYN | ACK, 500, 101, 0);
        r.seg_between(t + 2, port(i), S, RST, 101, 0, 0);
    }
    // Capture time moves past the linger (2 s) so all five are finished into the history.
    r.seg_between(2_100, port(9), S, SYN, 1, 0, 0);
    assert_eq!(r.done.len(), 5);
    assert_eq!(
        r.t.stats().history_forgotten,
        2,
        "two forgotten within their time, counted for the summary's warning"
    );
    for i in [0u16, 1, 2, 3, 4] {
        r.seg_between(2_200 + i64::from(i), port(i), S, SYN, 7_000, 0, 0);
    }
    let done = r.finish();
    let prev_of = |p: u16, syn_at_ms: i64| {
        done.iter()
            .find(|c| c.client.port == 41_000 + p && c.first.ts_ns == syn_at_ms * MS)
            .map(|c| c.prev().is_some())
    };
    assert_eq!(
        prev_of(0, 2_200),
        Some(false),
        "the oldest two were forgotten"
    );
    assert_eq!(prev_of(1, 2_201), Some(false));
    assert_eq!(prev_of(2, 2_202), Some(true));
    assert_eq!(prev_of(3, 2_203), Some(true));
    assert_eq!(prev_of(4, 2_204), Some(true));
    // A connection reset after its handshake (finished 2 s later); a SYN on its tuple 9 s
    // after its last packet is past the 5 s deadline.
    let mut r = Run::with(Config {
        history_ns: 5_000 * MS,
        ..Config::default()
    });
    r.handshake(0, 1, 100, 500);
    r.seg(2, C, RST, 101, 0, 0);
    r.seg_between(3_000, port(9), S, SYN, 1, 0, 0);
    assert_eq!(r.done.len(), 1, "finished into the history");
    r.seg(9_000, C, SYN, 900, 0, 0);
    assert_eq!(
        r.t.stats().history_forgotten,
        0,
        "past its time is not forgotten early"
    );
    let done = r.finish();
    let late = done
        .iter()
        .find(|c| c.client.port == C.1 && c.first.ts_ns == 9_000 * MS);
    assert_eq!(
        late.map(|c| c.prev().is_some()),
        Some(false),
        "past its deadline"
    );
}

#[test]
fn history_past_its_deadline_behind_a_later_one_is_ignored() {
    // The history is kept in the order connections finished. B resets at 1.0 s and finishes
    // at 3.0 s (deadline 6.0 s); A goes quiet at 0.5 s and finishes by idle timeout at 3.5 s
    // (deadline 5.5 s), after B. At 5.8 s A's entry is past its deadline but still behind
    // B's: a SYN on A's tuple then must not get A as its predecessor.
    let cfg = Config {
        idle_timeout_ns: 3_000 * MS,
        history_ns: 5_000 * MS,
        ..Config::default()
    };
    let mut r = Run::with(cfg);
    let b = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40_007);
    r.handshake(0, 1, 100, 500); // A on C:S, last packet at 1 ms ...
    r.seg(500, C, ACK | PSH, 101, 501, 10); // ... and at 0.5 s
    r.seg_between(600, b, S, SYN, 1, 0, 0);
    r.seg_between(601, S, b, SYN | ACK, 9, 2, 0);
    r.seg_between(1_000, b, S, RST, 2, 0, 0);
    r.seg_between(
        3_600,
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 8)), 40_008),
        S,
        SYN,
        1,
        0,
        0,
    );
    assert_eq!(r.done.len(), 2, "A and B finished");
    assert_eq!(r.done[0].client.port, b.1, "B first");
    r.seg(5_800, C, SYN, 9_000, 0, 0);
    let done = r.finish();
    let late = done
        .iter()
        .find(|c| c.client.port == C.1 && c.first.ts_ns == 5_800 * MS)
        .unwrap();
    assert!(late.prev().is_none(), "{:?}", late.prev());
}

/// First looks wait in a plain queue when they come in capture order; a caller whose frame
/// numbers do not ascend must still see connections due at once finish in id order.
#[test]
fn connections_due_at_once_finish_in_id_order_whatever_order_their_frames_came_in() {
    let mut t = Tracker::new(Config {
        idle_timeout_ns: 1_000 * MS,
        closed_linger_ns: 1_000 * MS,
        ..Config::default()
    });
    let mut done: Vec<u64> = Vec::new();
    let syn = |port: u16| TcpSegment {
        src: C.0,
        dst: S.0,
        src_port: port,
        dst_port: S.1,
        seq: Seq(1),
        ack: Seq(0),
        flags: TcpFlags(SYN),
        window: 1000,
        payload_len: 0,
        options: TcpOptions::default(),
        ip_id: 0,
        first_fragment: false,
    };
    // Three SYNs stamped at the same time, given frame numbers 9, 4, 7.
    for (port, frame) in [(40001, 9), (40002, 4), (40003, 7)] {
        let at = At::new(frame, 0);
        t.segment(&syn(port), at, 54, &mut |c: &Connection| done.push(c.id()));
    }
    // Capture time moves past their idle timeout.
    let at = At::new(10, 5_000 * MS);
    t.segment(&syn(40004), at, 54, &mut |c: &Connection| done.push(c.id()));
    assert_eq!(done, vec![4, 7, 9]);
}

#[test]
fn reservoir_allocated_late_gives_what_an_inline_one_gave() {
    // The reservoir is allocated at the second sample (the first is min_ns). Model: the
    // inline reservoir it replaced (Algorithm R with the same deterministic hash, which also
    // makes the samples); both must agree on count, min, max and median after every sample,
    // for sequences of every length.
    use crate::endpoint::splitmix as mix;
    struct Inline {
        count: u32,
        min: i64,
        max: i64,
        r: [u32; RttStats::RESERVOIR],
    }
    impl Inline {
        fn add(&mut self, ns: i64) {
            if ns < 0 {
                return;
            }
            if self.count == 0 {
                (self.min, self.max) = (ns, ns);
            } else {
                (self.min, self.max) = (self.min.min(ns), self.max.max(ns));
            }
            let us = u32::try_from(ns / 1000).unwrap_or(u32::MAX);
            let n = self.count as usize;
            if n < RttStats::RESERVOIR {
                self.r[n] = us;
            } else {
                let j = (mix(n as u64) % (n as u64 + 1)) as usize;
                if j < RttStats::RESERVOIR {
                    self.r[j] = us;
                }
            }
            self.count += 1;
        }
        fn median(&self) -> Option<i64> {
            let n = (self.count as usize).min(RttStats::RESERVOIR);
            match n {
                0 => None,
                1 => Some(self.min),
                _ => {
                    let mut v = self.r;
                    v[..n].sort_unstable();
                    Some(i64::from(v[(n - 1) / 2]) * 1000)
                }
            }
        }
    }
    let mut seed = 7u64;
    for len in [0usize, 1, 2, 3, 15, 16, 17, 40, 1000] {
        for _round in 0..20 {
            let mut s = RttStats::default();
            let mut m = Inline {
                count: 0,
                min: 0,
                max: 0,
                r: [0; RttStats::RESERVOIR],
            };
            for _ in 0..len {
                seed = mix(seed);
                // Mostly ms-scale, some negative (ignored), some beyond u32 microseconds.
                let ns = match seed % 10 {
                    0 => -5,
                    1 => i64::from(u32::MAX) * 2000,
                    _ => (seed % 5_000_000_000) as i64,
                };
                s.add(ns);
                m.add(ns);
                assert_eq!(
                    (s.count(), s.median_ns()),
                    (m.count, m.median()),
                    "len {len}"
                );
                if s.count() > 0 {
                    assert_eq!((s.min_ns, s.max_ns), (m.min, m.max));
                }
            }
        }
    }
}

#[test]
fn ts_is_an_option_in_eight_bytes() {
    use crate::Ts;
    assert_eq!(std::mem::size_of::<Ts>(), 8);
    assert_eq!(Ts::default().get(), None);
    assert!(Ts::NONE.is_none());
    for v in [0, -1, 1, i64::MAX, i64::MIN + 1] {
        assert_eq!(Ts::new(v).get(), Some(v));
    }
    // The one value that means none is taken as the next one, never lost.
    assert_eq!(Ts::new(i64::MIN).get(), Some(i64::MIN + 1));
    let mut t = Ts::from(At::new(3, 42));
    assert_eq!(t.take(), Some(42));
    assert!(t.is_none());
}

/// What the text and HTML summaries read of a connection (`Brief`, sent by the workers instead
/// of the whole connection), on a transcript whose values are counted by hand: a request sent
/// twice, a response, FINs with the client first; then the tuple reused by a new connection.
#[test]
fn a_brief_carries_what_the_summaries_read() {
    let mut r = Run::new();
    r.handshake(0, 20, 1000, 5000); // frames 1-3
    r.seg(21, C, ACK | PSH, 1001, 5001, 100); // request
    r.seg(30, C, ACK | PSH, 1001, 5001, 100); // the request again: a retransmission
    r.seg(41, S, ACK, 5001, 1101, 0);
    r.seg(60, S, ACK | PSH, 5001, 1101, 3000); // response
    r.seg(60, C, ACK, 1101, 8001, 0);
    r.seg(70, C, FIN | ACK, 1101, 8001, 0);
    r.seg(90, S, FIN | ACK, 8001, 1102, 0);
    r.seg(90, C, ACK, 1102, 8002, 0); // frame 11
    r.handshake(2000, 1, 700, 77); // frames 12-14, the same tuple again
    let done = r.finish();
    assert_eq!(done.len(), 2);
    let first = done[0].brief();
    assert_eq!(
        first,
        Brief {
            id: 1,
            client: C,
            server: S,
            duration_ns: 90 * MS,
            packets: 11,
            c2s: 100,
            s2c: 3000,
            hs_rtt_ns: Some(20 * MS),
            retrans: 1,
            duplicates: 0,
            close: Close::Fin {
                first: Side::Client
            },
            vantage: Vantage::NearClient,
            inferred_role: false,
            reused: false,
        }
    );
    let second = done[1].brief();
    assert_eq!((second.id, second.packets, second.c2s), (12, 3, 0));
    assert_eq!(second.hs_rtt_ns, Some(MS));
    assert_eq!(second.close, Close::Open);
    assert!(second.reused, "the tuple carried connection 1 before");
}

/// A connection that outlives its first look (2 s) is armed for the idle timeout (300 s);
/// closing arms it again, earlier, and leaves the idle entry queued, stale. 20 000 such
/// connections, a new one every 10 ms, each closing after 5 s (about 500 open at a time): the
/// timer entries stay within one and a half per open connection plus the slack (kept, the
/// stale ones grew to one per connection that had closed: 20 000), and every connection still
/// finishes closed once it has lingered.
#[test]
fn stale_timers_of_closed_connections_do_not_pile_up() {
    use crate::table::queue_bound;
    let n = 20_000u32;
    let mut events = Vec::new();
    for i in 0..n {
        let ms = i64::from(i) * 10;
        let c = (IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 40000);
        events.push((ms, c, S, SYN, 1000, 0));
        events.push((ms + 1, S, c, SYN | ACK, 9000, 1001));
        events.push((ms + 1, c, S, ACK, 1001, 9001));
        events.push((ms + 5_000, c, S, FIN | ACK, 1001, 9001));
        events.push((ms + 5_001, S, c, FIN | ACK, 9001, 1002));
        events.push((ms + 5_002, c, S, ACK, 1002, 9002));
    }
    events.sort_by_key(|e| e.0); // stable: a connection's own order holds
    let mut r = Run::new();
    let (mut over, mut peak) = (0usize, 0usize);
    for (ms, from, to, flags, seq, ack) in events {
        r.seg_between(ms, from, to, flags, seq, ack, 0);
        let (entries, open) = (r.t.timer_entries(), r.t.open_connections());
        peak = peak.max(entries);
        // (Checked when a connection starts: a few closings may come between two starts.)
        over = over.max(entries.saturating_sub(queue_bound(open)));
    }
    assert!(
        over <= 8,
        "{over} timer entries over the bound (peak {peak})"
    );
    assert!(peak < 6_000, "peak {peak} timer entries for about 500 open");
    // Capture time moves on past every linger: all finished, closed.
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 40001);
    r.seg(i64::from(n) * 10 + 10_000, other, SYN, 1, 0, 0);
    assert_eq!(r.done.len(), n as usize);
    assert!(r.done.iter().all(|c| c.end_reason == EndReason::Closed));
}

/// An RST answered by the same SYN again (a client retrying a refused port with one ISN)
/// closes and reopens one connection at every other packet. The queue of closed connections
/// (eviction's "closed longest ago") holds one entry for it, not one per close: it held all
/// 100 000 here, 16 bytes each, for a connection that stays one connection.
#[test]
fn a_connection_reset_and_reopened_over_and_over_is_queued_once() {
    let mut r = Run::new();
    for i in 0..100_000i64 {
        r.seg(i * 2, C, SYN, 1000, 0, 0);
        r.seg(i * 2 + 1, S, RST | ACK, 0, 1001, 0);
    }
    assert_eq!(r.t.open_connections(), 1);
    assert_eq!(r.t.closed_entries(), 1);
    let done = r.finish();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].packets(), 200_000);
}

/// Finished connections leave the queue of closed connections from its front only. With one
/// that stays tracked at the front (reset, then reopened by the same SYN and left open), the
/// entries of every connection closed after it stayed queued behind it; now they are dropped
/// once the queue outgrows the open connections, as stale timers are.
#[test]
fn a_tracked_connection_at_the_front_of_the_closed_queue_does_not_hold_the_rest() {
    use crate::table::queue_bound;
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(1, S, RST | ACK, 0, 1001, 0);
    r.seg(2, C, SYN, 1000, 0, 0); // the same SYN: the attempt goes on, open again
    let mut over = 0usize;
    for i in 0..20_000u32 {
        let ms = 10 + i64::from(i) * 10;
        let c = (IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i)), 40000);
        r.seg_between(ms, c, S, SYN, 1000, 0, 0);
        r.seg_between(ms + 1, S, c, SYN | ACK, 9000, 1001, 0);
        r.seg_between(ms + 1, c, S, FIN | ACK, 1001, 9001, 0);
        r.seg_between(ms + 2, S, c, FIN | ACK, 9001, 1002, 0);
        r.seg_between(ms + 2, c, S, ACK, 1002, 9002, 0);
        let open = r.t.open_connections();
        over = over.max(r.t.closed_entries().saturating_sub(queue_bound(open)));
    }
    // (Checked when a connection starts; connections finishing between two starts lower the
    // bound a little.)
    assert!(over <= 8, "{over} entries over the bound");
    assert!(r.t.closed_entries() < 6_000, "{}", r.t.closed_entries());
    // The first connection is still tracked, open; the others closed and finished in turn.
    assert!(r.done.iter().all(|c| c.client.addr != C.0));
    assert!(r.done.len() > 19_000, "{}", r.done.len());
    assert!(r
        .done
        .iter()
        .all(|c| c.client.port == 40000 && c.end_reason == EndReason::Closed));
}

#[test]
fn the_history_gives_back_the_predecessor_it_was_given() {
    // The history keeps a finished connection's facts packed (sequence numbers that may be
    // unknown as bits, the client as one bit of the tuple): the next SYN on the tuple must
    // get them back as they were. Two connections on one tuple, each finished by its timer
    // (2 s after the close) into the history; then a SYN from the same client, and one
    // from the other end, each taking its predecessor out of the history.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, ACK, 1001, 9001, 500);
    r.seg(3, C, FIN | ACK, 1501, 9001, 0);
    r.seg(4, S, FIN | ACK, 9001, 1502, 0);
    r.seg(5, C, ACK, 1502, 9002, 0);
    // 10 s later the client again, mid-stream (no SYN: its ISN unknown, and the server
    // sends nothing): the first connection is in the history.
    r.seg(10_000, C, ACK | PSH, 50_000, 70_000, 100);
    r.seg(10_005, C, RST, 50_100, 0, 0);
    // A SYN from the server's end, to the client's port, 10 s later again, refused; and
    // 20 s after it a SYN from the first client (the predecessor's client is now the other
    // end of the tuple).
    r.seg_between(20_000, S, C, SYN, 123, 0, 0);
    r.seg_between(20_001, C, S, RST | ACK, 0, 124, 0);
    r.handshake(40_000, 1, 5, 6);
    let done = r.finish();
    assert_eq!(done.len(), 4, "{done:?}");
    for (old, new, same_client) in [
        (&done[0], &done[1], true),
        (&done[1], &done[2], false),
        (&done[2], &done[3], false),
    ] {
        let want = Predecessor {
            id: old.id(),
            close: old.close(),
            last_ts: old.last.ts_ns,
            same_client,
            client_next_seq: old.client.next_seq(),
            server_next_seq: old.server.next_seq(),
            client_isn: old.client.isn(),
            client_first_ts: old.first.ts_ns,
            timestamps: false,
        };
        assert_eq!(new.prev(), Some(&want), "{new:?}");
    }
    // Known and unknown sequence numbers both came back.
    assert_eq!(done[0].client.next_seq(), Some(Seq(1502)));
    assert_eq!(done[0].server.next_seq(), Some(Seq(9002)));
    assert_eq!(done[0].client.isn(), Some(Seq(1000)));
    assert_eq!(done[1].client.next_seq(), Some(Seq(50_100)));
    assert_eq!(done[1].server.next_seq(), None);
    assert_eq!(done[1].client.isn(), None);
    assert_eq!(
        (done[2].client.addr, done[2].client.port),
        S,
        "the reversed SYN's client"
    );
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
    let to = if from == C { S } else { C };
    let s = TcpSegment {
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
        ip_id: id,
        first_fragment: false,
    };
    r.frame += 1;
    let done = &mut r.done;
    let mut sink = |c: &Connection| done.push(c.clone());
    r.t.segment(&s, At::new(r.frame, ms_x10 * MS / 10), 54 + len, &mut sink);
}

#[test]
fn a_copy_forwarded_one_hop_later_is_a_duplicate_even_after_the_next_original() {
    // cs1e_hauntedbrowser.pcap's shape: every client packet captured twice, the copy (same IP
    // ID) 0.1-7 ms after the original, sometimes after the next original: SYN, SYN', then
    // data A, B, A' (6.7 ms after A), B'. None of the copies is a retransmission or a SYN
    // retry; a real retransmission (a new IP ID) 300 ms later is one.
    let mut r = Run::new();
    seg_id(&mut r, 0, C, SYN, 1000, 0, 0, 0x62);
    seg_id(&mut r, 14, C, SYN, 1000, 0, 0, 0x62);
    r.seg(60, S, SYN | ACK, 9000, 1001, 0);
    seg_id(&mut r, 610, C, ACK, 1001, 9001, 0, 0x63);
    seg_id(&mut r, 611, C, ACK, 1001, 9001, 0, 0x63);
    seg_id(&mut r, 620, C, ACK | PSH, 1001, 9001, 100, 0x64);
    seg_id(&mut r, 621, C, ACK | PSH, 1101, 9001, 100, 0x65);
    seg_id(&mut r, 687, C, ACK | PSH, 1001, 9001, 100, 0x64);
    seg_id(&mut r, 688, C, ACK | PSH, 1101, 9001, 100, 0x65);
    seg_id(&mut r, 3620, C, ACK | PSH, 1001, 9001, 100, 0x70);
    let c = &r.finish()[0];
    assert_eq!(c.client.syn_retransmits(), 0);
    assert_eq!(c.client.duplicates(), 4);
    assert_eq!(
        c.client.retrans_segments(),
        1,
        "only the one with a new IP ID"
    );
    assert_eq!(c.client.unique_bytes, 200);
}

#[test]
fn data_captured_after_the_ack_that_covers_it_is_neither_loss_nor_a_retransmission() {
    // zeek_smb_smb3_multichannel.pcap frames 109-111: the receiver's ACK for 40455 is captured
    // before the (offloaded) segment 37535-52135 that it covers in part. The segment is new
    // data seen late; the bytes the ACK covered are not missed by the capture once they come.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, ACK, 1001, 9001, 1000); // 1001..2001
    r.seg(3, S, ACK, 9001, 3001, 0); // acknowledges 1000 bytes not seen yet
    r.seg(3, C, ACK, 2001, 9001, 3000); // 2001..5001: 1000 late, 2000 new
    r.seg(4, S, ACK, 9001, 5001, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.retrans_segments(), 0);
    assert_eq!(c.client.unseen_acked_bytes(), 0);
    assert_eq!(c.client.unique_bytes, 4000);
}

#[test]
fn acknowledged_data_never_captured_is_capture_loss() {
    // The same ACK with the bytes never seen: 1000 bytes the capture missed.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    r.seg(2, C, ACK, 1001, 9001, 1000);
    r.seg(3, S, ACK, 9001, 3001, 0);
    r.seg(4, C, ACK, 3001, 9001, 1000);
    r.seg(5, S, ACK, 9001, 4001, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.unseen_acked_bytes(), 1000);
    assert_eq!(c.client.retrans_segments(), 0);
}

#[test]
fn a_fast_open_syn_ack_that_accepts_the_data_completes_the_handshake() {
    // zeek_tcp_tcp-fast-open.pcap frames 8-11: the SYN carries 86 bytes, the SYN-ACK
    // acknowledges ISN + 87 (it accepted them), the client ACKs.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 86);
    r.seg(1, S, SYN | ACK, 9000, 1087, 0);
    r.seg(1, C, ACK, 1087, 9001, 0);
    let c = &r.finish()[0];
    assert_eq!(c.handshake.syn_ack.map(|a| a.frame()), Some(2));
    assert_eq!(c.handshake.ack.map(|a| a.frame()), Some(3));
    assert_eq!(c.handshake.invalid_acks(), 0);
    assert_eq!(c.client.unique_bytes, 86);
}

#[test]
fn a_syn_ack_captured_before_its_syn_is_one_connection() {
    // The SYN-ACK (acknowledging ISN 1000 + 1) is captured 0.1 ms before the SYN it answers:
    // one connection whose client sent the SYN, not two.
    let mut r = Run::new();
    seg_id(&mut r, 10, S, SYN | ACK, 9000, 1001, 0, 7);
    seg_id(&mut r, 11, C, SYN, 1000, 0, 0, 8);
    r.seg(2, C, ACK, 1001, 9001, 0);
    r.seg(3, C, ACK | PSH, 1001, 9001, 10);
    let done = r.finish();
    assert_eq!(done.len(), 1, "{done:?}");
    let c = &done[0];
    assert_eq!(c.role, RoleSource::Syn);
    assert_eq!(c.client.port, 40000);
    assert_eq!(c.handshake.syn_ack.map(|a| a.frame()), Some(1));
    assert_eq!(c.handshake.ack.map(|a| a.frame()), Some(3));
    assert_eq!(c.client.syn_retransmits(), 0);
}

#[test]
fn the_same_syn_after_a_long_backoff_is_the_same_attempt() {
    // A TIME-WAIT socket under tcp_rfc1337=1 ignores the client's RST: the same SYN (same
    // ISN) meets a stale ACK and is reset again and again, with backoff (1, 2, 4, 8, 16, 32
    // s) until TIME-WAIT ends and a SYN-ACK comes 67 s after the first SYN. One attempt.
    let mut r = Run::new();
    let mut t = 0;
    for gap in [0, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000] {
        t += gap;
        r.seg(t, C, SYN, 1000, 0, 0);
        r.seg(t + 1, S, ACK, 7777, 5555, 0);
        r.seg(t + 1, C, RST, 5555, 0, 0);
    }
    r.seg(t + 4_000, C, SYN, 1000, 0, 0);
    r.seg(t + 4_001, S, SYN | ACK, 9000, 1001, 0);
    r.seg(t + 4_001, C, ACK, 1001, 9001, 0);
    let done = r.finish();
    assert_eq!(done.len(), 1);
    let c = &done[0];
    assert_eq!(c.client.syn_retransmits(), 7);
    assert_eq!(c.handshake.invalid_acks(), 7);
    assert_eq!(
        c.syn_to_syn_ack_ns(),
        Some(MS),
        "from the SYN the SYN-ACK answered"
    );
    assert_eq!(c.handshake.syn_ack.map(|a| a.ts_ns), Some((t + 4_001) * MS));
}

/// A segment from `from` with IPv4 ID `id` at `ms`, through a sink that keeps the events'
/// `lost_wait_ns` (frame, wait).
#[allow(clippy::too_many_arguments)]
fn seg_event(
    r: &mut Run,
    waits: &mut Vec<(u64, i64)>,
    ms: i64,
    from: (IpAddr, u16),
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
    id: u16,
) {
    struct Waits<'a>(&'a mut Vec<(u64, i64)>, &'a mut Vec<Connection>);
    impl Sink for Waits<'_> {
        fn connection(&mut self, c: &Connection) {
            self.1.push(c.clone());
        }
        fn segment(&mut self, _c: &Connection, ev: &SegmentEvent<'_>) {
            if ev.lost_wait_ns > 0 {
                assert!(
                    ev.retransmission,
                    "a resend of data lost upstream is a retransmission"
                );
                self.0.push((ev.at.frame(), ev.lost_wait_ns));
            }
        }
    }
    let to = if from == C { S } else { C };
    let s = TcpSegment {
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
        ip_id: id,
        first_fragment: false,
    };
    r.frame += 1;
    let mut sink = Waits(waits, &mut r.done);
    r.t.segment(&s, At::new(r.frame, ms * MS), 54 + len, &mut sink);
}

#[test]
fn a_lost_tail_shows_at_the_receiver_as_a_skipped_ip_id() {
    // Captured at the client (the lab's tail-loss, fixtures/lab/vantage/tail-loss-client-*):
    // the server's IPv4 IDs follow each other (100, 101, ... one per segment; the GRO frame
    // of 2 segments takes 2), its tail (ID 106) is lost before the capture point, and the
    // same bytes come 248 ms later with ID 107, nothing from the client in between but the
    // ACK of what came. A resend of data lost upstream, waiting 248 ms.
    let run = |ids: [u16; 6], ack_at: i64, resend_at: i64| -> Vec<(u64, i64)> {
        let mut r = Run::new();
        let mut w = Vec::new();
        seg_event(&mut r, &mut w, 0, C, SYN, 1000, 0, 0, 1);
        seg_event(&mut r, &mut w, 20, S, SYN | ACK, 5000, 1001, 0, 0);
        seg_event(&mut r, &mut w, 20, C, ACK | PSH, 1001, 5001, 10, 2);
        seg_event(&mut r, &mut w, 40, S, ACK, 5001, 1011, 0, ids[0]);
        seg_event(&mut r, &mut w, 40, S, ACK, 5001, 1011, 2920, ids[1]);
        seg_event(&mut r, &mut w, 40, S, ACK, 7921, 1011, 1460, ids[2]);
        seg_event(&mut r, &mut w, 40, S, ACK, 9381, 1011, 1460, ids[3]);
        seg_event(&mut r, &mut w, 40, S, ACK, 10841, 1011, 1460, ids[4]);
        seg_event(&mut r, &mut w, ack_at, C, ACK, 1011, 12301, 0, 3);
        seg_event(
            &mut r,
            &mut w,
            resend_at,
            S,
            ACK | PSH,
            12301,
            1011,
            500,
            ids[5],
        );
        w
    };
    assert_eq!(
        run([100, 101, 103, 104, 105, 107], 41, 288),
        [(10, 248 * MS)]
    );
    // Consecutive IDs (nothing skipped): new data after a pause, not a resend.
    assert_eq!(run([100, 101, 103, 104, 105, 106], 41, 288), []);
    // A skip right after the peer's packet (a window update: the data answers it; a host-wide
    // ID counter took 106 for another connection, as on Windows): not a resend.
    assert_eq!(run([100, 101, 103, 104, 105, 107], 288, 288), []);
    // A skip after only 30 ms: no loss timer fires that soon.
    assert_eq!(run([100, 101, 103, 104, 105, 107], 41, 70), []);
}

#[test]
fn service_ports_name_the_server_of_a_connection_without_handshake() {
    // Mid-stream (no SYN): a Windows XP client on port 1350 talking to a web proxy on 8080;
    // the first packet seen is the proxy's. Neither port is below 1024 or in Linux's
    // ephemeral range: the service port names the server.
    let proxy = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), 8080);
    let xp = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 1350);
    let mut r = Run::new();
    r.seg_between(0, proxy, xp, ACK | PSH, 500, 900, 100);
    let c = &r.finish()[0];
    assert_eq!((c.server.port, c.client.port), (8080, 1350));
    assert_eq!(c.role, RoleSource::Port);
    assert!(
        crate::table::SERVICE_PORTS.windows(2).all(|w| w[0] < w[1]),
        "sorted for the search"
    );
}

#[test]
fn without_ids_a_lost_tail_is_judged_from_a_loss_probes_timing() {
    // The same lost tail with no IPv4 IDs (IPv6: every ID reads 0): the round trip is 20 ms,
    // and the last 500 bytes come 248 ms after the flight, the client quiet since its ACK at
    // 41 ms: Linux's loss probe for one segment in flight (2 x 20 + 200 ms, on a 4 ms tick).
    // A resend lost before the capture point, judged from timing alone. 150 ms or 400 ms of
    // silence match no probe: a pause, not a loss.
    let run = |resend_at: i64| -> Vec<(u64, i64)> {
        let mut r = Run::new();
        let mut w = Vec::new();
        seg_event(&mut r, &mut w, 0, C, SYN, 1000, 0, 0, 0);
        seg_event(&mut r, &mut w, 20, S, SYN | ACK, 5000, 1001, 0, 0);
        seg_event(&mut r, &mut w, 20, C, ACK | PSH, 1001, 5001, 10, 0);
        seg_event(&mut r, &mut w, 40, S, ACK, 5001, 1011, 2920, 0);
        seg_event(&mut r, &mut w, 41, C, ACK, 1011, 7921, 0, 0);
        seg_event(&mut r, &mut w, resend_at, S, ACK | PSH, 7921, 1011, 500, 0);
        w
    };
    assert_eq!(run(288), [(6, 248 * MS)]);
    assert_eq!(run(190), []);
    assert_eq!(run(440), []);
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

/// Traffic with many new 4-tuples whose client sends SYNs: most answered by a SYN-ACK (then
/// data and a close), some refused, some never answered and sent again (with the same or
/// another IP ID and TSval, some the same packet captured twice), some sent again with other
/// numbers or options (a new ISN, another window), some followed by the client's data or
/// reset or a stale ACK; timestamps that step back, pauses past the idle timeout, 16 SYNs
/// and more on one tuple.
fn syn_heavy_traffic(n: usize) -> Vec<(TcpSegment, At, u32)> {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let servers = [S, (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 443)];
    let mut out = Vec::new();
    let mut t = 1_000 * MS;
    // Per client: its ISN, TSval, whether its SYNs carry options.
    let mut isn = [0u32; 300];
    let mut tsval = [0u32; 300];
    let mut last_id = [0u16; 300];
    for frame in 1..=n as u64 {
        t += match rnd(1000) {
            0 => 400_000 * MS,
            1..=20 => 1_000 * MS,
            _ => rnd(2 * MS as u64) as i64,
        };
        let ts = if rnd(40) == 0 { t - 3 * MS } else { t };
        let k = rnd(300) as usize;
        let cl = (
            IpAddr::V4(Ipv4Addr::new(10, 1, (k / 200) as u8, k as u8)),
            20000 + k as u16,
        );
        let sv = servers[k % 2];
        let options = |ts: u32| TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some((ts, 0)),
            ..TcpOptions::default()
        };
        let with_options = k % 3 == 0;
        let (from, flags, seq, ack, len, window) = match rnd(24) {
            // A SYN: the same again (mostly), or a new ISN.
            0..=9 => {
                if rnd(8) == 0 {
                    isn[k] = isn[k].wrapping_add(1 + rnd(1 << 24) as u32);
                }
                (cl, SYN, isn[k], 0, 0, if rnd(30) == 0 { 999 } else { 1000 })
            }
            10..=12 => (sv, SYN | ACK, 7000, isn[k].wrapping_add(1), 0, 1000),
            13 => (sv, RST | ACK, 0, isn[k].wrapping_add(1), 0, 0),
            14 => (sv, ACK, 7000, isn[k].wrapping_add(99), 0, 1000),
            15 => (cl, RST, isn[k].wrapping_add(1), 0, 0, 0),
            16..=19 => (
                cl,
                ACK | PSH,
                isn[k].wrapping_add(1),
                7001,
                rnd(300) as u32,
                1000,
            ),
            20 => (cl, FIN | ACK, isn[k].wrapping_add(1), 7001, 0, 1000),
            21 => (sv, FIN | ACK, 7001, isn[k].wrapping_add(2), 0, 1000),
            // A SYN with data (TCP Fast Open): never compact.
            22 => (cl, SYN, isn[k], 0, 20, 1000),
            _ => (cl, SYN | TcpFlags::ECE | TcpFlags::CWR, isn[k], 0, 0, 1000),
        };
        tsval[k] = tsval[k].wrapping_add(1 + rnd(3) as u32);
        // One SYN in 10 is the last one captured again (same IP ID and TSval).
        let again = flags & SYN != 0 && rnd(10) == 0;
        let ip_id = if again { last_id[k] } else { frame as u16 };
        last_id[k] = ip_id;
        let (src, dst) = if from == cl { (cl, sv) } else { (sv, cl) };
        let seg = TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq: Seq(seq),
            ack: Seq(ack),
            flags: TcpFlags(flags),
            window,
            payload_len: len,
            options: if with_options && from == cl && flags & SYN != 0 {
                options(if again { tsval[k] - 1 } else { tsval[k] })
            } else {
                TcpOptions::default()
            },
            ip_id,
            first_fragment: false,
        };
        out.push((
            seg,
            At::new(frame, ts),
            54 + len + if with_options { 20 } else { 0 },
        ));
    }
    // 20 SYNs on one tuple, never answered: more than a compact connection holds.
    let lone = (IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), 30000);
    for i in 0..20u64 {
        let seg = TcpSegment {
            src: lone.0,
            dst: S.0,
            src_port: lone.1,
            dst_port: S.1,
            seq: Seq(5),
            flags: TcpFlags(SYN),
            window: 1000,
            ip_id: i as u16 + 1,
            ..TcpSegment::EMPTY
        };
        out.push((
            seg,
            At::new(n as u64 + 1 + i, t + 1 + i as i64 * 1_000 * MS),
            54,
        ));
    }
    out
}

/// Connections that have seen only their client's SYNs are kept compact and made full when
/// anything else happens on their tuple or when they finish: the tracker must report exactly
/// what it reports with every connection full from its first packet, and hold the same timers
/// at every moment. Under the default timers, a short idle timeout (timers re-armed,
/// connections expiring while compact), and a table so small that compact connections are
/// evicted; one tracker and three sharded.
#[test]
fn compact_connections_report_what_full_ones_do() {
    let traffic = syn_heavy_traffic(40_000);
    let mut mono = i64::MIN;
    let traffic: Vec<(TcpSegment, At, u32)> = traffic
        .into_iter()
        .map(|(s, at, len)| {
            mono = mono.max(at.ts_ns);
            (s, At::new(at.frame(), mono), len)
        })
        .collect();
    let configs = [
        Config::default(),
        Config {
            idle_timeout_ns: 1_500 * MS,
            closed_linger_ns: 3_000 * MS,
            ..Config::default()
        },
        Config {
            max_connections: 40,
            ..Config::default()
        },
    ];
    for (i, cfg) in configs.into_iter().enumerate() {
        for shards in [1, 3] {
            // Both side by side: after every packet their live timers are the same.
            let mk = |compact: bool| {
                let cfg = Config {
                    compact_syns: compact,
                    ..cfg.clone()
                };
                let ts: Vec<Tracker> = (0..shards).map(|_| Tracker::new(cfg.clone())).collect();
                let sinks: Vec<Everything> = (0..shards).map(|_| Everything::default()).collect();
                (ts, sinks)
            };
            let (mut full, mut compact) = (mk(false), mk(true));
            let timers = |ts: &[Tracker]| {
                let mut all: Vec<(i64, u64)> = ts.iter().flat_map(|t| t.live_timers()).collect();
                all.sort_unstable();
                all
            };
            let mut most_compact = 0;
            for (s, at, len) in &traffic {
                let k = shard_of(flow_hash(s), shards);
                for (ts, sinks) in [&mut full, &mut compact] {
                    ts[k].segment(s, *at, *len, &mut sinks[k]);
                    for (t, sink) in ts.iter_mut().zip(sinks.iter_mut()) {
                        t.advance_to(at.ts_ns, sink);
                    }
                }
                assert_eq!(
                    timers(&compact.0),
                    timers(&full.0),
                    "config {i}, frame {}",
                    at.frame()
                );
                most_compact =
                    most_compact.max(compact.0.iter().map(|t| t.compact_connections()).sum());
            }
            assert!(full.0.iter().all(|t| t.compact_connections() == 0));
            assert!(
                most_compact > 20,
                "config {i}: {most_compact} compact at most"
            );
            let end = |(mut ts, mut sinks): (Vec<Tracker>, Vec<Everything>)| {
                for (t, sink) in ts.iter_mut().zip(sinks.iter_mut()) {
                    t.finish_all(sink);
                }
                let stats: Vec<TrackerStats> = ts.iter().map(|t| t.stats().clone()).collect();
                let mut records: Vec<(Moment, String)> =
                    sinks.iter().flat_map(|s| s.records.clone()).collect();
                records.sort_by_key(|r| r.0); // stable: a moment's records keep their order
                let segments: std::collections::BTreeMap<u64, Vec<String>> =
                    sinks.into_iter().flat_map(|s| s.segments).collect();
                (records, segments, stats)
            };
            let (full_records, full_segments, full_stats) = end(full);
            let (records, segments, stats) = end(compact);
            assert_eq!(stats, full_stats, "config {i}, {shards} shards");
            assert_eq!(
                records.len(),
                full_records.len(),
                "config {i}, {shards} shards"
            );
            for (a, b) in records.iter().zip(&full_records) {
                assert_eq!(a, b, "config {i}, {shards} shards");
            }
            assert_eq!(segments, full_segments, "config {i}, {shards} shards");
            let kinds = |want: &str| records.iter().filter(|r| r.1.contains(want)).count();
            assert!(
                kinds("IdleTimeout") > 10 && kinds("Superseded") > 10,
                "config {i}: the traffic exercises expiry and new generations"
            );
            if i == 2 {
                assert!(kinds("Evicted") > 100, "config {i}: evictions");
            }
        }
    }
}

/// 10 000 SYNs from distinct 4-tuples, each sent twice 1 s apart and never answered: all
/// compact (no slot, no detector state), all counted open; at the end each is reported as a
/// connection of two SYNs from its client, the second a SYN retransmission.
#[test]
fn a_flood_of_unanswered_syns_stays_compact() {
    let mut r = Run::new();
    let syn = |i: u32| TcpSegment {
        src: IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i)),
        dst: S.0,
        src_port: 1024 + (i % 60_000) as u16,
        dst_port: S.1,
        seq: Seq(i.wrapping_mul(2_654_435_761)),
        flags: TcpFlags(SYN),
        window: 512,
        ip_id: i as u16,
        ..TcpSegment::EMPTY
    };
    let done = &mut r.done;
    let mut sink = |c: &Connection| done.push(c.clone());
    for send in 0..2u32 {
        for i in 0..10_000u32 {
            r.frame += 1;
            let at = At::new(
                r.frame,
                i64::from(send) * 1_000 * MS + i64::from(i) * 10_000,
            );
            let mut s = syn(i);
            s.ip_id = s.ip_id.wrapping_add(send as u16);
            r.t.segment(&s, at, 54, &mut sink);
        }
    }
    assert_eq!(r.t.open_connections(), 10_000);
    assert_eq!(r.t.compact_connections(), 10_000);
    assert!(r.t.live_slots().is_empty());
    let done = r.finish();
    assert_eq!(done.len(), 10_000);
    for (i, c) in done.iter().enumerate() {
        assert_eq!(c.id(), i as u64 + 1, "in the order they started");
        assert_eq!((c.client.packets, c.server.packets), (2, 0));
        assert_eq!(c.client.syn_retransmits(), 1);
        assert_eq!(c.last.frame(), 10_001 + i as u64);
        assert_eq!(c.end_reason, EndReason::CaptureEnd);
        assert_eq!(c.role, RoleSource::Syn);
    }
}

/// A SYN at 0 s and again at 1 s, then capture time passes the first look (2 s: the timer
/// moves to the last SYN + the idle timeout, 301 s), then the SYN-ACK at 3 s makes the
/// compact connection full by replaying its SYNs. Replayed, the first SYN's due time (300 s)
/// is earlier than the timer: the replay must not move the timer there (when that SYN came,
/// the timer was the first look, earlier still). The same timers as a connection full from
/// its first SYN, at every step.
#[test]
fn replayed_syns_leave_the_timer_where_it_was() {
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40007);
    type Step = (i64, (IpAddr, u16), (IpAddr, u16), u8, u32, u32);
    let steps: [Step; 5] = [
        (0, C, S, SYN, 1000, 0),
        (1_000, C, S, SYN, 1000, 0),
        (2_500, other, S, ACK, 5, 5),
        (3_000, S, C, SYN | ACK, 9000, 1001),
        (3_001, C, S, ACK, 1001, 9001),
    ];
    let mut runs = [false, true].map(|compact| {
        Run::with(Config {
            compact_syns: compact,
            ..Config::default()
        })
    });
    for (n, &(ms, from, to, flags, seq, ack)) in steps.iter().enumerate() {
        for r in &mut runs {
            r.seg_between(ms, from, to, flags, seq, ack, 0);
        }
        let [full, compact] = &runs;
        assert_eq!(compact.t.live_timers(), full.t.live_timers(), "step {n}");
        if n == 1 {
            assert_eq!(compact.t.compact_connections(), 1);
        }
    }
    let [_, compact] = &runs;
    assert_eq!(compact.t.compact_connections(), 0);
    // C's timer: its last packet (3.001 s) + 300 s would be later; the live one is the
    // re-armed 301 s (moved on when it runs out).
    assert!(compact.t.live_timers().contains(&(301_000 * MS, 1)));
}

/// A compact connection holds its first SYN and 15 sent again (Linux sends 7 in all, macOS
/// 11): the 17th makes it a full connection, so one that is never answered cannot grow a
/// compact record without bound. All 17 are counted either way.
#[test]
fn a_compact_connection_holds_at_most_sixteen_syns() {
    let mut r = Run::new();
    for i in 0..16 {
        r.seg(i * 1_000, C, SYN, 1000, 0, 0);
    }
    assert_eq!((r.t.compact_connections(), r.t.live_slots().len()), (1, 0));
    r.seg(16_000, C, SYN, 1000, 0, 0);
    assert_eq!((r.t.compact_connections(), r.t.live_slots().len()), (0, 1));
    let done = r.finish();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].client.syn_retransmits(), 16);
}
