//! Decoder tests on frames built byte by byte. Each builder documents the layout it writes.

use super::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A 20-byte TCP header plus `opts` (padded to a word) from port 40000 to 80.
fn tcp_header(seq: u32, ack: u32, flags: u8, opts: &[u8]) -> Vec<u8> {
    let mut o = opts.to_vec();
    while o.len() % 4 != 0 {
        o.push(0);
    }
    let doff = (20 + o.len()) / 4;
    let mut t = Vec::new();
    t.extend_from_slice(&40000u16.to_be_bytes());
    t.extend_from_slice(&80u16.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.push((doff as u8) << 4);
    t.push(flags);
    t.extend_from_slice(&1000u16.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    t.extend_from_slice(&o);
    t
}

/// IPv4 header (no options unless `opts`) with total length covering `tcp` + `payload`.
fn ipv4(tcp: &[u8], payload: usize, frag: u16, opts: &[u8]) -> Vec<u8> {
    let ihl = 20 + opts.len();
    let total = (ihl + tcp.len() + payload) as u16;
    let mut p = vec![0x40 | (ihl / 4) as u8, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34]);
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    p.extend_from_slice(opts);
    p.extend_from_slice(tcp);
    p.extend(std::iter::repeat_n(0xAB, payload));
    p
}

/// IPv6 header followed by the given extension headers (each already encoded, with its
/// next-header byte first) and TCP.
fn ipv6(first_next: u8, ext: &[u8], tcp: &[u8], payload: usize) -> Vec<u8> {
    let plen = (ext.len() + tcp.len() + payload) as u16;
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&plen.to_be_bytes());
    p.push(first_next);
    p.push(57); // hop limit
    p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    p.extend_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets());
    p.extend_from_slice(ext);
    p.extend_from_slice(tcp);
    p.extend(std::iter::repeat_n(0xCD, payload));
    p
}

fn ether(ethertypes: &[u16], ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for (i, et) in ethertypes.iter().enumerate() {
        f.extend_from_slice(&et.to_be_bytes());
        if i + 1 < ethertypes.len() {
            f.extend_from_slice(&[0x00, 0x64]); // TCI: VLAN 100
        }
    }
    f.extend_from_slice(ip);
    f
}

fn tcp_of(r: Result<Decoded, Malformed>) -> TcpSegment {
    match r {
        Ok(Decoded::Tcp(s)) => s,
        other => panic!("expected TCP, got {other:?}"),
    }
}

const SYN_OPTS: [u8; 20] = [
    2, 4, 0x05, 0xb4, // MSS 1460
    4, 2, // SACK permitted
    8, 10, 0, 0, 0, 1, 0, 0, 0, 0, // timestamps 1, 0
    1, // NOP
    3, 3, 7, // window scale 7
];

