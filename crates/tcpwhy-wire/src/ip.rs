//! IPv4 (RFC 791) and IPv6 (RFC 8200) down to the TCP header.

use crate::link::IpHint;
use crate::{tcp, Malformed, Skip, TcpSegment};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const IPPROTO_TCP: u8 = 6;

mod v4 {
    pub const HEADER_MIN: usize = 20;
    pub const TOTAL_LEN: std::ops::Range<usize> = 2..4;
    pub const IDENT: std::ops::Range<usize> = 4..6;
    pub const FLAGS_FRAG: std::ops::Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const SRC: std::ops::Range<usize> = 12..16;
    pub const DST: std::ops::Range<usize> = 16..20;
    /// More Fragments flag (RFC 791 section 3.1).
    pub const MF: u16 = 0x2000;
    pub const FRAG_OFFSET: u16 = 0x1FFF;
}

mod v6 {
    pub const HEADER: usize = 40;
    pub const PAYLOAD_LEN: std::ops::Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: std::ops::Range<usize> = 8..24;
    pub const DST: std::ops::Range<usize> = 24..40;
    /// Extension headers walked before giving up (RFC 8200 section 4.1 orders at most ~8).
    pub const MAX_EXT_HEADERS: usize = 16;
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const NO_NEXT: u8 = 59;
    pub const DEST_OPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

#[inline]
fn be16(b: &[u8], at: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[at.start], b[at.start + 1]])
}

/// `data` starts at the IP header; `wire_len` is how many bytes the IP packet occupied on the
/// wire (frame length less the link header), which may exceed `data.len()` under a snaplen.
/// A TCP segment is written into `seg` (`Ok(None)`); otherwise `seg` must not be used.
pub(crate) fn decode_into(
    hint: IpHint,
    data: &[u8],
    wire_len: usize,
    seg: &mut TcpSegment,
) -> Result<Option<Skip>, Malformed> {
    let version = data.first().ok_or(Malformed::IpTruncated)? >> 4;
    match (hint, version) {
        (IpHint::V4 | IpHint::Either, 4) => decode_v4(data, wire_len, seg),
        (IpHint::V6 | IpHint::Either, 6) => decode_v6(data, wire_len, seg),
        _ => Err(Malformed::IpVersion),
    }
}

fn decode_v4(
    data: &[u8],
    wire_len: usize,
    seg: &mut TcpSegment,
) -> Result<Option<Skip>, Malformed> {
    if data.len() < v4::HEADER_MIN {
        return Err(Malformed::IpTruncated);
    }
    let ihl = usize::from(data[0] & 0x0F) * 4;
    if ihl < v4::HEADER_MIN {
        return Err(Malformed::IpHeaderLength);
    }
    let mut total = usize::from(be16(data, v4::TOTAL_LEN));
    if total == 0 {
        // Captured on the sending host with TSO: the stack left the length for the NIC to fill.
        total = wire_len;
    }
    if total < ihl {
        return Err(Malformed::IpLengthTooShort);
    }
    if total > wire_len {
        return Err(Malformed::IpLengthExceedsFrame);
    }
    let flags_frag = be16(data, v4::FLAGS_FRAG);
    if flags_frag & v4::FRAG_OFFSET != 0 {
        return Ok(Some(Skip::Fragment));
    }
    if data[v4::PROTOCOL] != IPPROTO_TCP {
        return Ok(Some(Skip::NotTcp));
    }
    let tcp_bytes = data.get(ihl..).ok_or(Malformed::IpTruncated)?;
    let (s, d) = (&data[v4::SRC], &data[v4::DST]);
    tcp::decode_into(tcp_bytes, total - ihl, seg)?;
    seg.src = IpAddr::V4(Ipv4Addr::new(s[0], s[1], s[2], s[3]));
    seg.dst = IpAddr::V4(Ipv4Addr::new(d[0], d[1], d[2], d[3]));
    seg.ip_id = be16(data, v4::IDENT);
    seg.ttl = data[v4::TTL];
    seg.first_fragment = flags_frag & v4::MF != 0;
    Ok(None)
}

fn addr16(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

fn decode_v6(
    data: &[u8],
    wire_len: usize,
    seg: &mut TcpSegment,
) -> Result<Option<Skip>, Malformed> {
    if data.len() < v6::HEADER {
        return Err(Malformed::IpTruncated);
    }
    let mut payload = usize::from(be16(data, v6::PAYLOAD_LEN));
    if payload == 0 {
        // Jumbogram (RFC 2675) or TSO on the sending host: trust the frame.
        payload = wire_len.saturating_sub(v6::HEADER);
    }
    if v6::HEADER + payload > wire_len {
        return Err(Malformed::IpLengthExceedsFrame);
    }
    let mut next = data[v6::NEXT_HEADER];
    let mut off = v6::HEADER;
    let end = v6::HEADER + payload;
    let mut first_fragment = false;
    for _ in 0..v6::MAX_EXT_HEADERS {
        let ext_len = match next {
            IPPROTO_TCP => {
                let tcp_bytes = data.get(off..).ok_or(Malformed::IpTruncated)?;
                tcp::decode_into(tcp_bytes, end - off, seg)?;
                seg.src = IpAddr::V6(addr16(&data[v6::SRC]));
                seg.dst = IpAddr::V6(addr16(&data[v6::DST]));
                seg.ip_id = 0;
                seg.ttl = data[v6::HOP_LIMIT];
                seg.first_fragment = first_fragment;
                return Ok(None);
            }
            v6::HOP_BY_HOP | v6::ROUTING | v6::DEST_OPTS | v6::MOBILITY | v6::HIP | v6::SHIM6 => {
                let b = data.get(off..off + 2).ok_or(Malformed::IpTruncated)?;
                (usize::from(b[1]) + 1) * 8
            }
            v6::FRAGMENT => {
                let b = data.get(off..off + 8).ok_or(Malformed::IpTruncated)?;
                let frag = be16(b, 2..4);
                if frag >> 3 != 0 {
                    return Ok(Some(Skip::Fragment));
                }
                first_fragment = frag & 1 != 0;
                8
            }
            v6::AH => {
                let b = data.get(off..off + 2).ok_or(Malformed::IpTruncated)?;
                (usize::from(b[1]) + 2) * 4
            }
            v6::ESP | v6::NO_NEXT => return Ok(Some(Skip::Ipv6Opaque)),
            _ => return Ok(Some(Skip::NotTcp)),
        };
        if off + ext_len > end {
            return Err(Malformed::Ipv6ExtensionHeader);
        }
        next = data[off];
        off += ext_len;
    }
    Ok(Some(Skip::Ipv6Opaque))
}
