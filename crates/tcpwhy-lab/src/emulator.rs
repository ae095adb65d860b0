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

/// What the emulator does to the router's forwarded packets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmulatorConfig {
    /// NFQUEUE number the caller's iptables rule sends to.
    pub queue: u16,
    /// One-way delay added to every packet (0 = none).
    pub delay: Duration,
    /// Packets to drop instead of forwarding.
    pub drops: Vec<DropRule>,
}

/// Matches IPv4/IPv6 TCP packets. All set conditions must hold.
///
/// Every rule sees every TCP packet and counts its own matches; a packet is dropped when any
/// rule is inside its drop window. `DropRule::default()` matches every TCP packet (and, with
/// `skip == 0 && count == 0`, drops them all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropRule {
    pub src: Option<IpAddr>,
    pub dst: Option<IpAddr>,
    /// These TCP flag bits must all be set (`tcpwhy_wire::TcpFlags` consts).
    pub flags_all: u8,
    /// These must all be clear.
    pub flags_none: u8,
    /// TCP payload at least this long.
    pub min_payload: u32,
    /// TCP payload at most this long (`None`: no limit).
    pub max_payload: Option<u32>,
    /// Let the first `skip` matching packets pass.
    pub skip: u32,
    /// Then drop the next `count` matching packets (0 = all further).
    pub count: u32,
}

impl DropRule {
    /// Whether the segment meets every condition (ignores skip/count).
    pub fn matches(&self, seg: &TcpSegment) -> bool {
        self.src.is_none_or(|a| a == seg.src)
            && self.dst.is_none_or(|a| a == seg.dst)
            && seg.flags.0 & self.flags_all == self.flags_all
            && seg.flags.0 & self.flags_none == 0
            && seg.payload_len >= self.min_payload
            && self.max_payload.is_none_or(|m| seg.payload_len <= m)
    }

    /// Whether the `nth` matching packet (1-based) falls in the drop window.
    pub fn drops_nth(&self, nth: u64) -> bool {
        let skip = u64::from(self.skip);
        nth > skip && (self.count == 0 || nth - skip <= u64::from(self.count))
    }
}

/// What a queued packet turned out to be (for the statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    Tcp,
    /// Not TCP (UDP, ICMP, ARP never reaches here ...): delayed, never dropped.
    Other,
    /// Could not be decoded: delayed like the rest and forwarded, never dropped.
    Malformed,
}

/// The drop rules with their match counters.
#[derive(Clone, Debug, Default)]
pub struct Dropper {
    rules: Vec<DropRule>,
    seen: Vec<u64>,
}

impl Dropper {
    pub fn new(rules: Vec<DropRule>) -> Dropper {
        let seen = vec![0; rules.len()];
        Dropper { rules, seen }
    }

    /// Counts the segment against every rule; true if it is to be dropped.
    pub fn should_drop(&mut self, seg: &TcpSegment) -> bool {
        let mut drop = false;
        for (rule, seen) in self.rules.iter().zip(self.seen.iter_mut()) {
            if rule.matches(seg) {
                *seen = seen.saturating_add(1);
                drop |= rule.drops_nth(*seen);
            }
        }
        drop
    }

    /// Decides on a raw IP packet. `ip` may be cut short by the copy range; `wire_len` is the
    /// packet's full length. Only well-formed TCP can be dropped.
    pub fn decide(&mut self, ip: &[u8], wire_len: u32) -> (bool, PacketKind) {
        match tcpwhy_wire::decode(LinkType::RAW, ip, wire_len) {
            Ok(Decoded::Tcp(seg)) => (self.should_drop(&seg), PacketKind::Tcp),
            Ok(Decoded::Skipped(_)) => (false, PacketKind::Other),
            Err(_) => (false, PacketKind::Malformed),
        }
    }

    /// How many packets each rule has matched so far.
    pub fn matched(&self) -> &[u64] {
        &self.seen
    }
}

/// Packets held until their release time, released in arrival order.
#[derive(Clone, Debug)]
pub struct DelayLine<T> {
    delay: Duration,
    held: VecDeque<(Instant, T)>,
}

impl<T> DelayLine<T> {
    pub fn new(delay: Duration) -> DelayLine<T> {
        DelayLine {
            delay,
            held: VecDeque::with_capacity(1024),
        }
    }

