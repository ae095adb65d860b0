//! The flow key and hash: a 4-tuple the same in both directions.

use crate::conn::Connection;
use std::net::IpAddr;
use tcpwhy_wire::TcpSegment;

/// A 4-tuple with its two ends in a canonical order, so both directions find the same entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FlowKey {
    pub(crate) lo: (IpAddr, u16),
    pub(crate) hi: (IpAddr, u16),
}

impl FlowKey {
    pub(crate) fn new(a: (IpAddr, u16), b: (IpAddr, u16)) -> FlowKey {
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }
    pub(crate) fn of(seg: &TcpSegment) -> FlowKey {
        FlowKey::new((seg.src, seg.src_port), (seg.dst, seg.dst_port))
    }
    pub(crate) fn of_conn(c: &Connection) -> FlowKey {
        FlowKey::new(
            (c.client.addr, c.client.port),
            (c.server.addr, c.server.port),
        )
    }
}

/// One end of a tuple as a word: an IPv4 address and port exactly, an IPv6 one mixed down.
pub(crate) fn endpoint_word(addr: IpAddr, port: u16) -> u64 {
    match addr {
        IpAddr::V4(v) => (u64::from(u32::from(v)) << 16) | u64::from(port),
        IpAddr::V6(v) => {
            let x = u128::from(v);
            fmix64((x >> 64) as u64 ^ u64::from(port)) ^ (x as u64) ^ (1 << 63)
        }
    }
}

/// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
pub(crate) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The hash of a segment's 4-tuple, the same in both directions: the tracker's table is keyed
/// by it, and a caller spreading connections over several trackers can shard by it (bits
/// 20..52 are independent of the bits the table uses).
pub fn flow_hash(seg: &TcpSegment) -> u64 {
    tuple_hash((seg.src, seg.src_port), (seg.dst, seg.dst_port))
}

/// `flow_hash` of the segments between `a` and `b`.
#[inline]
pub(crate) fn tuple_hash(a: (IpAddr, u16), b: (IpAddr, u16)) -> u64 {
    let a = endpoint_word(a.0, a.1);
    let b = endpoint_word(b.0, b.1);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    fmix64(lo.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fmix64(hi))
}

/// Which of `shards` trackers follows the connection whose 4-tuple hashes to `hash`.
pub fn shard_of(hash: u64, shards: usize) -> usize {
    ((((hash >> 20) & 0xFFFF_FFFF) * shards as u64) >> 32) as usize
}
