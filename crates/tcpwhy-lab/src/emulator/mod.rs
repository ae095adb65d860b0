//! # The router's link emulator: delay and drop packets in user space through NFQUEUE
//!
//! The lab's kernel has no `netem` qdisc, so the router namespace sends every forwarded packet
//! to an NFQUEUE (`iptables-legacy -A FORWARD -j NFQUEUE --queue-num Q`) and this module holds
//! each one for the configured one-way delay before giving the kernel its verdict (ACCEPT), or
//! drops it at once (DROP) when a [`DropRule`] says so.
//!
//! ## Design
//!
//! * A pure core that never reads a clock: [`DelayLine`] (FIFO of release times), [`Dropper`]
//!   (rules with skip/count counters), [`LatencyHistogram`], and the netlink message
//!   encoder/parser ([`parse_datagram`]). Time is always passed in, so all of it is unit tested.
//! * A thin I/O loop ([`run`]): one nonblocking netlink socket, `ppoll` with a nanosecond timeout
//!   until the next release (at most [`MAX_WAIT`]), a batch of receives, then one `send` holding
//!   every verdict of the iteration: the DROPs, then a single `NFQNL_MSG_VERDICT_BATCH` ACCEPT
//!   that releases every due packet at once (the kernel releases all queued ids up to the given
//!   one, and since releases are FIFO in arrival order those are exactly the due packets).
//!
//! ## Why not the `nfq` crate
//!
//! `nfq` 0.2.5 does not expose its socket's file descriptor (no `AsFd`/`AsRawFd`), so it
//! cannot be polled with a timeout without `unsafe`, which this file forbids. It also keeps one
//! receive buffer alive per held message (an `Arc<Vec<u32>>` of page size: thousands of held
//! packets would pin megabytes) and sends one verdict syscall per packet. The NFQUEUE netlink
//! protocol needed here is small (one config message, packet messages, verdicts), so it is
//! spoken directly over a `nix` netlink socket. Like `nfq` (which only attaches
//! `NFQA_PAYLOAD` to a verdict when the payload was modified), our verdicts never carry a
//! payload, so the 128-byte copy range never truncates a forwarded packet: the kernel keeps the
//! full packet and only copies headers to us.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags};
use nix::sys::socket::{self, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};
use tcpwhy_wire::{Decoded, LinkType, TcpSegment};

mod histogram;
mod io_loop;
mod netlink;
mod policy;
pub use histogram::*;
pub use io_loop::*;
pub use netlink::*;
pub use policy::*;

