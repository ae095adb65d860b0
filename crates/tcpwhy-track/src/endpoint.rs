//! One side of a connection (a half-connection in gopacket's words).

use std::net::IpAddr;
use tcpwhy_wire::{Seq, TcpSegment};

/// A frame number and its capture time.
///
/// Frame numbers are 1-based (as in Wireshark), so the number is kept non-zero: an
/// `Option<At>` then takes 16 bytes, not 24 (a connection and its detector states hold dozens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    frame: std::num::NonZeroU64,
    pub ts_ns: i64,
}

impl At {
    /// Frame `frame` (1-based; 0, which no capture frame has, is taken as 1) at `ts_ns`.
    #[inline]
    pub fn new(frame: u64, ts_ns: i64) -> At {
        At {
            frame: std::num::NonZeroU64::new(frame).unwrap_or(std::num::NonZeroU64::MIN),
            ts_ns,
        }
    }

    /// The frame number, 1-based.
    #[inline]
    pub fn frame(&self) -> u64 {
        self.frame.get()
    }

    /// This packet came before `other`: by capture time, then by frame number. Frame numbers
    /// alone are the file's order, which a capture read in time order (one whose records
    /// stepped back) does not follow; times alone tie.
    #[inline]
    pub fn before(&self, other: &At) -> bool {
        (self.ts_ns, self.frame) < (other.ts_ns, other.frame)
    }
}

/// A capture time in nanoseconds, or none: an `Option<i64>` in 8 bytes rather than 16
/// (`i64::MIN`, 292 years before 1970, is "none"; a time that low is taken as one ns later).
/// For state that needs the time of an event and not its frame (an `Option<At>` is 16 bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ts(i64);

impl Ts {
    pub const NONE: Ts = Ts(i64::MIN);

    #[inline]
    pub fn new(ts_ns: i64) -> Ts {
        Ts(ts_ns.max(i64::MIN + 1))
    }

    #[inline]
    pub fn get(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }

    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == i64::MIN
    }

    #[inline]
    pub fn is_some(self) -> bool {
        self.0 != i64::MIN
    }

    /// The time, leaving none.
    #[inline]
    pub fn take(&mut self) -> Option<i64> {
        std::mem::replace(self, Ts::NONE).get()
    }
}

impl Default for Ts {
    fn default() -> Ts {
        Ts::NONE
    }
}

impl From<At> for Ts {
    #[inline]
    fn from(at: At) -> Ts {
        Ts::new(at.ts_ns)
    }
}

impl std::fmt::Debug for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// A timed segment's sample is prompt when a new segment of at least this many bytes (the
/// smallest MSS a host must accept, RFC 9293 section 3.7.1) left within `PROMPT_FOLLOW_NS`
/// after it: the receiver then holds more than a full segment unacknowledged, which TCP
/// receivers acknowledge at once (RFC 5681 section 4.2; Linux: more than one receive MSS;
/// Windows: every second segment), so neither a delayed-ACK timer (40 ms to 500 ms) nor the
/// application's answer is in the sample, only the gap to that segment.
const PROMPT_FOLLOW_BYTES: u32 = 536;
const PROMPT_FOLLOW_NS: i64 = 10_000_000;

/// Round-trip samples with bounded memory: count, min, max (exact, in ns), and a uniform
/// reservoir of up to [`RttStats::RESERVOIR`] samples in microseconds for the median (exact up
/// to that many samples, to the microsecond).
///
/// 24 bytes: the count lives in the reservoir, allocated at the second sample; without one,
/// `min_ns` tells none (`-1`: samples are never negative) from one (inline beside the two
/// times, a `u32` count made the struct 32 bytes, 8 of them padding, on each side of every
/// connection).
#[derive(Clone, Debug)]
pub struct RttStats {
    /// Valid when `count() > 0`.
    pub min_ns: i64,
    pub max_ns: i64,
    /// Allocated at the second sample: one sample is `min_ns` itself, and most sides of short
    /// connections have one (inline, the reservoir took 64 bytes per side of every connection).
    reservoir: Option<Box<Reservoir>>,
}

#[derive(Clone, Debug)]
struct Reservoir {
    /// Samples so far (saturating), two or more.
    count: u32,
    us: [u32; RttStats::RESERVOIR],
    /// The prompt samples among them, kept apart: allocated at the first.
    prompt: Option<Box<Prompt>>,
}

/// Samples of ACKs the receiver sent at once (see `RttStats::add`): their own reservoir, so
/// that a median of them is not diluted by the rest.
#[derive(Clone, Debug)]
struct Prompt {
    count: u32,
    max_ns: i64,
    us: [u32; RttStats::RESERVOIR],
}

/// Adds `v` (microseconds) as sample number `n` (0-based) of a reservoir of `us`: the first
/// `RESERVOIR` go in order, later ones replace one by Algorithm R with a deterministic hash of
/// the sample index (same input, same output).
fn reservoir_add(us: &mut [u32; RttStats::RESERVOIR], n: u32, v: u32) {
    let n = n as usize;
    if n < RttStats::RESERVOIR {
        us[n] = v;
    } else {
        let j = (splitmix(n as u64) % (n as u64 + 1)) as usize;
        if j < RttStats::RESERVOIR {
            us[j] = v;
        }
    }
}

/// The median (the lower middle for an even count) of the first `count` (at most all) of `us`.
fn reservoir_median(us: &[u32; RttStats::RESERVOIR], count: u32) -> i64 {
    let n = (count as usize).clamp(1, RttStats::RESERVOIR);
    let mut v = *us;
    let v = &mut v[..n];
    v.sort_unstable();
    i64::from(v[(n - 1) / 2]) * 1000
}

impl Default for RttStats {
    fn default() -> RttStats {
        RttStats {
            min_ns: -1,
            max_ns: -1,
            reservoir: None,
        }
    }
}

impl RttStats {
    pub const RESERVOIR: usize = 16;

    /// Samples so far (saturating at `u32::MAX`).
    #[inline]
    pub fn count(&self) -> u32 {
        match &self.reservoir {
            Some(r) => r.count,
            None => u32::from(self.min_ns >= 0),
        }
    }