    /// Holds `item`, which arrived at `arrival`, and returns its release time: `arrival +
    /// delay`, but never before the packet ahead of it (FIFO, no reordering).
    pub fn push(&mut self, arrival: Instant, item: T) -> Instant {
        let mut release = arrival + self.delay;
        if let Some(&(last, _)) = self.held.back() {
            release = release.max(last);
        }
        self.held.push_back((release, item));
        release
    }

    /// When the oldest held packet is due.
    pub fn next_release(&self) -> Option<Instant> {
        self.held.front().map(|&(t, _)| t)
    }

    /// The oldest packet if it is due at `now`, with its release time.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        match self.held.front() {
            Some(&(t, _)) if t <= now => self.held.pop_front(),
            _ => None,
        }
    }

    /// Everything still held, oldest first (for shutting down).
    pub fn pop_any(&mut self) -> Option<(Instant, T)> {
        self.held.pop_front()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// Log-linear histogram of microsecond values: exact below 128, then 64 buckets per power of
/// two (under 1.6 % error). Fixed size, no allocation after construction.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

const HIST_LINEAR: u64 = 128;
const HIST_SUB_BITS: u32 = 6;

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; Self::bucket(u64::MAX) + 1],
            total: 0,
            max: 0,
        }
    }
}

impl LatencyHistogram {
    fn bucket(v: u64) -> usize {
        if v < HIST_LINEAR {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= 7
        let sub = (v >> (exp - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1);
        (HIST_LINEAR + u64::from(exp - 7) * (1 << HIST_SUB_BITS) + sub) as usize
    }

    fn lower_bound(index: usize) -> u64 {
        let i = index as u64;
        if i < HIST_LINEAR {
            return i;
        }
        let k = i - HIST_LINEAR;
        let exp = k / (1 << HIST_SUB_BITS) + 7;
        let sub = k % (1 << HIST_SUB_BITS);
        (1 << exp) + (sub << (exp - u64::from(HIST_SUB_BITS)))
    }

    pub fn record(&mut self, us: u64) {
        if let Some(c) = self.counts.get_mut(Self::bucket(us)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(us);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), rounded down to its bucket; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower_bound(i).min(self.max);
            }
        }
        self.max
    }
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmulatorStats {
    /// Packets received from the queue (forwarded + dropped).
    pub packets: u64,
    /// Packets dropped by the rules.
    pub dropped: u64,
    /// Most packets held at once.
    pub max_held: usize,
    /// Packets released (ACCEPT).
    pub forwarded: u64,
    /// Of `packets`: decoded TCP, other protocols, undecodable.
    pub tcp: u64,
    pub non_tcp: u64,
    pub malformed: u64,
    /// Held packets released early because `stop` was set.
    pub released_early: u64,
    /// Release lateness (actual verdict time minus due time) over released packets, in us.
    pub late_p50_us: u64,
    pub late_p99_us: u64,
    pub late_max_us: u64,
    /// ENOBUFS from the socket: the kernel could not hand us packets (they were dropped).
    pub overruns: u64,
    /// Verdicts the kernel rejected, or that could not be sent.
    pub verdict_errors: u64,
    /// The kernel's own counters for this queue, read from /proc at the end (0 if unreadable):
    /// packets dropped because the queue was full, and because the socket could not take them.
    pub kernel_queue_dropped: u64,
    pub kernel_user_dropped: u64,
    /// Wall-clock time of the run and CPU time of the calling thread during it.
    pub elapsed: Duration,
    pub cpu_time: Duration,
}

impl EmulatorStats {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "packets": self.packets,
            "dropped": self.dropped,
            "forwarded": self.forwarded,
            "max_held": self.max_held,
            "tcp": self.tcp,
            "non_tcp": self.non_tcp,
            "malformed": self.malformed,
            "released_early": self.released_early,
            "late_p50_us": self.late_p50_us,
            "late_p99_us": self.late_p99_us,
            "late_max_us": self.late_max_us,
            "overruns": self.overruns,
            "verdict_errors": self.verdict_errors,
            "kernel_queue_dropped": self.kernel_queue_dropped,
            "kernel_user_dropped": self.kernel_user_dropped,
            "elapsed_us": self.elapsed.as_micros() as u64,
            "cpu_us": self.cpu_time.as_micros() as u64,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// NFQUEUE netlink protocol (linux/netlink.h, linux/netfilter/nfnetlink_queue.h). Netlink
// headers are in host byte order, nfnetlink payloads in network byte order.

const NLMSG_HDRLEN: usize = 16;
const NFGEN_HDRLEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = NFNL_SUBSYS_QUEUE << 8;
const NFQNL_MSG_VERDICT: u16 = (NFNL_SUBSYS_QUEUE << 8) | 1;
const NFQNL_MSG_CONFIG: u16 = (NFNL_SUBSYS_QUEUE << 8) | 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = (NFNL_SUBSYS_QUEUE << 8) | 3;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CAP_LEN: u16 = 13;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQA_CFG_F_GSO: u32 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Kernel verdict codes (linux/netfilter.h).
pub const NF_DROP: u32 = 0;
pub const NF_ACCEPT: u32 = 1;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Appends nlmsghdr + nfgenmsg; returns the message start for [`end_msg`].
fn begin_msg(out: &mut Vec<u8>, msg_type: u16, flags: u16, seq: u32, queue: u16) -> usize {
    let start = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, patched by end_msg
    out.extend_from_slice(&msg_type.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    out.extend_from_slice(&[0, 0]); // AF_UNSPEC, NFNETLINK_V0
    out.extend_from_slice(&queue.to_be_bytes());
    start
}

fn put_attr(out: &mut Vec<u8>, attr_type: u16, data: &[u8]) {
    out.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&attr_type.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(align4(out.len()), 0);
}

fn end_msg(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

/// The one config message: bind the queue, copy `copy_range` bytes of each packet, raise the
/// queue length, fail-open and GSO off. Asks for an ACK.
fn config_msg(out: &mut Vec<u8>, seq: u32, queue: u16, copy_range: u32, max_len: u32) {
    let start = begin_msg(out, NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue);
    put_attr(out, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0]);
    let mut params = copy_range.to_be_bytes().to_vec();
    params.push(NFQNL_COPY_PACKET);
    put_attr(out, NFQA_CFG_PARAMS, &params);
    put_attr(out, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes());
    // Fail-open OFF: with it on, a packet that finds the queue (or our socket buffer) full is
    // forwarded at once, overtaking the held ones and escaping delay and drop rules, which
    // silently breaks a scenario. Off, such a packet is dropped, which TCP sees as ordinary
    // congestion loss and the kernel counts (reported as kernel_*_dropped). The queue length
    // (65536) and socket buffer (32 MB) keep that from happening at lab rates.
    // GSO OFF (the default, made explicit): the kernel segments GSO packets before queueing,
    // so drop rules count and drop individual MSS-sized segments as a real link would.
    put_attr(out, NFQA_CFG_FLAGS, &0u32.to_be_bytes());
    put_attr(
        out,
        NFQA_CFG_MASK,
        &(NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO).to_be_bytes(),
    );
    end_msg(out, start);
}

/// Appends a verdict for one packet (`batch`: for every queued packet up to `id`).
fn verdict_msg(out: &mut Vec<u8>, seq: u32, queue: u16, id: u32, verdict: u32, batch: bool) {
    let msg_type = if batch {
        NFQNL_MSG_VERDICT_BATCH
    } else {
        NFQNL_MSG_VERDICT
    };
    let start = begin_msg(out, msg_type, NLM_F_REQUEST, seq, queue);
    let mut hdr = [0u8; 8];
    hdr[..4].copy_from_slice(&verdict.to_be_bytes());
    hdr[4..].copy_from_slice(&id.to_be_bytes());
    put_attr(out, NFQA_VERDICT_HDR, &hdr);
    end_msg(out, start);
}

/// One message of a datagram read from the netlink socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NlEvent<'a> {
    /// A queued packet: its id, the copied bytes, and its full length.
    Packet {
        id: u32,
        data: &'a [u8],
        wire_len: u32,
    },
    /// An NLMSG_ERROR: `errno` 0 is an ACK for request `seq`.
    Ack { seq: u32, errno: i32 },
    /// Something unusable (bad lengths, packet without header); counted, ignored.
    Garbage,
    /// A message type we do not use.
    Other,
}

/// Calls `on` for each netlink message in `buf`. Never panics, whatever the bytes.
pub fn parse_datagram<'a>(buf: &'a [u8], mut on: impl FnMut(NlEvent<'a>)) {
    let mut off = 0;
    while buf.len().saturating_sub(off) >= NLMSG_HDRLEN {
        let (Some(len), Some(msg_type)) = (ne_u32(buf, off), ne_u16(buf, off + 4)) else {
            break;
        };
        let len = len as usize;
        let Some(msg) = buf.get(off..off.saturating_add(len)) else {
            on(NlEvent::Garbage);
            return;
        };
        if len < NLMSG_HDRLEN {
            on(NlEvent::Garbage);
            return;
        }
        on(parse_msg(msg, msg_type));
        off = off.saturating_add(align4(len));
    }
}

fn parse_msg(msg: &[u8], msg_type: u16) -> NlEvent<'_> {
    match msg_type {
        NLMSG_ERROR => match (ne_u32(msg, NLMSG_HDRLEN), ne_u32(msg, NLMSG_HDRLEN + 12)) {
            // struct nlmsgerr { int error; struct nlmsghdr msg; }: seq is at 8 in that header.
            (Some(err), Some(seq)) => NlEvent::Ack {
                seq,
                errno: (err as i32).saturating_abs(),
            },
            _ => NlEvent::Garbage,
        },
        NFQNL_MSG_PACKET => {
            let mut id = None;
            let mut data: &[u8] = &[];
            let mut cap_len = None;
            let mut off = NLMSG_HDRLEN + NFGEN_HDRLEN;
            while let (Some(alen), Some(atype)) = (ne_u16(msg, off), ne_u16(msg, off + 2)) {
                let alen = usize::from(alen);
                let Some(body) = msg.get(off + 4..off + alen.max(4)) else {
                    break;
                };
                if alen < 4 {
                    break;
                }
                match atype & NLA_TYPE_MASK {
                    NFQA_PACKET_HDR => id = be_u32(body, 0),
                    NFQA_PAYLOAD => data = body,
                    NFQA_CAP_LEN => cap_len = be_u32(body, 0),
                    _ => {}
                }
                off += align4(alen);
            }
            match id {
                Some(id) => NlEvent::Packet {
                    id,
                    data,
                    wire_len: cap_len.unwrap_or(data.len() as u32).max(data.len() as u32),
                },
                None => NlEvent::Garbage,
            }
        }
        _ => NlEvent::Other,
    }
}

/// Buffered verdicts for one queue, sent with one syscall.
struct Verdicts {
    buf: Vec<u8>,
    queue: u16,
    seq: u32,
}

impl Verdicts {
    fn drop_now(&mut self, id: u32) {
        self.seq = self.seq.wrapping_add(1);
        verdict_msg(&mut self.buf, self.seq, self.queue, id, NF_DROP, false);
    }

