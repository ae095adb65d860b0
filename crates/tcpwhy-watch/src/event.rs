//! The records the BPF programs put in the ring buffer (`struct event` in
//! `bpf/watch.bpf.c`), read field by field from their bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The size of `struct event` (a `_Static_assert` in the C source says the same).
pub const EVENT_SIZE: usize = 208;

/// `EV_CONNECT`: a connect() left SYN-SENT (established, or closed without a connection).
pub const EV_CONNECT: u32 = 1;
/// `EV_LOSS`: a socket entered the Loss congestion state (its retransmission timer fired).
pub const EV_LOSS: u32 = 2;
/// `EV_PROBE`: a socket resent data outside Recovery and Loss: a tail loss probe.
pub const EV_PROBE: u32 = 3;
/// `EV_DROP`: this host dropped a received pure SYN, or a final handshake ACK at a full
/// accept queue (skb:kfree_skb); local is the packet's destination.
pub const EV_DROP: u32 = 4;
/// `EV_ACCEPT`: a handshake this host completed as the server after drops of its 4-tuple.
pub const EV_ACCEPT: u32 = 5;
/// `EV_RESTART`: a write on a socket idle for longer than its RTO with nothing in flight,
/// before the kernel restarts its congestion window.
pub const EV_RESTART: u32 = 6;
/// `EV_BURST_END`: the burst a restart began is over (the next write found nothing in flight,
/// or the socket closed): its bytes, and the jiffies from the restart to its last data sent
/// (in `idle_jiffies`).
pub const EV_BURST_END: u32 = 7;
/// `EV_ZERO_WINDOW`: the peer's window opened again after being zero; the stall's jiffies
/// (from the ACK that closed it to the one that opened it) are in `idle_jiffies`. With
/// `newstate` `TCP_CLOSE`: the socket closed while the window was still zero, the stall's
/// jiffies counted to the close.
pub const EV_ZERO_WINDOW: u32 = 8;
/// `EV_DSACK`: a socket that resent after a timeout received a D-SACK since: the resend was
/// not needed.
pub const EV_DSACK: u32 = 9;

/// TCP states as the kernel numbers them (include/net/tcp_states.h).
pub const TCP_ESTABLISHED: u32 = 1;
pub const TCP_TIME_WAIT: u32 = 6;
pub const TCP_CLOSE: u32 = 7;
pub const TCP_LISTEN: u32 = 10;

const AF_INET6: u16 = 10;

/// One event, decoded. Times are CLOCK_MONOTONIC nanoseconds (`bpf_ktime_get_ns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    /// The socket's kernel address: names one connection while it lives.
    pub sk: u64,
    pub kind: u32,
    /// The network namespace's inode number (as `ls -Li /proc/PID/ns/net` shows it).
    pub netns: u32,
    /// The process that called connect() (0: not known, e.g. an accepted socket).
    pub tgid: u32,
    /// For `EV_CONNECT`: the state the socket went to from SYN-SENT.
    pub newstate: u32,
    pub comm: String,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The socket entered SYN-SENT: the first SYN.
    pub syn_ns: u64,
    /// The last SYN sent (the first, or its last retransmission).
    pub last_syn_ns: u64,
    pub syn_retx: u32,
    /// Resets the socket sent in SYN-SENT (to an ACK that did not acknowledge its SYN).
    pub rst_sent: u32,
    /// The last such reset's reason (`enum sk_rst_reason`; named from the tracepoint's format).
    pub rst_reason: u32,
    /// Resets received in SYN-SENT.
    pub rst_recv: u32,
    pub rst_sent_ns: u64,
    /// The smoothed round trip, microseconds.
    pub srtt_us: u32,
    /// The retransmission timeout, jiffies.
    pub rto_jiffies: u32,
    pub cwnd: u32,
    pub mss: u32,
    /// Jiffies of the last ACK the socket received (tp->rcv_tstamp).
    pub rcv_tstamp: u32,
    /// Jiffies since then, when the event was made.
    pub rcv_age: u32,
    /// The congestion state (Open 0, Disorder 1, CWR 2, Recovery 3, Loss 4).
    pub ca_state: u32,
    /// `EV_DROP`, `EV_ACCEPT`: a drop met a listener whose accept queue was full (the
    /// handshake's last ACK, or the data after it, that no socket could be made for).
    pub queue_full: bool,
    /// The connect() caller's cgroup (v2) id: its directory's inode number (0: not known).
    pub cgroup: u64,
    /// `EV_RESTART`: jiffies since the socket last sent.
    pub idle_jiffies: u32,
    /// `EV_RESTART`: the write's size in bytes.
    pub bytes: u32,
    /// `EV_RESTART`: the slow-start threshold before the restart.
    pub ssthresh: u32,
    /// `EV_DROP`, `EV_ACCEPT`: the last drop's `enum skb_drop_reason` (named from
    /// skb:kfree_skb's format). The first and last drop's times are `syn_ns`, `last_syn_ns`.
    pub drop_reason: u32,
    /// `EV_DROP`, `EV_ACCEPT`: the 4-tuple's drops so far.
    pub drops: u32,
    /// `EV_DROP`, `EV_ACCEPT`: the state of the socket the packet met (0: none).
    pub rx_state: u32,
    /// `EV_DROP`, `EV_ACCEPT` at a full accept queue: the first dropped segment that
    /// carried data, which its sender must send again on its timer (0: none).
    pub data_drop_ns: u64,
    /// `EV_DROP`, `EV_ACCEPT`: the listener's first SYN-ACK resend after a drop, whose answer
    /// can complete the handshake (0: none).
    pub synack_ns: u64,
}