    /// Adds a sample; `prompt` when the receiver acknowledged it at once (see
    /// `PROMPT_FOLLOW_BYTES`): prompt samples are also kept apart.
    pub fn add(&mut self, ns: i64, prompt: bool) {
        if ns < 0 {
            return;
        }
        let us = |ns: i64| u32::try_from(ns / 1000).unwrap_or(u32::MAX);
        if self.min_ns < 0 && !prompt {
            self.min_ns = ns;
            self.max_ns = ns;
            return;
        }
        // The first sample (with one sample, min_ns is it) starts the reservoir; a prompt
        // first sample starts it too, to be kept apart.
        let first = (self.min_ns >= 0).then_some(self.min_ns);
        let r = self.reservoir.get_or_insert_with(|| {
            Box::new(Reservoir {
                count: u32::from(first.is_some()),
                us: [first.map_or(0, us); Self::RESERVOIR],
                prompt: None,
            })
        });
        self.min_ns = if self.min_ns < 0 {
            ns
        } else {
            self.min_ns.min(ns)
        };
        self.max_ns = self.max_ns.max(ns);
        reservoir_add(&mut r.us, r.count, us(ns));
        r.count = r.count.saturating_add(1);
        if prompt {
            let p = r.prompt.get_or_insert_with(|| {
                Box::new(Prompt {
                    count: 0,
                    max_ns: ns,
                    us: [0; Self::RESERVOIR],
                })
            });
            p.max_ns = p.max_ns.max(ns);
            reservoir_add(&mut p.us, p.count, us(ns));
            p.count = p.count.saturating_add(1);
        }
    }

    /// Median of the reservoir (the lower middle for an even count).
    pub fn median_ns(&self) -> Option<i64> {
        match self.reservoir.as_deref() {
            Some(r) if r.count > 1 => Some(reservoir_median(&r.us, r.count)),
            // One sample (inline, or a prompt first one in the reservoir): min_ns is it, exact.
            _ => (self.min_ns >= 0).then_some(self.min_ns),
        }
    }

    /// The prompt samples (see `add`): (median, max, count), none without one.
    pub fn prompt(&self) -> Option<(i64, i64, u32)> {
        let p = self.reservoir.as_deref()?.prompt.as_deref()?;
        Some((reservoir_median(&p.us, p.count), p.max_ns, p.count))
    }
}

/// How long a hole that opened at `opened` (`i64::MAX`: none) was open at `now`: at least 1
/// ns when there was one, so that 0 means none.
fn hole_age(opened: i64, now: i64) -> i64 {
    if opened == i64::MAX {
        0
    } else {
        now.saturating_sub(opened).max(1)
    }
}

