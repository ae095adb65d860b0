//! Connections that have seen nothing but their client's SYNs, kept compact.
//!
//! A flood of spoofed SYNs, or a scan, is a million 4-tuples that each see one SYN (or a few
//! sent again) and nothing else. As full connections they cost 1.1 KB each (the tracker's
//! 448-byte slot, the detectors' 640-byte state, its timers and index) for the idle timeout:
//! 1 M unanswered SYNs took 1.2 GB. Such a connection is an [`Embryo`] instead (112 bytes,
//! 24 more per SYN sent again), which holds every field of its SYNs that the tracker and the
//! detectors read: it becomes a full [`Connection`](crate::Connection) when anything else
//! happens on its 4-tuple (an answer, a reset, a SYN with other numbers, data) or when it is
//! finished (idle timeout, eviction, the end of the capture), by replaying its SYNs through
//! the tracker and the sink in their order, so that everything reported is what a connection
//! created at its first SYN would have reported. Until then the detectors never see it: their
//! per-connection state is made at its first replayed SYN.
//!
//! The records live in fixed chunks (growing never moves them) and are named by a handle with
//! [`COMPACT`] set, which the tracker's index and timers hold where they hold a full
//! connection's slot.

use crate::endpoint::At;
use std::net::IpAddr;
use tcpwhy_wire::{Seq, TcpFlags, TcpOptions, TcpSegment};

/// The bit that marks a handle as an embryo's (the rest is its index); a full connection's
/// slot never has it (slots stay below 2^31: 2^31 slots would be a terabyte).
pub(crate) const COMPACT: u32 = 1 << 31;

/// SYNs sent again that an embryo holds; one more and it becomes a full connection (Linux
/// sends 7 SYNs by default, macOS 11; syn-unanswered keeps the times of 16).
pub(crate) const MAX_AGAIN: usize = 15;

/// Bits of `Syn::opts`: which options the SYN carried.
const MSS: u8 = 1;
const WSCALE: u8 = 2;
const SACK_OK: u8 = 4;
const TS: u8 = 8;

/// A client's first SYN, packed: every field of the segment the tracker and the detectors
/// read (48 bytes against the segment's 108).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Syn {
    pub at: At,
    seq: u32,
    ack: u32,
    tsval: u32,
    tsecr: u32,
    pub frame_len: u32,
    window: u16,
    ip_id: u16,
    mss: u16,
    window_scale: u8,
    flags: u8,
    opts: u8,
    ttl: u8,
}

const _: () = assert!(std::mem::size_of::<Syn>() == 48);

impl Syn {
    /// `seg` packed, if it can begin an embryo: a SYN without ACK, RST or FIN, no payload
    /// (TCP Fast Open data goes to the detectors as data), no SACK blocks, not an IP fragment.
    pub fn of(seg: &TcpSegment, at: At, frame_len: u32) -> Option<Syn> {
        let f = seg.flags;
        let plain = f.syn() && !f.ack() && !f.rst() && !f.fin();
        if !plain
            || seg.payload_len != 0
            || seg.options.sack_count != 0
            || seg.options.tfo_cookie
            || seg.first_fragment
        {
            return None;
        }
        let o = &seg.options;
        let (tsval, tsecr) = o.timestamp.unwrap_or((0, 0));
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        Some(Syn {
            at,
            seq: seg.seq.0,
            ack: seg.ack.0,
            tsval,
            tsecr,
            frame_len,
            window: seg.window,
            ip_id: seg.ip_id,
            mss: o.mss.unwrap_or(0),
            window_scale: o.window_scale.unwrap_or(0),
            flags: f.0,
            ttl: seg.ttl,
            opts: bit(o.mss.is_some(), MSS)
                | bit(o.window_scale.is_some(), WSCALE)
                | bit(o.sack_permitted, SACK_OK)
                | bit(o.timestamp.is_some(), TS),
        })
    }

    /// The segment again, from `client` to `server`.
    pub fn segment(&self, client: (IpAddr, u16), server: (IpAddr, u16)) -> TcpSegment {
        let has = |b: u8| self.opts & b != 0;
        TcpSegment {
            src: client.0,
            dst: server.0,
            src_port: client.1,
            dst_port: server.1,
            seq: Seq(self.seq),
            ack: Seq(self.ack),
            flags: TcpFlags(self.flags),
            window: self.window,
            payload_len: 0,
            options: TcpOptions {
                mss: has(MSS).then_some(self.mss),
                window_scale: has(WSCALE).then_some(self.window_scale),
                sack_permitted: has(SACK_OK),
                timestamp: has(TS).then_some((self.tsval, self.tsecr)),
                sack_count: 0,
                sack_first: (Seq(0), Seq(0)),
                mptcp: false,
                tfo_cookie: false,
            },
            ip_id: self.ip_id,
            ttl: self.ttl,
            first_fragment: false,
        }
    }
}

/// The same SYN sent again: what may differ from the first (its time, IP ID and TSval; 24
/// bytes). A SYN that differs in anything else is not kept as one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Again {
    pub at: At,
    tsval: u32,
    ip_id: u16,
}

