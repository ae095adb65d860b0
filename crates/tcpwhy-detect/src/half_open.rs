//! Half-open attempts summed over the whole capture, for the capture-level findings
//! `syn-flood` and `syn-scan` (detectors/syn_flood.rs, detectors/syn_scan.rs).
//!
//! Every finished connection whose client sent SYNs and never completed a handshake nor sent
//! data is an attempt; each is added to a summary by target service (address and port), by
//! source address, and by (source, target) pair, with how it was answered. A worker thread
//! keeps its own summary; the summaries are merged when the capture ends. Every part merges
//! exactly (counts add, spans widen, the first frames are the smallest of both), so the merged
//! summary, and the findings made from it, are those of one thread that saw every connection,
//! whatever the sharding.
//!
//! Memory is bounded: each map holds at most `MAX_KEYS` keys; one that would grow beyond is
//! dropped and counted as "more than that" (a flood of spoofed sources drops the maps of
//! sources and pairs at its 65 537th source). Distinct sources and targets are then
//! estimated by HyperLogLog sketches (4 KiB each, about 1.6% standard error), which merge
//! exactly too. Worst case about 25 MB per worker (the maps full: 9, 9 and 7 MB), reached
//! only by floods and scans.

use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::net::IpAddr;
use tcpwhy_track::{Connection, RoleSource};

/// Keys kept per map (targets, sources, (source, target) pairs) before it is dropped: a
/// scan of a /16 on one port fits.
pub(crate) const MAX_KEYS: usize = 1 << 16;
/// Frames kept as a sample of a target's attempts (the first ones).
pub(crate) const SAMPLE: usize = 10;
/// A client's TCP stack sends an unanswered SYN again after its initial retransmission
/// timeout: 1 s (RFC 6298; Linux, Windows, macOS), 3 s on old stacks (RFC 1122). A single SYN
/// that went unanswered while the capture went on this long after it was not sent by a stack
/// that wanted the connection.
pub(crate) const RETRY_WITHIN_NS: i64 = 3_000_000_000;

/// How an attempt was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A SYN-ACK, which the client never acknowledged.
    SynAck,
    /// A reset (the port is closed).
    Rst,
    /// Something else (an ACK with other numbers: earlier state on the tuple).
    Other,
    /// Nothing.
    None,
}

/// The first frames of an entity's attempts (their connection ids, ascending): the smallest
/// `SAMPLE` of all, whichever thread saw them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    ids: [u64; SAMPLE],
    len: u8,
}

impl Sample {
    fn add(&mut self, id: u64) {
        let n = usize::from(self.len);
        let pos = self.ids[..n].partition_point(|&x| x < id);
        if pos == SAMPLE || self.ids[..n].get(pos) == Some(&id) {
            return;
        }
        let end = n.min(SAMPLE - 1);
        self.ids.copy_within(pos..end, pos + 1);
        self.ids[pos] = id;
        self.len = (n + 1).min(SAMPLE) as u8;
    }

    fn merge(&mut self, o: &Sample) {
        for &id in o.ids() {
            self.add(id);
        }
    }

    pub fn ids(&self) -> &[u64] {
        &self.ids[..usize::from(self.len)]
    }
}

/// The attempts of one target, source or pair.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    pub attempts: u32,
    /// Attempts no client stack makes (`HalfOpen::add`).
    pub crafted: u32,
    pub syn_ack: u32,
    pub rst: u32,
    pub other: u32,
    pub none: u32,
    /// Attempts whose SYN was sent again.
    pub retried: u32,
    /// The first and the last attempt's first SYN.
    pub first_ns: i64,
    pub last_ns: i64,
}

impl Tally {
    fn add(&mut self, a: &Attempt) {
        if self.attempts == 0 {
            (self.first_ns, self.last_ns) = (a.ts_ns, a.ts_ns);
        }
        self.attempts = self.attempts.saturating_add(1);
        self.crafted = self.crafted.saturating_add(u32::from(a.crafted));
        self.retried = self.retried.saturating_add(u32::from(a.syns > 1));
        let n = match a.answer {
            Answer::SynAck => &mut self.syn_ack,
            Answer::Rst => &mut self.rst,
            Answer::Other => &mut self.other,
            Answer::None => &mut self.none,
        };
        *n = n.saturating_add(1);
        self.first_ns = self.first_ns.min(a.ts_ns);
        self.last_ns = self.last_ns.max(a.ts_ns);
    }