/// The low 24 bits of a segment identity, as `Endpoint::prev_sig` keeps them.
#[inline]
fn low24(sig: u32) -> [u8; 3] {
    let b = sig.to_le_bytes();
    [b[0], b[1], b[2]]
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Sequence ranges the capture has not seen this side send (yet): above a jump in its
/// sequence numbers (filled later, they are reordering), or acknowledged by the peer before
/// the capture saw them (filled later, they are data captured after the ACK that covers it:
/// offloaded super-segments, merged interfaces; never filled, capture loss). Sixteen: a
/// flight with SACK recovery leaves a hole per lost segment (the holes live in the box of what
/// most sides never do).
const MAX_HOLES: usize = 16;

/// Holes in a sender's sequence space, oldest first (`MAX_HOLES` at most).
#[derive(Clone, Debug)]
struct Holes {
    ranges: [(Seq, Seq); MAX_HOLES],
    /// When each hole opened (capture time).
    opened: [i64; MAX_HOLES],
    count: u8,
    /// Bit i: hole i was acknowledged by the peer (its bytes count as unseen until filled).
    acked: u16,
}

impl Holes {
    fn add(&mut self, from: Seq, to: Seq, acked: bool, now: i64) {
        if from >= to {
            return;
        }
        if usize::from(self.count) == MAX_HOLES {
            // Forget the oldest hole.
            self.remove(0);
        }
        let n = usize::from(self.count);
        self.ranges[n] = (from, to);
        self.opened[n] = now;
        self.acked = (self.acked & !(1 << n)) | (u16::from(acked) << n);
        self.count += 1;
    }

    fn is_acked(&self, i: usize) -> bool {
        self.acked & (1 << i) != 0
    }

    /// Take `[from, to)` out of the holes: the bytes it filled in plain holes and in
    /// acknowledged ones, and when the oldest plain hole it filled opened (`i64::MAX`: none).
    fn fill(&mut self, from: Seq, to: Seq) -> (u32, u32, i64) {
        let (mut plain, mut acked, mut opened) = (0u32, 0u32, i64::MAX);
        let mut i = 0;
        while i < usize::from(self.count) {
            let (a, b) = self.ranges[i];
            let (lo, hi) = (from.max(a), to.min(b));
            if lo >= hi {
                i += 1;
                continue;
            }
            let n = hi.diff(lo) as u32;
            if self.is_acked(i) {
                acked += n;
            } else {
                plain += n;
                opened = opened.min(self.opened[i]);
            }
            match (lo == a, hi == b) {
                (true, true) => {
                    self.remove(i);
                    continue;
                }
                (true, false) => self.ranges[i].0 = hi,
                (false, true) => self.ranges[i].1 = lo,
                (false, false) => {
                    // Filled in the middle: two holes remain (the right one is dropped when
                    // there is no room: the list is best effort).
                    self.ranges[i].1 = lo;
                    if usize::from(self.count) < MAX_HOLES {
                        let n = usize::from(self.count);
                        self.ranges.copy_within(i + 1..n, i + 2);
                        self.opened.copy_within(i + 1..n, i + 2);
                        self.ranges[i + 1] = (hi, b);
                        self.opened[i + 1] = self.opened[i];
                        let low = self.acked & ((1 << (i + 1)) - 1);
                        let high = (self.acked >> (i + 1)) << (i + 2);
                        let bit = u16::from(self.is_acked(i)) << (i + 1);
                        self.acked = low | bit | high;
                        self.count += 1;
                        i += 1;
                    }
                }
            }
            i += 1;
        }
        (plain, acked, opened)
    }

    fn remove(&mut self, i: usize) {
        let n = usize::from(self.count);
        self.ranges.copy_within(i + 1..n, i);
        self.opened.copy_within(i + 1..n, i);
        let low = self.acked & ((1 << i) - 1);
        let high = (self.acked >> (i + 1)) << i;
        self.acked = low | high;
        self.count -= 1;
    }

    /// The peer acknowledged up to `ack`: the plain holes it covers become acknowledged ones
    /// (the capture missed those bytes, unless they come later); their size in bytes.
    fn acked(&mut self, ack: Seq) -> u64 {
        let mut missed = 0;
        for i in 0..usize::from(self.count) {
            let (a, b) = self.ranges[i];
            if ack >= b && !self.is_acked(i) {
                missed += u64::from(b.diff(a).max(0) as u32);
                self.acked |= 1 << i;
            }
        }
        missed
    }
}

/// What most sides of most connections never do, counted once it happens (`Endpoint`'s
/// methods of the same names read it).
#[derive(Clone, Debug)]
struct Unusual {
    syn_retransmits: u32,
    retrans_bytes: u64,
    retrans_segments: u32,
    out_of_order: u32,
    keepalives: u32,
    duplicates: u32,
    /// The payload of those duplicates.
    duplicate_payload_bytes: u64,
    unseen_acked_bytes: u64,
    /// When the peer's ACKs first and last showed bytes the capture missed.
    unseen_seen_ns: Option<(i64, i64)>,
    ip_fragments: bool,
    sack_blocks: u32,
    zero_windows: u32,
    holes: Holes,
    /// This side's first RST (most connections close with FINs).
    rst: Option<At>,
    /// The ISN a SYN with another one replaced (two SYN-ACKs answering one SYN's copies).
    replaced_isn: Option<Seq>,
    /// The sequence number of a FIN the capture missed, by the peer's ACK of one more than
    /// this side sent, and that ACK's time: until data beyond it shows it was a byte of data.
    unseen_fin: Option<(Seq, i64)>,
}

impl Unusual {
    /// An ACK at `ts_ns` showed bytes the capture missed.
    fn saw_unseen(&mut self, ts_ns: i64) {
        let first = self.unseen_seen_ns.map_or(ts_ns, |s| s.0);
        self.unseen_seen_ns = Some((first, ts_ns));
    }

    /// Nothing unusual yet (what a side without the box reads).
    const NONE: Unusual = Unusual {
        syn_retransmits: 0,
        retrans_bytes: 0,
        retrans_segments: 0,
        out_of_order: 0,
        keepalives: 0,
        duplicates: 0,
        duplicate_payload_bytes: 0,
        unseen_acked_bytes: 0,
        unseen_seen_ns: None,
        ip_fragments: false,
        sack_blocks: 0,
        zero_windows: 0,
        holes: Holes {
            ranges: [(Seq(0), Seq(0)); MAX_HOLES],
            opened: [0; MAX_HOLES],
            count: 0,
            acked: 0,
        },
        rst: None,
        replaced_isn: None,
        unseen_fin: None,
    };
}

/// Everything tcpwhy knows about one side of a connection.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
    /// The ISN, next sequence, highest ACK, scaled window, MSS and window scale (from the
    /// SYN, RFC 7323 section 2.2), each valid once its bit of `known` is set (as Options they
    /// took 24 bytes more per side): read them through `isn()`, `next_seq()`, `max_ack()`,
    /// `window_scaled()`, `mss()`, `window_scale()`.
    isn_v: Seq,
    next_seq_v: Seq,
    max_ack_v: Seq,
    window_scaled_v: u32,
    mss_v: u16,
    window_scale_v: u8,
    known: u8,
    pub packets: u64,
    /// Sum of frame lengths on the wire (what tshark's conversation table counts).
    pub frame_bytes: u64,
    /// Payload bytes sent for the first time.
    pub unique_bytes: u64,
    pub data_segments: u64,
    /// Last advertised window, raw (scaled: `window_scaled()`).
    pub window_raw: u16,
    pub fin: Option<At>,
    pub last_ts: i64,
    /// Time for this side's data to be acknowledged by the peer, as seen from the capture point.
    pub ack_rtt: RttStats,
    /// The segment being timed for `ack_rtt` (Karn: only never-retransmitted data).
    /// (The end of its sequence range, and when it was sent; none when `timed_at` is.) The
    /// time is kept to the even nanosecond: its lowest bit says whether a segment of at least
    /// `PROMPT_FOLLOW_BYTES` followed within `PROMPT_FOLLOW_NS` (`count_new_data`), which
    /// makes the sample prompt (`RttStats::add`). A bit of its own would make every side 8
    /// bytes longer.
    timed_end: Seq,
    timed_at: Ts,
    /// A TSval this side sent and when it was first seen, waiting for the peer's echo.
    /// (None when `ts_pending_at` is.)
    ts_pending: u32,
    ts_pending_at: Ts,
    /// Counts of what most sides of most connections never do (retransmit, reorder, probe,
    /// ...), their sequence holes and their RST, allocated at the first (inline they were 48
    /// bytes per side of every connection): read them through the methods of the same names.
    unusual: Option<Box<Unusual>>,
    /// The last segment's identity (a hash of the headers that change between two sends);
    /// `last_ts` says when it was seen. And the low 24 bits of the one before it: a copy
    /// forwarded by a bridge or a router can come after the next original (A, B, A', B'), and
    /// 3 bytes fit where two bools and padding were (the bools are bits of `known` now).
    pub(crate) last_sig: u32,
    pub(crate) prev_sig: [u8; 3],
    // This side's IPv4 IDs are `Connection::ids` (`IpIds`): there their 4 bytes share a word
    // with the connection's small fields; here they would make each side 8 bytes longer.
}

