//! A connection: two endpoints, its place in the history of its 4-tuple, and what it looked
//! like from the capture point.

use crate::endpoint::{At, Endpoint, IpIds, Ts};
use std::net::IpAddr;

/// Which side of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// How tcpwhy decided which side is the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleSource {
    /// The client sent the SYN.
    Syn,
    /// Only the SYN-ACK was seen: its receiver is the client.
    SynAck,
    /// No handshake: the server is the side on a well-known or non-ephemeral port (inferred).
    Port,
    /// No handshake and no port hint: the first packet's sender is the client (inferred).
    FirstPacket,
}

impl RoleSource {
    pub fn name(self) -> &'static str {
        match self {
            RoleSource::Syn => "syn",
            RoleSource::SynAck => "syn-ack",
            RoleSource::Port => "port",
            RoleSource::FirstPacket => "first-packet",
        }
    }
    /// True when no SYN or SYN-ACK told the roles.
    pub fn inferred(self) -> bool {
        matches!(self, RoleSource::Port | RoleSource::FirstPacket)
    }
}

/// How a connection closed, from what the capture saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// FIN both ways; `first` closed first (and holds TIME-WAIT on most stacks).
    Fin { first: Side },
    /// Reset; `by` sent the first RST.
    Rst { by: Side },
    /// FIN one way only.
    HalfClosed { by: Side },
    /// Neither FIN nor RST seen.
    Open,
}

impl Close {
    pub fn kind(self) -> &'static str {
        match self {
            Close::Fin { .. } => "fin",
            Close::Rst { .. } => "rst",
            Close::HalfClosed { .. } => "half-closed",
            Close::Open => "none",
        }
    }
    pub fn by(self) -> Option<Side> {
        match self {
            Close::Fin { first } => Some(first),
            Close::Rst { by } | Close::HalfClosed { by } => Some(by),
            Close::Open => None,
        }
    }
}

/// Why the tracker stopped following a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// Closed (FIN both ways or RST) and quiet for the linger time.
    Closed,
    /// A new SYN started the next connection on the same 4-tuple.
    Superseded,
    /// No packet for the idle timeout.
    IdleTimeout,
    /// The capture ended.
    CaptureEnd,
    /// Dropped to stay under `--max-connections`.
    Evicted,
}

impl EndReason {
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Closed => "closed",
            EndReason::Superseded => "superseded",
            EndReason::IdleTimeout => "idle-timeout",
            EndReason::CaptureEnd => "capture-end",
            EndReason::Evicted => "evicted",
        }
    }
}

/// Where the capture point sat, inferred from the handshake (docs/tcp-signatures.md section 10):
/// near the client, SYN -> SYN-ACK is almost the whole round trip; near the server,
/// SYN-ACK -> ACK is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vantage {
    NearClient,
    NearServer,
    Middle,
    /// Both endpoints on the capturing host (loopback).
    Local,
    Unknown,
}

impl Vantage {
    pub fn name(self) -> &'static str {
        match self {
            Vantage::NearClient => "client",
            Vantage::NearServer => "server",
            Vantage::Middle => "middle",
            Vantage::Local => "local",
            Vantage::Unknown => "unknown",
        }
    }
}

/// The connection that used the same 4-tuple before this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predecessor {
    pub id: u64,
    pub close: Close,
    /// Time of its last packet.
    pub last_ts: i64,
    /// Its client was this connection's client too (same direction of connect).
    pub same_client: bool,
    /// Sequence after the last byte (FIN included) that its client / server sent: for the
    /// server, the client's value is its `rcv_nxt`.
    pub client_next_seq: Option<tcpwhy_wire::Seq>,
    pub server_next_seq: Option<tcpwhy_wire::Seq>,
    pub client_isn: Option<tcpwhy_wire::Seq>,
    pub client_first_ts: i64,
    /// Both sides used TCP timestamps.
    pub timestamps: bool,
}

/// The shortest wait that shows an answer lost in the handshake: Linux's smallest
/// retransmission timer (TCP_RTO_MIN, 200 ms; a SYN's own is 1 s). A SYN-ACK or SYN sent again
/// sooner (copies the capture could not tell apart, a relay's packets, an answer to a SYN sent
/// again at once) lost nothing.
pub const ANSWER_LOST_MIN_NS: i64 = 200_000_000;

