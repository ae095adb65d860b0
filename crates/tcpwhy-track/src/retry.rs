//! Attempts linked across connections. A client whose SYN a service refused with a reset
//! often tries again from a new port (an application's reconnect loop: an OpenFlow switch
//! every few seconds, a service started before the one it needs), so the refused connection
//! alone does not show how long the client could not connect. And where either side may open
//! the session (BGP), the refused side's peer may connect to it instead, so nobody waited on
//! the refusal.
//!
//! [`RetryWatch`] sees every TCP segment of the capture in capture order, before the tracker
//! that follows its connection (the reading thread, when trackers are sharded by 4-tuple),
//! and links the connections: it gives [`Link`]s for the trackers of the refused ones
//! ([`Tracker::link`](crate::Tracker::link)).
//!
//! A refusal is the reset RFC 9293 prescribes for a SYN (a segment without ACK) that meets no
//! listener: RST and ACK with sequence number 0 (section 3.10.7.1); the detectors check that
//! the reset acknowledges the SYN. A client's next SYN to the same service (address and port)
//! from another port is its next attempt. When an attempt is answered by a SYN-ACK, the client
//! got through: each refused attempt of the loop before it is linked to the SYN of the attempt
//! that followed it. A loop that never gets through links nothing: attempts some time apart
//! that are all refused may be a periodic check as well as a loop, and nobody is shown
//! waiting. The service's host sending a SYN to the refused client on the refused port links
//! the last refusal as the session opened the other way. Not linked: a client that sent SYNs
//! to other ports of the same host after a refusal (a scan probing ports is nobody's retry).
//!
//! Memory is bounded: one entry per (client address, service address) pair refused and not
//! yet linked, at most [`MAX_PAIRS`], with at most [`MAX_LOOP`] refused attempts of its loop
//! (the oldest are left unlinked); an entry older than the refused attempt's linger time (its
//! connection is finished by then) is dropped when room is needed, and a refusal that finds
//! no room is not watched (counted in [`RetryWatch::unwatched`]).

use crate::config::Config;
use crate::endpoint::At;
use crate::flow::tuple_hash;
use rustc_hash::FxHashMap;
use std::net::IpAddr;
use tcpwhy_wire::TcpSegment;

/// Refused (client, service) pairs watched at once, at most.
pub const MAX_PAIRS: usize = 1 << 16;
/// Refused attempts of one loop kept for linking, at most.
pub const MAX_LOOP: usize = 16;

/// A pair's refusals not yet linked.
#[derive(Clone, Debug)]
struct Refusal {
    /// The service's port and the last refused attempt's client port.
    port: u16,
    client_port: u16,
    /// When the last reset was seen.
    ts_ns: i64,
    /// The client sent SYNs to another port of the same host since (or was refused on two).
    other_ports: bool,
    /// The attempt after the last refusal, waiting for its answer: its port and SYN.
    pending: Option<(u16, At)>,
    /// Earlier refused attempts of the loop: each one's port, and the port and SYN of the
    /// attempt after it.
    earlier: Vec<(u16, u16, At)>,
}

/// What a later SYN says of a refused attempt: for the tracker of the refused connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The refused connection: its client and its server (address, port).
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    /// The SYN of the attempt after it.
    pub at: At,
    /// That SYN's source port.
    pub from_port: u16,
    /// The server's host sent it, to the client's host on the refused port (the session
    /// opened the other way); else the client sent it to the same service again, and got
    /// through then or later.
    pub reverse: bool,
    /// Capture time when the link was made (the segment that made it).
    pub made_ns: i64,
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
    /// The links the last segment made.
    made: Vec<Link>,
}

impl RetryWatch {
    pub fn new(cfg: &Config) -> RetryWatch {
        RetryWatch {
            pairs: FxHashMap::default(),
            linger_ns: cfg.reset_attempt_linger_ns.max(cfg.closed_linger_ns),
            unwatched: 0,
            made: Vec::new(),
        }
    }

    /// Refusals that found the watch full.
    pub fn unwatched(&self) -> u64 {
        self.unwatched
    }

    /// One segment, in capture order, before its tracker sees it (`at`: capture time that
    /// never steps back, as the tracker's): the links it makes, to be given to the refused
    /// connections' trackers before this segment goes to its own.
    #[inline]
    pub fn segment(&mut self, seg: &TcpSegment, at: At) -> &[Link] {
        if !self.made.is_empty() {
            self.made.clear();
        }
        let f = seg.flags;
        if f.rst() {
            if f.ack() && seg.seq.0 == 0 && seg.payload_len == 0 {
                self.refused(seg, at.ts_ns);
            }
        } else if f.syn() && !self.pairs.is_empty() {
            if f.ack() {
                self.syn_ack(seg, at.ts_ns);
            } else {
                self.syn(seg, at);
            }
        }
        &self.made
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
        let (port, client_port) = (seg.src_port, seg.dst_port);
        let r = self.pairs.entry(key).or_insert(Refusal {
            port,
            client_port,
            ts_ns,
            other_ports: false,
            pending: None,
            earlier: Vec::new(),
        });
        if r.port != port {
            r.other_ports = true;
        }
        match r.pending.take() {
            // The attempt after the last refusal was refused too: the loop goes on.
            Some((p, syn)) if p == client_port && r.port == port => {
                if r.earlier.len() == MAX_LOOP {
                    r.earlier.remove(0);
                }
                r.earlier.push((r.client_port, p, syn));
            }
            // Any other refusal begins the pair's loop again.
            _ => r.earlier.clear(),
        }
        r.port = port;
        r.client_port = client_port;
        r.ts_ns = ts_ns;
    }