/// A connection that has seen nothing but its client's SYNs (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Embryo {
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    /// Its live timer's deadline (what `Tracker::armed` holds for a full connection).
    pub armed: i64,
    pub syn: Syn,
    /// The SYNs sent again, oldest first: an exact-size allocation, made again at each (most
    /// SYNs are answered before any is sent again, and a flood's are never sent again; a
    /// vector's header and spare room took 144 bytes for two).
    pub again: Box<[Again]>,
}

const _: () = assert!(std::mem::size_of::<Embryo>() <= 112);

impl Embryo {
    /// The connection's id: the frame number of its first SYN.
    #[inline]
    pub fn id(&self) -> u64 {
        self.syn.at.frame()
    }

    /// Its last packet.
    pub fn last(&self) -> At {
        self.again.last().map_or(self.syn.at, |a| a.at)
    }

    /// `seg` travels between the embryo's two ends (either way).
    #[inline]
    pub fn same_tuple(&self, seg: &TcpSegment) -> bool {
        let (a, b) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        (a == self.client && b == self.server) || (a == self.server && b == self.client)
    }

    /// Keep `seg` if it is the first SYN sent again (from the client, every field but the
    /// IP ID and TSval the same, room left); false: it is something else, which only a full
    /// connection can take.
    pub fn absorb(&mut self, seg: &TcpSegment, at: At, frame_len: u32) -> bool {
        let Some(syn) = Syn::of(seg, at, frame_len) else {
            return false;
        };
        let first = &self.syn;
        let same = (seg.src, seg.src_port) == self.client
            && (syn.seq, syn.ack, syn.tsecr, syn.frame_len)
                == (first.seq, first.ack, first.tsecr, first.frame_len)
            && (
                syn.window,
                syn.mss,
                syn.window_scale,
                syn.flags,
                syn.opts,
                syn.ttl,
            ) == (
                first.window,
                first.mss,
                first.window_scale,
                first.flags,
                first.opts,
                first.ttl,
            );
        if !same || self.again.len() >= MAX_AGAIN {
            return false;
        }
        let mut again = std::mem::take(&mut self.again).into_vec();
        again.reserve_exact(1);
        again.push(Again {
            at,
            tsval: syn.tsval,
            ip_id: syn.ip_id,
        });
        self.again = again.into_boxed_slice();
        true
    }

    /// Every SYN in the order they came: (segment, time, frame length).
    pub fn syns(&self) -> impl Iterator<Item = (TcpSegment, At, u32)> + '_ {
        let first = self.syn.segment(self.client, self.server);
        let len = self.syn.frame_len;
        std::iter::once((first, self.syn.at, len)).chain(self.again.iter().map(move |a| {
            let mut s = first;
            s.ip_id = a.ip_id;
            if let Some((_, tsecr)) = s.options.timestamp {
                s.options.timestamp = Some((a.tsval, tsecr));
            }
            (s, a.at, len)
        }))
    }
}

/// Embryos in fixed chunks, by handle (`COMPACT` | index); freed places are used again.
/// Each one's tuple hash is kept beside them, densely, in chunks of their own: the tracker's
/// index rehashes every entry when it grows (computed from each embryo's addresses, that was
/// 8% of a flood's run).
#[derive(Default)]
pub(crate) struct Embryos {
    chunks: Vec<Box<[Option<Embryo>]>>,
    hashes: Vec<Box<[u64]>>,
    len: usize,
    free: Vec<u32>,
}

const CHUNK: usize = 1024;

impl Embryos {
    #[inline]
    pub fn get(&self, h: u32) -> Option<&Embryo> {
        let i = (h & !COMPACT) as usize;
        self.chunks.get(i / CHUNK)?[i % CHUNK].as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, h: u32) -> Option<&mut Embryo> {
        let i = (h & !COMPACT) as usize;
        self.chunks.get_mut(i / CHUNK)?[i % CHUNK].as_mut()
    }

    /// Store `e`, whose tuple hashes to `hash`; its handle.
    pub fn put(&mut self, e: Embryo, hash: u64) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                if self.len == self.chunks.len() * CHUNK {
                    self.chunks.push((0..CHUNK).map(|_| None).collect());
                    self.hashes.push(vec![0; CHUNK].into_boxed_slice());
                }
                self.len += 1;
                self.len - 1
            }
        };
        if let Some(place) = self.chunks.get_mut(i / CHUNK).map(|c| &mut c[i % CHUNK]) {
            *place = Some(e);
        }
        if let Some(h) = self.hashes.get_mut(i / CHUNK).map(|c| &mut c[i % CHUNK]) {
            *h = hash;
        }
        i as u32 | COMPACT
    }

    /// The tuple hash of embryo `h` (0 if there is none).
    #[inline]
    pub fn hash(&self, h: u32) -> u64 {
        let i = (h & !COMPACT) as usize;
        self.hashes.get(i / CHUNK).map_or(0, |c| c[i % CHUNK])
    }

    /// Take the embryo out (its place is free again).
    pub fn take(&mut self, h: u32) -> Option<Embryo> {
        let i = (h & !COMPACT) as usize;
        let e = self.chunks.get_mut(i / CHUNK)?[i % CHUNK].take()?;
        self.free.push(i as u32);
        Some(e)
    }

    /// Every embryo with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Embryo)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter_map(move |(i, e)| e.as_ref().map(|e| ((c * CHUNK + i) as u32 | COMPACT, e)))
        })
    }
}
