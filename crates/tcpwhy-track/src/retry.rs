//! Attempts linked across connections. A client whose SYN a service refused with a reset
//! often tries again from a new port (an application's reconnect loop: an OpenFlow switch
//! every few seconds, a service started before the one it needs), so the refused connection
//! alone does not show how long the client could not connect. And where either side may open
//! the session (BGP), the refused side's peer may connect to it instead, so nobody waited on
//! the refusal.
//!
//! [`RetryWatch`] sees every TCP segment of the capture in capture order, before the tracker
//! that follows its connection (the reading thread, when trackers are sharded by 4-tuple),
//! and links the two connections: it gives a [`Link`] for the tracker of the refused one
//! ([`Tracker::link`](crate::Tracker::link)).
//!
//! A refusal is the reset RFC 9293 prescribes for a SYN (a segment without ACK) that meets no
//! listener: RST and ACK with sequence number 0 (section 3.10.7.1); the detectors check that
//! the reset acknowledges the SYN. Linked is the next SYN from the refused client to the same
//! service (address and port) from another port, or from the service's address to the same
//! port of the client. Not linked: a client that sent SYNs to other ports of the same host
//! after the refusal (a scan probing ports is nobody's retry).
//!
//! Memory is bounded: one entry per (client address, service address) pair refused and not
//! yet linked, at most [`MAX_PAIRS`]; an entry older than the refused attempt's linger time
//! (its connection is finished by then) is dropped when room is needed, and a refusal that
//! finds no room is not watched (counted in [`RetryWatch::unwatched`]).

use crate::config::Config;
use crate::endpoint::At;
use crate::flow::tuple_hash;
use rustc_hash::FxHashMap;
use std::net::IpAddr;
use tcpwhy_wire::TcpSegment;

/// Refused (client, service) pairs watched at once, at most.
pub const MAX_PAIRS: usize = 1 << 16;

/// A refusal not yet linked.
#[derive(Clone, Copy, Debug)]
struct Refusal {
    /// The service's port and the refused client's port.
    port: u16,
    client_port: u16,
    /// When the reset was seen.
    ts_ns: i64,
    /// The client sent SYNs to another port of the same host since (or was refused on two).
    other_ports: bool,
}

/// What a later SYN says of a refused attempt: for the tracker of the refused connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The refused connection: its client and its server (address, port).
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    /// The later SYN.
    pub at: At,
    /// That SYN's source port.
    pub from_port: u16,
    /// The server's host sent it, to the client's host on the refused port (the session
    /// opened the other way); else the client sent it to the same service again.
    pub reverse: bool,
}

impl Link {
    /// The refused connection's [`flow_hash`](crate::flow_hash): which tracker follows it.
    pub fn hash(&self) -> u64 {
        tuple_hash(self.client, self.server)
    }
}

/// Refusals seen and not yet linked (see the module's text).
#[derive(Debug)]
pub struct RetryWatch {
    pairs: FxHashMap<(IpAddr, IpAddr), Refusal>,
    linger_ns: i64,
    unwatched: u64,
}

impl RetryWatch {
    pub fn new(cfg: &Config) -> RetryWatch {
        RetryWatch {
            pairs: FxHashMap::default(),
            linger_ns: cfg.reset_attempt_linger_ns.max(cfg.closed_linger_ns),
            unwatched: 0,
        }
    }

    /// Refusals that found the watch full.
    pub fn unwatched(&self) -> u64 {
        self.unwatched
    }

    /// One segment, in capture order, before its tracker sees it: the link it makes, if any
    /// (to be given to the refused connection's tracker before this segment goes to its own).
    #[inline]
    pub fn segment(&mut self, seg: &TcpSegment, at: At) -> Option<Link> {
        let f = seg.flags;
        if f.rst() {
            if f.ack() && seg.seq.0 == 0 && seg.payload_len == 0 {
                self.refused(seg, at.ts_ns);
            }
            return None;
        }
        if !f.syn() || f.ack() || self.pairs.is_empty() {
            return None;
        }
        self.syn(seg, at)
    }

