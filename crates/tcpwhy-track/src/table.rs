//! The connection table: 4-tuple -> current connection, with generations, expiry by capture
//! time, and a hard cap.
//!
//! Memory is bounded by open connections: finished connections are handed to the [`Sink`] and
//! dropped; what a later SYN on the same 4-tuple needs to know about them is kept as a small
//! [`Predecessor`] for [`Config::history_ns`]. Every timer runs on capture time, so the same
//! input always gives the same output.

use crate::conn::{Connection, EndReason, Predecessor, RoleSource, Side};
use crate::endpoint::At;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::IpAddr;
use tcpwhy_wire::TcpSegment;

/// Receives every connection once, when the tracker is done with it.
pub trait Sink {
    /// A connection the tracker is done with (closed, expired, superseded, or at the end).
    fn connection(&mut self, c: &Connection);
    /// Every segment, after the tracker accounted it (detectors watch these).
    fn segment(&mut self, _c: &Connection, _ev: &SegmentEvent<'_>) {}
}

/// One segment as the tracker saw it, for detectors.
#[derive(Clone, Copy, Debug)]
pub struct SegmentEvent<'a> {
    pub seg: &'a TcpSegment,
    pub at: At,
    /// Which side sent it.
    pub from: Side,
    /// It carried sequence space never seen before.
    pub new_data: bool,
    /// It carried payload already sent (a retransmission; keep-alives excluded).
    pub retransmission: bool,
}

impl<F: FnMut(&Connection)> Sink for F {
    fn connection(&mut self, c: &Connection) {
        self(c)
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    /// A connection with no packet for this long is finished (Zeek's tcp_inactivity_timeout).
    pub idle_timeout_ns: i64,
    /// A closed connection is kept this long for late packets (retransmitted FINs, last ACKs).
    pub closed_linger_ns: i64,
    /// How long the facts about a finished connection are kept for the next SYN on its 4-tuple:
    /// 300 s covers TIME-WAIT (60 s) and a full Linux ISN wrap (274.9 s).
    pub history_ns: i64,
    /// At most this many connections are tracked at once; beyond it, the least recently active
    /// are finished early (`EndReason::Evicted`). The history of finished connections kept for
    /// the next SYN on their 4-tuple is capped at the same number of entries.
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            idle_timeout_ns: 300 * SEC,
            closed_linger_ns: 10 * SEC,
            history_ns: 300 * SEC,
            max_connections: 1_000_000,
        }
    }
}

const SEC: i64 = 1_000_000_000;

/// A 4-tuple with its two ends in a canonical order, so both directions find the same entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FlowKey {
    lo: (IpAddr, u16),
    hi: (IpAddr, u16),
}

impl FlowKey {
    fn of(seg: &TcpSegment) -> FlowKey {
        let a = (seg.src, seg.src_port);
        let b = (seg.dst, seg.dst_port);
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }
}

/// An entry in a deadline queue; stale when the slot now holds another connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    deadline: i64,
    slot: u32,
    id: u64,
}

#[derive(Clone, Copy, Debug)]
struct History {
    prev: Predecessor,
    client: (IpAddr, u16),
}

/// Counters the summary reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    pub connections: u64,
    pub evicted: u64,
    pub peak_open: u64,
}

pub struct Tracker {
    cfg: Config,
    map: FxHashMap<FlowKey, u32>,
    slots: Vec<Option<Connection>>,
    free: Vec<u32>,
    open: usize,
    /// Min-heaps by deadline: a timer pushed again after later activity must not wait behind
    /// every timer queued since (with FIFO queues a closed connection lingered twice as long).
    idle_q: BinaryHeap<Reverse<Timer>>,
    close_q: BinaryHeap<Reverse<Timer>>,
    history: FxHashMap<FlowKey, History>,
    history_q: VecDeque<(i64, FlowKey, u64)>,
    next_id: u64,
    /// The latest capture time seen (timestamps may step backwards; timers do not).
    now: i64,
    stats: TrackerStats,
}

/// Two identical packets this close are one packet captured twice.
const DUPLICATE_NS: i64 = 1_000_000;