/// The handshake as seen at the capture point. Its SYN is `Connection::syn()` (nearly always
/// the connection's first packet: one bit of the connection instead of 16 bytes here), and
/// the durations that start at the SYN are methods of `Connection` too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Handshake {
    pub syn_ack: Option<At>,
    /// The client's ACK of the SYN-ACK.
    pub ack: Option<At>,
    /// What few connections have (stale ACKs and RSTs from the client in the handshake, a
    /// SYN sent again, an earlier connection on the 4-tuple), allocated at the first: inline it
    /// would be 24 bytes of every connection, and a box of the predecessor's own 8 more. Read
    /// through the methods of the same names (`Connection::prev` for the predecessor).
    odd: Option<Box<Odd>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Odd {
    invalid_acks: u32,
    first_invalid_ack: Option<At>,
    client_rsts: u32,
    /// The handshake's SYN when it is not the connection's first packet (a SYN sent again).
    syn_later: Option<At>,
    /// The last of the server's SYN-ACKs sent again (same ISN) before the client's ACK, and
    /// how many: the first was lost on the way to the client, or the client's ACK of it was.
    syn_ack_again: Option<At>,
    syn_acks_again: u32,
    /// The connection that used the same 4-tuple before this one (`Connection::prev`).
    prev: Option<Predecessor>,
}

impl Handshake {
    /// ACKs from the server side, before any SYN-ACK, that do not acknowledge the client's SYN
    /// (a TIME-WAIT or stale socket answering with old numbers, docs/tcp-signatures.md section 1).
    pub fn invalid_acks(&self) -> u32 {
        self.odd.as_ref().map_or(0, |o| o.invalid_acks)
    }
    /// The first of those ACKs.
    pub fn first_invalid_ack(&self) -> Option<At> {
        self.odd.as_ref().and_then(|o| o.first_invalid_ack)
    }
    /// RSTs the client sent before the handshake completed.
    pub fn client_rsts(&self) -> u32 {
        self.odd.as_ref().map_or(0, |o| o.client_rsts)
    }
    pub(crate) fn count_invalid_ack(&mut self, at: At) {
        let o = self.odd.get_or_insert_default();
        o.invalid_acks += 1;
        o.first_invalid_ack.get_or_insert(at);
    }
    pub(crate) fn count_client_rst(&mut self) {
        self.odd.get_or_insert_default().client_rsts += 1;
    }
    /// The SYN-ACKs the server sent again (same ISN) before the client's ACK: how many, and
    /// the last. The client's ACK, when it came, answered that one.
    pub fn syn_acks_again(&self) -> Option<(u32, At)> {
        let o = self.odd.as_ref()?;
        Some((o.syn_acks_again, o.syn_ack_again?))
    }
    pub(crate) fn note_syn_ack_again(&mut self, at: At) {
        let o = self.odd.get_or_insert_default();
        o.syn_acks_again = o.syn_acks_again.saturating_add(1);
        o.syn_ack_again = Some(at);
    }
    /// The SYN-ACK the client's ACK answered: the last one sent before that ACK.
    pub fn answered_syn_ack(&self) -> Option<At> {
        self.syn_acks_again().map(|(_, a)| a).or(self.syn_ack)
    }
}

/// `Connection::flags`: the handshake's SYN is the connection's first packet.
const SYN_IS_FIRST: u8 = 1;
/// `Connection::flags`: a SYN-ACK, or a segment after the handshake, carried a Multipath TCP
/// option: the connection is one subflow of an MPTCP connection (RFC 8684).
const MPTCP: u8 = 2;

/// One TCP connection: one generation of one 4-tuple.
#[derive(Clone, Debug)]
pub struct Connection {
    pub client: Endpoint,
    pub server: Endpoint,
    pub role: RoleSource,
    pub first: At,
    pub last: At,
    pub handshake: Handshake,
    pub end_reason: EndReason,
    /// When FIN both ways or an RST was seen (cleared if the connection carries on).
    pub closed_at: Ts,
    /// The tracker's table slot while the connection is tracked: dense and reused after the
    /// connection is finished, so per-connection state elsewhere (the detectors') can live in
    /// arrays indexed by it instead of hash maps. Together with `id` it names the connection.
    pub slot: u32,
    /// The tracker's queue of closed connections holds an entry for it (one at most: an RST
    /// answered by the same SYN again, over and over, closes and reopens one connection at
    /// every other packet, and queued an entry at each close).
    pub(crate) queued_closed: bool,
    /// `SYN_IS_FIRST`, `MPTCP` (in padding).
    flags: u8,
    /// What each side's IPv4 IDs said so far (`IpIds`), by `Side`: 4 bytes a side, next to
    /// the small fields above in one 8-byte word (in `Endpoint` they would pad each side to
    /// the next 8 bytes).
    pub(crate) ids: [IpIds; 2],
}