    /// A SYN while refusals are watched.
    #[cold]
    fn syn(&mut self, seg: &TcpSegment, at: At) {
        let (src, dst) = (seg.src, seg.dst);
        if let Some(r) = self.pairs.get_mut(&(src, dst)) {
            if r.port != seg.dst_port {
                r.other_ports = true;
            } else if r.client_port != seg.src_port && r.pending.is_none() && !r.other_ports {
                // (The same port's SYN again is the refused attempt's own: its tracker sees it.)
                r.pending = Some((seg.src_port, at));
            }
        }
        // The refused client's peer connects to it, on the port it was refused on. (Over
        // loopback that SYN cannot be told from the client's own next attempt.)
        if src == dst {
            return;
        }
        let Some(r) = self.pairs.get(&(dst, src)) else {
            return;
        };
        if r.port != seg.dst_port || r.other_ports {
            return;
        }
        self.made.push(Link {
            client: (dst, r.client_port),
            server: (src, r.port),
            at,
            from_port: seg.src_port,
            reverse: true,
            made_ns: at.ts_ns,
        });
        self.pairs.remove(&(dst, src));
    }

    /// A SYN-ACK while refusals are watched: the client's next attempt got through.
    #[cold]
    fn syn_ack(&mut self, seg: &TcpSegment, made_ns: i64) {
        let key = (seg.dst, seg.src);
        let Some(r) = self.pairs.get(&key) else {
            return;
        };
        let Some((p, syn)) = r.pending else {
            return;
        };
        if (p, r.port) != (seg.dst_port, seg.src_port) {
            return;
        }
        let (client, server) = (seg.dst, seg.src);
        let link = |refused: u16, from_port: u16, at: At| Link {
            client: (client, refused),
            server: (server, r.port),
            at,
            from_port,
            reverse: false,
            made_ns,
        };
        for &(refused, next, at) in &r.earlier {
            self.made.push(link(refused, next, at));
        }
        self.made.push(link(r.client_port, p, syn));
        self.pairs.remove(&key);
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

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    /// Refused from port 40000 at 0, from 40001 at 2 s, answered from 40002 at 4 s: both
    /// refusals are linked when the SYN-ACK comes, each to the SYN after it.
    #[test]
    fn a_loop_that_gets_through_links_each_refusal_to_the_next_try() {
        let mut w = RetryWatch::new(&Config::default());
        let (c, s) = ("10.0.0.1", "10.0.0.2");
        assert!(w.segment(&seg(c, 40000, s, 6653, SYN, 7), at(0)).is_empty());
        assert!(w
            .segment(&seg(s, 6653, c, 40000, RST_ACK, 0), at(1))
            .is_empty());
        // Another client's SYN to the service says nothing of this one.
        assert!(w
            .segment(&seg("10.0.0.9", 40001, s, 6653, SYN, 9), at(3))
            .is_empty());
        assert!(w
            .segment(&seg(c, 40001, s, 6653, SYN, 11), at(2000))
            .is_empty());
        assert!(w
            .segment(&seg(s, 6653, c, 40001, RST_ACK, 0), at(2001))
            .is_empty());
        assert!(w
            .segment(&seg(c, 40002, s, 6653, SYN, 13), at(4000))
            .is_empty());
        // A SYN-ACK to another port is not the answer.
        assert!(w
            .segment(&seg(s, 6653, c, 40009, SYN_ACK, 5), at(4000))
            .is_empty());
        let links = w
            .segment(&seg(s, 6653, c, 40002, SYN_ACK, 5), at(4001))
            .to_vec();
        let want = |refused, from_port, next: At| Link {
            client: (ip(c), refused),
            server: (ip(s), 6653),
            at: next,
            from_port,
            reverse: false,
            made_ns: at(4001).ts_ns,
        };
        assert_eq!(
            links,
            [want(40000, 40001, at(2000)), want(40001, 40002, at(4000))]
        );
        assert_eq!(
            links[0].hash(),
            crate::flow_hash(&seg(c, 40000, s, 6653, SYN, 7))
        );
        assert!(w.pairs.is_empty(), "linked once");
    }

    /// Refused, then refused again from a new port 44 s later, and no more: nothing shows the
    /// client waiting (a periodic check looks the same), so nothing is linked.
    #[test]
    fn a_loop_that_never_gets_through_links_nothing() {
        let mut w = RetryWatch::new(&Config::default());
        let (c, s) = ("172.16.42.216", "192.168.11.1");
        w.segment(&seg(c, 38391, s, 8080, SYN, 7), at(0));
        w.segment(&seg(s, 8080, c, 38391, RST_ACK, 0), at(2));
        w.segment(&seg(c, 38434, s, 8080, SYN, 9), at(44_000));
        assert!(w
            .segment(&seg(s, 8080, c, 38434, RST_ACK, 0), at(44_087))
            .is_empty());
        let r = &w.pairs[&(ip(c), ip(s))];
        assert_eq!(
            (r.client_port, r.earlier.len(), r.pending),
            (38434, 1, None)
        );
    }

    #[test]
    fn the_same_port_again_and_a_reset_of_a_connection_are_not_links() {
        let mut w = RetryWatch::new(&Config::default());
        // A reset in answer to an ACK carries that ACK's number as its sequence, without ACK.
        w.segment(&seg("10.0.0.2", 80, "10.0.0.1", 40000, RST, 1234), at(0));
        assert!(w.pairs.is_empty());
        w.segment(&seg("10.0.0.2", 80, "10.0.0.1", 40000, RST_ACK, 0), at(1));
        // The same SYN again (Windows after 0.5 s), answered: the tracker sees it on its tuple.
        w.segment(&seg("10.0.0.1", 40000, "10.0.0.2", 80, SYN, 7), at(500));
        assert!(w
            .segment(&seg("10.0.0.2", 80, "10.0.0.1", 40000, SYN_ACK, 3), at(501))
            .is_empty());
    }

    #[test]
    fn the_peer_connecting_back_on_the_refused_port_is_a_reverse_link() {
        let mut w = RetryWatch::new(&Config::default());
        w.segment(&seg("1.0.3.1", 179, "1.0.3.2", 51000, RST_ACK, 0), at(0));
        // Another port of the client: not the session refused.
        assert!(w
            .segment(&seg("1.0.3.1", 33000, "1.0.3.2", 22, SYN, 1), at(10))
            .is_empty());
        let l = w.segment(&seg("1.0.3.1", 33001, "1.0.3.2", 179, SYN, 1), at(1800))[0];
        assert!(l.reverse);
        assert_eq!(
            (l.client, l.server),
            ((ip("1.0.3.2"), 51000), (ip("1.0.3.1"), 179))
        );
        assert_eq!((l.at, l.made_ns), (at(1800), at(1800).ts_ns));
        // Over loopback the peer's SYN and the client's next one look the same: no reverse.
        w.segment(
            &seg("127.0.0.1", 6633, "127.0.0.1", 51000, RST_ACK, 0),
            at(2000),
        );
        assert!(w
            .segment(
                &seg("127.0.0.1", 56440, "127.0.0.1", 6633, SYN, 1),
                at(6000)
            )
            .is_empty());
        let l = w.segment(
            &seg("127.0.0.1", 6633, "127.0.0.1", 56440, SYN_ACK, 1),
            at(6001),
        )[0];
        assert!(!l.reverse);
    }

    #[test]
    fn a_client_probing_other_ports_of_the_host_is_not_retrying() {
        let mut w = RetryWatch::new(&Config::default());
        w.segment(&seg("10.0.0.2", 113, "10.0.0.8", 36050, RST_ACK, 0), at(0));
        w.segment(&seg("10.0.0.8", 36050, "10.0.0.2", 25, SYN, 1), at(1));
        w.segment(&seg("10.0.0.8", 36050, "10.0.0.2", 70, SYN, 1), at(2));
        w.segment(&seg("10.0.0.8", 36061, "10.0.0.2", 113, SYN, 1), at(3000));
        assert!(w
            .segment(
                &seg("10.0.0.2", 113, "10.0.0.8", 36061, SYN_ACK, 1),
                at(3001)
            )
            .is_empty());
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

    #[test]
    fn a_long_loop_keeps_its_last_refusals() {
        let mut w = RetryWatch::new(&Config::default());
        let (c, s) = ("10.0.0.1", "10.0.0.2");
        let n = MAX_LOOP as u16 + 4;
        for i in 0..n {
            w.segment(&seg(c, 40000 + i, s, 80, SYN, 7), at(i64::from(i) * 1000));
            w.segment(
                &seg(s, 80, c, 40000 + i, RST_ACK, 0),
                at(i64::from(i) * 1000 + 1),
            );
        }
        w.segment(&seg(c, 40000 + n, s, 80, SYN, 7), at(i64::from(n) * 1000));
        let links = w.segment(
            &seg(s, 80, c, 40000 + n, SYN_ACK, 7),
            at(i64::from(n) * 1000 + 1),
        );
        assert_eq!(links.len(), MAX_LOOP + 1);
        assert_eq!(links[0].client.1, 40000 + n - 1 - MAX_LOOP as u16);
        assert_eq!(links[MAX_LOOP].client.1, 40000 + n - 1);
    }
}
