//! Handshakes and roles: Fast Open, reordered SYN-ACKs, SYNs sent again, roles without a handshake.

use super::*;

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
fn two_syn_acks_with_different_isns_the_client_takes_the_one_it_acknowledges() {
    // KakaoTalk_talk.pcap (nDPI) frames 17-28: the SYN sent three times, answered by two
    // SYN-ACKs 0.7 ms apart with ISNs 9000 and 70000; the client acknowledges 9001, and the
    // server's data begins there. Its sequence space is the first SYN-ACK's: the data is new,
    // not resent, and the handshake completed with the client's ACK.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(400, C, SYN, 1000, 0, 0);
    r.seg(2400, S, SYN | ACK, 9000, 1001, 0);
    r.seg(2401, S, SYN | ACK, 70000, 1001, 0);
    r.seg(2408, C, ACK, 1001, 9001, 0);
    r.seg(2410, C, ACK | PSH, 1001, 9001, 600);
    r.seg(3700, S, ACK | PSH, 9001, 1601, 206);
    let done = r.finish();
    assert_eq!(done.len(), 1, "{done:?}");
    let c = &done[0];
    assert_eq!(c.server.isn(), Some(Seq(9000)));
    assert_eq!(c.handshake.ack.map(|a| a.frame()), Some(5));
    assert_eq!(c.server.unique_bytes, 206);
    assert_eq!(c.server.retrans_segments(), 0);
    // The client acknowledging the later SYN-ACK keeps it.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(20, S, SYN | ACK, 9000, 1001, 0);
    r.seg(21, S, SYN | ACK, 70000, 1001, 0);
    r.seg(28, C, ACK, 1001, 70001, 0);
    r.seg(40, S, ACK | PSH, 70001, 1001, 206);
    let c = &r.finish()[0];
    assert_eq!(c.server.isn(), Some(Seq(70000)));
    assert_eq!(c.server.retrans_segments(), 0);
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
fn syn_acks_sent_again_before_the_ack_are_kept_and_time_no_round_trip() {
    // Captured at the server: SYN, SYN-ACK (lost on the way), the SYN again 1 s later, the
    // SYN-ACK again, the client's ACK 20 ms after it. The ACK answered the second SYN-ACK
    // (frame 4): the client's leg is 20 ms, and the handshake times no round trip.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(0, S, SYN | ACK, 5000, 1001, 0);
    r.seg(1000, C, SYN, 1000, 0, 0);
    r.seg(1000, S, SYN | ACK, 5000, 1001, 0);
    r.seg(1020, C, ACK, 1001, 5001, 0);
    let c = &r.finish()[0];
    assert_eq!(c.handshake.syn_ack.map(|a| a.frame()), Some(2));
    assert_eq!(
        c.handshake.syn_acks_again().map(|(n, a)| (n, a.frame())),
        Some((1, 4))
    );
    assert!(c.answer_lost());
    assert_eq!(c.handshake_rtt_ns(), None);
    assert_eq!(c.syn_ack_to_ack_ns(), Some(20 * MS));
    // A copy of the SYN-ACK a millisecond later (no ID to tell it apart) lost nothing: the
    // round trip is timed as usual.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(10, S, SYN | ACK, 5000, 1001, 0);
    r.seg(11, S, SYN | ACK, 5000, 1001, 0);
    r.seg(20, C, ACK, 1001, 5001, 0);
    let c = &r.finish()[0];
    assert!(!c.answer_lost());
    assert_eq!(c.handshake_rtt_ns(), Some(20 * MS));
    // A SYN-ACK sent again after the client's ACK (the accept queue's case) is not kept here.
    let mut r = Run::new();
    r.seg(0, C, SYN, 1000, 0, 0);
    r.seg(10, S, SYN | ACK, 5000, 1001, 0);
    r.seg(20, C, ACK, 1001, 5001, 0);
    r.seg(1010, S, SYN | ACK, 5000, 1001, 0);
    let c = &r.finish()[0];
    assert_eq!(c.handshake.syn_acks_again(), None);
    assert_eq!(c.handshake_rtt_ns(), Some(20 * MS));
}