    /// A reset from `seg.src` refusing `seg.dst`'s SYN.
    #[cold]
    fn refused(&mut self, seg: &TcpSegment, ts_ns: i64) {
        let key = (seg.dst, seg.src);
        if self.pairs.len() >= MAX_PAIRS && !self.pairs.contains_key(&key) {
            let oldest = ts_ns.saturating_sub(self.linger_ns);
            self.pairs.retain(|_, r| r.ts_ns >= oldest);
            if self.pairs.len() >= MAX_PAIRS {
                self.unwatched += 1;
                return;
            }
        }
        let r = self.pairs.entry(key).or_insert(Refusal {
            port: seg.src_port,
            client_port: seg.dst_port,
            ts_ns,
            other_ports: false,
        });
        r.other_ports |= r.port != seg.src_port;
        r.port = seg.src_port;
        r.client_port = seg.dst_port;
        r.ts_ns = ts_ns;
    }

    /// A SYN while refusals are watched.
    #[cold]
    fn syn(&mut self, seg: &TcpSegment, at: At) -> Option<Link> {
        let (src, dst) = (seg.src, seg.dst);
        if let Some(r) = self.pairs.get_mut(&(src, dst)) {
            if r.port != seg.dst_port {
                r.other_ports = true;
            } else if r.client_port != seg.src_port {
                // The same port's SYN again is the refused attempt's own (its tracker sees it).
                let r = *r;
                self.pairs.remove(&(src, dst));
                return (!r.other_ports).then_some(Link {
                    client: (src, r.client_port),
                    server: (dst, r.port),
                    at,
                    from_port: seg.src_port,
                    reverse: false,
                });
            }
        }
        // The refused client's peer connects to it, on the port it was refused on.
        let r = *self.pairs.get(&(dst, src))?;
        if r.port != seg.dst_port || r.other_ports {
            return None;
        }
        self.pairs.remove(&(dst, src));
        Some(Link {
            client: (dst, r.client_port),
            server: (src, r.port),
            at,
            from_port: seg.src_port,
            reverse: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::{Seq, TcpFlags};

    fn seg(src: &str, sp: u16, dst: &str, dp: u16, flags: u8, seq: u32) -> TcpSegment {
        let mut s = TcpSegment::EMPTY;
        s.src = src.parse().expect("an address");
        s.dst = dst.parse().expect("an address");
        s.src_port = sp;
        s.dst_port = dp;
        s.flags = TcpFlags(flags);
        s.seq = Seq(seq);
        s
    }

    const SYN: u8 = 0x02;
    const RST_ACK: u8 = 0x14;
    const SYN_ACK: u8 = 0x12;
    const RST: u8 = 0x04;

    fn at(ms: i64) -> At {
        At::new(ms as u64 + 1, ms * 1_000_000)
    }

    #[test]
    fn a_retry_from_a_new_port_is_linked_to_the_refused_attempt() {
        let mut w = RetryWatch::new(&Config::default());
        assert_eq!(
            w.segment(&seg("10.0.0.1", 40000, "10.0.0.2", 6653, SYN, 7), at(0)),
            None
        );
        assert_eq!(
            w.segment(&seg("10.0.0.2", 6653, "10.0.0.1", 40000, RST_ACK, 0), at(1)),
            None
        );
        // A SYN-ACK or a SYN elsewhere says nothing of it.
        assert_eq!(
            w.segment(&seg("10.0.0.2", 6653, "10.0.0.1", 40001, SYN_ACK, 5), at(2)),
            None
        );
        assert_eq!(
            w.segment(&seg("10.0.0.9", 40001, "10.0.0.2", 6653, SYN, 9), at(3)),
            None
        );
        let l = w
            .segment(&seg("10.0.0.1", 40002, "10.0.0.2", 6653, SYN, 11), at(2000))
            .expect("linked");
        assert_eq!(l.client, ("10.0.0.1".parse().expect("ip"), 40000));
        assert_eq!(l.server, ("10.0.0.2".parse().expect("ip"), 6653));
        assert_eq!((l.at, l.from_port, l.reverse), (at(2000), 40002, false));
        assert_eq!(
            l.hash(),
            crate::flow_hash(&seg("10.0.0.1", 40000, "10.0.0.2", 6653, SYN, 7))
        );
        // Linked once: the next SYN is the new attempt's business.
        assert_eq!(
            w.segment(&seg("10.0.0.1", 40003, "10.0.0.2", 6653, SYN, 13), at(4000)),
            None
        );
    }

    #[test]
    fn the_same_port_again_and_a_reset_of_a_connection_are_not_links() {
        let mut w = RetryWatch::new(&Config::default());
        // A reset in answer to an ACK carries that ACK's number as its sequence, without ACK.
        w.segment(&seg("10.0.0.2", 80, "10.0.0.1", 40000, RST, 1234), at(0));
        assert!(w.pairs.is_empty());
        w.segment(&seg("10.0.0.2", 80, "10.0.0.1", 40000, RST_ACK, 0), at(1));
        assert_eq!(
            w.segment(&seg("10.0.0.1", 40000, "10.0.0.2", 80, SYN, 7), at(500)),
            None
        );
        assert!(w
            .segment(&seg("10.0.0.1", 40001, "10.0.0.2", 80, SYN, 7), at(900))
            .is_some());
    }

    #[test]
    fn the_peer_connecting_back_on_the_refused_port_is_a_reverse_link() {
        let mut w = RetryWatch::new(&Config::default());
        w.segment(&seg("1.0.3.1", 179, "1.0.3.2", 51000, RST_ACK, 0), at(0));
        // Another port of the client: not the session refused.
        assert_eq!(
            w.segment(&seg("1.0.3.1", 33000, "1.0.3.2", 22, SYN, 1), at(10)),
            None
        );
        let l = w
            .segment(&seg("1.0.3.1", 33001, "1.0.3.2", 179, SYN, 1), at(1800))
            .expect("linked");
        assert!(l.reverse);
        assert_eq!(l.client, ("1.0.3.2".parse().expect("ip"), 51000));
        assert_eq!(l.server, ("1.0.3.1".parse().expect("ip"), 179));
    }

    #[test]
    fn a_client_probing_other_ports_of_the_host_is_not_retrying() {
        let mut w = RetryWatch::new(&Config::default());
        w.segment(&seg("10.0.0.2", 113, "10.0.0.8", 36050, RST_ACK, 0), at(0));
        w.segment(&seg("10.0.0.8", 36050, "10.0.0.2", 25, SYN, 1), at(1));
        w.segment(&seg("10.0.0.8", 36050, "10.0.0.2", 70, SYN, 1), at(2));
        assert_eq!(
            w.segment(&seg("10.0.0.8", 36061, "10.0.0.2", 113, SYN, 1), at(3000)),
            None
        );
        assert!(
            w.pairs.is_empty(),
            "the probe of the same port ends the watch"
        );
    }

    #[test]
    fn a_full_watch_makes_room_from_refusals_past_their_linger_time() {
        let cfg = Config::default();
        let mut w = RetryWatch::new(&cfg);
        for i in 0..MAX_PAIRS as u32 {
            let client = std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
            w.segment(&seg("10.255.0.1", 80, &client, 40000, RST_ACK, 0), at(0));
        }
        assert_eq!(w.pairs.len(), MAX_PAIRS);
        w.segment(
            &seg("10.255.0.1", 80, "192.168.0.1", 40000, RST_ACK, 0),
            at(1),
        );
        assert_eq!((w.pairs.len(), w.unwatched()), (MAX_PAIRS, 1));
        let later = cfg.reset_attempt_linger_ns / 1_000_000 + 10;
        w.segment(
            &seg("10.255.0.1", 80, "192.168.0.1", 40000, RST_ACK, 0),
            at(later),
        );
        assert_eq!((w.pairs.len(), w.unwatched()), (1, 1));
    }
}
