//! What each side sent: data, retransmissions, duplicates, capture loss, keepalives, round-trip
//! samples.

use super::*;

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
fn an_ack_one_past_a_side_without_a_fin_is_its_missed_fin() {
    // Wireshark's tls12-chacha20poly1305.pcap (only packets with data kept): the server's
    // data ends at 201, the client's last ACK is 202. A FIN takes one sequence number: the
    // capture missed the FIN, not a byte of data.
    let run = |tail: &dyn Fn(&mut Run)| {
        let mut r = Run::new();
        r.handshake(0, 1, 1, 1);
        r.seg(2, C, ACK | PSH, 2, 2, 100);
        r.seg(3, S, ACK | PSH, 2, 102, 200);
        r.seg(4, C, ACK | PSH, 102, 203, 30);
        tail(&mut r);
        r.finish().remove(0)
    };
    let c = run(&|_| {});
    assert_eq!(c.server.unseen_acked_bytes(), 0);
    // The FIN captured after the ACK of it: no loss either, and the FIN is the server's.
    let c = run(&|r| r.seg(5, S, FIN | ACK, 202, 132, 0));
    assert_eq!(c.server.unseen_acked_bytes(), 0);
    assert!(c.server.fin.is_some());
    // Data after it: that byte was data the capture missed.
    let c = run(&|r| r.seg(5, S, ACK | PSH, 203, 132, 50));
    assert_eq!(c.server.unseen_acked_bytes(), 1);
    // Two bytes past: data, as before.
    let mut r = Run::new();
    r.handshake(0, 1, 1, 1);
    r.seg(2, C, ACK | PSH, 2, 2, 100);
    r.seg(3, S, ACK | PSH, 2, 102, 200);
    r.seg(4, C, ACK | PSH, 102, 204, 30);
    assert_eq!(r.finish()[0].server.unseen_acked_bytes(), 2);
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
        s.add(v * 1000 + 7, false); // microseconds plus 7 ns
    }
    assert_eq!(s.median_ns(), Some(3000), "exact to the microsecond");
    assert_eq!(
        (s.min_ns, s.max_ns, s.count()),
        (1007, 5007, 5),
        "exact in ns"
    );
    for v in 0..10_000 {
        s.add((1000 + v % 7) * 1000, false);
    }
    let m = s.median_ns().unwrap();
    assert!((1_000_000..1_007_000).contains(&m));
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
fn reservoir_allocated_late_gives_what_an_inline_one_gave() {
    // The reservoir is allocated at the second sample (the first is min_ns). Model: the
    // inline reservoir it replaced (Algorithm R with the same deterministic hash, which also
    // makes the samples); both must agree on count, min, max and median after every sample,
    // for sequences of every length. Every third sample is prompt: a second model of only
    // those must agree with `prompt()` (its median from microseconds, as the reservoir keeps
    // them), and they must not change the first.
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
            let mut mp = Inline {
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
                let prompt = seed % 3 == 0;
                s.add(ns, prompt);
                m.add(ns);
                if prompt {
                    mp.add(ns);
                }
                match (s.prompt(), mp.count) {
                    (None, 0) => {}
                    (Some((median, max, n)), count) => {
                        let k = (count as usize).min(RttStats::RESERVOIR);
                        let mut v = mp.r;
                        v[..k].sort_unstable();
                        let want = i64::from(v[(k - 1) / 2]) * 1000;
                        assert_eq!((median, max, n), (want, mp.max, count), "len {len}");
                    }
                    (p, count) => panic!("prompt {p:?} with {count} prompt samples"),
                }
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
fn the_same_ip_id_on_the_segment_sent_just_before_is_a_copy_however_late() {
    // tcpdump's bgp-infinite-loop.pcap: a segment and its copy 60 ms later, identical down to
    // the IP ID (0xc78a) and TTL, nothing sent or received in between. No stack resends with
    // the ID it used, so the second is the same packet captured again, not a timeout. A copy
    // only told apart by timestamps is still looked for within 25 ms (a sender's timestamp
    // clock may tick that slowly), and a new IP ID is a resend whenever it comes.
    // (`seg_id` times are in tenths of a millisecond.)
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    seg_id(&mut r, 100, C, ACK | PSH, 1001, 9001, 34, 0xc78a);
    seg_id(&mut r, 700, C, ACK | PSH, 1001, 9001, 34, 0xc78a);
    seg_id(&mut r, 800, C, ACK | PSH, 1001, 9001, 34, 0xc78b);
    let c = &r.finish()[0];
    assert_eq!(c.client.duplicates(), 1);
    assert_eq!(
        c.client.retrans_segments(),
        1,
        "only the one with a new IP ID"
    );

    // The same ID more than a second later: the counter may have gone round; a resend.
    let mut r = Run::new();
    r.handshake(0, 1, 1000, 9000);
    seg_id(&mut r, 100, C, ACK | PSH, 1001, 9001, 34, 0xc78a);
    seg_id(&mut r, 12_000, C, ACK | PSH, 1001, 9001, 34, 0xc78a);
    let c = &r.finish()[0];
    assert_eq!(c.client.duplicates(), 0);
    assert_eq!(c.client.retrans_segments(), 1);
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
    let s = TcpSegment {
        ip_id: id,
        ttl: 64,
        ..segment(from, peer(from), flags, seq, ack, len)
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
fn ids_that_skipped_twice_with_nothing_lost_say_nothing_of_a_lost_tail() {
    // The lost tail above, from a sender whose IDs come from one counter for the whole host
    // (Windows; nDPI's anydesk-2 and webex captures): its other connections take IDs between
    // this one's segments. Two skips inside one flight, each after four consecutive IDs (no
    // timer fires inside a flight: nothing was lost), show it; after them, a skip before data
    // after a silence is no lost segment. A single such skip (a lost pure ACK can be one)
    // leaves the IDs trusted.
    let run = |ids: &[u16]| -> Vec<(u64, i64)> {
        let mut r = Run::new();
        let mut w = Vec::new();
        seg_event(&mut r, &mut w, 0, C, SYN, 1000, 0, 0, 1);
        seg_event(&mut r, &mut w, 20, S, SYN | ACK, 5000, 1001, 0, 0);
        seg_event(&mut r, &mut w, 20, C, ACK | PSH, 1001, 5001, 10, 2);
        let (flight, last) = ids.split_at(ids.len() - 1);
        let mut seq = 5001;
        for (i, id) in flight.iter().enumerate() {
            let len = if i == 0 { 0 } else { 1460 };
            seg_event(&mut r, &mut w, 40, S, ACK, seq, 1011, len, *id);
            seq += len;
        }
        seg_event(&mut r, &mut w, 41, C, ACK, 1011, seq, 0, 3);
        seg_event(&mut r, &mut w, 288, S, ACK | PSH, seq, 1011, 500, last[0]);
        w
    };
    let ids = |skips: &[u16]| -> Vec<u16> {
        // 100 (the ACK), then 14 data segments, then the last one after the silence, one
        // ID apart but for a skip after each ID in `skips` and the tail lost before the last.
        let mut v = vec![100u16];
        let mut id = 100;
        while v.len() < 15 {
            id += if skips.contains(&id) { 2 } else { 1 };
            v.push(id);
        }
        v.push(id + 2);
        v
    };
    // Consecutive but for the lost tail: resent 248 ms after the flight.
    assert_eq!(run(&ids(&[])), [(20, 248 * MS)]);
    // One skip inside the flight (after 104), then four in a row: still a lost tail.
    assert_eq!(run(&ids(&[104])), [(20, 248 * MS)]);
    // Two skips inside the flight (after 104 and 110): a shared counter; no loss.
    assert_eq!(run(&ids(&[104, 110])), []);
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

#[test]
fn before_the_first_segment_seen_an_earlier_ip_id_is_the_original_reordered() {
    // tcpflow's test1-part2.pcap, a cut of test1.pcap: the sender's first segment in the file
    // (IP ID 0xf516) carries the bytes after those of its second (0xf515, 0.4 ms later). No
    // handshake, so nothing is known below the first segment: the second left before the
    // first (its ID is below), the original reordered on the way, not a resend. With an ID
    // above the first's it would be a resend of data sent before the capture began.
    // (`seg_id` times are in tenths of a millisecond.)
    let run = |second_id: u16| {
        let mut r = Run::new();
        seg_id(&mut r, 0, C, ACK, 1001 + 1396, 9001, 1396, 0xf516);
        seg_id(&mut r, 1, S, ACK, 9001, 1001, 0, 0x0101);
        seg_id(&mut r, 4, C, ACK, 1001, 9001, 1396, second_id);
        seg_id(&mut r, 5, S, ACK, 9001, 1001 + 2792, 0, 0x0102);
        r.finish().remove(0)
    };
    let c = run(0xf515);
    assert_eq!(c.client.out_of_order(), 1);
    assert_eq!(c.client.retrans_segments(), 0);
    assert_eq!(c.client.unique_bytes, 2792);
    let c = run(0xf517);
    assert_eq!(c.client.out_of_order(), 0);
    assert_eq!(c.client.retrans_segments(), 1);
    assert_eq!(c.client.unique_bytes, 1396);
}

#[test]
fn a_side_not_in_the_capture_closed_where_the_peer_acknowledged_one_more() {
    // tcpflow's bug2.pcap holds the server's packets only: its ACK field stays at the end of
    // the request, then moves by one (frame 48) and never again. That one sequence number is
    // the client's FIN, which the capture missed; data would move it by its length.
    let mut r = Run::new();
    r.seg(0, S, SYN | ACK, 9000, 1001, 0);
    r.seg(10, S, ACK, 9001, 1444, 100);
    r.seg(20, S, ACK | FIN, 9101, 1445, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.packets, 0);
    assert_eq!(c.client.closed_ns(), Some(20 * MS));
    // Moving again after that one: it was a byte of data.
    let mut r = Run::new();
    r.seg(0, S, SYN | ACK, 9000, 1001, 0);
    r.seg(10, S, ACK, 9001, 1444, 100);
    r.seg(20, S, ACK, 9101, 1445, 0);
    r.seg(30, S, ACK, 9101, 1500, 0);
    let c = &r.finish()[0];
    assert_eq!(c.client.closed_ns(), None);
}
