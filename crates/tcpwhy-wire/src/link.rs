//! Link layers: find where the IP packet starts.
//!
//! Link-type numbers are from <https://www.tcpdump.org/linktypes.html>.

use crate::{Malformed, Skip};

/// A pcap/pcapng link type (LINKTYPE_* value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u32);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    /// DLT_RAW as written by some platforms' libpcap instead of 101.
    pub const DLT_RAW_12: LinkType = LinkType(12);
    pub const DLT_RAW_14: LinkType = LinkType(14);
    pub const RAW: LinkType = LinkType(101);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const LINUX_SLL2: LinkType = LinkType(276);
    pub const PPP: LinkType = LinkType(9);
    pub const IPNET: LinkType = LinkType(226);
    pub const NFLOG: LinkType = LinkType(239);
    pub const PKTAP: LinkType = LinkType(258);

    /// The link type's name as libpcap gives it (LINKTYPE_...), for messages; None for one
    /// this list does not know.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "NULL",
            1 => "ETHERNET",
            6 => "IEEE802_5",
            9 => "PPP",
            12 | 14 | 101 => "RAW",
            50 => "PPP_HDLC",
            104 => "C_HDLC",
            105 => "IEEE802_11",
            108 => "LOOP",
            113 => "LINUX_SLL",
            119 => "IEEE802_11_PRISM",
            127 => "IEEE802_11_RADIOTAP",
            192 => "PPI",
            195 => "IEEE802_15_4",
            201 => "BLUETOOTH_HCI_H4_WITH_PHDR",
            220 => "USB_LINUX_MMAPPED",
            226 => "IPNET",
            228 => "IPV4",
            229 => "IPV6",
            239 => "NFLOG",
            242 => "IPOIB",
            249 => "USBPCAP",
            258 => "PKTAP",
            276 => "LINUX_SLL2",
            _ => return None,
        })
    }
}

/// Which IP version the link layer announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpHint {
    V4,
    V6,
    /// Raw IP: read the version nibble.
    Either,
}

