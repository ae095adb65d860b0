//! Every TCP socket of the current network namespace through sock_diag netlink (inet_diag,
//! with tcp_info and the congestion control name): what `ss -tni` shows, without running ss.
//! Replies are parsed with bounds checks: a short or malformed message is skipped, never
//! trusted (fields missing from an older kernel's shorter tcp_info read as absent).

use std::io;
use std::net::IpAddr;

pub const TCP_ESTABLISHED: u8 = 1;
pub const TCP_SYN_SENT: u8 = 2;
pub const TCP_TIME_WAIT: u8 = 6;
pub const TCP_LISTEN: u8 = 10;

/// Every state, as a dump's state mask.
pub const ALL_STATES: u32 = u32::MAX;

/// `idiag_timer`: which timer is pending (include/uapi/linux/inet_diag.h, net/ipv4/tcp_diag.c).
pub const TIMER_RETRANSMIT: u8 = 1;
/// The zero-window probe timer (`persist`): the peer's window is closed and data waits.
pub const TIMER_PROBE: u8 = 4;
/// A TIME-WAIT socket's timer; `expires_ms` is what is left of its 60 s.
pub const TIMER_TIME_WAIT: u8 = 3;

/// `tcpi_options` bit: the connection negotiated TCP timestamps (RFC 7323).
pub const TCPI_OPT_TIMESTAMPS: u8 = 1;