    fn accept_up_to(&mut self, id: u32) {
        self.seq = self.seq.wrapping_add(1);
        verdict_msg(&mut self.buf, self.seq, self.queue, id, NF_ACCEPT, true);
    }
}

/// The pure part of the loop: decisions, the delay line and the counters.
struct Engine {
    line: DelayLine<u32>,
    dropper: Dropper,
    late: LatencyHistogram,
    stats: EmulatorStats,
}

impl Engine {
    fn new(cfg: &EmulatorConfig) -> Engine {
        Engine {
            line: DelayLine::new(cfg.delay),
            dropper: Dropper::new(cfg.drops.clone()),
            late: LatencyHistogram::default(),
            stats: EmulatorStats::default(),
        }
    }

    fn on_event(&mut self, ev: NlEvent<'_>, arrival: Instant, out: &mut Verdicts) {
        match ev {
            NlEvent::Packet { id, data, wire_len } => {
                self.on_packet(id, data, wire_len, arrival, out)
            }
            NlEvent::Ack { errno, .. } if errno != 0 => self.stats.verdict_errors += 1,
            NlEvent::Garbage => self.stats.malformed += 1,
            NlEvent::Ack { .. } | NlEvent::Other => {}
        }
    }

    fn on_packet(
        &mut self,
        id: u32,
        ip: &[u8],
        wire_len: u32,
        arrival: Instant,
        out: &mut Verdicts,
    ) {
        self.stats.packets += 1;
        let (drop, kind) = self.dropper.decide(ip, wire_len);
        match kind {
            PacketKind::Tcp => self.stats.tcp += 1,
            PacketKind::Other => self.stats.non_tcp += 1,
            PacketKind::Malformed => self.stats.malformed += 1,
        }
        if drop {
            self.stats.dropped += 1;
            out.drop_now(id);
        } else {
            self.line.push(arrival, id);
            self.stats.max_held = self.stats.max_held.max(self.line.len());
        }
    }