pub(crate) enum Network {
    /// IP starts at this offset.
    Ip(IpHint, usize),
    Other(Skip),
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
/// 802.1Q, 802.1ad, and the pre-standard QinQ tags 0x9100/0x9200.
const ETHERTYPE_VLAN: [u16; 4] = [0x8100, 0x88A8, 0x9100, 0x9200];
/// Ethernet header: destination (6), source (6), EtherType (2).
const ETH_HEADER: usize = 14;
const VLAN_TAG: usize = 4;
/// At most this many stacked VLAN tags are walked (real networks use two).
const MAX_VLAN_TAGS: usize = 8;
/// Linux cooked v1: packet type (2), ARPHRD (2), address length (2), address (8), protocol (2).
const SLL_HEADER: usize = 16;
const SLL_PROTOCOL: std::ops::Range<usize> = 14..16;
/// Linux cooked v2: protocol (2), reserved (2), ifindex (4), ARPHRD (2), packet type (1),
/// address length (1), address (8).
const SLL2_HEADER: usize = 20;
const SLL2_PROTOCOL: std::ops::Range<usize> = 0..2;
/// BSD loopback: a 4-byte address family.
const NULL_HEADER: usize = 4;
/// PPP protocol numbers of IP (RFC 1332, RFC 5072).
const PPP_IPV4: u16 = 0x0021;
const PPP_IPV6: u16 = 0x0057;
/// Solaris ipnet: version (1), family (1), htype (2), pktlen (4), ifindex (4), grifindex (4),
/// zsrc (4), zdst (4). Families are Solaris's: 2 for IPv4, 26 for IPv6.
const IPNET_HEADER: usize = 24;
/// Linux NFLOG: family (1), version (1), resource id (2), then TLVs of length (2, including
/// the 4-byte TLV header; in the capturing host's byte order), type (2), the value padded to
/// 4 bytes. The packet is the value of type 9 (NFULA_PAYLOAD). Families: 2 IPv4, 10 IPv6.
const NFLOG_HEADER: usize = 4;
const NFULA_PAYLOAD: u16 = 9;
/// Apple PKTAP: its header's length (4, little-endian), the next header's type (4), the
/// inner frame's DLT (4), then interface names and process facts up to that length.
const PKTAP_DLT: std::ops::Range<usize> = 8..12;

#[inline]
fn be16(b: &[u8], at: std::ops::Range<usize>) -> Option<u16> {
    let s = b.get(at)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

fn ethertype_to_net(ethertype: u16, offset: usize) -> Network {
    match ethertype {
        ETHERTYPE_IPV4 => Network::Ip(IpHint::V4, offset),
        ETHERTYPE_IPV6 => Network::Ip(IpHint::V6, offset),
        _ => Network::Other(Skip::NotIp),
    }
}

/// BSD address families for IPv6 differ by OS: 24 (NetBSD/OpenBSD), 28 (FreeBSD), 30 (macOS).
fn af_to_net(af: u32) -> Network {
    match af {
        2 => Network::Ip(IpHint::V4, NULL_HEADER),
        24 | 28 | 30 => Network::Ip(IpHint::V6, NULL_HEADER),
        _ => Network::Other(Skip::NotIp),
    }
}

pub(crate) fn strip(link: LinkType, data: &[u8]) -> Result<Network, Malformed> {
    match link {
        LinkType::ETHERNET => {
            let mut ethertype = be16(data, 12..14).ok_or(Malformed::LinkTruncated)?;
            let mut offset = ETH_HEADER;
            let mut tags = 0;
            while ETHERTYPE_VLAN.contains(&ethertype) {
                tags += 1;
                if tags > MAX_VLAN_TAGS {
                    return Ok(Network::Other(Skip::NotIp));
                }
                // The tag is TCI (2) + the inner EtherType (2).
                ethertype = be16(data, offset + 2..offset + 4).ok_or(Malformed::LinkTruncated)?;
                offset += VLAN_TAG;
            }
            Ok(ethertype_to_net(ethertype, offset))
        }
        LinkType::LINUX_SLL => {
            let proto = be16(data, SLL_PROTOCOL).ok_or(Malformed::LinkTruncated)?;
            Ok(ethertype_to_net(proto, SLL_HEADER))
        }
        LinkType::LINUX_SLL2 => {
            if data.len() < SLL2_HEADER {
                return Err(Malformed::LinkTruncated);
            }
            let proto = be16(data, SLL2_PROTOCOL).ok_or(Malformed::LinkTruncated)?;
            Ok(ethertype_to_net(proto, SLL2_HEADER))
        }
        LinkType::NULL => {
            let b = data.get(..NULL_HEADER).ok_or(Malformed::LinkTruncated)?;
            // Host byte order of the capturing machine: accept either.
            let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let af = if le > 0xFFFF { le.swap_bytes() } else { le };
            Ok(af_to_net(af))
        }
        LinkType::LOOP => {
            let b = data.get(..NULL_HEADER).ok_or(Malformed::LinkTruncated)?;
            Ok(af_to_net(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
        }
        LinkType::RAW | LinkType::DLT_RAW_12 | LinkType::DLT_RAW_14 => {
            Ok(Network::Ip(IpHint::Either, 0))
        }
        LinkType::IPV4 => Ok(Network::Ip(IpHint::V4, 0)),
        LinkType::IPV6 => Ok(Network::Ip(IpHint::V6, 0)),
        LinkType::PPP => ppp(data),
        LinkType::IPNET => {
            let family = *data.get(1).ok_or(Malformed::LinkTruncated)?;
            if data.len() < IPNET_HEADER {
                return Err(Malformed::LinkTruncated);
            }
            Ok(match family {
                2 => Network::Ip(IpHint::V4, IPNET_HEADER),
                26 => Network::Ip(IpHint::V6, IPNET_HEADER),
                _ => Network::Other(Skip::NotIp),
            })
        }
        LinkType::NFLOG => nflog(data),
        LinkType::PKTAP => {
            let le32 = |r: std::ops::Range<usize>| {
                data.get(r)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            };
            let len = le32(0..4).ok_or(Malformed::LinkTruncated)? as usize;
            let dlt = le32(PKTAP_DLT).ok_or(Malformed::LinkTruncated)?;
            let inner = data.get(len..).ok_or(Malformed::LinkTruncated)?;
            if len < PKTAP_DLT.end || dlt == LinkType::PKTAP.0 {
                return Err(Malformed::LinkTruncated);
            }
            // The inner frame's DLT; DLT_RAW differs by OS (12, 14), which LinkType covers.
            Ok(match strip(LinkType(dlt), inner)? {
                Network::Ip(hint, at) => Network::Ip(hint, len + at),
                other => other,
            })
        }
        other => Ok(Network::Other(Skip::LinkType(other.0))),
    }
}

/// PPP: an optional address and control (0xff 0x03), then the protocol in 1 byte (when
/// compressed: an odd first byte) or 2.
fn ppp(data: &[u8]) -> Result<Network, Malformed> {
    let mut at = if data.starts_with(&[0xff, 0x03]) {
        2
    } else {
        0
    };
    let first = *data.get(at).ok_or(Malformed::LinkTruncated)?;
    let proto = if first & 1 == 1 {
        at += 1;
        u16::from(first)
    } else {
        let p = be16(data, at..at + 2).ok_or(Malformed::LinkTruncated)?;
        at += 2;
        p
    };
    Ok(match proto {
        PPP_IPV4 => Network::Ip(IpHint::V4, at),
        PPP_IPV6 => Network::Ip(IpHint::V6, at),
        _ => Network::Other(Skip::NotIp),
    })
}

/// NFLOG: the payload TLV's value. TLV lengths are in the capturing host's byte order: read
/// as little-endian first (x86, ARM), and as big-endian if that does not walk to the end.
fn nflog(data: &[u8]) -> Result<Network, Malformed> {
    let family = *data.first().ok_or(Malformed::LinkTruncated)?;
    let hint = match family {
        2 => IpHint::V4,
        10 => IpHint::V6,
        _ => return Ok(Network::Other(Skip::NotIp)),
    };
    for little in [true, false] {
        let mut at = NFLOG_HEADER;
        while let (Some(l), Some(t)) = (data.get(at..at + 2), data.get(at + 2..at + 4)) {
            let (len, kind) = if little {
                (
                    u16::from_le_bytes([l[0], l[1]]),
                    u16::from_le_bytes([t[0], t[1]]),
                )
            } else {
                (
                    u16::from_be_bytes([l[0], l[1]]),
                    u16::from_be_bytes([t[0], t[1]]),
                )
            };
            let len = usize::from(len);
            if len < 4 || at + len > data.len() {
                break;
            }
            if kind == NFULA_PAYLOAD {
                return Ok(Network::Ip(hint, at + 4));
            }
            at += len.div_ceil(4) * 4;
        }
    }
    Ok(Network::Other(Skip::NotIp))
}