impl Default for Event {
    fn default() -> Self {
        let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        Event {
            ts_ns: 0,
            sk: 0,
            kind: 0,
            netns: 0,
            tgid: 0,
            newstate: 0,
            comm: String::new(),
            local: unspecified,
            remote: unspecified,
            syn_ns: 0,
            last_syn_ns: 0,
            syn_retx: 0,
            rst_sent: 0,
            rst_reason: 0,
            rst_recv: 0,
            rst_sent_ns: 0,
            srtt_us: 0,
            rto_jiffies: 0,
            cwnd: 0,
            mss: 0,
            rcv_tstamp: 0,
            rcv_age: 0,
            ca_state: 0,
            queue_full: false,
            cgroup: 0,
            idle_jiffies: 0,
            bytes: 0,
            ssthresh: 0,
            drop_reason: 0,
            drops: 0,
            rx_state: 0,
            data_drop_ns: 0,
            synack_ns: 0,
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

fn addr(family: u16, b: &[u8], port: u16) -> SocketAddr {
    let ip = if family == AF_INET6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    };
    SocketAddr::new(ip, port)
}

impl Event {
    /// Decode one ring-buffer record; None when it is not `EVENT_SIZE` bytes.
    pub fn parse(b: &[u8]) -> Option<Event> {
        if b.len() != EVENT_SIZE {
            return None;
        }
        let comm = &b[32..48];
        let end = comm.iter().position(|c| *c == 0).unwrap_or(comm.len());
        let family = u16_at(b, 48);
        Some(Event {
            ts_ns: u64_at(b, 0),
            sk: u64_at(b, 8),
            kind: u32_at(b, 16),
            netns: u32_at(b, 20),
            tgid: u32_at(b, 24),
            newstate: u32_at(b, 28),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
            local: addr(family, &b[56..72], u16_at(b, 50)),
            remote: addr(family, &b[72..88], u16_at(b, 52)),
            syn_ns: u64_at(b, 88),
            last_syn_ns: u64_at(b, 96),
            syn_retx: u32_at(b, 104),
            rst_sent: u32_at(b, 108),
            rst_reason: u32_at(b, 112),
            rst_recv: u32_at(b, 116),
            rst_sent_ns: u64_at(b, 120),
            srtt_us: u32_at(b, 128),
            rto_jiffies: u32_at(b, 132),
            cwnd: u32_at(b, 136),
            mss: u32_at(b, 140),
            rcv_tstamp: u32_at(b, 144),
            rcv_age: u32_at(b, 148),
            ca_state: u32_at(b, 152),
            queue_full: u32_at(b, 156) != 0,
            cgroup: u64_at(b, 160),
            idle_jiffies: u32_at(b, 168),
            bytes: u32_at(b, 172),
            ssthresh: u32_at(b, 176),
            drop_reason: u32_at(b, 180),
            drops: u32_at(b, 184),
            rx_state: u32_at(b, 188),
            data_drop_ns: u64_at(b, 192),
            synack_ns: u64_at(b, 200),
        })
    }

    /// The bytes `parse` reads back (tests build events with it, field by field).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_SIZE];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(0, &self.ts_ns.to_ne_bytes());
        put(8, &self.sk.to_ne_bytes());
        put(16, &self.kind.to_ne_bytes());
        put(20, &self.netns.to_ne_bytes());
        put(24, &self.tgid.to_ne_bytes());
        put(28, &self.newstate.to_ne_bytes());
        let c = self.comm.as_bytes();
        put(32, &c[..c.len().min(15)]);
        let (family, l, r): (u16, Vec<u8>, Vec<u8>) = match (self.local.ip(), self.remote.ip()) {
            (IpAddr::V6(l), IpAddr::V6(r)) => (AF_INET6, l.octets().to_vec(), r.octets().to_vec()),
            (IpAddr::V4(l), IpAddr::V4(r)) => (2, l.octets().to_vec(), r.octets().to_vec()),
            _ => (2, vec![0; 4], vec![0; 4]),
        };
        put(48, &family.to_ne_bytes());
        put(50, &self.local.port().to_ne_bytes());
        put(52, &self.remote.port().to_ne_bytes());
        put(56, &l);
        put(72, &r);
        put(88, &self.syn_ns.to_ne_bytes());
        put(96, &self.last_syn_ns.to_ne_bytes());
        put(104, &self.syn_retx.to_ne_bytes());
        put(108, &self.rst_sent.to_ne_bytes());
        put(112, &self.rst_reason.to_ne_bytes());
        put(116, &self.rst_recv.to_ne_bytes());
        put(120, &self.rst_sent_ns.to_ne_bytes());
        put(128, &self.srtt_us.to_ne_bytes());
        put(132, &self.rto_jiffies.to_ne_bytes());
        put(136, &self.cwnd.to_ne_bytes());
        put(140, &self.mss.to_ne_bytes());
        put(144, &self.rcv_tstamp.to_ne_bytes());
        put(148, &self.rcv_age.to_ne_bytes());
        put(152, &self.ca_state.to_ne_bytes());
        put(156, &u32::from(self.queue_full).to_ne_bytes());
        put(160, &self.cgroup.to_ne_bytes());
        put(168, &self.idle_jiffies.to_ne_bytes());
        put(172, &self.bytes.to_ne_bytes());
        put(176, &self.ssthresh.to_ne_bytes());
        put(180, &self.drop_reason.to_ne_bytes());
        put(184, &self.drops.to_ne_bytes());
        put(188, &self.rx_state.to_ne_bytes());
        put(192, &self.data_drop_ns.to_ne_bytes());
        put(200, &self.synack_ns.to_ne_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_wrong_sizes_are_refused() {
        let e = Event {
            ts_ns: 5,
            sk: 0xffff_8880_1234_5678,
            kind: EV_CONNECT,
            netns: 4_026_531_840,
            tgid: 77,
            newstate: TCP_ESTABLISHED,
            comm: "curl".into(),
            local: "[fd00::1]:41001".parse().unwrap(),
            remote: "[fd00::2]:80".parse().unwrap(),
            syn_ns: 1,
            last_syn_ns: 2,
            syn_retx: 1,
            rst_sent: 1,
            rst_reason: 2,
            rst_recv: 0,
            rst_sent_ns: 3,
            srtt_us: 50,
            rto_jiffies: 51,
            cwnd: 10,
            mss: 1448,
            rcv_tstamp: 4_294_967_000,
            rcv_age: 60,
            ca_state: 2,
            queue_full: true,
            cgroup: 9_876,
            idle_jiffies: 70,
            bytes: 100_000,
            ssthresh: 40,
            drop_reason: 40,
            drops: 2,
            rx_state: 6,
            data_drop_ns: 5,
            synack_ns: 6,
        };
        assert_eq!(Event::parse(&e.to_bytes()), Some(e.clone()));
        let v4 = Event {
            local: "10.0.0.1:5".parse().unwrap(),
            remote: "10.0.0.2:6".parse().unwrap(),
            ..e
        };
        assert_eq!(Event::parse(&v4.to_bytes()), Some(v4));
        assert_eq!(Event::parse(&[0u8; 207]), None);
        assert_eq!(Event::parse(&[0u8; 209]), None);
    }
}