/// Longest the loop sleeps before looking at `stop` again.
pub const MAX_WAIT: Duration = Duration::from_millis(20);
/// Bytes of each packet the kernel copies to us: IPv4 with options (60) plus TCP with options
/// (60) fits; IPv6 with long extension headers may not, and is then forwarded undecoded.
pub const COPY_RANGE: u32 = 128;
/// Kernel queue length (the default, 1024, overflows with a 25 ms delay at ~40 k packets/s).
pub const QUEUE_MAX_LEN: u32 = 65536;
/// Socket receive buffer asked for (SO_RCVBUFFORCE, falling back to SO_RCVBUF).
const RCVBUF_BYTES: usize = 32 << 20;
/// Datagrams received per loop iteration before due packets are released again.
const RECV_BATCH: usize = 64;
/// Below this much time before the next release the loop spins (nonblocking receives)
/// instead of sleeping, so releases are not late by the scheduler's wake-up latency.
const SPIN: Duration = Duration::from_micros(100);
/// Verdict bytes buffered before a send is forced (kernel limit is the socket's sndbuf).
const VERDICT_FLUSH_BYTES: usize = 16 << 10;
/// Receive buffer: one netlink message per datagram, ~200 bytes with a 128-byte copy range.
const RECV_BUF_BYTES: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use tcpwhy_wire::TcpFlags;

    const C: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 123, 1, 2));
    const S: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 123, 2, 2));

    fn tcp_header(flags: u8) -> Vec<u8> {
        let mut t = vec![
            0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff,
        ];
        t.extend_from_slice(&[0, 0, 0, 0]);
        t
    }

    /// IPv4 + TCP with `payload` bytes of data (all present in the buffer).
    fn v4(src: IpAddr, dst: IpAddr, flags: u8, payload: usize) -> Vec<u8> {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) else {
            panic!("v4 addresses")
        };
        let total = (40 + payload) as u16;
        let mut p = vec![0x45, 0];
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
        p.extend_from_slice(&s.octets());
        p.extend_from_slice(&d.octets());
        p.extend_from_slice(&tcp_header(flags));
        p.extend(std::iter::repeat_n(0xAB, payload));
        p
    }

    fn v6(src: Ipv6Addr, dst: Ipv6Addr, flags: u8, payload: usize) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
        p.extend_from_slice(&[6, 64]);
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(&tcp_header(flags));
        p.extend(std::iter::repeat_n(0xCD, payload));
        p
    }

    fn udp4() -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 123, 1, 2];
        p.extend_from_slice(&[10, 123, 2, 2, 0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0]);
        p
    }

    fn decide(d: &mut Dropper, p: &[u8]) -> bool {
        d.decide(p, p.len() as u32).0
    }

    const ACK: u8 = TcpFlags::ACK;
    const SYN: u8 = TcpFlags::SYN;
    const PSH: u8 = TcpFlags::PSH;

    #[test]
    fn delay_line_is_fifo_with_release_times() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut line = DelayLine::new(ms(25));
        assert_eq!(line.push(t0, 1), t0 + ms(25));
        assert_eq!(line.push(t0 + ms(1), 2), t0 + ms(26));
        assert_eq!(line.push(t0 + ms(1), 3), t0 + ms(26));
        assert_eq!(line.len(), 3);
        assert_eq!(line.next_release(), Some(t0 + ms(25)));
        assert_eq!(line.pop_due(t0 + ms(24)), None);
        assert_eq!(line.pop_due(t0 + ms(25)), Some((t0 + ms(25), 1)));
        assert_eq!(line.pop_due(t0 + ms(25)), None);
        assert_eq!(line.pop_due(t0 + ms(30)), Some((t0 + ms(26), 2)));
        assert_eq!(line.pop_due(t0 + ms(30)), Some((t0 + ms(26), 3)));
        assert!(line.is_empty());
        assert_eq!(line.next_release(), None);
    }

    #[test]
    fn delay_line_never_reorders() {
        // An arrival stamped earlier than the previous one (it cannot happen with a monotonic
        // clock, but the line must not depend on it) is released after its predecessor.
        let t0 = Instant::now();
        let mut line = DelayLine::new(Duration::from_millis(5));
        line.push(t0 + Duration::from_millis(2), 'a');
        assert_eq!(line.push(t0, 'b'), t0 + Duration::from_millis(7));
        let order: Vec<char> = std::iter::from_fn(|| line.pop_any().map(|(_, c)| c)).collect();
        assert_eq!(order, ['a', 'b']);
    }

    #[test]
    fn zero_delay_is_due_immediately() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(Duration::ZERO);
        line.push(t0, 7u32);
        assert_eq!(line.pop_due(t0), Some((t0, 7)));
    }

    #[test]
    fn drop_rule_skip_and_count() {
        let rule = DropRule {
            src: Some(S),
            min_payload: 1,
            max_payload: None,
            skip: 2,
            count: 2,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![rule]);
        let data = v4(S, C, ACK | PSH, 1000);
        let got: Vec<bool> = (0..6).map(|_| decide(&mut d, &data)).collect();
        assert_eq!(got, [false, false, true, true, false, false]);
        // Non-matching packets do not count.
        assert!(!decide(&mut d, &v4(C, S, ACK | PSH, 1000)));
        assert_eq!(d.matched(), &[6]);
    }

    #[test]
    fn drop_rule_count_zero_drops_all_further() {
        let rule = DropRule {
            skip: 1,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![rule]);
        let p = v4(C, S, ACK, 0);
        let got: Vec<bool> = (0..4).map(|_| decide(&mut d, &p)).collect();
        assert_eq!(got, [false, true, true, true]);
    }

    #[test]
    fn drop_rule_flags_and_payload() {
        let syn_only = DropRule {
            flags_all: SYN,
            flags_none: ACK,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![syn_only]);
        assert!(decide(&mut d, &v4(C, S, SYN, 0)));
        assert!(!decide(&mut d, &v4(S, C, SYN | ACK, 0)), "SYN-ACK has ACK");
        assert!(!decide(&mut d, &v4(C, S, ACK, 0)), "no SYN");

        let data = DropRule {
            dst: Some(C),
            min_payload: 100,
            max_payload: None,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![data]);
        assert!(!decide(&mut d, &v4(S, C, ACK, 99)));
        assert!(decide(&mut d, &v4(S, C, ACK, 100)));
        assert!(!decide(&mut d, &v4(C, S, ACK, 100)), "wrong direction");
    }

    #[test]
    fn payload_length_comes_from_ip_header_when_copy_is_truncated() {
        let rule = DropRule {
            min_payload: 1000,
            max_payload: None,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![rule]);
        let full = v4(S, C, ACK, 1448);
        let cut = &full[..COPY_RANGE as usize];
        assert_eq!(d.decide(cut, full.len() as u32), (true, PacketKind::Tcp));
        // With the cut length only, it is not a valid packet: forwarded, never dropped.
        assert_eq!(
            d.decide(cut, cut.len() as u32),
            (false, PacketKind::Malformed)
        );
    }

    #[test]
    fn every_rule_counts_and_any_drops() {
        let first_syn = DropRule {
            flags_all: SYN,
            count: 1,
            ..DropRule::default()
        };
        let third_any = DropRule {
            skip: 2,
            count: 1,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![first_syn, third_any]);
        assert!(decide(&mut d, &v4(C, S, SYN, 0)));
        assert!(!decide(&mut d, &v4(C, S, SYN, 0)));
        assert!(decide(&mut d, &v4(C, S, ACK, 0)));
        assert!(!decide(&mut d, &v4(C, S, ACK, 0)));
        assert_eq!(d.matched(), &[2, 4]);
    }

    #[test]
    fn ipv6_rules() {
        let a = Ipv6Addr::new(0xfd00, 0x123, 1, 0, 0, 0, 0, 2);
        let b = Ipv6Addr::new(0xfd00, 0x123, 2, 0, 0, 0, 0, 2);
        let rule = DropRule {
            src: Some(IpAddr::V6(b)),
            flags_all: ACK,
            min_payload: 10,
            max_payload: None,
            ..DropRule::default()
        };
        let mut d = Dropper::new(vec![rule]);
        assert_eq!(
            d.decide(&v6(b, a, ACK, 10), 80),
            (true, PacketKind::Tcp),
            "v6 payload 10"
        );
        assert!(!decide(&mut d, &v6(a, b, ACK, 10)));
        assert!(!decide(&mut d, &v6(b, a, ACK, 9)));
        // A v4 rule address never matches a v6 packet.
        let mut d = Dropper::new(vec![DropRule {
            src: Some(S),
            ..DropRule::default()
        }]);
        assert!(!decide(&mut d, &v6(b, a, ACK, 10)));
    }

    #[test]
    fn non_tcp_and_malformed_are_never_dropped() {
        let mut d = Dropper::new(vec![DropRule::default()]);
        assert_eq!(d.decide(&udp4(), 28), (false, PacketKind::Other));
        for bad in [
            &[][..],
            &[0x45][..],
            &[0x70, 0, 0, 0][..],
            &v4(C, S, ACK, 0)[..30],
            &[0x4f; 60][..],
            &[0x60; 40][..],
        ] {
            assert_eq!(
                d.decide(bad, bad.len() as u32),
                (false, PacketKind::Malformed)
            );
        }
        // TCP header claims more data than the packet holds.
        let mut p = v4(C, S, ACK, 0);
        p[32] = 0xf0;
        assert!(!d.decide(&p, p.len() as u32).0);
        assert_eq!(d.matched(), &[0]);
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.max(), 100);
        h.record(1_000_000);
        assert_eq!(h.max(), 1_000_000);
        let p100 = h.quantile(1.0);
        assert!(p100 <= 1_000_000 && p100 > 980_000, "{p100}");
        for v in [127, 128, 129, 255, 256, 1 << 20, u64::MAX] {
            let lb = LatencyHistogram::lower_bound(LatencyHistogram::bucket(v));
            assert!(lb <= v && v - lb <= v / 64, "{v} -> {lb}");
        }
    }

    /// A packet message as the kernel writes it (header fields in host order).
    fn packet_msg(id: u32, data: &[u8], cap_len: Option<u32>) -> Vec<u8> {
        let mut m = Vec::new();
        let start = begin_msg(&mut m, NFQNL_MSG_PACKET, 0, 0, 0);
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&[0x08, 0x00, 2]); // hw_protocol, hook
        put_attr(&mut m, NFQA_PACKET_HDR, &hdr);
        put_attr(&mut m, 5, &3u32.to_be_bytes()); // NFQA_IFINDEX_INDEV
        put_attr(&mut m, NFQA_PAYLOAD, data);
        if let Some(c) = cap_len {
            put_attr(&mut m, NFQA_CAP_LEN, &c.to_be_bytes());
        }
        end_msg(&mut m, start);
        m
    }

    fn events(buf: &[u8]) -> Vec<NlEvent<'_>> {
        let mut v = Vec::new();
        parse_datagram(buf, |e| v.push(e));
        v
    }

    #[test]
    fn parses_packet_messages() {
        let pkt = v4(C, S, SYN, 0);
        let mut dgram = packet_msg(42, &pkt, None);
        dgram.extend(packet_msg(43, &pkt[..30], Some(1500)));
        let ev = events(&dgram);
        assert_eq!(
            ev,
            [
                NlEvent::Packet {
                    id: 42,
                    data: &pkt[..],
                    wire_len: 40
                },
                NlEvent::Packet {
                    id: 43,
                    data: &pkt[..30],
                    wire_len: 1500
                },
            ]
        );
    }

    #[test]
    fn parses_acks_and_errors() {
        let mut m = Vec::new();
        let start = begin_msg(&mut m, NLMSG_ERROR, 0, 9, 0);
        m.truncate(start + NLMSG_HDRLEN);
        m.extend_from_slice(&(-1i32).to_ne_bytes()); // -EPERM
        let mut orig = Vec::new();
        begin_msg(&mut orig, NFQNL_MSG_CONFIG, 5, 77, 0);
        m.extend_from_slice(&orig[..NLMSG_HDRLEN]);
        end_msg(&mut m, start);
        assert_eq!(events(&m), [NlEvent::Ack { seq: 77, errno: 1 }]);
    }

    #[test]
    fn parser_survives_garbage() {
        let pkt = v4(C, S, SYN, 0);
        let good = packet_msg(1, &pkt, None);
        for cut in 0..good.len() {
            let _ = events(&good[..cut]);
        }
        // Length field past the end, zero length, attribute lengths wrong.
        let mut bad = good.clone();
        bad[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert_eq!(events(&bad), [NlEvent::Garbage]);
        bad[0..4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(events(&bad), [NlEvent::Garbage]);
        let mut bad = good.clone();
        bad[NLMSG_HDRLEN + NFGEN_HDRLEN..][..2].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(events(&bad), [NlEvent::Garbage], "no packet header parsed");
        let mut bad = good.clone();
        bad[NLMSG_HDRLEN + NFGEN_HDRLEN..][..2].copy_from_slice(&0xffffu16.to_ne_bytes());
        assert_eq!(events(&bad), [NlEvent::Garbage]);
        // Pseudo-random bytes.
        let mut x = 0x12345678u32;
        for _ in 0..2000 {
            let mut b = vec![0u8; (x % 300) as usize];
            for byte in &mut b {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *byte = x as u8;
            }
            if b.len() >= 6 {
                b[4..6].copy_from_slice(&NFQNL_MSG_PACKET.to_ne_bytes());
            }
            parse_datagram(&b, |e| {
                if let NlEvent::Packet { id, data, wire_len } = e {
                    let mut d = Dropper::new(vec![DropRule::default()]);
                    let _ = (id, d.decide(data, wire_len));
                }
            });
        }
    }

    #[test]
    fn config_and_verdict_encoding() {
        let mut m = Vec::new();
        config_msg(&mut m, 1, 7, 128, 65536);
        assert_eq!(m.len() % 4, 0);
        assert_eq!(ne_u32(&m, 0), Some(m.len() as u32));
        assert_eq!(ne_u16(&m, 4), Some(NFQNL_MSG_CONFIG));
        assert_eq!(ne_u16(&m, 6), Some(NLM_F_REQUEST | NLM_F_ACK));
        assert_eq!(&m[18..20], &7u16.to_be_bytes());
        // First attribute: the BIND command.
        assert_eq!(&m[20..28], &[8, 0, 1, 0, NFQNL_CFG_CMD_BIND, 0, 0, 0]);
        // PARAMS: 5 bytes (be32 range + mode), padded.
        assert_eq!(ne_u16(&m, 28), Some(9));
        assert_eq!(&m[32..37], &[0, 0, 0, 128, NFQNL_COPY_PACKET]);

        let mut v = Verdicts {
            buf: Vec::new(),
            queue: 7,
            seq: 0,
        };
        v.drop_now(5);
        v.accept_up_to(9);
        assert_eq!(v.buf.len(), 64);
        assert_eq!(ne_u16(&v.buf, 4), Some(NFQNL_MSG_VERDICT));
        assert_eq!(&v.buf[24..32], &[0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(ne_u16(&v.buf, 36), Some(NFQNL_MSG_VERDICT_BATCH));
        assert_eq!(&v.buf[56..64], &[0, 0, 0, 1, 0, 0, 0, 9]);
    }

    #[test]
    fn engine_drops_at_once_and_batches_releases() {
        let t0 = Instant::now();
        let cfg = EmulatorConfig {
            queue: 3,
            delay: Duration::from_millis(10),
            drops: vec![DropRule {
                flags_all: SYN,
                count: 1,
                ..DropRule::default()
            }],
        };
        let mut e = Engine::new(&cfg);
        let mut out = Verdicts {
            buf: Vec::new(),
            queue: 3,
            seq: 0,
        };
        e.on_packet(1, &v4(C, S, SYN, 0), 40, t0, &mut out);
        assert_eq!(out.buf.len(), 32, "dropped at once");
        out.buf.clear();
        e.on_packet(2, &v4(C, S, SYN, 0), 40, t0, &mut out);
        e.on_packet(3, &udp4(), 28, t0 + Duration::from_millis(1), &mut out);
        e.on_packet(4, b"junk", 4, t0 + Duration::from_millis(2), &mut out);
        assert!(out.buf.is_empty());
        e.release_due(t0 + Duration::from_millis(11), &mut out);
        // One batch verdict up to id 3 (ids 2 and 3 due).
        assert_eq!(out.buf.len(), 32);
        assert_eq!(&out.buf[24..32], &[0, 0, 0, 1, 0, 0, 0, 3]);
        out.buf.clear();
        e.release_all(&mut out);
        assert_eq!(&out.buf[24..32], &[0, 0, 0, 1, 0, 0, 0, 4]);
        let s = e.finish();
        assert_eq!(
            (
                s.packets,
                s.dropped,
                s.forwarded,
                s.tcp,
                s.non_tcp,
                s.malformed
            ),
            (4, 1, 3, 2, 1, 1)
        );
        assert_eq!((s.max_held, s.released_early), (3, 1));
        assert_eq!((s.late_p50_us, s.late_max_us), (0, 1000));
    }

    #[test]
    fn proc_counters() {
        let text = "    0  12345     0 2   128     0     0        5  1\n    \
                    3  99999     4 2   128    17     2      100  1\n";
        assert_eq!(parse_queue_proc(text, 3, 99999), Some((17, 2)));
        assert_eq!(parse_queue_proc(text, 3, 1), None);
        assert_eq!(parse_queue_proc("garbage", 0, 0), None);
    }
}