    /// Releases everything due at `now` with one batch verdict.
    fn release_due(&mut self, now: Instant, out: &mut Verdicts) {
        let mut last = None;
        while let Some((due, id)) = self.line.pop_due(now) {
            self.late
                .record(now.saturating_duration_since(due).as_micros() as u64);
            last = Some(id);
        }
        if let Some(id) = last {
            out.accept_up_to(id);
        }
    }

    /// Releases everything still held (shutting down: otherwise the kernel drops them when the
    /// socket closes).
    fn release_all(&mut self, out: &mut Verdicts) {
        let mut last = None;
        while let Some((_, id)) = self.line.pop_any() {
            self.stats.released_early += 1;
            last = Some(id);
        }
        if let Some(id) = last {
            out.accept_up_to(id);
        }
    }

    fn finish(mut self) -> EmulatorStats {
        self.stats.forwarded = self.stats.packets - self.stats.dropped;
        self.stats.late_p50_us = self.late.quantile(0.50);
        self.stats.late_p99_us = self.late.quantile(0.99);
        self.stats.late_max_us = self.late.max();
        self.stats
    }
}

// ---------------------------------------------------------------------------------------------
// I/O

/// A bound NFQUEUE netlink socket.
struct Nfq {
    fd: OwnedFd,
    portid: u32,
}

/// A packet that arrived while we were waiting for the config ACK.
struct Early {
    id: u32,
    data: Vec<u8>,
    wire_len: u32,
}

impl Nfq {
    fn open(queue: u16, early: &mut Vec<Early>) -> io::Result<Nfq> {
        let fd = socket::socket(
            socket::AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )?;
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        if socket::setsockopt(&fd, socket::sockopt::RcvBufForce, &RCVBUF_BYTES).is_err() {
            socket::setsockopt(&fd, socket::sockopt::RcvBuf, &RCVBUF_BYTES)?;
        }
        let portid = socket::getsockname::<NetlinkAddr>(fd.as_raw_fd())?.pid();
        let nfq = Nfq { fd, portid };

        let seq = 1;
        let mut msg = Vec::with_capacity(64);
        config_msg(&mut msg, seq, queue, COPY_RANGE, QUEUE_MAX_LEN);
        nfq.send(&msg)?;

        // Wait for the ACK; packets may already arrive (the queue is bound first).
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut buf = vec![0u8; RECV_BUF_BYTES];
        for _ in 0..10_000 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            nfq.wait(left)?;
            let n = match nfq.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => continue,
                Err(e) if e.raw_os_error() == Some(Errno::ENOBUFS as i32) => continue,
                Err(e) => return Err(e),
            };
            let mut result = None;
            parse_datagram(&buf[..n], |ev| match ev {
                NlEvent::Ack { seq: s, errno } if s == seq => result = Some(errno),
                NlEvent::Packet { id, data, wire_len } => early.push(Early {
                    id,
                    data: data.to_vec(),
                    wire_len,
                }),
                _ => {}
            });
            match result {
                Some(0) => return Ok(nfq),
                Some(errno) => {
                    let e = io::Error::from_raw_os_error(errno);
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "binding NFQUEUE {queue}: {e} (EBUSY/EPERM: another program holds it)"
                        ),
                    ));
                }
                None => {}
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer from the kernel binding NFQUEUE {queue}"),
        ))
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        socket::send(self.fd.as_raw_fd(), msg, MsgFlags::empty())?;
        Ok(())
    }

    /// Sends the buffered verdicts. Transient failures are retried, then counted: the packets
    /// stay queued in the kernel until the socket closes, which drops them.
    fn flush(&self, v: &mut Verdicts, stats: &mut EmulatorStats) -> io::Result<()> {
        if v.buf.is_empty() {
            return Ok(());
        }
        for attempt in 0..4 {
            match socket::send(self.fd.as_raw_fd(), &v.buf, MsgFlags::empty()) {
                Ok(_) => break,
                Err(Errno::EINTR | Errno::EAGAIN | Errno::ENOBUFS | Errno::ENOMEM)
                    if attempt < 3 =>
                {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(Errno::EINTR | Errno::EAGAIN | Errno::ENOBUFS | Errno::ENOMEM) => {
                    stats.verdict_errors += 1;
                }
                Err(e) => {
                    v.buf.clear();
                    return Err(e.into());
                }
            }
        }
        v.buf.clear();
        Ok(())
    }

    /// One nonblocking receive: Ok(None) when nothing is waiting.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC;
        match socket::recv(self.fd.as_raw_fd(), buf, flags) {
            // MSG_TRUNC returns the real length: a cut datagram is parsed as far as it goes.
            Ok(n) => Ok(Some(n.min(buf.len()))),
            Err(Errno::EAGAIN | Errno::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Sleeps until the socket is readable or `timeout` passed (nanosecond precision).
    fn wait(&self, timeout: Duration) -> io::Result<()> {
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        let ts = nix::sys::time::TimeSpec::from_duration(timeout);
        match nix::poll::ppoll(&mut fds, Some(ts), None) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `(queue_dropped, user_dropped)` for our queue from the kernel's per-namespace table.
fn kernel_drop_counters(queue: u16, portid: u32) -> Option<(u64, u64)> {
    // Per network namespace: read it through this thread's view (/proc/thread-self), since the
    // caller moved only this thread into the router's namespace.
    let text = std::fs::read_to_string("/proc/thread-self/net/netfilter/nfnetlink_queue").ok()?;
    parse_queue_proc(&text, queue, portid)
}

/// Lines: queue, portid, queue_total, copy_mode, copy_range, queue_dropped, user_dropped, ...
fn parse_queue_proc(text: &str, queue: u16, portid: u32) -> Option<(u64, u64)> {
    text.lines().find_map(|line| {
        let f: Vec<u64> = line
            .split_whitespace()
            .map_while(|w| w.parse().ok())
            .collect();
        (f.len() >= 7 && f[0] == u64::from(queue) && f[1] == u64::from(portid))
            .then(|| (f[5], f[6]))
    })
}

fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Lowers this thread's timer slack to 1 ns for the run (default 50 us) so `ppoll` wakes on
/// time, and restores it on drop.
struct TimerSlack(Option<i32>);

impl TimerSlack {
    fn tighten() -> TimerSlack {
        let old = nix::sys::prctl::get_timerslack().ok();
        let _ = nix::sys::prctl::set_timerslack(1);
        TimerSlack(old)
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if let Some(old) = self.0.and_then(|v| u64::try_from(v).ok()) {
            let _ = nix::sys::prctl::set_timerslack(old);
        }
    }
}

/// Runs in the calling thread, which the caller has already moved into the router's network
/// namespace (setns) after installing `iptables-legacy -A FORWARD -j NFQUEUE --queue-num Q`.
/// Returns when `stop` becomes true (checked at least every [`MAX_WAIT`]), with the
/// statistics. Packets still held then are released (accepted) early, since closing the queue
/// would make the kernel drop them.
pub fn run(cfg: &EmulatorConfig, stop: &AtomicBool) -> io::Result<EmulatorStats> {
    let started = Instant::now();
    let cpu_start = thread_cpu_time();
    let _slack = TimerSlack::tighten();
    let mut early = Vec::new();
    let nfq = Nfq::open(cfg.queue, &mut early)?;
    let mut engine = Engine::new(cfg);
    let mut out = Verdicts {
        buf: Vec::with_capacity(VERDICT_FLUSH_BYTES * 2),
        queue: cfg.queue,
        seq: 1,
    };
    let mut buf = vec![0u8; RECV_BUF_BYTES];

    let now = Instant::now();
    for p in &early {
        engine.on_packet(p.id, &p.data, p.wire_len, now, &mut out);
    }
    drop(early);

    loop {
        let now = Instant::now();
        engine.release_due(now, &mut out);
        nfq.flush(&mut out, &mut engine.stats)?;
        if stop.load(Ordering::Relaxed) {
            break;
        }

        let wait = engine
            .line
            .next_release()
            .map_or(MAX_WAIT, |t| t.saturating_duration_since(now))
            .min(MAX_WAIT);
        if wait > SPIN {
            // Wake a little early; the remaining SPIN is covered by nonblocking receives.
            nfq.wait(wait - SPIN)?;
        }

        for _ in 0..RECV_BATCH {
            let n = match nfq.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                // The kernel could not queue packets to our socket (they were dropped).
                Err(e) if e.raw_os_error() == Some(Errno::ENOBUFS as i32) => {
                    engine.stats.overruns += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let arrival = Instant::now();
            parse_datagram(&buf[..n], |ev| engine.on_event(ev, arrival, &mut out));
            if out.buf.len() >= VERDICT_FLUSH_BYTES {
                nfq.flush(&mut out, &mut engine.stats)?;
            }
        }
    }

    engine.release_all(&mut out);
    nfq.flush(&mut out, &mut engine.stats)?;
    if let Some((queue_dropped, user_dropped)) = kernel_drop_counters(cfg.queue, nfq.portid) {
        engine.stats.kernel_queue_dropped = queue_dropped;
        engine.stats.kernel_user_dropped = user_dropped;
    }
    let mut stats = engine.finish();
    stats.elapsed = started.elapsed();
    stats.cpu_time = thread_cpu_time().saturating_sub(cpu_start);
    Ok(stats)
}

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