#[test]
fn ethernet_ipv4_syn_with_options() {
    let f = ether(
        &[0x0800],
        &ipv4(
            &tcp_header(100, 0, TcpFlags::SYN, &SYN_OPTS),
            0,
            0x4000,
            &[],
        ),
    );
    let s = tcp_of(decode(LinkType::ETHERNET, &f, f.len() as u32));
    assert_eq!(s.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(s.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!((s.src_port, s.dst_port), (40000, 80));
    assert_eq!(s.seq, Seq(100));
    assert!(s.flags.syn() && !s.flags.ack());
    assert_eq!(s.options.mss, Some(1460));
    assert_eq!(s.options.window_scale, Some(7));
    assert!(s.options.sack_permitted);
    assert_eq!(s.options.timestamp, Some((1, 0)));
    assert_eq!(s.ip_id, 0x1234);
    assert_eq!(s.ttl, 64);
    assert!(!s.first_fragment);
}

#[test]
fn stacked_vlan_tags_are_walked() {
    let ip = ipv4(&tcp_header(1, 2, TcpFlags::ACK, &[]), 10, 0, &[]);
    let f = ether(&[0x88a8, 0x8100, 0x0800], &ip);
    let s = tcp_of(decode(LinkType::ETHERNET, &f, f.len() as u32));
    assert_eq!(s.payload_len, 10);
    // Non-IP inside the tags is skipped, not malformed.
    let arp = ether(&[0x8100, 0x0806], &[0; 28]);
    assert_eq!(
        decode(LinkType::ETHERNET, &arp, arp.len() as u32),
        Ok(Decoded::Skipped(Skip::NotIp))
    );
}

#[test]
fn payload_length_comes_from_ip_not_caplen() {
    let ip = ipv4(
        &tcp_header(1, 2, TcpFlags::ACK | TcpFlags::PSH, &[]),
        1448,
        0,
        &[],
    );
    let f = ether(&[0x0800], &ip);
    let orig = f.len() as u32;
    for snap in [54usize, 64, 96, f.len()] {
        let s = tcp_of(decode(LinkType::ETHERNET, &f[..snap], orig));
        assert_eq!(s.payload_len, 1448, "snaplen {snap}");
    }
}

#[test]
fn every_truncation_length_is_safe_and_consistent() {
    let tcp = tcp_header(7, 9, TcpFlags::ACK, &SYN_OPTS);
    let ip4 = ipv4(&tcp, 100, 0, &[]);
    let hbh = [6u8, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop, next = TCP, PadN
    let ip6 = ipv6(0, &hbh, &tcp, 100);
    for (link, frame) in [
        (LinkType::ETHERNET, ether(&[0x8100, 0x0800], &ip4)),
        (LinkType::RAW, ip6.clone()),
        (LinkType::IPV6, ip6),
    ] {
        let full = tcp_of(decode(link, &frame, frame.len() as u32));
        for cut in 0..frame.len() {
            match decode(link, &frame[..cut], frame.len() as u32) {
                Ok(Decoded::Tcp(s)) => {
                    // Whatever survives the cut agrees with the full decode.
                    assert_eq!((s.seq, s.ack, s.payload_len), (full.seq, full.ack, 100));
                    assert_eq!(s.flags, full.flags);
                }
                Ok(Decoded::Skipped(k)) => panic!("cut {cut}: skipped {k:?}"),
                Err(_) => {}
            }
        }
    }
}

proptest! {
    /// Random bytes never panic the decoder, over every link type (the first byte biased
    /// toward IPv4 or IPv6 so that the deep paths are reached).
    #[test]
    fn garbage_never_panics(
        ip6 in any::<bool>(),
        mut buf in prop::collection::vec(any::<u8>(), 0..128),
        orig in 0u32..4000,
    ) {
        if let Some(b) = buf.first_mut() {
            *b = if ip6 { 0x60 } else { 0x45 };
        }
        for link in [0, 1, 101, 108, 113, 228, 229, 276, 999] {
            let _ = decode(LinkType(link), &buf, orig);
        }
    }

    /// Frames decoded one after the other into one reused segment (as the readers do) give
    /// what a fresh decode of each gives.
    #[test]
    fn decoding_random_frames_into_a_used_segment(
        frames in prop::collection::vec(tcp_ish_frame(), 1..16),
    ) {
        let mut seg = TcpSegment::EMPTY;
        for (buf, orig) in &frames {
            let r = decode_into(LinkType::RAW, buf, *orig, &mut seg);
            match decode(LinkType::RAW, buf, *orig) {
                Ok(Decoded::Tcp(want)) => {
                    prop_assert_eq!(r, Ok(None));
                    prop_assert_eq!(&seg, &want);
                }
                Ok(Decoded::Skipped(s)) => prop_assert_eq!(r, Ok(Some(s))),
                Err(e) => prop_assert_eq!(r, Err(e)),
            }
        }
    }
}

/// 40 to 95 random bytes made mostly a well-formed IPv4 or IPv6 TCP header, so that most
/// decode as TCP (one in three IPv6), with an original length up to 63 bytes longer.
fn tcp_ish_frame() -> impl Strategy<Value = (Vec<u8>, u32)> {
    (0u8..3, prop::collection::vec(any::<u8>(), 40..96), 0u32..64).prop_map(
        |(kind, mut buf, extra)| {
            if kind == 0 {
                buf[0] = 0x60;
                buf[6] = 6; // next header: TCP
            } else {
                buf[0] = 0x45;
                buf[2..4].copy_from_slice(&0u16.to_be_bytes()); // length from the frame
                buf[6] = 0x40 | (buf[6] & 0x20); // DF, sometimes MF, offset 0
                buf[7] = 0;
                buf[9] = 6; // protocol: TCP
            }
            let orig = buf.len() as u32 + extra;
            (buf, orig)
        },
    )
}

/// The frames of `tcp_ish_frame` are mostly TCP: the property above tests the decoder's
/// TCP paths, not only its errors.
#[test]
fn tcp_ish_frames_are_mostly_tcp() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut tcp = 0;
    for _ in 0..1000 {
        let Ok(tree) = tcp_ish_frame().new_tree(&mut runner) else {
            continue;
        };
        let (buf, orig) = tree.current();
        tcp += usize::from(matches!(
            decode(LinkType::RAW, &buf, orig),
            Ok(Decoded::Tcp(_))
        ));
    }
    assert!(tcp > 200, "only {tcp} of 1000 frames were TCP");
}

#[test]
fn ipv6_extension_headers_are_walked() {
    let tcp = tcp_header(5, 6, TcpFlags::ACK, &[]);
    // hop-by-hop -> destination options -> routing (type 0 with no addresses) -> TCP
    let mut ext = vec![60u8, 0, 1, 4, 0, 0, 0, 0]; // HBH, next = dest opts
    ext.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]); // dest opts, next = routing
    ext.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]); // routing, next = TCP
    let p = ipv6(0, &ext, &tcp, 33);
    let s = tcp_of(decode(LinkType::IPV6, &p, p.len() as u32));
    assert_eq!(s.payload_len, 33);
    assert_eq!(s.src, IpAddr::V6(Ipv6Addr::LOCALHOST));
    assert_eq!(s.ttl, 57, "the hop limit");
    // First fragment (offset 0, M=1) carries TCP; a later fragment is skipped.
    let first = ipv6(44, &[6, 0, 0, 1, 0, 0, 0, 1], &tcp, 8);
    assert!(tcp_of(decode(LinkType::RAW, &first, first.len() as u32)).first_fragment);
    let later = ipv6(44, &[6, 0, 0x05, 0x00, 0, 0, 0, 1], &[0; 16], 0);
    assert_eq!(
        decode(LinkType::RAW, &later, later.len() as u32),
        Ok(Decoded::Skipped(Skip::Fragment))
    );
    // ESP stops the walk.
    let esp = ipv6(50, &[0; 16], &[], 0);
    assert_eq!(
        decode(LinkType::RAW, &esp, esp.len() as u32),
        Ok(Decoded::Skipped(Skip::Ipv6Opaque))
    );
    // An extension header longer than the payload is malformed.
    let bad = ipv6(0, &[6, 200, 0, 0, 0, 0, 0, 0], &tcp, 0);
    assert_eq!(
        decode(LinkType::RAW, &bad, bad.len() as u32),
        Err(Malformed::Ipv6ExtensionHeader)
    );
}