/// What tells two sends of a segment apart (a retransmission differs in IP ID or TSval).
fn signature(seg: &TcpSegment) -> u32 {
    let (tsval, tsecr) = seg.options.timestamp.unwrap_or((0, 0));
    let words = [
        u64::from(seg.seq.0) << 32 | u64::from(seg.ack.0),
        u64::from(seg.payload_len) << 32 | u64::from(seg.window) << 16 | u64::from(seg.ip_id),
        u64::from(tsval) << 32 | u64::from(tsecr),
        u64::from(seg.flags.0),
    ];
    let h = words.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
        (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29)
    });
    (h ^ (h >> 32)) as u32
}

/// Ports at or above this are taken as ephemeral (IANA dynamic range starts at 49152; Linux's
/// default ip_local_port_range starts at 32768).
const EPHEMERAL_MIN: u16 = 32768;
/// How many queue entries eviction may re-queue before it takes the oldest anyway.
const EVICT_SCAN: usize = 16;

fn guess_roles(seg: &TcpSegment) -> (bool, RoleSource) {
    // Returns (sender is client, how we know).
    if seg.flags.syn() {
        return if seg.flags.ack() {
            (false, RoleSource::SynAck)
        } else {
            (true, RoleSource::Syn)
        };
    }
    let (s, d) = (seg.src_port, seg.dst_port);
    let eph = |p: u16| p >= EPHEMERAL_MIN;
    if eph(s) != eph(d) {
        return (eph(s), RoleSource::Port);
    }
    if (s < 1024) != (d < 1024) {
        return (d < 1024, RoleSource::Port);
    }
    (true, RoleSource::FirstPacket)
}

impl Tracker {
    pub fn new(cfg: Config) -> Tracker {
        Tracker {
            cfg,
            map: FxHashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            idle_q: BinaryHeap::new(),
            close_q: BinaryHeap::new(),
            history: FxHashMap::default(),
            history_q: VecDeque::new(),
            next_id: 1,
            now: i64::MIN,
            stats: TrackerStats::default(),
        }
    }

    pub fn stats(&self) -> &TrackerStats {
        &self.stats
    }

    /// Connections currently tracked.
    /// The slots of the connections tracked now (each connection's `slot`), for tests.
    pub fn live_slots(&self) -> Vec<u32> {
        self.slots
            .iter()
            .filter_map(|c| c.as_ref().map(|c| c.slot))
            .collect()
    }

    pub fn open_connections(&self) -> usize {
        self.open
    }

    /// Feed one TCP segment.
    pub fn segment(&mut self, seg: &TcpSegment, at: At, frame_len: u32, sink: &mut dyn Sink) {
        if at.ts_ns > self.now {
            self.now = at.ts_ns;
            self.expire(sink);
        }
        // Connections and detectors see capture time that never steps back: a frame stamped
        // earlier than one before it (merged interfaces, a clock adjusted) counts as "now", so
        // every interval measured is >= 0 and intervals never overlap (their sum stays within
        // the capture's span; found by fuzzing the pipeline).
        let at = At {
            frame: at.frame,
            ts_ns: at.ts_ns.max(self.now),
        };
        let key = FlowKey::of(seg);
        let slot = match self.map.get(&key).copied() {
            Some(slot) => {
                if self.starts_new_generation(slot, seg) {
                    let prev = self.predecessor(slot);
                    self.finish(slot, EndReason::Superseded, sink);
                    self.create(key, seg, at, prev, sink)
                } else {
                    slot
                }
            }
            None => {
                let prev = self.history.remove(&key).map(|h| (h.prev, h.client));
                self.create(key, seg, at, prev, sink)
            }
        };
        if let Some((from, new_data, retransmission)) = self.update(slot, seg, at, frame_len) {
            if let Some(c) = self.slots[slot as usize].as_ref() {
                let ev = SegmentEvent {
                    seg,
                    at,
                    from,
                    new_data,
                    retransmission,
                };
                sink.segment(c, &ev);
            }
        }
    }