/// What a summary of many connections reads of each (the text report's counts and its
/// slowest connections): about a seventh of a `Connection`, with no heap behind it. The
/// tracking workers send these instead of whole connections when the printer needs no more.
#[derive(Clone, Debug, PartialEq)]
pub struct Brief {
    pub id: u64,
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    pub duration_ns: i64,
    pub packets: u64,
    /// Unique payload bytes client -> server and server -> client.
    pub c2s: u64,
    pub s2c: u64,
    pub hs_rtt_ns: Option<i64>,
    /// Retransmitted segments and duplicates, both directions (saturating).
    pub retrans: u32,
    pub duplicates: u32,
    pub close: Close,
    pub vantage: Vantage,
    pub inferred_role: bool,
    /// The 4-tuple carried an earlier connection.
    pub reused: bool,
}

impl Connection {
    /// The frame number of the connection's first packet: unique, ascending in the order
    /// connections started, the same whatever else the capture holds or how the work was
    /// shared among threads, and a place to jump to in Wireshark (Go to Packet).
    #[inline]
    pub fn id(&self) -> u64 {
        self.first.frame()
    }

    /// The handshake's SYN: the one answered by the first SYN-ACK (the last SYN before it).
    #[inline]
    pub fn syn(&self) -> Option<At> {
        if self.flags & SYN_IS_FIRST != 0 {
            Some(self.first)
        } else {
            self.handshake.odd.as_ref().and_then(|o| o.syn_later)
        }
    }

    /// The side the capture holds not one packet of although the other acknowledges
    /// something of it (its SYN, its data): the capture saw one direction only (a capture
    /// filter, asymmetric routing), so that side's ACKs, answers and close are unknown, not
    /// absent. None when both sides were seen, and for a connection begun before the capture
    /// (its ACK numbers may acknowledge what came before).
    pub fn unseen_side(&self) -> Option<Side> {
        if self.role.inferred() {
            return None;
        }
        if self.client.packets == 0 && self.server.max_ack().is_some() {
            Some(Side::Client)
        } else if self.server.packets == 0 && self.client.max_ack().is_some() {
            Some(Side::Server)
        } else {
            None
        }
    }

    /// One subflow of a Multipath TCP connection: the server accepted MPTCP (its SYN-ACK
    /// carried the option) or MPTCP options travel after the handshake. The application's data
    /// may then travel on other subflows too (other 4-tuples), so this subflow's requests,
    /// responses and pauses are not the application's.
    #[inline]
    pub fn mptcp(&self) -> bool {
        self.flags & MPTCP != 0
    }

    pub(crate) fn set_mptcp(&mut self) {
        self.flags |= MPTCP;
    }

    /// The connection that used the same 4-tuple before this one, if the tracker knew one (a
    /// reused 4-tuple).
    #[inline]
    pub fn prev(&self) -> Option<&Predecessor> {
        self.handshake.odd.as_ref().and_then(|o| o.prev.as_ref())
    }

    pub(crate) fn set_prev(&mut self, p: Predecessor) {
        self.handshake.odd.get_or_insert_default().prev = Some(p);
    }

    pub(crate) fn set_syn(&mut self, at: At) {
        if at == self.first {
            self.flags |= SYN_IS_FIRST;
        } else {
            self.flags &= !SYN_IS_FIRST;
            self.handshake.odd.get_or_insert_default().syn_later = Some(at);
        }
    }

    /// `ack` acknowledges the client's SYN: its ISN + 1, or, when the SYN carried data (TCP
    /// Fast Open, RFC 7413), up to the end of that data (a SYN-ACK that accepts the data
    /// acknowledges it too). The client's next sequence is the end of its SYN until the
    /// handshake completes.
    pub fn acks_client_syn(&self, ack: tcpwhy_wire::Seq) -> bool {
        let Some(isn) = self.client.isn() else {
            return false;
        };
        let end = self.client.next_seq().unwrap_or(isn + 1);
        ack == isn + 1 || (ack > isn + 1 && ack <= end)
    }