#[test]
fn ipv4_options_and_fragments() {
    let tcp = tcp_header(1, 1, TcpFlags::ACK, &[]);
    let with_opts = ipv4(&tcp, 4, 0, &[1, 1, 1, 0]); // NOP NOP NOP EOL
    let s = tcp_of(decode(LinkType::RAW, &with_opts, with_opts.len() as u32));
    assert_eq!(s.payload_len, 4);
    let first = ipv4(&tcp, 4, 0x2000, &[]);
    assert!(tcp_of(decode(LinkType::IPV4, &first, first.len() as u32)).first_fragment);
    let later = ipv4(&tcp, 4, 0x0010, &[]);
    assert_eq!(
        decode(LinkType::IPV4, &later, later.len() as u32),
        Ok(Decoded::Skipped(Skip::Fragment))
    );
}

#[test]
fn lying_lengths_are_malformed() {
    let tcp = tcp_header(1, 1, TcpFlags::ACK, &[]);
    let mut p = ipv4(&tcp, 0, 0, &[]);
    p[2..4].copy_from_slice(&9000u16.to_be_bytes()); // total length beyond the frame
    assert_eq!(
        decode(LinkType::RAW, &p, p.len() as u32),
        Err(Malformed::IpLengthExceedsFrame)
    );
    p[2..4].copy_from_slice(&10u16.to_be_bytes());
    assert_eq!(
        decode(LinkType::RAW, &p, p.len() as u32),
        Err(Malformed::IpLengthTooShort)
    );
    let mut p = ipv4(&tcp, 0, 0, &[]);
    p[20 + 12] = 0xF0; // data offset 60 > segment
    assert_eq!(
        decode(LinkType::RAW, &p, p.len() as u32),
        Err(Malformed::TcpDataOffset)
    );
    let mut p = ipv4(&tcp, 0, 0, &[]);
    p[0] = 0x44; // IHL 16 bytes
    assert_eq!(
        decode(LinkType::RAW, &p, p.len() as u32),
        Err(Malformed::IpHeaderLength)
    );
    // TSO: total length 0 means "the frame's length".
    let mut p = ipv4(&tcp, 500, 0, &[]);
    p[2..4].copy_from_slice(&[0, 0]);
    assert_eq!(
        tcp_of(decode(LinkType::RAW, &p, p.len() as u32)).payload_len,
        500
    );
}