    fn merge(&mut self, o: &Tally) {
        if o.attempts == 0 {
            return;
        }
        if self.attempts == 0 {
            *self = *o;
            return;
        }
        self.attempts = self.attempts.saturating_add(o.attempts);
        self.crafted = self.crafted.saturating_add(o.crafted);
        self.syn_ack = self.syn_ack.saturating_add(o.syn_ack);
        self.rst = self.rst.saturating_add(o.rst);
        self.other = self.other.saturating_add(o.other);
        self.none = self.none.saturating_add(o.none);
        self.retried = self.retried.saturating_add(o.retried);
        self.first_ns = self.first_ns.min(o.first_ns);
        self.last_ns = self.last_ns.max(o.last_ns);
    }

    /// Crafted attempts per second over the span of the attempts (at least 1 s).
    pub fn crafted_per_s(&self) -> f64 {
        let span = (self.last_ns - self.first_ns).max(1_000_000_000);
        f64::from(self.crafted) / (span as f64 / 1e9)
    }
}

/// The attempts of one (source, target) pair, in brief, and the first one's id (the frame
/// of its SYN; `u64::MAX`: none yet).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairTally {
    pub attempts: u32,
    pub crafted: u32,
    pub syn_ack: u32,
    pub rst: u32,
    pub first_id: u64,
}

impl Default for PairTally {
    fn default() -> PairTally {
        PairTally {
            attempts: 0,
            crafted: 0,
            syn_ack: 0,
            rst: 0,
            first_id: u64::MAX,
        }
    }
}

impl PairTally {
    fn add(&mut self, a: &Attempt) {
        self.first_id = self.first_id.min(a.id);
        self.attempts = self.attempts.saturating_add(1);
        self.crafted = self.crafted.saturating_add(u32::from(a.crafted));
        self.syn_ack = self
            .syn_ack
            .saturating_add(u32::from(a.answer == Answer::SynAck));
        self.rst = self.rst.saturating_add(u32::from(a.answer == Answer::Rst));
    }

    fn merge(&mut self, o: &PairTally) {
        self.first_id = self.first_id.min(o.first_id);
        self.attempts = self.attempts.saturating_add(o.attempts);
        self.crafted = self.crafted.saturating_add(o.crafted);
        self.syn_ack = self.syn_ack.saturating_add(o.syn_ack);
        self.rst = self.rst.saturating_add(o.rst);
    }
}

/// A map of at most `cap` keys; `None` once it would have held more (which merges as "more").
#[derive(Clone, Debug)]
pub(crate) struct Capped<K, V> {
    map: Option<FxHashMap<K, V>>,
    cap: usize,
}

impl<K: Hash + Eq + Copy, V: Default> Capped<K, V> {
    fn new(cap: usize) -> Capped<K, V> {
        Capped {
            map: Some(FxHashMap::default()),
            cap,
        }
    }

    fn add(&mut self, k: K, f: impl FnOnce(&mut V)) {
        let Some(m) = &mut self.map else {
            return;
        };
        if m.len() >= self.cap && !m.contains_key(&k) {
            self.map = None;
            return;
        }
        f(m.entry(k).or_default());
    }

    fn merge(&mut self, o: Capped<K, V>, f: impl Fn(&mut V, &V)) {
        let (Some(m), Some(om)) = (&mut self.map, o.map) else {
            self.map = None;
            return;
        };
        for (k, v) in om {
            f(m.entry(k).or_default(), &v);
        }
        if m.len() > self.cap {
            self.map = None;
        }
    }

    /// The entries, if there were no more than the cap.
    pub fn entries(&self) -> Option<&FxHashMap<K, V>> {
        self.map.as_ref()
    }
}

/// A HyperLogLog sketch of distinct values (2^12 registers: about 1.6% standard error).
#[derive(Clone, Debug)]
pub(crate) struct Distinct {
    registers: Box<[u8; Distinct::M]>,
}