/// The parts of `struct tcp_info` the checks use (microseconds and milliseconds as the kernel
/// gives them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_retransmits`: consecutive timeouts of the segment (or SYN) at the head.
    pub retransmits: u8,
    /// `tcpi_probes`: unanswered zero-window (or keepalive) probes.
    pub probes: u8,
    /// `tcpi_backoff`: how many times the RTO (or probe interval) was doubled.
    pub backoff: u8,
    /// `tcpi_options`: TCPI_OPT_* bits (timestamps, SACK, window scale, ECN).
    pub options: u8,
    pub rto_us: u32,
    pub snd_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub rtt_us: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    /// `tcpi_notsent_bytes` (Linux >= 4.6; absent from a shorter tcp_info).
    pub notsent_bytes: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socket {
    pub state: u8,
    pub src: (IpAddr, u16),
    pub dst: (IpAddr, u16),
    /// `idiag_timer`: the pending timer (TIMER_*), 0 for none.
    pub timer: u8,
    /// Milliseconds until that timer fires (for TIME-WAIT: what is left of it).
    pub expires_ms: u32,
    /// LISTEN: the accept queue's length; others: bytes not yet read.
    pub rqueue: u32,
    /// LISTEN: the accept queue's limit (the backlog); others: bytes written and not yet
    /// acknowledged (in flight or not sent yet).
    pub wqueue: u32,
    pub info: Option<TcpInfo>,
    pub cong: Option<String>,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;

/// The dump request for one address family: the states in `states` (bit 1 << state), with
/// tcp_info and the congestion control.
pub fn request(family: u8, seq: u32, states: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(72);
    m.extend_from_slice(&72u32.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol (TCP), extensions, pad, states, sockid (zeros).
    m.push(family);
    m.push(6);
    m.push((1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1)));
    m.push(0);
    m.extend_from_slice(&states.to_ne_bytes());
    m.extend_from_slice(&[0u8; 48]);
    m
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(i..i + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// What one receive buffer held: sockets, and whether the dump is over (or failed).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub sockets: Vec<Socket>,
    pub done: bool,
    /// A netlink error (negative errno) ended the dump.
    pub error: Option<i32>,
    /// Messages too short or inconsistent to read.
    pub malformed: u32,
}

/// Parse one buffer of netlink messages.
pub fn parse(buf: &[u8]) -> Batch {
    let mut out = Batch::default();
    let mut off = 0usize;
    while off + 16 <= buf.len() {
        let (Some(len), Some(ty)) = (u32_at(buf, off), u16_at(buf, off + 4)) else {
            break;
        };
        let len = len as usize;
        if len < 16 || off + len > buf.len() {
            out.malformed += 1;
            break;
        }
        let body = &buf[off + 16..off + len];
        match ty {
            NLMSG_DONE => {
                out.done = true;
                return out;
            }
            NLMSG_ERROR => {
                out.error = Some(u32_at(body, 0).map_or(-1, |e| e as i32));
                out.done = true;
                return out;
            }
            SOCK_DIAG_BY_FAMILY => match socket(body) {
                Some(s) => out.sockets.push(s),
                None => out.malformed += 1,
            },
            _ => {}
        }
        off += (len + 3) & !3;
    }
    out
}

/// One `inet_diag_msg` and its attributes.
fn socket(b: &[u8]) -> Option<Socket> {
    if b.len() < 72 {
        return None;
    }
    let family = b[0];
    let state = b[1];
    let timer = b[2];
    let sport = u16::from_be_bytes([b[4], b[5]]);
    let dport = u16::from_be_bytes([b[6], b[7]]);
    let addr = |at: usize| -> Option<IpAddr> {
        let raw: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
        match family {
            2 => Some(IpAddr::from([raw[0], raw[1], raw[2], raw[3]])),
            10 => Some(IpAddr::from(raw)),
            _ => None,
        }
    };
    let (src, dst) = (addr(8)?, addr(24)?);
    let expires_ms = u32_at(b, 52)?;
    let rqueue = u32_at(b, 56)?;
    let wqueue = u32_at(b, 60)?;
    let mut s = Socket {
        state,
        src: (src, sport),
        dst: (dst, dport),
        timer,
        expires_ms,
        rqueue,
        wqueue,
        info: None,
        cong: None,
    };
    let mut off = 72;
    while off + 4 <= b.len() {
        let (Some(alen), Some(aty)) = (u16_at(b, off), u16_at(b, off + 2)) else {
            break;
        };
        let alen = alen as usize;
        if alen < 4 || off + alen > b.len() {
            break;
        }
        let data = &b[off + 4..off + alen];
        match aty {
            INET_DIAG_INFO => s.info = tcp_info(data),
            INET_DIAG_CONG => {
                let name: Vec<u8> = data.iter().copied().take_while(|c| *c != 0).collect();
                s.cong = String::from_utf8(name).ok().filter(|n| !n.is_empty());
            }
            _ => {}
        }
        off += (alen + 3) & !3;
    }
    Some(s)
}

/// `struct tcp_info` (include/uapi/linux/tcp.h) up to `tcpi_total_retrans` (offset 100), and
/// `tcpi_notsent_bytes` (offset 144) when the kernel's struct reaches it.
fn tcp_info(d: &[u8]) -> Option<TcpInfo> {
    Some(TcpInfo {
        retransmits: *d.get(2)?,
        probes: *d.get(3)?,
        backoff: *d.get(4)?,
        options: *d.get(5)?,
        rto_us: u32_at(d, 8)?,
        snd_mss: u32_at(d, 16)?,
        unacked: u32_at(d, 24)?,
        last_data_sent_ms: u32_at(d, 44)?,
        last_data_recv_ms: u32_at(d, 52)?,
        rtt_us: u32_at(d, 68)?,
        snd_ssthresh: u32_at(d, 76)?,
        snd_cwnd: u32_at(d, 80)?,
        total_retrans: u32_at(d, 100)?,
        notsent_bytes: u32_at(d, 144),
    })
}

/// Dump every TCP socket (IPv4 and IPv6) of the calling thread's network namespace.
pub fn dump() -> io::Result<(Vec<Socket>, u32)> {
    dump_states(ALL_STATES)
}

/// Dump the TCP sockets in the states of `states` (bit 1 << state; the kernel filters them,
/// so a dump of listeners alone stays cheap on a host with a million connections).
pub fn dump_states(states: u32) -> io::Result<(Vec<Socket>, u32)> {
    use nix::sys::socket::{
        recv, sendto, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
        SockType,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .map_err(|e| io::Error::other(format!("sock_diag netlink socket: {e}")))?;
    let kernel = NetlinkAddr::new(0, 0);
    let mut all = Vec::new();
    let mut malformed = 0;
    let mut buf = vec![0u8; 1 << 16];
    for (seq, family) in [(1u32, 2u8), (2, 10)] {
        sendto(
            fd.as_raw_fd(),
            &request(family, seq, states),
            &kernel,
            MsgFlags::empty(),
        )
        .map_err(|e| io::Error::other(format!("sock_diag request: {e}")))?;
        // Bounded: a dump of ten million sockets ends long before this.
        for _ in 0..1_000_000 {
            let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())
                .map_err(|e| io::Error::other(format!("sock_diag reply: {e}")))?;
            if n == 0 {
                break;
            }
            let b = parse(&buf[..n]);
            malformed += b.malformed;
            all.extend(b.sockets);
            if let Some(e) = b.error.filter(|e| *e != 0) {
                // IPv6 may be off in a namespace: that family has nothing to dump.
                if family == 10 {
                    break;
                }
                return Err(io::Error::other(format!("sock_diag: error {e}")));
            }
            if b.done {
                break;
            }
        }
    }
    Ok((all, malformed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply message built field by field: one IPv4 ESTABLISHED socket with tcp_info and
    /// "cubic", as the kernel lays it out.
    fn reply(state: u8, with_info: bool) -> Vec<u8> {
        let mut body = vec![0u8; 72];
        body[0] = 2; // AF_INET
        body[1] = state;
        body[2] = TIMER_PROBE;
        body[4..6].copy_from_slice(&40000u16.to_be_bytes());
        body[6..8].copy_from_slice(&80u16.to_be_bytes());
        body[8..12].copy_from_slice(&[10, 0, 0, 1]);
        body[24..28].copy_from_slice(&[10, 0, 0, 2]);
        body[52..56].copy_from_slice(&1234u32.to_ne_bytes());
        body[56..60].copy_from_slice(&3u32.to_ne_bytes());
        body[60..64].copy_from_slice(&128u32.to_ne_bytes());
        if with_info {
            let mut info = vec![0u8; 232];
            info[2..6].copy_from_slice(&[1, 2, 3, TCPI_OPT_TIMESTAMPS]);
            info[24..28].copy_from_slice(&9u32.to_ne_bytes());
            info[76..80].copy_from_slice(&250u32.to_ne_bytes());
            info[144..148].copy_from_slice(&4096u32.to_ne_bytes());
            info[8..12].copy_from_slice(&204_000u32.to_ne_bytes()); // rto
            info[16..20].copy_from_slice(&1448u32.to_ne_bytes());
            info[44..48].copy_from_slice(&3_000u32.to_ne_bytes()); // last data sent
            info[68..72].copy_from_slice(&50_000u32.to_ne_bytes()); // rtt
            info[80..84].copy_from_slice(&320u32.to_ne_bytes()); // cwnd
            info[100..104].copy_from_slice(&7u32.to_ne_bytes());
            body.extend_from_slice(&((4 + info.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
            body.extend_from_slice(&info);
            body.extend_from_slice(&10u16.to_ne_bytes());
            body.extend_from_slice(&INET_DIAG_CONG.to_ne_bytes());
            body.extend_from_slice(b"cubic\0\0\0"); // 6 bytes + padding
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&body);
        m
    }

    fn done() -> Vec<u8> {
        let mut m = 20u32.to_ne_bytes().to_vec();
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0u8; 14]);
        m
    }

    #[test]
    fn parses_sockets_info_and_congestion_control() {
        let mut buf = reply(TCP_ESTABLISHED, true);
        buf.extend(reply(TCP_TIME_WAIT, false));
        buf.extend(done());
        let b = parse(&buf);
        assert!(b.done);
        assert_eq!(b.malformed, 0);
        assert_eq!(b.sockets.len(), 2);
        let s = &b.sockets[0];
        assert_eq!(s.src, ("10.0.0.1".parse().unwrap(), 40000));
        assert_eq!(s.dst, ("10.0.0.2".parse().unwrap(), 80));
        assert_eq!((s.rqueue, s.wqueue), (3, 128));
        assert_eq!(s.cong.as_deref(), Some("cubic"));
        let i = s.info.unwrap();
        assert_eq!(
            (i.rto_us, i.rtt_us, i.snd_cwnd, i.last_data_sent_ms),
            (204_000, 50_000, 320, 3_000)
        );
        assert_eq!(i.total_retrans, 7);
        assert_eq!(
            (i.retransmits, i.probes, i.backoff, i.options),
            (1, 2, 3, TCPI_OPT_TIMESTAMPS)
        );
        assert_eq!((i.unacked, i.snd_ssthresh), (9, 250));
        assert_eq!(i.notsent_bytes, Some(4096));
        assert_eq!((s.timer, s.expires_ms), (TIMER_PROBE, 1234));
        assert_eq!(b.sockets[1].state, TCP_TIME_WAIT);
        assert!(b.sockets[1].info.is_none());
    }

    #[test]
    fn truncated_and_lying_messages_are_skipped_not_trusted() {
        let full = reply(TCP_ESTABLISHED, true);
        // Every truncation of a valid message: no panic, never a socket with made-up fields.
        for cut in 0..full.len() {
            let b = parse(&full[..cut]);
            assert!(b.sockets.len() <= 1);
        }
        // A length field larger than the buffer.
        let mut lying = full.clone();
        lying[0..4].copy_from_slice(&100_000u32.to_ne_bytes());
        let b = parse(&lying);
        assert!(b.sockets.is_empty());
        assert_eq!(b.malformed, 1);
        // A message too short for inet_diag_msg.
        let mut short = 24u32.to_ne_bytes().to_vec();
        short.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        short.extend_from_slice(&[0u8; 18]);
        assert_eq!(parse(&short).malformed, 1);
        // An attribute whose length runs past the message: the socket without it.
        let mut bad_attr = full.clone();
        bad_attr[16 + 72..16 + 74].copy_from_slice(&60_000u16.to_ne_bytes());
        let b = parse(&bad_attr);
        assert_eq!(b.sockets.len(), 1);
        assert!(b.sockets[0].info.is_none());
    }

    #[test]
    fn netlink_error_ends_the_dump() {
        let mut m = 36u32.to_ne_bytes().to_vec();
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&(-22i32).to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]);
        let b = parse(&m);
        assert_eq!(b.error, Some(-22));
        assert!(b.done);
    }

    #[test]
    fn tcp_info_of_an_older_kernel_has_no_notsent_bytes() {
        // Linux 4.2 to 4.5's tcp_info ends after tcpi_segs_in (144 bytes): the fields the
        // checks need are there, notsent_bytes (4.6) is not.
        let d = vec![0u8; 144];
        let i = tcp_info(&d).expect("104 bytes suffice");
        assert_eq!(i.notsent_bytes, None);
        assert!(tcp_info(&d[..103]).is_none());
    }

    #[test]
    fn request_layout() {
        let r = request(2, 7, 1 << TCP_LISTEN);
        assert_eq!(r.len(), 72);
        assert_eq!(u32_at(&r, 0), Some(72));
        assert_eq!(u16_at(&r, 4), Some(SOCK_DIAG_BY_FAMILY));
        assert_eq!((r[16], r[17], r[18]), (2, 6, 0b1010));
        assert_eq!(u32_at(&r, 20), Some(1 << 10));
    }
}