    /// The server's first SYN-ACK: the handshake's, or, when the capture holds no SYN (it
    /// began with the SYN-ACK, or misses the client's packets), the connection's first packet.
    pub fn first_syn_ack(&self) -> Option<At> {
        self.handshake.syn_ack.or_else(|| {
            (self.role == RoleSource::SynAck && self.client.isn().is_none()).then_some(self.first)
        })
    }

    /// The server sent its SYN-ACK again at least `ANSWER_LOST_MIN_NS` after the first, with
    /// no ACK in between: the first (or the client's ACK of it) was lost on the way.
    pub fn answer_lost(&self) -> bool {
        match (self.first_syn_ack(), self.handshake.syn_acks_again()) {
            (Some(a), Some((_, b))) => b.ts_ns - a.ts_ns >= ANSWER_LOST_MIN_NS,
            _ => false,
        }
    }

    /// SYN -> ACK of the handshake: one full round trip from any vantage point; None where the
    /// server's answer was lost (`answer_lost`): the wait for the retry is loss, and
    /// the client's ACK need not follow the SYN-ACK it answered by one leg of the path.
    pub fn handshake_rtt_ns(&self) -> Option<i64> {
        if self.answer_lost() {
            return None;
        }
        Some(self.handshake.ack?.ts_ns - self.syn()?.ts_ns).filter(|d| *d >= 0)
    }
    pub fn syn_to_syn_ack_ns(&self) -> Option<i64> {
        Some(self.handshake.syn_ack?.ts_ns - self.syn()?.ts_ns).filter(|d| *d >= 0)
    }
    /// The SYN-ACK the client answered -> its ACK: the client's leg of the round trip.
    pub fn syn_ack_to_ack_ns(&self) -> Option<i64> {
        let hs = &self.handshake;
        Some(hs.ack?.ts_ns - hs.answered_syn_ack()?.ts_ns).filter(|d| *d >= 0)
    }

    pub(crate) fn new(
        client: (IpAddr, u16),
        server: (IpAddr, u16),
        role: RoleSource,
        at: At,
    ) -> Connection {
        Connection {
            client: Endpoint::new(client.0, client.1, at.ts_ns),
            server: Endpoint::new(server.0, server.1, at.ts_ns),
            role,
            first: at,
            last: at,
            handshake: Handshake::default(),
            end_reason: EndReason::CaptureEnd,
            closed_at: Ts::NONE,
            slot: 0,
            queued_closed: false,
            flags: 0,
            ids: [IpIds::default(); 2],
        }
    }

    pub fn brief(&self) -> Brief {
        Brief {
            id: self.id(),
            client: (self.client.addr, self.client.port),
            server: (self.server.addr, self.server.port),
            duration_ns: self.duration_ns(),
            packets: self.packets(),
            c2s: self.client.unique_bytes,
            s2c: self.server.unique_bytes,
            hs_rtt_ns: self.handshake_rtt_ns(),
            retrans: self
                .client
                .retrans_segments()
                .saturating_add(self.server.retrans_segments()),
            duplicates: self
                .client
                .duplicates()
                .saturating_add(self.server.duplicates()),
            close: self.close(),
            vantage: self.vantage(),
            inferred_role: self.role.inferred(),
            reused: self.prev().is_some(),
        }
    }

    pub fn endpoint(&self, side: Side) -> &Endpoint {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }

    pub fn duration_ns(&self) -> i64 {
        (self.last.ts_ns - self.first.ts_ns).max(0)
    }

    pub fn packets(&self) -> u64 {
        self.client.packets + self.server.packets
    }