#[test]
fn cooked_and_loopback_link_layers() {
    let ip = ipv4(&tcp_header(3, 4, TcpFlags::ACK, &[]), 0, 0, &[]);
    let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    tcp_of(decode(LinkType::LINUX_SLL, &sll, sll.len() as u32));
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
    ];
    sll2.extend_from_slice(&ip);
    tcp_of(decode(LinkType::LINUX_SLL2, &sll2, sll2.len() as u32));
    for af in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
        let mut null = af.to_vec();
        null.extend_from_slice(&ip);
        tcp_of(decode(LinkType::NULL, &null, null.len() as u32));
    }
    let mut lo = 2u32.to_be_bytes().to_vec();
    lo.extend_from_slice(&ip);
    tcp_of(decode(LinkType::LOOP, &lo, lo.len() as u32));
    assert_eq!(
        decode(LinkType(147), &ip, ip.len() as u32),
        Ok(Decoded::Skipped(Skip::LinkType(147)))
    );
}

#[test]
fn sack_blocks_and_bad_option_lengths() {
    let mut opts = vec![1, 1, 5, 18];
    for v in [10u32, 20, 30, 40] {
        opts.extend_from_slice(&v.to_be_bytes());
    }
    let o = tcp::parse_options(&opts);
    assert_eq!(o.sack_count, 2);
    assert_eq!(o.sack_first, (Seq(10), Seq(20)), "the first block's edges");
    // Five blocks do not fit in 40 bytes of options; a longer SACK option counts four.
    let mut long = vec![5, 42];
    long.extend_from_slice(&[0; 40]);
    assert_eq!(tcp::parse_options(&long).sack_count, 4);
    // A SACK option whose length is not a whole number of blocks is ignored.
    assert_eq!(
        tcp::parse_options(&[5, 9, 0, 0, 0, 0, 0, 0, 0]).sack_count,
        0
    );
    // A zero length would loop forever in a naive parser; here it stops.
    assert_eq!(tcp::parse_options(&[2, 0, 5, 0]), TcpOptions::default());
    // An option running past the end is ignored.
    assert_eq!(tcp::parse_options(&[2, 4, 5]).mss, None);
}