/// What one side's IPv4 IDs said so far: the ID of its last segment, how many IDs it used
/// (its segments: a TSO or GRO frame carries several, each with its own ID), and how many
/// segments in a row came with the ID that followed (saturating; bit `ID_DATA`: that segment
/// carried payload; bits `ID_SHARED`: how many skips were no lost segment). A sender whose
/// IDs follow each other (Linux: one counter per socket) shows a segment lost before the
/// capture point as an ID skipped, and one reordered on the way as an ID that went back
/// (`IpIds::order`). A sender whose IDs skipped twice with nothing lost (Windows: one counter
/// for the host, which its other connections use too) says nothing by a skip any more.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IpIds {
    last_ip_id: u16,
    last_ids: u8,
    id_run: u8,
}

impl IpIds {
    /// Note segment `seg`'s IPv4 ID (`packets`: the side's packets before it; `mss`: the
    /// segment size, to count the IDs a TSO or GRO frame used). Returns what the IDs say about
    /// it, when this side's IDs have followed each other (`ID_RUN` segments in a row): how many
    /// IDs were skipped just before it (segments this side sent that the capture did not see),
    /// or that it was sent before the last segment seen (`IdOrder::Earlier`: reordered on the
    /// way; the run goes on, the last ID stays). A skip breaks the run unless the caller explains it (`skip_unexplained`
    /// otherwise: the skipped segment was a lost one, resent now).
    pub(crate) fn order(&mut self, packets: u64, seg: &TcpSegment, mss: u32) -> IdOrder {
        let had_data = self.id_run & ID_DATA != 0;
        let shared = self.id_run & ID_SHARED;
        let run = self.id_run & ID_RUN_MAX;
        if seg.ip_id == 0 {
            self.id_run = 0;
            return IdOrder::Unknown;
        }
        let expected = self
            .last_ip_id
            .wrapping_add(u16::from(self.last_ids.max(1)));
        let skipped = seg.ip_id.wrapping_sub(expected);
        let counted = packets > 0 && run >= ID_RUN && shared < 2 * ID_SHARED_ONE;
        if counted && (1..=64).contains(&expected.wrapping_sub(seg.ip_id)) {
            return IdOrder::Earlier;
        }
        // Before a run is seen (a capture cut into a connection): an ID strictly below the
        // last one, by at most 64, also says the segment left before it. A resend takes a
        // new ID from the sender's counter (per socket or per host: above the last); a
        // sender whose IDs do not move repeats the last one; random IDs land there once in
        // a thousand segments.
        if packets > 0 && (1..=64).contains(&self.last_ip_id.wrapping_sub(seg.ip_id)) {
            return IdOrder::Earlier;
        }
        let order = if counted && (1..=8).contains(&skipped) {
            IdOrder::Skipped(skipped, had_data)
        } else {
            IdOrder::Next
        };
        let run = match order {
            // Kept until the caller says whether the skip is explained.
            IdOrder::Skipped(..) => ID_RUN,
            _ if packets > 0 && skipped == 0 => (run + 1).min(ID_RUN_MAX),
            _ => 0,
        };
        self.id_run = run | shared | if seg.payload_len > 0 { ID_DATA } else { 0 };
        self.last_ip_id = seg.ip_id;
        let segs = seg.payload_len.div_ceil(mss.max(1)).max(1);
        self.last_ids = u8::try_from(segs).unwrap_or(u8::MAX);
        order
    }

    /// The IDs `order` found skipped were not a lost segment: the run of consecutive IDs is
    /// broken, and the skips with nothing lost are counted (to `ID_SHARED`, where they stay).
    pub(crate) fn skip_unexplained(&mut self) {
        let shared = (self.id_run & ID_SHARED)
            .saturating_add(ID_SHARED_ONE)
            .min(ID_SHARED);
        self.id_run = (self.id_run & ID_DATA) | shared;
    }
}

/// Segments in a row with consecutive IPv4 IDs before a skipped ID is taken as a lost one.
const ID_RUN: u8 = 4;
/// `IpIds::id_run` bit: the last segment carried payload (a lost tail follows data).
const ID_DATA: u8 = 0x80;
/// `IpIds::id_run` bits: skips that were no lost segment, counted (saturating at three) in
/// steps of `ID_SHARED_ONE`; from two on, the sender's IDs say nothing by a skip.
const ID_SHARED: u8 = 0x60;
const ID_SHARED_ONE: u8 = 0x20;
/// `IpIds::id_run` bits: the run of consecutive IDs (saturating).
const ID_RUN_MAX: u8 = 0x1f;

/// What a segment's IPv4 ID says about it (`IpIds::order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdOrder {
    /// No IDs to count (IPv6, ID 0), or not consecutive so far.
    Unknown,
    /// The ID after the last one.
    Next,
    /// This many IDs skipped before it; and whether the segment before it carried payload.
    Skipped(u16, bool),
    /// Sent before the last segment seen (reordered on the way).
    Earlier,
}

/// Bits of `Endpoint::known`.
const ISN: u8 = 1;
const NEXT_SEQ: u8 = 2;
const MAX_ACK: u8 = 4;
const WINDOW_SCALED: u8 = 8;
const MSS: u8 = 16;
const WINDOW_SCALE: u8 = 32;
const SACK_PERMITTED: u8 = 64;
const TIMESTAMPS: u8 = 128;

/// A value of `Endpoint` valid under `bit` of `known`: store `v` and set the bit, or clear it.
#[inline]
fn set_known<T>(known: &mut u8, bit: u8, slot: &mut T, v: Option<T>) {
    match v {
        Some(v) => {
            *slot = v;
            *known |= bit;
        }
        None => *known &= !bit,
    }
}