    /// A SYN (no ACK) that cannot belong to the connection now on the tuple.
    fn starts_new_generation(&self, slot: u32, seg: &TcpSegment) -> bool {
        if !seg.flags.syn() || seg.flags.ack() {
            return false;
        }
        let Some(c) = self.slots[slot as usize].as_ref() else {
            return false;
        };
        let from_client = (seg.src, seg.src_port) == (c.client.addr, c.client.port);
        if from_client {
            // The same ISN again is a retransmitted SYN (also after an RST in SYN_SENT).
            return c.client.isn != Some(seg.seq);
        }
        // A SYN from the server side: simultaneous open while only the client's SYN was seen,
        // otherwise the roles turned round on this tuple.
        let only_syn = c.server.packets == 0 && c.client.isn.is_some();
        !only_syn
    }

    fn predecessor(&self, slot: u32) -> Option<(Predecessor, (IpAddr, u16))> {
        self.slots[slot as usize].as_ref().map(history_of)
    }

    fn create(
        &mut self,
        key: FlowKey,
        seg: &TcpSegment,
        at: At,
        prev: Option<(Predecessor, (IpAddr, u16))>,
        sink: &mut dyn Sink,
    ) -> u32 {
        if self.open >= self.cfg.max_connections.max(1) {
            self.evict_one(sink);
        }
        let (sender_is_client, role) = guess_roles(seg);
        let (src, dst) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        let (client, server) = if sender_is_client {
            (src, dst)
        } else {
            (dst, src)
        };
        let id = self.next_id;
        self.next_id += 1;
        let mut conn = Connection::new(id, client, server, role, at);
        if let Some((mut p, old_client)) = prev {
            p.same_client = old_client == client;
            conn.prev = Some(p);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        conn.slot = slot;
        self.slots[slot as usize] = Some(conn);
        self.map.insert(key, slot);
        self.open += 1;
        self.stats.connections += 1;
        self.stats.peak_open = self.stats.peak_open.max(self.open as u64);
        self.idle_q.push(Reverse(Timer {
            deadline: at.ts_ns + self.cfg.idle_timeout_ns,
            slot,
            id,
        }));
        slot
    }

    /// Account one segment; returns (sender, carried new data, was a retransmission).
    fn update(
        &mut self,
        slot: u32,
        seg: &TcpSegment,
        at: At,
        frame_len: u32,
    ) -> Option<(Side, bool, bool)> {
        let c = self.slots[slot as usize].as_mut()?;
        c.last = at;
        let from_client = (seg.src, seg.src_port) == (c.client.addr, c.client.port);
        let side = if from_client {
            Side::Client
        } else {
            Side::Server
        };
        // The same packet captured twice (both ends of a veth, `any`, a bridge and its port):
        // identical headers, including the IPv4 ID or the TCP timestamps that tell two sends of
        // the same bytes apart, within 1 ms. Counted as a packet, otherwise ignored.
        {
            let me = if from_client {
                &mut c.client
            } else {
                &mut c.server
            };
            let sig = signature(seg);
            let distinctive = seg.ip_id != 0 || seg.options.timestamp.is_some();
            if distinctive
                && me.packets > 0
                && me.last_sig == sig
                && at.ts_ns.saturating_sub(me.last_ts) <= DUPLICATE_NS
            {
                // Like tshark: packets, frame bytes and payload count every copy captured.
                me.duplicates += 1;
                me.packets += 1;
                me.frame_bytes += u64::from(frame_len);
                me.payload_bytes += u64::from(seg.payload_len);
                return None;
            }
            me.last_sig = sig;
        }
        let flags = seg.flags;

        // The handshake at the capture point.
        if flags.syn() && !flags.ack() && side == Side::Client && c.handshake.syn_ack.is_none() {
            c.handshake.syn = Some(at);
        }
        if flags.syn()
            && flags.ack()
            && side == Side::Server
            && c.handshake.syn_ack.is_none()
            && c.client.isn.is_some_and(|isn| seg.ack == isn + 1)
        {
            c.handshake.syn_ack = Some(at);
        }
        if side == Side::Client && !flags.syn() && flags.ack() && c.handshake.ack.is_none() {
            if let (Some(_), Some(isn)) = (c.handshake.syn_ack, c.server.isn) {
                if seg.ack == isn + 1 {
                    c.handshake.ack = Some(at);
                }
            }
        }

        // Before the SYN-ACK, an ACK from the server side that does not acknowledge the SYN
        // belongs to earlier state on the tuple: note it, and keep its numbers out of this
        // connection's sequence space.
        let in_syn_sent = c.client.isn.is_some() && c.handshake.syn_ack.is_none();
        let mut ack_valid = flags.ack() && !flags.rst();
        if in_syn_sent
            && side == Side::Server
            && flags.ack()
            && !flags.syn()
            && c.client.isn.is_some_and(|isn| seg.ack != isn + 1)
        {
            c.handshake.invalid_acks += 1;
            c.handshake.first_invalid_ack.get_or_insert(at);
            ack_valid = false;
        }
        if in_syn_sent && side == Side::Client && flags.rst() {
            c.handshake.client_rsts += 1;
        }

        let (me, peer) = match side {
            Side::Client => (&mut c.client, &mut c.server),
            Side::Server => (&mut c.server, &mut c.client),
        };
        let retrans_before = me.retrans_segments;
        let had_new = me.on_send(seg, at, frame_len, peer.max_ack);
        let retransmission = me.retrans_segments != retrans_before;
        if let Some((tsval, _)) = seg.options.timestamp {
            if had_new {
                me.on_tsval(tsval, at.ts_ns);
            }
        }
        if ack_valid && me.max_ack.is_none_or(|m| seg.ack > m) {
            me.max_ack = Some(seg.ack);
            let tsecr = seg.options.timestamp.map(|t| t.1);
            peer.on_acked(seg.ack, tsecr, at.ts_ns);
        }
        // Window scaling applies only when both SYNs carried the option, never to SYNs.
        if !flags.syn() && !flags.rst() {
            me.window_scaled = match (me.window_scale, peer.window_scale) {
                (Some(s), Some(_)) => Some(u64::from(seg.window) << s.min(14)),
                _ if me.isn.is_some() && peer.isn.is_some() => Some(u64::from(seg.window)),
                _ => None,
            };
        }

        // Closing: RST, or FIN both ways. Packets after that keep it open a little longer.
        let closed = c.client.rst.is_some()
            || c.server.rst.is_some()
            || (c.client.fin.is_some() && c.server.fin.is_some());
        if closed && c.closed_at.is_none() {
            c.closed_at = Some(at.ts_ns);
            self.close_q.push(Reverse(Timer {
                deadline: at.ts_ns + self.cfg.closed_linger_ns,
                slot,
                id: c.id,
            }));
        } else if flags.syn() && !flags.ack() && c.closed_at.is_some() && side == Side::Client {
            // The same SYN after an RST in SYN_SENT (stale-state collision): the attempt goes on.
            c.closed_at = None;
            c.client.rst = None;
            c.server.rst = None;
        }
        Some((side, had_new, retransmission))
    }

    fn live(&self, t: &Timer) -> Option<&Connection> {
        self.slots
            .get(t.slot as usize)?
            .as_ref()
            .filter(|c| c.id == t.id)
    }

    /// Finish connections whose timers ran out at `self.now`.
    fn expire(&mut self, sink: &mut dyn Sink) {
        let now = self.now;
        while let Some(&Reverse(t)) = self.close_q.peek() {
            if t.deadline > now {
                break;
            }
            self.close_q.pop();
            // Still closed (a SYN may have revived it), and quiet for the linger time?
            let Some(c) = self.live(&t).filter(|c| c.closed_at.is_some()) else {
                continue;
            };
            let deadline = c.last.ts_ns + self.cfg.closed_linger_ns;
            if deadline <= now {
                self.finish(t.slot, EndReason::Closed, sink);
            } else {
                self.close_q.push(Reverse(Timer { deadline, ..t }));
            }
        }
        while let Some(&Reverse(t)) = self.idle_q.peek() {
            if t.deadline > now {
                break;
            }
            self.idle_q.pop();
            let Some(c) = self.live(&t) else { continue };
            let deadline = c.last.ts_ns + self.cfg.idle_timeout_ns;
            if deadline <= now {
                self.finish(t.slot, EndReason::IdleTimeout, sink);
            } else {
                self.idle_q.push(Reverse(Timer { deadline, ..t }));
            }
        }
        while let Some(&(deadline, key, id)) = self.history_q.front() {
            if deadline > now {
                break;
            }
            self.history_q.pop_front();
            if self.history.get(&key).is_some_and(|h| h.prev.id == id) {
                self.history.remove(&key);
            }
        }
    }

    /// Make room: finish the connection that closed longest ago, else the least recently active
    /// one (approximately: the oldest idle timer whose connection has not been active since it
    /// was queued), which counts as an eviction.
    fn evict_one(&mut self, sink: &mut dyn Sink) {
        // A closed connection lingering for late packets goes first: it is done anyway, so
        // finishing it early is not an eviction.
        while let Some(Reverse(t)) = self.close_q.pop() {
            if self.live(&t).is_some_and(|c| c.closed_at.is_some()) {
                self.finish(t.slot, EndReason::Closed, sink);
                return;
            }
        }
        let mut scanned = 0;
        while let Some(Reverse(t)) = self.idle_q.pop() {
            let Some(c) = self.live(&t) else { continue };
            let deadline = c.last.ts_ns + self.cfg.idle_timeout_ns;
            if deadline > t.deadline && scanned < EVICT_SCAN {
                scanned += 1;
                self.idle_q.push(Reverse(Timer { deadline, ..t }));
                continue;
            }
            self.stats.evicted += 1;
            self.finish(t.slot, EndReason::Evicted, sink);
            return;
        }
    }

    fn finish(&mut self, slot: u32, reason: EndReason, sink: &mut dyn Sink) {
        let Some(mut c) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        c.end_reason = reason;
        self.free.push(slot);
        self.open -= 1;
        let key = FlowKey::of_conn(&c);
        if self.map.get(&key) == Some(&slot) {
            self.map.remove(&key);
        }
        if reason != EndReason::Superseded {
            let (prev, client) = history_of(&c);
            self.history.insert(key, History { prev, client });
            self.history_q
                .push_back((c.last.ts_ns + self.cfg.history_ns, key, c.id));
            // History is bounded like the table: the oldest facts go first.
            while self.history_q.len() > self.cfg.max_connections.max(1) {
                if let Some((_, k, id)) = self.history_q.pop_front() {
                    if self.history.get(&k).is_some_and(|h| h.prev.id == id) {
                        self.history.remove(&k);
                    }
                }
            }
        }
        sink.connection(&c);
    }

    /// The capture ended: finish every connection still tracked, in the order they started.
    pub fn finish_all(&mut self, sink: &mut dyn Sink) {
        let mut live: Vec<(u64, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (c.id, i as u32)))
            .collect();
        live.sort_unstable();
        for (_, slot) in live {
            let reason = match self.slots[slot as usize].as_ref().and_then(|c| c.closed_at) {
                Some(_) => EndReason::Closed,
                None => EndReason::CaptureEnd,
            };
            self.finish(slot, reason, sink);
        }
    }
}

/// What the next connection on the tuple needs to know about `c`, and who its client was.
fn history_of(c: &Connection) -> (Predecessor, (IpAddr, u16)) {
    let p = Predecessor {
        id: c.id,
        close: c.close(),
        last_ts: c.last.ts_ns,
        same_client: true,
        client_next_seq: c.client.next_seq,
        server_next_seq: c.server.next_seq,
        client_isn: c.client.isn,
        client_first_ts: c.first.ts_ns,
        timestamps: c.client.timestamps && c.server.timestamps,
    };
    (p, (c.client.addr, c.client.port))
}

impl FlowKey {
    fn of_conn(c: &Connection) -> FlowKey {
        let a = (c.client.addr, c.client.port);
        let b = (c.server.addr, c.server.port);
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }
}
