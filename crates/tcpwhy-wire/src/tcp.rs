//! The TCP header (RFC 9293 section 3.1) and its options.

use crate::{Malformed, Seq, TcpSegment};

/// Bytes of the fixed header needed to know ports, numbers, flags and window.
const NEEDED: usize = 16;
const HEADER_MIN: usize = 20;
mod field {
    pub const SRC_PORT: std::ops::Range<usize> = 0..2;
    pub const DST_PORT: std::ops::Range<usize> = 2..4;
    pub const SEQ: std::ops::Range<usize> = 4..8;
    pub const ACK: std::ops::Range<usize> = 8..12;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: std::ops::Range<usize> = 14..16;
}

/// Option kinds (IANA "TCP Option Kind Numbers").
mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2; // RFC 9293 section 3.2
    pub const WSCALE: u8 = 3; // RFC 7323 section 2
    pub const SACK_PERMITTED: u8 = 4; // RFC 2018
    pub const SACK: u8 = 5; // RFC 2018
    pub const TIMESTAMP: u8 = 8; // RFC 7323 section 3
    pub const MPTCP: u8 = 30; // RFC 8684 section 3
    pub const FAST_OPEN: u8 = 34; // RFC 7413 section 4.1.1
    /// The experimental kind Fast Open used before 34 was assigned (RFC 6994: magic 0xF989).
    pub const EXPERIMENTAL: u8 = 254;
}

/// At most four SACK blocks fit in 40 bytes of options (RFC 2018 section 3).
pub const MAX_SACK_BLOCKS: usize = 4;

/// TCP control bits.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    #[inline]
    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    #[inline]
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    #[inline]
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    #[inline]
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    #[inline]
    pub fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
}

impl std::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [(u8, &str); 8] = [
            (TcpFlags::SYN, "S"),
            (TcpFlags::FIN, "F"),
            (TcpFlags::RST, "R"),
            (TcpFlags::PSH, "P"),
            (TcpFlags::ACK, "."),
            (TcpFlags::URG, "U"),
            (TcpFlags::ECE, "E"),
            (TcpFlags::CWR, "W"),
        ];
        for (bit, name) in NAMES {
            if self.0 & bit != 0 {
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

/// The options tcpwhy reads. Options cut by the snaplen are simply absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr)
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks in the segment (at most `MAX_SACK_BLOCKS`). Only the first block's edges
    /// are kept (all four were 32 of the segment's 108 bytes, copied for every packet from the
    /// reading thread to a worker).
    pub sack_count: u8,
    /// The first SACK block (left and right edge), valid when `sack_count > 0`: a first block
    /// below the cumulative ACK is a D-SACK, reporting data received twice (RFC 2883).
    pub sack_first: (Seq, Seq),
    /// A Multipath TCP option (any subtype) is present: on a SYN-ACK, or on a segment after
    /// the handshake (DSS), the connection is one subflow of an MPTCP connection.
    pub mptcp: bool,
    /// A TCP Fast Open option carrying a cookie (RFC 7413; kind 34, or the experimental kind
    /// 254 with magic 0xF989): a SYN with it asks the server to take the SYN's data.
    pub tfo_cookie: bool,
}

#[inline]
fn be16(b: &[u8], at: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[at.start], b[at.start + 1]])
}
#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `data` starts at the TCP header (possibly cut short by the snaplen); `ip_len` is the TCP
/// header plus payload length according to the IP header. Addresses are filled by the caller.
///
/// Written into `seg` in place (the caller's segment, not a value copied up through the layers
/// of the decoder: that copying was a sixth of the decoding); the addresses, `ip_id` and
/// `first_fragment` are the caller's. On an error `seg` holds a mix and must not be used.
pub(crate) fn decode_into(
    data: &[u8],
    ip_len: usize,
    seg: &mut TcpSegment,
) -> Result<(), Malformed> {
    if data.len() < NEEDED || ip_len < NEEDED {
        return Err(Malformed::TcpTruncated);
    }
    let doff = usize::from(data[field::DATA_OFFSET] >> 4) * 4;
    if doff < HEADER_MIN || doff > ip_len {
        return Err(Malformed::TcpDataOffset);
    }
    match data.get(HEADER_MIN..doff.min(data.len())) {
        Some(opts) => parse_options_into(opts, &mut seg.options),
        None => seg.options = TcpOptions::default(),
    };
    seg.src_port = be16(data, field::SRC_PORT);
    seg.dst_port = be16(data, field::DST_PORT);
    seg.seq = Seq(be32(data, field::SEQ.start));
    seg.ack = Seq(be32(data, field::ACK.start));
    seg.flags = TcpFlags(data[field::FLAGS]);
    seg.window = be16(data, field::WINDOW);
    seg.payload_len = (ip_len - doff) as u32;
    Ok(())
}

/// Lax option parser: stops at EOL, at a length that cannot be right, or at the captured end.
#[cfg(test)]
pub(crate) fn parse_options(b: &[u8]) -> TcpOptions {
    let mut o = TcpOptions::default();
    parse_options_into(b, &mut o);
    o
}

/// `parse_options`, into `o` (every field written).
pub(crate) fn parse_options_into(mut b: &[u8], o: &mut TcpOptions) {
    *o = TcpOptions::default();
    // What Linux puts on every segment after the handshake when timestamps are on: NOP, NOP,
    // timestamp (RFC 7323 appendix A's layout). Decoded without the loop.
    if let [kind::NOP, kind::NOP, kind::TIMESTAMP, 10, v0, v1, v2, v3, e0, e1, e2, e3] = *b {
        o.timestamp = Some((
            u32::from_be_bytes([v0, v1, v2, v3]),
            u32::from_be_bytes([e0, e1, e2, e3]),
        ));
        return;
    }
    while let Some(&k) = b.first() {
        match k {
            kind::EOL => break,
            kind::NOP => {
                b = &b[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = b.get(1) else { break };
        let len = usize::from(len);
        if len < 2 {
            break;
        }
        let Some(body) = b.get(2..len) else { break };
        match (k, body.len()) {
            (kind::MSS, 2) => o.mss = Some(u16::from_be_bytes([body[0], body[1]])),
            (kind::WSCALE, 1) => o.window_scale = Some(body[0]),
            (kind::SACK_PERMITTED, 0) => o.sack_permitted = true,
            (kind::TIMESTAMP, 8) => o.timestamp = Some((be32(body, 0), be32(body, 4))),
            (kind::MPTCP, _) => o.mptcp = true,
            (kind::FAST_OPEN, n) if n > 0 => o.tfo_cookie = true,
            (kind::EXPERIMENTAL, n) if n > 2 && body[..2] == [0xF9, 0x89] => o.tfo_cookie = true,
            (kind::SACK, n) if n % 8 == 0 => {
                o.sack_count = (n / 8).min(MAX_SACK_BLOCKS) as u8;
                if n >= 8 {
                    o.sack_first = (Seq(be32(body, 0)), Seq(be32(body, 4)));
                }
            }
            _ => {}
        }
        b = &b[len..];
    }
}