impl Endpoint {
    /// The peer's handshake ACK acknowledged `ack`, one past the ISN this side's later SYN
    /// replaced (two SYN-ACKs with different ISNs answering copies of one SYN: the peer took
    /// the first). While this side has sent nothing after its SYN, that ISN is its sequence
    /// space again; returns whether it was.
    pub(crate) fn take_back_replaced_isn(&mut self, ack: Seq) -> bool {
        let Some(old) = self.unusual.as_ref().and_then(|u| u.replaced_isn) else {
            return false;
        };
        let sent_nothing = self.isn().map(|i| i + 1) == self.next_seq() && self.unique_bytes == 0;
        if ack != old + 1 || !sent_nothing {
            return false;
        }
        let later = self.isn_v;
        self.isn_v = old;
        self.set_next_seq(old + 1);
        self.unusual().replaced_isn = Some(later);
        true
    }

    /// Initial sequence number from this side's SYN.
    #[inline]
    pub fn isn(&self) -> Option<Seq> {
        (self.known & ISN != 0).then_some(self.isn_v)
    }
    /// The sequence number after the highest byte (or SYN/FIN) this side sent.
    #[inline]
    pub fn next_seq(&self) -> Option<Seq> {
        (self.known & NEXT_SEQ != 0).then_some(self.next_seq_v)
    }
    /// Highest acknowledgment this side sent.
    #[inline]
    pub fn max_ack(&self) -> Option<Seq> {
        (self.known & MAX_ACK != 0).then_some(self.max_ack_v)
    }
    /// Last advertised window, scaled (only when the handshake was seen; at most 65535 << 14:
    /// the tracker caps the scale at 14 as RFC 7323 says).
    #[inline]
    pub fn window_scaled(&self) -> Option<u32> {
        (self.known & WINDOW_SCALED != 0).then_some(self.window_scaled_v)
    }
    /// The MSS option of this side's SYN.
    #[inline]
    pub fn mss(&self) -> Option<u16> {
        (self.known & MSS != 0).then_some(self.mss_v)
    }
    /// The window scale option of this side's SYN, as sent (RFC 7323 section 2.2).
    #[inline]
    pub fn window_scale(&self) -> Option<u8> {
        (self.known & WINDOW_SCALE != 0).then_some(self.window_scale_v)
    }
    /// This side's SYN offered SACK (RFC 2018).
    #[inline]
    pub fn sack_permitted(&self) -> bool {
        self.known & SACK_PERMITTED != 0
    }
    /// This side sent TCP timestamps (RFC 7323).
    #[inline]
    pub fn timestamps(&self) -> bool {
        self.known & TIMESTAMPS != 0
    }
    /// Count a segment as sent again although the capture never saw its first transmission
    /// (lost before the capture point): a retransmitted segment, its bytes already counted as
    /// new here.
    pub(crate) fn count_unseen_resend(&mut self) {
        let u = self.unusual();
        u.retrans_segments += 1;
    }

    /// Whether `sig` is the identity of this side's last segment or of the one before it.
    #[inline]
    pub(crate) fn recently_sent(&self, sig: u32) -> bool {
        self.packets > 0 && (self.last_sig == sig || self.prev_sig == low24(sig))
    }
    /// Remember `sig` as this side's last segment's identity.
    #[inline]
    pub(crate) fn note_sent(&mut self, sig: u32) {
        self.prev_sig = low24(self.last_sig);
        self.last_sig = sig;
    }
    #[inline]
    fn set_next_seq(&mut self, s: Seq) {
        self.next_seq_v = s;
        self.known |= NEXT_SEQ;
    }
    #[inline]
    pub(crate) fn set_max_ack(&mut self, s: Seq) {
        self.max_ack_v = s;
        self.known |= MAX_ACK;
    }
    #[inline]
    pub(crate) fn set_window_scaled(&mut self, w: Option<u32>) {
        set_known(&mut self.known, WINDOW_SCALED, &mut self.window_scaled_v, w);
    }

    /// SYNs sent again with the same ISN.
    pub fn syn_retransmits(&self) -> u32 {
        self.usual().syn_retransmits
    }
    /// Payload bytes sent again.
    pub fn retrans_bytes(&self) -> u64 {
        self.usual().retrans_bytes
    }
    /// Segments that sent payload again.
    pub fn retrans_segments(&self) -> u32 {
        self.usual().retrans_segments
    }
    /// Segments that filled a sequence hole (arrived out of order at the capture point).
    pub fn out_of_order(&self) -> u32 {
        self.usual().out_of_order
    }
    /// Keep-alive probes (one old byte or none at next_seq - 1), not counted as retransmissions.
    pub fn keepalives(&self) -> u32 {
        self.usual().keepalives
    }
    /// The same packet captured again within 25 ms, with the same IPv4 ID or timestamps (a
    /// capture on both ends of a veth, on `any`, on a bridge and its port, a copy forwarded
    /// one hop later): counted as a packet, not as a retransmission.
    pub fn duplicates(&self) -> u32 {
        self.usual().duplicates
    }
    /// When this side closed its sending half: its FIN, or (a FIN the capture missed) the
    /// peer's ACK of one sequence number past all this side sent, with no data after it.
    pub fn closed_ns(&self) -> Option<i64> {
        self.fin
            .map(|a| a.ts_ns)
            .or(self.usual().unseen_fin.map(|(_, t)| t))
    }
    /// Bytes this side's peer acknowledged that the capture never saw this side send.
    pub fn unseen_acked_bytes(&self) -> u64 {
        self.usual().unseen_acked_bytes
    }
    /// When the peer's ACKs first and last showed bytes of this side that the capture missed
    /// (times of those ACKs), if they ever did.
    pub fn unseen_acked_span(&self) -> Option<(i64, i64)> {
        self.usual().unseen_seen_ns
    }
    /// This side sent first IP fragments (their payload counts that fragment only, so the
    /// peer acknowledges more than was seen).
    pub fn ip_fragments(&self) -> bool {
        self.usual().ip_fragments
    }
    /// SACK blocks this side sent.
    pub fn sack_blocks(&self) -> u32 {
        self.usual().sack_blocks
    }
    /// Zero windows this side advertised (outside SYNs).
    pub fn zero_windows(&self) -> u32 {
        self.usual().zero_windows
    }