    pub fn close(&self) -> Close {
        let (c, s) = (&self.client, &self.server);
        let before = |a: Option<At>, b: Option<At>| match (a, b) {
            (Some(a), Some(b)) => a.before(&b),
            (Some(_), None) => true,
            _ => false,
        };
        let rst_first = match (c.rst(), s.rst()) {
            (Some(a), Some(b)) => Some(if a.before(&b) {
                Side::Client
            } else {
                Side::Server
            }),
            (Some(_), None) => Some(Side::Client),
            (None, Some(_)) => Some(Side::Server),
            (None, None) => None,
        };
        let fin_first = if before(c.fin, s.fin) {
            Side::Client
        } else {
            Side::Server
        };
        match (c.fin, s.fin, rst_first) {
            // FIN both ways before any reset: a clean close.
            (Some(cf), Some(sf), rst) => {
                let last_fin = cf.frame().max(sf.frame());
                let rst_at = [c.rst(), s.rst()]
                    .into_iter()
                    .flatten()
                    .map(|a| a.frame())
                    .min();
                match (rst, rst_at) {
                    (Some(by), Some(r)) if r < last_fin => Close::Rst { by },
                    _ => Close::Fin { first: fin_first },
                }
            }
            (_, _, Some(by)) => Close::Rst { by },
            (Some(_), None, None) => Close::HalfClosed { by: Side::Client },
            (None, Some(_), None) => Close::HalfClosed { by: Side::Server },
            (None, None, None) => Close::Open,
        }
    }

    pub fn vantage(&self) -> Vantage {
        if self.client.addr.is_loopback() && self.server.addr.is_loopback() {
            return Vantage::Local;
        }
        let (Some(a), Some(b)) = (self.syn_to_syn_ack_ns(), self.syn_ack_to_ack_ns()) else {
            return Vantage::Unknown;
        };
        let total = a + b;
        if total <= 0 {
            return Vantage::Unknown;
        }
        // The side of the path that holds at least three quarters of the round trip is "far".
        if a * 4 >= total * 3 {
            Vantage::NearClient
        } else if b * 4 >= total * 3 {
            Vantage::NearServer
        } else {
            Vantage::Middle
        }
    }

    /// The data->ACK samples of the side whose data crosses the far part of the path from the
    /// capture point, and the near part to add to them (from the handshake split); none when
    /// the capture point sits in the middle or is unknown.
    fn far_samples(&self) -> Option<(&crate::endpoint::RttStats, i64)> {
        match self.vantage() {
            Vantage::NearClient | Vantage::Local => {
                Some((&self.client.ack_rtt, self.syn_ack_to_ack_ns().unwrap_or(0)))
            }
            Vantage::NearServer => {
                Some((&self.server.ack_rtt, self.syn_to_syn_ack_ns().unwrap_or(0)))
            }
            Vantage::Middle | Vantage::Unknown => None,
        }
    }

    /// Full-path round-trip samples: the handshake, plus the data->ACK samples of the side
    /// whose data crosses the far part of the path from the capture point, with the near part
    /// (from the handshake split) added. Returns (min, median, max, samples) in ns.
    pub fn rtt_summary(&self) -> Option<(i64, i64, i64, u32)> {
        let hs = self.handshake_rtt_ns();
        let Some((far, near_ns)) = self.far_samples() else {
            return hs.map(|h| (h, h, h, 1));
        };
        let mut min = hs;
        let mut max = hs;
        let mut count = u32::from(hs.is_some());
        if far.count() > 0 {
            let fmin = far.min_ns + near_ns;
            let fmax = far.max_ns + near_ns;
            min = Some(min.map_or(fmin, |m| m.min(fmin)));
            max = Some(max.map_or(fmax, |m| m.max(fmax)));
            count += far.count();
        }
        let median = match far.median_ns() {
            Some(m) => Some(m + near_ns),
            None => hs,
        };
        Some((min?, median?, max?, count))
    }

    /// Like `rtt_summary`, but the median, maximum and count from the handshake and the
    /// prompt data->ACK samples only (`RttStats::add`): ACKs of lone segments wait for the
    /// receiver's delayed-ACK timer or its application's answer, which are no part of the
    /// path. The minimum is still that of every sample.
    pub fn prompt_rtt_summary(&self) -> Option<(i64, i64, i64, u32)> {
        let (min, _, _, _) = self.rtt_summary()?;
        let hs = self.handshake_rtt_ns();
        let Some((far, near_ns)) = self.far_samples() else {
            return Some((min, min, min, 1));
        };
        let hs_n = u32::from(hs.is_some());
        match far.prompt() {
            Some((median, max, n)) => {
                let max = (max + near_ns).max(hs.unwrap_or(0));
                Some((min, median + near_ns, max, n.saturating_add(hs_n)))
            }
            None => hs.map(|h| (min, h, h, hs_n)),
        }
    }

    /// Both sides sent the window scale option in their SYNs (RFC 7323 section 2.2).
    pub fn window_scaling(&self) -> bool {
        self.client.window_scale().is_some() && self.server.window_scale().is_some()
    }
}