#[test]
fn the_usual_nop_nop_timestamp_layout_decodes_like_any_other() {
    // NOP, NOP, TS (Linux's layout, decoded by a shortcut) and TS, NOP, NOP (the loop) carry
    // the same values; a 12-byte block that only looks similar takes the loop.
    let fast = crate::tcp::parse_options(&[1, 1, 8, 10, 0, 0, 1, 2, 0xde, 0xad, 0xbe, 0xef]);
    let slow = crate::tcp::parse_options(&[8, 10, 0, 0, 1, 2, 0xde, 0xad, 0xbe, 0xef, 1, 1]);
    assert_eq!(fast, slow);
    assert_eq!(fast.timestamp, Some((258, 0xdead_beef)));
    let other = crate::tcp::parse_options(&[1, 1, 8, 9, 0, 0, 1, 2, 0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(
        other.timestamp, None,
        "a timestamp option of the wrong length is ignored"
    );
}

/// The readers decode every frame into one reused segment (`decode_into`): each field must be
/// written for each TCP frame, or a field of the frame before (a SACK block, an MSS, an IPv6
/// address, a fragment flag) would carry over. Every ordered pair of these frames, decoded one
/// after the other into one segment, gives what `decode` gives for the second alone; then
/// random frames do, in a row.
#[test]
fn decoding_into_a_used_segment_leaves_nothing_of_it() {
    let mut sack = vec![1, 1, 5, 26];
    for v in [10u32, 20, 30, 40, 50, 60] {
        sack.extend_from_slice(&v.to_be_bytes());
    }
    let syn = ether(
        &[0x0800],
        &ipv4(
            &tcp_header(100, 0, TcpFlags::SYN, &SYN_OPTS),
            0,
            0x4000,
            &[],
        ),
    );
    let sacked = ipv4(&tcp_header(7, 9, TcpFlags::ACK, &sack), 0, 0x2000, &[]);
    let plain = ipv4(
        &tcp_header(1, 2, TcpFlags::ACK | TcpFlags::PSH, &[]),
        100,
        0,
        &[],
    );
    let v6_first_fragment = ipv6(
        44,
        &[6, 0, 0, 1, 0, 0, 0, 1],
        &tcp_header(5, 6, 0x11, &[]),
        8,
    );
    // Options cut off by the snaplen: none are read.
    let mut cut = syn.clone();
    cut.truncate(14 + 20 + 22);
    let frames: Vec<(LinkType, &[u8], u32)> = vec![
        (LinkType::ETHERNET, &syn, syn.len() as u32),
        (LinkType::RAW, &sacked, sacked.len() as u32),
        (LinkType::RAW, &plain, plain.len() as u32),
        (
            LinkType::RAW,
            &v6_first_fragment,
            v6_first_fragment.len() as u32,
        ),
        (LinkType::ETHERNET, &cut, syn.len() as u32),
    ];
    for a in &frames {
        for b in &frames {
            let mut seg = TcpSegment::EMPTY;
            assert_eq!(decode_into(a.0, a.1, a.2, &mut seg), Ok(None));
            assert_eq!(decode_into(b.0, b.1, b.2, &mut seg), Ok(None));
            assert_eq!(Ok(Decoded::Tcp(seg)), decode(b.0, b.1, b.2));
        }
    }
}

/// The wrappers of PPP, Solaris ipnet, Linux NFLOG and Apple PKTAP, each
/// built by hand around the same IPv4 (and for some IPv6) segment, decode to that segment.
#[test]
fn ppp_ipnet_nflog_and_pktap() {
    let tcp = tcp_header(7, 9, TcpFlags::ACK, &[]);
    let ip4 = ipv4(&tcp, 10, 0, &[]);
    let ip6 = ipv6(6, &[], &tcp, 10);
    let check = |link: LinkType, frame: &[u8]| {
        let s = tcp_of(decode(link, frame, frame.len() as u32));
        assert_eq!(
            (s.src_port, s.dst_port, s.seq.0, s.payload_len),
            (40000, 80, 7, 10)
        );
    };
    // PPP: with address and control, 2-byte protocol; without them; compressed (1 byte).
    for head in [&[0xff, 0x03, 0x00, 0x21][..], &[0x00, 0x21], &[0x21]] {
        let mut f = head.to_vec();
        f.extend_from_slice(&ip4);
        check(LinkType::PPP, &f);
    }
    let mut f = vec![0xff, 0x03, 0x00, 0x57];
    f.extend_from_slice(&ip6);
    check(LinkType::PPP, &f);
    let mut lcp = vec![0xff, 0x03, 0xc0, 0x21];
    lcp.extend_from_slice(&[1, 1, 0, 4]);
    assert_eq!(
        decode(LinkType::PPP, &lcp, lcp.len() as u32),
        Ok(Decoded::Skipped(Skip::NotIp))
    );
    // ipnet: version 1, family 2 / 26, then 22 bytes of the rest of the header.
    for (family, ip) in [(2u8, &ip4), (26, &ip6)] {
        let mut f = vec![1, family];
        f.extend(std::iter::repeat_n(0, 22));
        f.extend_from_slice(ip);
        check(LinkType::IPNET, &f);
    }
    // NFLOG: a prefix TLV ("x\0", padded), then the payload TLV; lengths little-endian (an
    // x86 capture) and big-endian.
    for little in [true, false] {
        let u16b = |v: u16| {
            if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let mut f = vec![2, 0, 0, 0];
        f.extend_from_slice(&u16b(6));
        f.extend_from_slice(&u16b(10)); // NFULA_PREFIX
        f.extend_from_slice(&[b'x', 0, 0, 0]);
        f.extend_from_slice(&u16b(4 + ip4.len() as u16));
        f.extend_from_slice(&u16b(9));
        f.extend_from_slice(&ip4);
        check(LinkType::NFLOG, &f);
    }
    // PKTAP: a 108-byte header naming DLT_EN10MB, then an Ethernet frame.
    let mut f = 108u32.to_le_bytes().to_vec();
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend(std::iter::repeat_n(0, 96));
    f.extend_from_slice(&ether(&[0x0800], &ip4));
    check(LinkType::PKTAP, &f);
    // Cut anywhere, none of them panics.
    for link in [
        LinkType::PPP,
        LinkType::IPNET,
        LinkType::NFLOG,
        LinkType::PKTAP,
    ] {
        for n in 0..f.len() {
            let _ = decode(link, &f[..n], n as u32);
        }
    }
}

#[test]
fn a_multipath_tcp_option_is_seen_whatever_its_subtype() {
    // MP_CAPABLE on a SYN-ACK (kind 30, length 12: subtype 0 and version 1 in the first body
    // byte, flags, the 64-bit key), after MSS and NOP NOP SACK-permitted; and a DSS (subtype 2,
    // length 8) beside the usual timestamps.
    let mut syn_ack = vec![2, 4, 0x05, 0xb4, 1, 1, 4, 2, 30, 12, 0x01, 0x81];
    syn_ack.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let o = tcp::parse_options(&syn_ack);
    assert!(o.mptcp && o.sack_permitted && o.mss == Some(1460));
    let dss = [
        1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 30, 8, 0x20, 0x01, 0, 0, 0, 9,
    ];
    let o = tcp::parse_options(&dss);
    assert!(o.mptcp && o.timestamp == Some((1, 2)));
    // Without it: false.
    assert!(!tcp::parse_options(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]).mptcp);
}

#[test]
fn a_fast_open_cookie_is_seen_in_either_kind() {
    // tfo.pcap frame 27's options as captured (Linux 6.18): MSS, SACK-permitted, timestamps,
    // NOP, window scale, Fast Open (kind 34, length 10: an 8-byte cookie), NOP NOP.
    let mut syn = vec![
        2, 4, 0xff, 0xd7, 4, 2, 8, 10, 0x80, 0x95, 0xe3, 0xa7, 0, 0, 0, 0,
    ];
    syn.extend_from_slice(&[1, 3, 3, 10, 34, 10, 0x7f, 0x1c, 0xc6, 0x21, 0x5d, 0x65]);
    syn.extend_from_slice(&[0xb7, 0x98, 1, 1]);
    let o = tcp::parse_options(&syn);
    assert!(o.tfo_cookie && o.mss == Some(0xffd7) && o.window_scale == Some(10));
    assert_eq!(o.timestamp, Some((0x8095_e3a7, 0)));
    // A cookie request (kind 34, length 2: no cookie) is not a cookie.
    assert!(!tcp::parse_options(&[34, 2, 1, 1]).tfo_cookie);
    // The experimental kind 254 with Fast Open's magic 0xF989 and a 4-byte cookie (RFC 7413
    // section 4.1.1 and RFC 6994), and the same kind with another magic: not Fast Open.
    assert!(tcp::parse_options(&[254, 8, 0xf9, 0x89, 1, 2, 3, 4]).tfo_cookie);
    assert!(!tcp::parse_options(&[254, 8, 0x12, 0x34, 1, 2, 3, 4]).tfo_cookie);
}