    /// The first RST this side sent (kept with the unusual: most connections close with FINs).
    pub fn rst(&self) -> Option<At> {
        self.usual().rst
    }
    /// Forget this side's RST (the connection carried on after it).
    pub(crate) fn clear_rst(&mut self) {
        if let Some(u) = &mut self.unusual {
            u.rst = None;
        }
    }

    /// The counts of the unusual (all zero until the first).
    #[inline]
    fn usual(&self) -> &Unusual {
        self.unusual.as_deref().unwrap_or(&Unusual::NONE)
    }

    /// The counts of the unusual, allocated now if this is the first.
    fn unusual(&mut self) -> &mut Unusual {
        self.unusual.get_or_insert_with(|| Box::new(Unusual::NONE))
    }

    /// Count the packet as the same one captured again.
    pub(crate) fn count_duplicate(&mut self, payload_len: u32) {
        let u = self.unusual();
        u.duplicates += 1;
        u.duplicate_payload_bytes += u64::from(payload_len);
    }

    /// Payload bytes sent, counting retransmissions and packets captured twice (what tshark
    /// counts): the unique bytes plus the rest, which only sides that send again or are
    /// captured twice have (kept with what they do; inline, 8 bytes of every side).
    pub fn payload_bytes(&self) -> u64 {
        let u = self.usual();
        self.unique_bytes + u.retrans_bytes + u.duplicate_payload_bytes
    }

    pub(crate) fn new(addr: IpAddr, port: u16, ts_ns: i64) -> Endpoint {
        Endpoint {
            addr,
            port,
            isn_v: Seq(0),
            next_seq_v: Seq(0),
            max_ack_v: Seq(0),
            window_scaled_v: 0,
            mss_v: 0,
            window_scale_v: 0,
            known: 0,
            packets: 0,
            frame_bytes: 0,
            unique_bytes: 0,
            data_segments: 0,
            window_raw: 0,
            fin: None,
            last_ts: ts_ns,
            ack_rtt: RttStats::default(),
            timed_end: Seq(0),
            timed_at: Ts::NONE,
            ts_pending: 0,
            ts_pending_at: Ts::NONE,
            unusual: None,
            last_sig: 0,
            prev_sig: [0; 3],
        }
    }

    /// Account a segment this side sent. Returns (it carried new sequence space, it carried
    /// payload already sent: a retransmission, how long the sequence hole it filled had been
    /// open: 0 when it filled none). `peer_acked` is the highest ACK the peer sent: a
    /// keep-alive probe repeats a byte the peer has already acknowledged; an unacknowledged
    /// byte sent again is a retransmission. A segment that fills a hole the capture saw open
    /// (data that came after later data) is neither: reordering, or the retransmission of a
    /// segment lost before the capture point, which the hole's age lets a detector tell apart.
    pub(crate) fn on_send(
        &mut self,
        seg: &TcpSegment,
        at: At,
        frame_len: u32,
        peer_acked: Option<Seq>,
        sent_earlier: bool,
    ) -> (bool, bool, i64) {
        self.packets += 1;
        self.frame_bytes += u64::from(frame_len);
        if seg.first_fragment {
            self.unusual().ip_fragments = true;
        }
        self.last_ts = at.ts_ns;
        let o = &seg.options;
        if o.timestamp.is_some() {
            self.known |= TIMESTAMPS;
        }
        if o.sack_count > 0 {
            self.unusual().sack_blocks += u32::from(o.sack_count);
        }
        let syn = seg.flags.syn();
        if syn {
            match self.isn() {
                Some(isn) if isn == seg.seq => self.unusual().syn_retransmits += 1,
                old => {
                    // A new ISN defines the sequence space: forget numbers seen before it
                    // (a stale ACK from earlier state on the tuple).
                    if let Some(old) = old {
                        self.unusual().replaced_isn = Some(old);
                    }
                    self.known &= !NEXT_SEQ;
                    if let Some(u) = &mut self.unusual {
                        u.holes.count = 0;
                        u.holes.acked = 0;
                    }
                    self.isn_v = seg.seq;
                    self.known |= ISN;
                    set_known(&mut self.known, MSS, &mut self.mss_v, o.mss);
                    set_known(
                        &mut self.known,
                        WINDOW_SCALE,
                        &mut self.window_scale_v,
                        o.window_scale,
                    );
                    self.known = (self.known & !SACK_PERMITTED)
                        | if o.sack_permitted { SACK_PERMITTED } else { 0 };
                }
            }
        }
        if seg.flags.fin() && self.fin.is_none() {
            self.fin = Some(at);
        }
        if seg.flags.rst() {
            if self.rst().is_none() {
                self.unusual().rst = Some(at);
            }
            // An RST's sequence number says nothing about data sent.
            return (false, false, 0);
        }
        if seg.window == 0 && !syn {
            self.unusual().zero_windows += 1;
        }
        self.window_raw = seg.window;

        let len = seg.payload_len;
        let span = len + u32::from(syn) + u32::from(seg.flags.fin());
        let start = seg.seq;
        let end = start + span;
        if let Some(u) = self.unusual.as_mut() {
            if let Some((fin, _)) = u.unseen_fin {
                if seg.flags.fin() && start + len == fin {
                    // The FIN, captured after the ACK of it.
                    u.unseen_fin = None;
                } else if len > 0 && start > fin {
                    // Data after it: the byte the peer acknowledged was data the capture missed.
                    u.unseen_fin = None;
                    u.unseen_acked_bytes += 1;
                    u.saw_unseen(at.ts_ns);
                }
            }
        }
        let Some(next) = self.next_seq() else {
            // First segment seen from this side: everything in it is new. Without the SYN,
            // its start is the lowest sequence seen (`isn_v` holds it while `ISN` is unknown).
            if self.known & ISN == 0 {
                self.isn_v = start;
            }
            self.set_next_seq(end);
            self.count_new_data(len, 0, at, end);
            return (span > 0, false, 0);
        };
        if end > next {
            if start > next {
                // A pure ACK whose sequence jumps ahead shows that the bytes before it were sent,
                // not when: its hole's age runs from the first data segment beyond it.
                let opened = if len == 0 { i64::MAX } else { at.ts_ns };
                self.add_hole(next, start, false, opened);
            }
            if len > 0 {
                self.date_holes(start, at.ts_ns);
            }
            let fresh = end.diff(start.max(next)) as u32;
            let fresh_payload = fresh.min(len);
            self.set_next_seq(end);
            let old = len - fresh_payload;
            // Payload below `next` that fills a hole was never seen before: reordering, or data
            // captured after the ACK that covers it. The rest was sent before.
            let (late, opened) = if old > 0 {
                self.fill_holes(start, start + old)
            } else {
                (0, i64::MAX)
            };
            let again = old - late;
            self.count_new_data(fresh_payload + late, again, at, end);
            (true, again > 0, hole_age(opened, at.ts_ns))
        } else {
            if len > 0 {
                let (late, opened) = self.fill_holes(start, start + len);
                // In a connection that began before the capture, payload below everything seen
                // from this side whose IPv4 ID says it left before the last segment seen: the
                // first transmission, reordered on the way (a resend takes a newer ID).
                let unseen_before = self.known & ISN == 0 && end <= self.isn_v;
                let reordered_before = late == 0 && sent_earlier && unseen_before;
                if reordered_before {
                    self.isn_v = start;
                }
                if late == len || reordered_before {
                    self.unusual().out_of_order += 1;
                    self.unique_bytes += u64::from(len);
                    self.data_segments += 1;
                    return (false, false, hole_age(opened, at.ts_ns));
                } else if late == 0 && len <= 1 && start == (next - 1) && peer_acked == Some(next) {
                    self.unusual().keepalives += 1;
                } else {
                    self.unique_bytes += u64::from(late);
                    self.count_retransmission(len - late);
                    return (false, true, hole_age(opened, at.ts_ns));
                }
            } else if len == 0 && !syn && start == (next - 1) && !seg.flags.fin() {
                self.unusual().keepalives += 1;
            }
            (false, false, 0)
        }
    }

