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
        other => Ok(Network::Other(Skip::LinkType(other.0))),
    }
}