impl Default for Distinct {
    fn default() -> Distinct {
        Distinct {
            registers: Box::new([0; Distinct::M]),
        }
    }
}

impl Distinct {
    const P: u32 = 12;
    const M: usize = 1 << Self::P;

    fn add(&mut self, hash: u64) {
        let j = (hash >> (64 - Self::P)) as usize;
        let rank = ((hash << Self::P) | (1 << (Self::P - 1))).leading_zeros() as u8 + 1;
        if let Some(r) = self.registers.get_mut(j) {
            *r = (*r).max(rank);
        }
    }

    fn merge(&mut self, o: &Distinct) {
        for (a, b) in self.registers.iter_mut().zip(o.registers.iter()) {
            *a = (*a).max(*b);
        }
    }

    /// The estimated count (linear counting while registers are still empty).
    pub fn estimate(&self) -> u64 {
        let m = Self::M as f64;
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let raw = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }
}

/// A 64-bit hash of an address and port (MurmurHash3's finalizer over its bits).
fn hash_of(addr: IpAddr, port: u16) -> u64 {
    let bits = match addr {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v) ^ (1 << 127),
    };
    let mix = |mut x: u64| {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    };
    mix(mix((bits >> 64) as u64 ^ u64::from(port)) ^ bits as u64)
}

/// One attempt, as the summary counts it.
struct Attempt {
    id: u64,
    ts_ns: i64,
    syns: u32,
    answer: Answer,
    crafted: bool,
}

/// Every half-open attempt of the capture (or of one worker's share), summed.
#[derive(Clone, Debug)]
pub struct HalfOpen {
    pub(crate) total: Tally,
    /// By target service (address, port), with the first attempts' frames.
    pub(crate) targets: Capped<(IpAddr, u16), (Tally, Sample)>,
    /// By source address.
    pub(crate) sources: Capped<IpAddr, Tally>,
    /// By (source address, target address, target port).
    pub(crate) pairs: Capped<(IpAddr, IpAddr, u16), PairTally>,
    pub(crate) distinct_sources: Distinct,
    pub(crate) distinct_targets: Distinct,
    /// Which findings to make (`--disable`): syn-flood, syn-scan.
    pub(crate) flood_on: bool,
    pub(crate) scan_on: bool,
}

impl HalfOpen {
    pub(crate) fn new(flood_on: bool, scan_on: bool) -> HalfOpen {
        HalfOpen {
            total: Tally::default(),
            targets: Capped::new(MAX_KEYS),
            sources: Capped::new(MAX_KEYS),
            pairs: Capped::new(MAX_KEYS),
            distinct_sources: Distinct::default(),
            distinct_targets: Distinct::default(),
            flood_on,
            scan_on,
        }
    }

    /// A finished connection, finished at capture time `finished_ns` (for one still open at
    /// the end of the capture: the capture's last packet). Counted if it is a half-open
    /// attempt: it began with its client's SYN, and the client never completed a handshake
    /// nor sent data or a FIN.
    ///
    /// An attempt is *crafted* when no client's TCP stack would have left it so: a SYN-ACK
    /// came and the client never acknowledged it (a stack answers a SYN-ACK with an ACK, or a
    /// reset when it no longer wants the connection; a scanner or a flooding tool ignores it,
    /// and a spoofed source never sees it), or a single SYN went unanswered and was never
    /// sent again although the capture went on `RETRY_WITHIN_NS` after it. Refused attempts
    /// are neither: a client stack gives up at a reset too.
    pub(crate) fn connection(&mut self, c: &Connection, finished_ns: i64) {
        let half_open = c.role == RoleSource::Syn
            && c.client.isn().is_some()
            && c.handshake.ack.is_none()
            && c.client.unique_bytes == 0
            && c.client.fin.is_none();
        if !half_open {
            return;
        }
        let answer = if c.handshake.syn_ack.is_some() {
            Answer::SynAck
        } else if c.server.rst().is_some() {
            Answer::Rst
        } else if c.server.packets > 0 {
            Answer::Other
        } else {
            Answer::None
        };
        let syns = c.client.syn_retransmits().saturating_add(1);
        let ts_ns = c.first.ts_ns;
        let waited = finished_ns.saturating_sub(ts_ns) >= RETRY_WITHIN_NS;
        let crafted = answer == Answer::SynAck || (answer == Answer::None && syns == 1 && waited);
        let a = Attempt {
            id: c.id(),
            ts_ns,
            syns,
            answer,
            crafted,
        };
        let (src, dst) = (c.client.addr, (c.server.addr, c.server.port));
        self.total.add(&a);
        self.targets.add(dst, |(t, s)| {
            t.add(&a);
            s.add(a.id);
        });
        self.sources.add(src, |t| t.add(&a));
        self.pairs.add((src, dst.0, dst.1), |t| t.add(&a));
        self.distinct_sources.add(hash_of(src, 0));
        self.distinct_targets.add(hash_of(dst.0, dst.1));
    }