    fn count_new_data(&mut self, fresh: u32, old: u32, at: At, end: Seq) {
        if fresh + old == 0 {
            return;
        }
        self.data_segments += 1;
        self.unique_bytes += u64::from(fresh);
        if old > 0 {
            self.count_retransmission_bytes(old);
        }
        match self.timed_at.get() {
            None if old == 0 => {
                self.timed_end = end;
                // Even (not followed), and never the one value `Ts` cannot hold.
                self.timed_at = Ts::new((at.ts_ns & !1).max(i64::MIN + 2));
            }
            Some(t0)
                if old == 0
                    && fresh >= PROMPT_FOLLOW_BYTES
                    && at.ts_ns.saturating_sub(t0) <= PROMPT_FOLLOW_NS =>
            {
                self.timed_at = Ts::new(t0 | 1);
            }
            _ => {}
        }
    }

    fn count_retransmission(&mut self, len: u32) {
        self.data_segments += 1;
        self.count_retransmission_bytes(len);
    }

    fn count_retransmission_bytes(&mut self, len: u32) {
        let u = self.unusual();
        u.retrans_bytes += u64::from(len);
        u.retrans_segments += 1;
        // Karn's rule: an RTT sample spanning a retransmission is ambiguous.
        self.timed_at = Ts::NONE;
        self.ts_pending_at = Ts::NONE;
    }

    fn add_hole(&mut self, from: Seq, to: Seq, acked: bool, now: i64) {
        self.unusual().holes.add(from, to, acked, now);
    }

    /// Holes that end at or before `seq` and were opened by a pure ACK date from `now`: data
    /// beyond them has come.
    fn date_holes(&mut self, seq: Seq, now: i64) {
        if let Some(u) = self.unusual.as_mut() {
            let h = &mut u.holes;
            for i in 0..usize::from(h.count) {
                if h.opened[i] == i64::MAX && h.ranges[i].1 <= seq {
                    h.opened[i] = now;
                }
            }
        }
    }

    /// Take `[from, to)` out of this side's holes; the bytes it filled, and when the oldest
    /// plain hole it filled opened. Bytes of holes the peer had acknowledged no longer count
    /// as missed by the capture: they came late.
    fn fill_holes(&mut self, from: Seq, to: Seq) -> (u32, i64) {
        let Some(u) = self.unusual.as_mut() else {
            return (0, i64::MAX);
        };
        let (plain, acked, opened) = u.holes.fill(from, to);
        u.unseen_acked_bytes = u.unseen_acked_bytes.saturating_sub(u64::from(acked));
        (plain + acked, opened)
    }

    /// The peer acknowledged up to `ack` (echoing `tsecr` if it uses timestamps): close holes
    /// it covers (the capture missed those bytes) and take one RTT sample when the ACK advances
    /// over data being timed. A timestamp echo of the pending TSval gives an unambiguous sample
    /// (RFC 7323 section 4.1); otherwise only never-retransmitted data is timed (Karn), and an
    /// ACK reporting a duplicate (`dsack`, RFC 2883) says the data was sent twice, once
    /// unseen by the capture: no sample then either.
    /// The peer acknowledged up to `ack` (from `prev`) while the capture holds not one packet
    /// of this side (one direction captured): an ACK that moves by one sequence number, and
    /// never again, is this side's FIN (`closed_ns`); data moves it by its length.
    pub(crate) fn on_acked_unseen(&mut self, prev: Seq, ack: Seq, ts_ns: i64) {
        if self.fin.is_some() {
            return;
        }
        if self.usual().unseen_fin.is_some() {
            // It moved again: that was a byte of data.
            self.unusual().unseen_fin = None;
        } else if ack.diff(prev) == 1 {
            self.unusual().unseen_fin = Some((prev, ts_ns));
        }
    }

