//! # tcpwhy-wire: bytes to TCP segments
//!
//! Zero-copy, panic-free decoding of captured frames into the TCP facts the tracker needs.
//! Every decoder is *lax* in the etherparse sense: a frame cut by the capture's snaplen is still
//! understood, because lengths come from the IP header, never from the captured length.
//!
//! ```
//! use tcpwhy_wire::{decode, Decoded, LinkType};
//! // A raw IPv4 packet (link type 101) holding a TCP SYN from 10.0.0.1:40000 to 10.0.0.2:80.
//! let mut pkt = vec![
//!     0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
//!     0x9c, 0x40, 0, 80, 0, 0, 0, 100, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0, // TCP
//! ];
//! match decode(LinkType(101), &pkt, pkt.len() as u32) {
//!     Ok(Decoded::Tcp(seg)) => {
//!         assert!(seg.flags.syn());
//!         assert_eq!(seg.src_port, 40000);
//!         assert_eq!(seg.payload_len, 0);
//!     }
//!     other => panic!("not decoded: {other:?}"),
//! }
//! ```
//!
//! Architecture invariant: bytes in, values out. No I/O, no clock, no other tcpwhy crate; any
//! byte string decodes to a packet or a `Malformed` kind, never a panic (fuzzed).
#![forbid(unsafe_code)]

mod ip;
mod link;
mod seq;
mod tcp;

pub use link::LinkType;
pub use seq::Seq;
pub use tcp::{TcpFlags, TcpOptions, MAX_SACK_BLOCKS};

use std::net::IpAddr;

/// One decoded TCP segment: the header facts, with no reference into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: Seq,
    pub ack: Seq,
    pub flags: TcpFlags,
    /// The raw (unscaled) window field.
    pub window: u16,
    /// TCP payload length from the IP length fields (not from the captured length).
    pub payload_len: u32,
    pub options: TcpOptions,
    /// IPv4 identification (0 for IPv6), used to recognise the same packet captured twice.
    pub ip_id: u16,
    /// IPv4 TTL or IPv6 hop limit as captured. A packet that another device sent in a host's
    /// name (a firewall's reset, a SYN proxy's SYN-ACK) usually arrives with another.
    pub ttl: u8,
    /// True for the first fragment of a fragmented IP datagram (it carries the TCP header, but
    /// `payload_len` covers only this fragment).
    pub first_fragment: bool,
}

impl TcpSegment {
    /// A segment of zeros (from 0.0.0.0 port 0 to the same), to decode into.
    pub const EMPTY: TcpSegment = TcpSegment {
        src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        src_port: 0,
        dst_port: 0,
        seq: Seq(0),
        ack: Seq(0),
        flags: TcpFlags(0),
        window: 0,
        payload_len: 0,
        options: TcpOptions {
            mss: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack_count: 0,
            sack_first: (Seq(0), Seq(0)),
            mptcp: false,
            tfo_cookie: false,
        },
        ip_id: 0,
        ttl: 0,
        first_fragment: false,
    };
}

/// What a frame turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Tcp(TcpSegment),
    /// Not a TCP segment we analyse; the reason is counted in the summary.
    Skipped(Skip),
}

/// Why a well-formed frame was not analysed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Skip {
    /// A link type tcpwhy does not decode (counted by type).
    LinkType(u32),
    /// Not IPv4 or IPv6 (ARP, LLDP, 802.3 frames ...).
    NotIp,
    /// IP, but another transport (UDP, ICMP ...).
    NotTcp,
    /// A non-first IP fragment (no TCP header in it).
    Fragment,
    /// An IPv6 packet whose headers stop at a header we cannot walk (ESP, no next header).
    Ipv6Opaque,
}

impl Skip {
    /// Stable kebab-case name used in the summary.
    pub fn name(&self) -> &'static str {
        match self {
            Skip::LinkType(_) => "link-type",
            Skip::NotIp => "not-ip",
            Skip::NotTcp => "not-tcp",
            Skip::Fragment => "ip-fragment",
            Skip::Ipv6Opaque => "ipv6-opaque",
        }
    }
}

/// A frame that claims to be something it is not. Counted by kind and skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// The link-layer header is cut short.
    LinkTruncated,
    /// The IP header is cut short (by the snaplen or the frame's end).
    IpTruncated,
    /// IP version nibble is neither 4 nor 6 where IP was announced.
    IpVersion,
    /// IPv4 header length below 20 bytes.
    IpHeaderLength,
    /// IP total/payload length smaller than the headers it must hold.
    IpLengthTooShort,
    /// IP length larger than the frame on the wire.
    IpLengthExceedsFrame,
    /// An IPv6 extension header runs past the packet.
    Ipv6ExtensionHeader,
    /// The TCP fixed header is cut short (snaplen too small to see flags).
    TcpTruncated,
    /// TCP data offset below 5 words or past the IP payload.
    TcpDataOffset,
}

impl Malformed {
    /// Stable kebab-case name used in the summary.
    pub fn name(&self) -> &'static str {
        match self {
            Malformed::LinkTruncated => "link-truncated",
            Malformed::IpTruncated => "ip-truncated",
            Malformed::IpVersion => "ip-version",
            Malformed::IpHeaderLength => "ip-header-length",
            Malformed::IpLengthTooShort => "ip-length-too-short",
            Malformed::IpLengthExceedsFrame => "ip-length-exceeds-frame",
            Malformed::Ipv6ExtensionHeader => "ipv6-extension-header",
            Malformed::TcpTruncated => "tcp-truncated",
            Malformed::TcpDataOffset => "tcp-data-offset",
        }
    }
}

/// Decode one captured frame.
///
/// `data` is what was captured; `orig_len` is the frame's length on the wire (the record's
/// original length). Never panics, whatever the bytes.
pub fn decode(link: LinkType, data: &[u8], orig_len: u32) -> Result<Decoded, Malformed> {
    let mut seg = TcpSegment::EMPTY;
    Ok(match decode_into(link, data, orig_len, &mut seg)? {
        None => Decoded::Tcp(seg),
        Some(skip) => Decoded::Skipped(skip),
    })
}

/// Where the IP packet starts in a frame of link type `link`, or `None` when the frame
/// carries no IP (or is cut before its link header ends).
pub fn ip_offset(link: LinkType, data: &[u8]) -> Option<usize> {
    match link::strip(link, data) {
        Ok(link::Network::Ip(_, at)) if at <= data.len() => Some(at),
        _ => None,
    }
}

/// `decode`, with the TCP segment written into `seg` (`Ok(None)`), whose earlier content does
/// not matter: no segment is copied up through the decoder's layers. On `Ok(Some(skip))` or an
/// error, `seg` holds a mix of fields and must not be used.
pub fn decode_into(
    link: LinkType,
    data: &[u8],
    orig_len: u32,
    seg: &mut TcpSegment,
) -> Result<Option<Skip>, Malformed> {
    let (net, offset) = match link::strip(link, data)? {
        link::Network::Ip(version_hint, offset) => (version_hint, offset),
        link::Network::Other(skip) => return Ok(Some(skip)),
    };
    // Bytes the IP packet occupied on the wire: the frame less its link header.
    let wire_len = (orig_len.max(data.len() as u32) as usize).saturating_sub(offset);
    ip::decode_into(net, &data[offset..], wire_len, seg)
}

#[cfg(test)]
mod tests;
