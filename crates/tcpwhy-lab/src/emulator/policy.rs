//! What the emulator does to each packet: its configuration, the drop rules and the delay
//! line (pure: time is passed in).

use super::*;

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
    pub(super) rules: Vec<DropRule>,
    pub(super) seen: Vec<u64>,
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
    pub(super) delay: Duration,
    pub(super) held: VecDeque<(Instant, T)>,
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