    pub(crate) fn on_acked(&mut self, ack: Seq, tsecr: Option<u32>, dsack: bool, ts_ns: i64) {
        if let Some(u) = &mut self.unusual {
            let missed = u.holes.acked(ack);
            if missed > 0 {
                u.unseen_acked_bytes += missed;
                u.saw_unseen(ts_ns);
            }
        }
        if let Some(next) = self.next_seq() {
            // One past a side first seen mid-stream that has sent no data: the answer to a
            // keep-alive probe (sent one below the next sequence, RFC 9293 section 3.8.4) or
            // to a FIN the capture missed, not data it missed.
            let keepalive_reply =
                ack.diff(next) == 1 && self.isn().is_none() && self.unique_bytes == 0;
            // One past all this side sent, which sent no FIN: the FIN the capture missed (it
            // takes one sequence number), not a byte of data, unless data follows it.
            let unseen_fin = ack.diff(next) == 1 && self.fin.is_none();
            if ack > next && keepalive_reply {
                self.set_next_seq(ack);
            } else if ack > next && unseen_fin {
                self.unusual().unseen_fin = Some((next, ts_ns));
                self.set_next_seq(ack);
            } else if ack > next {
                // Acknowledges bytes never seen at all: the capture missed the end of a flight,
                // or will see it after this ACK (a hole that a late segment may still fill).
                let u = self.unusual();
                u.unseen_acked_bytes += u64::from(ack.diff(next) as u32);
                u.saw_unseen(ts_ns);
                u.holes.add(next, ack, true, ts_ns);
                self.set_next_seq(ack);
            }
        }
        let (end, Some(t0)) = (self.timed_end, self.timed_at.get()) else {
            return;
        };
        if ack < end {
            return;
        }
        self.timed_at = Ts::NONE;
        let (t0, prompt) = (t0 & !1, t0 & 1 == 1);
        let pending = self.ts_pending_at.take().map(|t| (self.ts_pending, t));
        match (tsecr, pending) {
            (Some(echo), Some((v, t_v))) if echo == v => self.ack_rtt.add(ts_ns - t_v, prompt),
            (Some(_), Some(_)) => {}
            _ if dsack => {}
            _ => self.ack_rtt.add(ts_ns - t0, prompt),
        }
    }

    /// Remember the TSval of the timed data segment, for `on_acked`.
    pub(crate) fn on_tsval(&mut self, tsval: u32, ts_ns: i64) {
        if self.timed_at.is_some() && self.ts_pending_at.is_none() {
            self.ts_pending = tsval;
            self.ts_pending_at = Ts::new(ts_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::TcpFlags;

    fn seg(flags: u8, seq: u32, len: u32) -> TcpSegment {
        TcpSegment {
            seq: Seq(seq),
            flags: TcpFlags(flags),
            payload_len: len,
            window: 1000,
            ..TcpSegment::EMPTY
        }
    }

    #[test]
    fn a_send_says_whether_it_was_new_and_whether_it_was_sent_again() {
        // (new sequence space, payload sent again), segment by segment.
        let mut e = Endpoint::new("10.0.0.1".parse().unwrap(), 40000, 0);
        let at = |n: u64| At::new(n, n as i64 * 1000);
        let acked = Some(Seq(0));
        let send = |e: &mut Endpoint, n: u64, flags: u8, seq: u32, len: u32| {
            let (new, again, _) = e.on_send(&seg(flags, seq, len), at(n), 54 + len, acked, false);
            (new, again)
        };
        assert_eq!(send(&mut e, 1, TcpFlags::SYN, 100, 0), (true, false));
        assert_eq!(send(&mut e, 2, TcpFlags::ACK, 101, 500), (true, false));
        // 250 bytes sent before and 250 new: both.
        assert_eq!(send(&mut e, 3, TcpFlags::ACK, 351, 500), (true, true));
        // All of it sent before.
        assert_eq!(send(&mut e, 4, TcpFlags::ACK, 101, 500), (false, true));
        // A pure ACK, and a reset: neither.
        assert_eq!(send(&mut e, 5, TcpFlags::ACK, 851, 0), (false, false));
        assert_eq!(send(&mut e, 6, TcpFlags::RST, 851, 0), (false, false));
        assert_eq!((e.retrans_segments(), e.retrans_bytes()), (2, 750));
        // The first RST is the one kept; forgotten when the connection carries on.
        send(&mut e, 7, TcpFlags::RST, 851, 0);
        assert_eq!(e.rst().map(|a| a.frame()), Some(6));
        e.clear_rst();
        assert_eq!(e.rst(), None);
    }

    #[test]
    fn a_side_that_does_nothing_unusual_allocates_nothing() {
        // SYN, two data segments, FIN, all acknowledged: no box for the unusual counts (it
        // would cost every connection an allocation), and they read zero. A retransmission
        // allocates it and is counted.
        let mut e = Endpoint::new("10.0.0.1".parse().unwrap(), 40000, 0);
        let at = |n: u64| At::new(n, n as i64 * 1000);
        // Frame `n`, acknowledging the peer's byte 0 (none for the SYN).
        let send = |e: &mut Endpoint, n: u64, flags: u8, seq: u32, len: u32| {
            let acked = (n > 1).then_some(Seq(0));
            e.on_send(&seg(flags, seq, len), at(n), 54 + len, acked, false);
        };
        send(&mut e, 1, TcpFlags::SYN, 100, 0);
        send(&mut e, 2, TcpFlags::ACK, 101, 500);
        e.on_acked(Seq(601), None, false, 3000);
        send(&mut e, 4, TcpFlags::ACK, 601, 500);
        send(&mut e, 5, TcpFlags::ACK | TcpFlags::FIN, 1101, 0);
        e.on_acked(Seq(1102), None, false, 6000);
        assert!(e.unusual.is_none());
        assert_eq!(e.rst(), None);
        assert_eq!(
            (e.retrans_segments(), e.keepalives(), e.unseen_acked_bytes()),
            (0, 0, 0)
        );
        assert_eq!((e.unique_bytes, e.data_segments), (1000, 2));
        send(&mut e, 7, TcpFlags::ACK, 601, 500);
        assert_eq!((e.retrans_segments(), e.retrans_bytes()), (1, 500));
        assert!(e.unusual.is_some());
    }
}