    /// Add another worker's summary.
    pub fn merge(&mut self, o: HalfOpen) {
        self.total.merge(&o.total);
        self.targets.merge(o.targets, |(t, s), (ot, os)| {
            t.merge(ot);
            s.merge(os);
        });
        self.sources.merge(o.sources, Tally::merge);
        self.pairs.merge(o.pairs, PairTally::merge);
        self.distinct_sources.merge(&o.distinct_sources);
        self.distinct_targets.merge(&o.distinct_targets);
    }

    /// Half-open attempts counted.
    pub fn attempts(&self) -> u64 {
        u64::from(self.total.attempts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_the_smallest_ids_whatever_the_order() {
        let mut a = Sample::default();
        for id in [50, 3, 99, 7, 3, 12, 1, 80, 60, 70, 65, 2, 90] {
            a.add(id);
        }
        assert_eq!(a.ids(), [1, 2, 3, 7, 12, 50, 60, 65, 70, 80]);
        // Split in two and merged: the same.
        let (mut b, mut c) = (Sample::default(), Sample::default());
        for id in [50, 99, 3, 12, 80, 70, 2] {
            b.add(id);
        }
        for id in [7, 1, 60, 65, 90, 3] {
            c.add(id);
        }
        b.merge(&c);
        assert_eq!(b.ids(), a.ids());
    }

    #[test]
    fn a_capped_map_merges_to_what_one_map_of_all_keys_gives() {
        // 10 keys with a cap of 8: one map of them all overflows; two halves of 5 do not,
        // their merge does.
        let mut one: Capped<u32, u32> = Capped::new(8);
        for k in 0..10 {
            one.add(k, |v| *v += 1);
        }
        assert!(one.entries().is_none());
        let (mut a, mut b) = (Capped::<u32, u32>::new(8), Capped::<u32, u32>::new(8));
        for k in 0..5 {
            a.add(k, |v| *v += 1);
            b.add(k + 5, |v| *v += 1);
        }
        a.merge(b, |x, y| *x += y);
        assert!(a.entries().is_none());
        // 8 keys, shared between the halves: kept, counts added.
        let (mut a, mut b) = (Capped::<u32, u32>::new(8), Capped::<u32, u32>::new(8));
        for k in 0..8 {
            a.add(k, |v| *v += 1);
            b.add(7 - k, |v| *v += 2);
        }
        a.merge(b, |x, y| *x += y);
        let m = a.entries().expect("8 keys fit");
        assert!(m.values().all(|v| *v == 3) && m.len() == 8);
    }

    #[test]
    fn distinct_counts_are_estimated_within_a_few_percent_and_merge_exactly() {
        for n in [1u32, 10, 1_000, 100_000, 1_000_000] {
            let mut d = Distinct::default();
            let (mut a, mut b) = (Distinct::default(), Distinct::default());
            for i in 0..n {
                let h = hash_of(IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i)), 0);
                d.add(h);
                // Split between two halves, a third of the values in both.
                if i % 2 == 0 || i % 3 == 0 {
                    a.add(h);
                }
                if i % 2 == 1 || i % 3 == 0 {
                    b.add(h);
                }
            }
            let e = d.estimate() as f64;
            assert!(
                (e - f64::from(n)).abs() <= f64::from(n) * 0.05 + 1.0,
                "{n}: estimated {e}"
            );
            a.merge(&b);
            assert_eq!(a.registers, d.registers, "{n}");
        }
    }
}
