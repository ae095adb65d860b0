//! The connection table: 4-tuple -> current connection, with generations, expiry by capture
//! time, and a hard cap.
//!
//! Memory is bounded by open connections: finished connections are handed to the [`Sink`] and
//! dropped; what a later SYN on the same 4-tuple needs to know about them is kept as a small
//! [`Predecessor`] for [`Config::history_ns`]. Every timer runs on capture time, so the same
//! input always gives the same output. A connection that has seen only its client's SYNs is
//! kept compact until anything else happens on its 4-tuple (`crate::embryo`). What a segment
//! does to its connection (TCP accounting) is the connection's own (`crate::account`).

use crate::account::Accounted;
use crate::config::Config;
use crate::conn::{Connection, EndReason, Predecessor, RoleSource};
use crate::embryo::{Embryo, Embryos, Syn, COMPACT};
use crate::endpoint::At;
use crate::flow::{flow_hash, FlowKey};
use crate::history::{history_of, History, HistoryRing};
use crate::sink::{Moment, SegmentEvent, Sink};
use crate::slots::{Slots, Timer};
use hashbrown::HashTable;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::IpAddr;
use tcpwhy_wire::TcpSegment;

/// Sorted timer queues besides the heap (`Tracker::queues`).
const QUEUES: usize = 3;

/// Counters the summary reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    pub connections: u64,
    pub evicted: u64,
    pub peak_open: u64,
    /// Finished connections the history for the next SYN on a 4-tuple forgot before their
    /// time (`Config::history_ns`) because it was full (`Config::max_connections` entries):
    /// a later SYN on such a tuple is not compared with them.
    pub history_forgotten: u64,
}

pub struct Tracker {
    cfg: Config,
    /// 4-tuple -> slot (or embryo handle), by the tuple's hash (equality is checked against
    /// the connection).
    index: HashTable<u32>,
    slots: Slots,
    /// Connections that have seen only their client's SYNs (`crate::embryo`), counted in
    /// `open` like the rest.
    embryos: Embryos,
    /// Each slot's tuple hash (for the index's rehashing and removal).
    hashes: Vec<u64>,
    free: Vec<u32>,
    open: usize,
    /// One timer per connection, a min-heap by (deadline, id): a timer pushed again after
    /// later activity must not wait behind every timer queued since (with FIFO queues a closed
    /// connection lingered twice as long).
    timers: BinaryHeap<Reverse<Timer>>,
    /// Timers armed in order need no heap: a timer no earlier than the last one of a queue
    /// joins that queue, which stays sorted. Most timers are a fixed time after the packet
    /// being handled, so each kind arrives in capture order: a new connection's first look
    /// (first packet + linger), a closing connection's due time (last packet + linger), an
    /// idle connection's (last packet + idle timeout). A timer that fits no queue goes to the
    /// heap. Timers pop from whichever queue or heap holds the least, so the order is the
    /// heap's alone would be. (With one queue, every closing connection went through the heap:
    /// 5% of a single-threaded run's time was its pops.)
    queues: [VecDeque<Timer>; QUEUES],
    /// Each slot's live timer deadline (other entries for the slot are stale); never later
    /// than the connection's due time.
    armed: Vec<i64>,
    /// Closed connections in the order they first closed, for eviction (stale entries
    /// skipped; a connection closed, reopened by the same SYN and closed again keeps its
    /// place: `Connection::queued_closed`).
    closed: VecDeque<(u32, u64)>,
    /// No timer or history entry runs out before this (capture time moving on before it has
    /// nothing to do).
    next_due: i64,
    history: HistoryRing,
    /// The latest capture time seen (timestamps may step backwards; timers do not).
    now: i64,
    stats: TrackerStats,
    /// The capture ended: the connections left to finish (id, slot, in id order) and how
    /// many of them `finish_some` has finished.
    ending: Option<(Vec<(u64, u32)>, usize)>,
}

/// Ports at or above this are taken as ephemeral (IANA dynamic range starts at 49152; Linux's
/// default ip_local_port_range starts at 32768).
const EPHEMERAL_MIN: u16 = 32768;
/// How many queue entries eviction may re-queue before it takes the oldest anyway.
const EVICT_SCAN: usize = 16;

/// Entries beyond one and a half per tracked connection, at most, in the timer queues and in
/// the queue of closed connections, before the stale ones are dropped (`queue_bound`). A connection that outlives its first look is armed for the idle timeout (300 s
/// ahead); when it closes it is armed again, earlier, and the idle entry stays queued, stale,
/// until its time. Kept, those entries grew with every such connection of the last 300 s of
/// capture rather than with the connections open (26 MB at 100 000 open in the synthetic
/// series, for a million connections that had closed). Dropping them costs a pass over the
/// entries, once per half the open count of new connections at least. The queue of closed
/// connections had the same flaw (see `Tracker::create`).
const QUEUE_SLACK: usize = 4096;

/// The most entries the timer queues, or the queue of closed connections, hold with `open`
/// connections tracked before their stale entries are dropped.
pub(crate) fn queue_bound(open: usize) -> usize {
    open + open / 2 + QUEUE_SLACK
}

/// The capacity to shrink a queue to once its stale entries are gone, if it is mostly empty.
fn shrunk(capacity: usize, len: usize) -> Option<usize> {
    (capacity > 4 * len + 1024).then_some(2 * len + 64)
}

fn guess_roles(seg: &TcpSegment) -> (bool, RoleSource) {
    // Returns (sender is client, how we know).
    if seg.flags.syn() {
        return if seg.flags.ack() {
            (false, RoleSource::SynAck)
        } else {
            (true, RoleSource::Syn)
        };
    }
    // A well-known port (below 1024) or a registered service's port is the server's, before
    // any guess from the ephemeral range (Windows XP clients took ports 1025-5000; servers
    // listen on 8080 or 3306, below Linux's ephemeral range too).
    let (s, d) = (seg.src_port, seg.dst_port);
    if (s < 1024) != (d < 1024) {
        return (d < 1024, RoleSource::Port);
    }
    let service = |p: u16| SERVICE_PORTS.binary_search(&p).is_ok();
    if service(s) != service(d) {
        return (service(d), RoleSource::Port);
    }
    let eph = |p: u16| p >= EPHEMERAL_MIN;
    if eph(s) != eph(d) {
        return (eph(s), RoleSource::Port);
    }
    (true, RoleSource::FirstPacket)
}

/// Registered ports of common services above 1024, sorted: a connection without handshake
/// whose one end uses one has its server there.
pub(crate) const SERVICE_PORTS: [u16; 44] = [
    1080, 1194, 1433, 1521, 1723, 1883, 2049, 2181, 2375, 2376, 3128, 3268, 3306, 3389, 4369, 5000,
    5060, 5222, 5432, 5671, 5672, 5900, 5984, 6379, 6443, 6667, 7000, 8000, 8008, 8080, 8081, 8443,
    8883, 8888, 9000, 9042, 9090, 9092, 9100, 9200, 9300, 9418, 11211, 27017,
];

impl Tracker {
    pub fn new(cfg: Config) -> Tracker {
        let history = HistoryRing::new(cfg.max_connections, cfg.history_ns);
        Tracker {
            cfg,
            index: HashTable::new(),
            slots: Slots {
                chunks: Vec::new(),
                len: 0,
            },
            embryos: Embryos::default(),
            hashes: Vec::new(),
            free: Vec::new(),
            open: 0,
            // (Room for a few timers from the start: the heap gets its first one only when a
            // timer is armed out of order.)
            timers: BinaryHeap::with_capacity(64),
            queues: std::array::from_fn(|_| VecDeque::with_capacity(64)),
            armed: Vec::new(),
            closed: VecDeque::new(),
            next_due: i64::MAX,
            history,
            now: i64::MIN,
            stats: TrackerStats::default(),
            ending: None,
        }
    }

    pub fn stats(&self) -> &TrackerStats {
        &self.stats
    }

    /// The slots of the connections tracked now (each connection's `slot`), for tests. (A
    /// connection kept compact has none.)
    pub fn live_slots(&self) -> Vec<u32> {
        self.slots.iter().map(|c| c.slot).collect()
    }

    /// Connections kept compact now (`crate::embryo`), for tests.
    pub fn compact_connections(&self) -> usize {
        self.embryos.iter().count()
    }

    /// Capture time as far as this tracker has seen it (never stepping back).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// Connections currently tracked.
    pub fn open_connections(&self) -> usize {
        self.open
    }

    /// Feed one TCP segment.
    pub fn segment(&mut self, seg: &TcpSegment, at: At, frame_len: u32, sink: &mut dyn Sink) {
        self.segment_hashed(seg, flow_hash(seg), at, frame_len, sink);
    }

    /// Move capture time to `ts_ns` (if later): connections whose timers ran out by then are
    /// finished. A sharded caller tells every tracker where the capture is, so that trackers
    /// seeing no packets for a while still finish their connections on time.
    pub fn advance_to(&mut self, ts_ns: i64, sink: &mut dyn Sink) {
        if ts_ns > self.now {
            self.now = ts_ns;
            if ts_ns >= self.next_due {
                self.expire(sink);
            }
        }
    }

    /// Feed one TCP segment whose [`flow_hash`] the caller already has.
    pub fn segment_hashed(
        &mut self,
        seg: &TcpSegment,
        hash: u64,
        at: At,
        frame_len: u32,
        sink: &mut dyn Sink,
    ) {
        self.advance_to(at.ts_ns, sink);
        // Connections and detectors see capture time that never steps back: a frame stamped
        // earlier than one before it (merged interfaces, a clock adjusted) counts as "now", so
        // every interval measured is >= 0 and intervals never overlap (their sum stays within
        // the capture's span; found by fuzzing the pipeline).
        let at = At::new(at.frame(), at.ts_ns.max(self.now));
        sink.moment(Moment::packet(at));
        let (slots, embryos) = (&self.slots, &self.embryos);
        let found = self
            .index
            .find(hash, |&s| holds(slots, embryos, s, seg))
            .copied();
        let slot = match found {
            Some(h) if h & COMPACT != 0 => {
                // The same SYN again stays compact; anything else needs the full connection.
                if let Some(e) = self.embryos.get_mut(h) {
                    if e.absorb(seg, at, frame_len) {
                        return;
                    }
                }
                let Some(slot) = self.promote(h, hash, true, sink) else {
                    return;
                };
                self.on_tuple(slot, hash, seg, at, sink)
            }
            Some(slot) => self.on_tuple(slot, hash, seg, at, sink),
            None => {
                let key = FlowKey::of(seg);
                let prev = self
                    .history
                    .take(hash, &key, at.ts_ns)
                    .map(|h| h.predecessor());
                // A connection whose first packet is its client's SYN, with nothing before it
                // on the tuple to compare with, starts compact.
                if prev.is_none() && self.cfg.compact_syns {
                    if let Some(syn) = Syn::of(seg, at, frame_len) {
                        self.create_compact(hash, seg, syn, sink);
                        return;
                    }
                }
                self.create(hash, seg, at, prev, sink)
            }
        };
        self.account(slot, seg, at, frame_len, sink);
    }

    /// A later attempt linked to a refused one ([`RetryWatch`](crate::RetryWatch)), given
    /// before the segment that made it: to the sink with the refused connection, when this
    /// tracker still follows it. Capture time moves to that segment's first, as the segment
    /// would move it, so that every tracker finishes the same connections before the link.
    pub fn link(&mut self, link: &crate::Link, sink: &mut dyn Sink) {
        self.advance_to(link.made_ns, sink);
        let mut probe = TcpSegment::EMPTY;
        ((probe.src, probe.src_port), (probe.dst, probe.dst_port)) = (link.client, link.server);
        let (slots, embryos) = (&self.slots, &self.embryos);
        let found = self
            .index
            .find(link.hash(), |&s| holds(slots, embryos, s, &probe))
            .copied();
        // A compact connection has seen nothing but its SYNs: no reset, nothing refused.
        if let Some(slot) = found.filter(|h| h & COMPACT == 0) {
            if let Some(c) = self.slots.get(slot) {
                sink.linked(c, link);
            }
        }
    }

    /// The slot of the connection `seg` belongs to, given the one now on its tuple: that one,
    /// or its successor when `seg` starts the tuple's next generation.
    #[inline(always)]
    fn on_tuple(
        &mut self,
        slot: u32,
        hash: u64,
        seg: &TcpSegment,
        at: At,
        sink: &mut dyn Sink,
    ) -> u32 {
        if self.starts_new_generation(slot, seg) {
            let prev = self.predecessor(slot);
            self.finish(slot, EndReason::Superseded, sink);
            self.create(hash, seg, at, prev, sink)
        } else {
            slot
        }
    }

    /// Account `seg` to the connection in `slot` and hand it to the sink. (Inlined, as are
    /// `update` and `starts_new_generation`: as calls they cost the packet path 1.4% more
    /// instructions.)
    #[inline(always)]
    fn account(
        &mut self,
        slot: u32,
        seg: &TcpSegment,
        at: At,
        frame_len: u32,
        sink: &mut dyn Sink,
    ) {
        if let Some(a) = self.update(slot, seg, at, frame_len) {
            if let Some(c) = self.slots.get(slot) {
                let ev = SegmentEvent {
                    seg,
                    at,
                    from: a.side,
                    new_data: a.new_data,
                    retransmission: a.retransmission || a.lost_wait_ns > 0,
                    lost_wait_ns: a.lost_wait_ns,
                    lost_by_timing: a.lost_by_timing,
                    acked_before: a.acked_before,
                };
                sink.segment(c, &ev);
            }
        }
    }

    /// Start a connection at its client's first SYN, compact (`create` for a full one).
    fn create_compact(&mut self, hash: u64, seg: &TcpSegment, syn: Syn, sink: &mut dyn Sink) {
        if self.open >= self.cfg.max_connections.max(1) {
            self.evict_one(sink);
        }
        let (client, server) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        let at = syn.at;
        // The first look, as for a full connection (`create`).
        let first = at
            .ts_ns
            .saturating_add(self.cfg.idle_timeout_ns.min(self.cfg.closed_linger_ns));
        let h = self.embryos.put(
            Embryo {
                client,
                server,
                armed: first,
                syn,
                again: Box::default(),
            },
            hash,
        );
        let (hashes, embryos) = (&self.hashes, &self.embryos);
        self.index
            .insert_unique(hash, h, |&s| handle_hash(hashes, embryos, s));
        self.open += 1;
        self.stats.connections += 1;
        self.stats.peak_open = self.stats.peak_open.max(self.open as u64);
        self.arm(h, at.frame(), first);
        if self.timer_entries() > queue_bound(self.open) {
            self.drop_stale_timers();
        }
        if self.closed.len() > queue_bound(self.open) {
            self.drop_finished_closed();
        }
        let mut c = Connection::new(client, server, RoleSource::Syn, at);
        c.slot = u32::MAX;
        sink.started(&c);
    }

    /// Make the compact connection `h` (its tuple's hash `hash`) a full one: a slot, and its
    /// SYNs replayed through `update` and the sink as they came, so that the connection and
    /// every detector's state are what they would be had it been full from its first SYN.
    /// Its timer carries over if `keep_timer` (not when it is made full to be finished: its
    /// timer entry is then left stale). None if `h` holds no embryo.
    fn promote(&mut self, h: u32, hash: u64, keep_timer: bool, sink: &mut dyn Sink) -> Option<u32> {
        let e = self.embryos.take(h)?;
        let (id, armed) = (e.id(), e.armed);
        let mut conn = Connection::new(e.client, e.server, RoleSource::Syn, e.syn.at);
        let slot = self.alloc_slot();
        conn.slot = slot;
        self.slots.put(slot, conn);
        self.hashes[slot as usize] = hash;
        if let Some(s) = self.index.find_mut(hash, |&s| s == h) {
            *s = slot;
        }
        // The replay compares each SYN's due time with the live timer, which is set after it:
        // none may arm one (when each SYN came, the timer was no later than its due time; an
        // entry armed now would only be left stale).
        self.armed[slot as usize] = i64::MIN;
        for (seg, at, frame_len) in e.syns() {
            self.account(slot, &seg, at, frame_len, sink);
        }
        self.armed[slot as usize] = armed;
        if keep_timer {
            self.carry_timer(armed, id, h, slot);
        }
        Some(slot)
    }

    /// The queued timer (`deadline`, `id`) of embryo `h` now belongs to `slot`. Each queue is
    /// sorted, so it is found by a binary search; one in the heap is armed again instead (the
    /// heap's entry is left stale).
    fn carry_timer(&mut self, deadline: i64, id: u64, h: u32, slot: u32) {
        let key = (deadline, id);
        for q in &mut self.queues {
            let (Some(front), Some(back)) = (q.front(), q.back()) else {
                continue;
            };
            if (front.deadline, front.id) > key || (back.deadline, back.id) < key {
                continue;
            }
            // Most connections are answered within a round trip of their SYN: their timer is
            // among the last queued.
            let near_back = (1..=8)
                .filter_map(|k| q.len().checked_sub(k))
                .find(|&i| q.get(i).is_some_and(|t| (t.deadline, t.id) <= key));
            let found = match near_back {
                Some(i) if q.get(i).is_some_and(|t| (t.deadline, t.id) == key) => Ok(i),
                _ => q.binary_search_by(|t| (t.deadline, t.id).cmp(&key)),
            };
            let Ok(mut i) = found else {
                continue;
            };
            // Entries of one (deadline, id) sit together: the embryo's is one of them.
            while i > 0 && q.get(i - 1).is_some_and(|t| (t.deadline, t.id) == key) {
                i -= 1;
            }
            while let Some(t) = q.get_mut(i).filter(|t| (t.deadline, t.id) == key) {
                if t.slot == h {
                    t.slot = slot;
                    return;
                }
                i += 1;
            }
        }
        self.arm(slot, id, deadline);
    }

    /// A free slot (the table grows by one if none is).
    fn alloc_slot(&mut self) -> u32 {
        match self.free.pop() {
            Some(s) => s,
            None => {
                self.hashes.push(0);
                self.armed.push(0);
                self.slots.grow()
            }
        }
    }

    /// A SYN (no ACK) that cannot belong to the connection now on the tuple.
    #[inline(always)]
    fn starts_new_generation(&self, slot: u32, seg: &TcpSegment) -> bool {
        if !seg.flags.syn() || seg.flags.ack() {
            return false;
        }
        let Some(c) = self.slots.get(slot) else {
            return false;
        };
        let from_client = (seg.src, seg.src_port) == (c.client.addr, c.client.port);
        if from_client {
            if c.client.isn().is_none() {
                // The SYN-ACK came first (capture reordering, merged interfaces): the SYN it
                // acknowledges is this connection's, not a new one.
                return !syn_ack_answers(c, seg);
            }
            // The same ISN again is a retransmitted SYN (also after an RST in SYN_SENT).
            return c.client.isn() != Some(seg.seq);
        }
        // A SYN from the server side: simultaneous open while only the client's SYN was seen,
        // otherwise the roles turned round on this tuple.
        let only_syn = c.server.packets == 0 && c.client.isn().is_some();
        !only_syn
    }

    fn predecessor(&self, slot: u32) -> Option<(Predecessor, (IpAddr, u16))> {
        self.slots.get(slot).map(history_of)
    }

    fn create(
        &mut self,
        hash: u64,
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
        // A connection is named by the frame number of its first packet: unique, in the order
        // connections start, and the same however the capture is shared among trackers.
        let id = at.frame();
        let mut conn = Connection::new(client, server, role, at);
        if let Some((mut p, old_client)) = prev {
            p.same_client = old_client == client;
            conn.set_prev(p);
        }
        let slot = self.alloc_slot();
        conn.slot = slot;
        self.slots.put(slot, conn);
        self.hashes[slot as usize] = hash;
        let (hashes, embryos) = (&self.hashes, &self.embryos);
        self.index
            .insert_unique(hash, slot, |&s| handle_hash(hashes, embryos, s));
        self.open += 1;
        self.stats.connections += 1;
        self.stats.peak_open = self.stats.peak_open.max(self.open as u64);
        // A first look after the linger time: most connections have closed by then.
        let first = at
            .ts_ns
            .saturating_add(self.cfg.idle_timeout_ns.min(self.cfg.closed_linger_ns));
        self.arm(slot, id, first);
        if self.timer_entries() > queue_bound(self.open) {
            self.drop_stale_timers();
        }
        if self.closed.len() > queue_bound(self.open) {
            // Finished connections leave the queue from its front only: one at the front
            // that stays tracked (closed, reopened by the same SYN and alive for hours) kept
            // every entry behind it.
            self.drop_finished_closed();
        }
        if let Some(c) = self.slots.get(slot) {
            sink.started(c);
        }
        slot
    }

    /// Account one segment on its connection (`Connection::on_segment`: what the segment
    /// was) and keep the closed queue and the connection's timer up to date.
    #[inline(always)]
    fn update(&mut self, slot: u32, seg: &TcpSegment, at: At, frame_len: u32) -> Option<Accounted> {
        let c = self.slots.get_mut(slot)?;
        let a = c.on_segment(seg, at, frame_len)?;
        if a.queue_closed {
            self.closed.push_back((slot, c.id()));
        }
        // Closing brings the connection's due time forward: its timer must not be later.
        let due = due(&self.cfg, c);
        let id = c.id();
        if due < self.armed[slot as usize] {
            self.arm(slot, id, due);
        }
        Some(a)
    }

    fn arm(&mut self, slot: u32, id: u64, deadline: i64) {
        self.next_due = self.next_due.min(deadline);
        if slot & COMPACT != 0 {
            if let Some(e) = self.embryos.get_mut(slot) {
                e.armed = deadline;
            }
        } else if let Some(a) = self.armed.get_mut(slot as usize) {
            *a = deadline;
        }
        let t = Timer { deadline, id, slot };
        // The queue whose last timer is the latest one before `t` (the tightest fit keeps
        // each queue to one kind of timer); none: the heap.
        let fit = self
            .queues
            .iter_mut()
            .filter(|q| q.back().is_none_or(|b| *b < t))
            .max_by_key(|q| q.back().copied());
        match fit {
            Some(q) => q.push_back(t),
            None => self.timers.push(Reverse(t)),
        }
    }

    /// Entries in the queue of closed connections, live and stale (for tests).
    #[cfg(test)]
    pub(crate) fn closed_entries(&self) -> usize {
        self.closed.len()
    }

    /// The live timers (deadline, connection id), in order (for tests).
    #[cfg(test)]
    pub(crate) fn live_timers(&self) -> Vec<(i64, u64)> {
        let all = self
            .queues
            .iter()
            .flatten()
            .chain(self.timers.iter().map(|r| &r.0));
        let mut live: Vec<(i64, u64)> = all
            .filter(|t| self.armed_due(t).is_some())
            .map(|t| (t.deadline, t.id))
            .collect();
        live.sort_unstable();
        live
    }

    /// Timer entries queued, live and stale.
    pub(crate) fn timer_entries(&self) -> usize {
        self.timers.len() + self.queues.iter().map(VecDeque::len).sum::<usize>()
    }

    /// Drop the stale timer entries (see `QUEUE_SLACK`). The live ones keep their order, so
    /// timers pop as before.
    fn drop_stale_timers(&mut self) {
        let (slots, armed, embryos) = (&self.slots, &self.armed, &self.embryos);
        let live = |t: &Timer| armed_due(&self.cfg, slots, armed, embryos, t).is_some();
        for q in &mut self.queues {
            q.retain(|t| live(t));
            if let Some(cap) = shrunk(q.capacity(), q.len()) {
                q.shrink_to(cap);
            }
        }
        self.timers.retain(|r| live(&r.0));
        if let Some(cap) = shrunk(self.timers.capacity(), self.timers.len()) {
            self.timers.shrink_to(cap);
        }
    }

    /// Drop the entries of finished connections from the queue of closed connections (see
    /// `QUEUE_SLACK`); the live ones keep their order.
    fn drop_finished_closed(&mut self) {
        let slots = &self.slots;
        self.closed
            .retain(|&(slot, id)| slots.holding(slot, id).is_some());
        if let Some(cap) = shrunk(self.closed.capacity(), self.closed.len()) {
            self.closed.shrink_to(cap);
        }
    }

    /// The earliest timer of the heap and the queues, and the queue it heads (`None`: the
    /// heap).
    fn peek_timer_at(&self) -> Option<(Timer, Option<usize>)> {
        let mut best = self.timers.peek().map(|r| (r.0, None));
        for (i, q) in self.queues.iter().enumerate() {
            if let Some(&t) = q.front() {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, Some(i)));
                }
            }
        }
        best
    }

    fn peek_timer(&self) -> Option<Timer> {
        self.peek_timer_at().map(|(t, _)| t)
    }

    fn pop_timer(&mut self) -> Option<Timer> {
        match self.peek_timer_at()? {
            (_, Some(i)) => self.queues[i].pop_front(),
            (_, None) => self.timers.pop().map(|r| r.0),
        }
    }

    /// When the connection whose live timer `t` is (none: a stale timer) is due, and whether
    /// it closed.
    fn armed_due(&self, t: &Timer) -> Option<(i64, bool)> {
        armed_due(&self.cfg, &self.slots, &self.armed, &self.embryos, t)
    }

    /// Finish connections whose time ran out by `self.now`, in (due time, id) order. A timer
    /// whose connection was active since it was armed goes back with the later time; each
    /// connection finishes at its true due time, announced as its moment.
    fn expire(&mut self, sink: &mut dyn Sink) {
        let now = self.now;
        while let Some(t) = self.peek_timer() {
            if t.deadline > now {
                break;
            }
            self.pop_timer();
            let Some((due, closed)) = self.armed_due(&t) else {
                continue;
            };
            if due > t.deadline {
                self.arm(t.slot, t.id, due);
                continue;
            }
            let reason = if closed {
                EndReason::Closed
            } else {
                EndReason::IdleTimeout
            };
            sink.moment(Moment::timer(due, t.id));
            self.finish(t.slot, reason, sink);
        }
        // Closed connections mostly finish in the order they closed: drop finished ones.
        while let Some(&(slot, id)) = self.closed.front() {
            if self.slots.holding(slot, id).is_some() {
                break;
            }
            self.closed.pop_front();
        }
        self.history.expire(now);
        let timer = self.peek_timer().map_or(i64::MAX, |t| t.deadline);
        self.next_due = timer.min(self.history.next_deadline());
    }

    /// Make room: finish the connection that closed longest ago, else the least recently active
    /// one (approximately: the earliest timer whose connection has not been active since it
    /// was armed), which counts as an eviction.
    fn evict_one(&mut self, sink: &mut dyn Sink) {
        // A closed connection lingering for late packets goes first: it is done anyway, so
        // finishing it early is not an eviction.
        while let Some((slot, id)) = self.closed.pop_front() {
            let Some(c) = self.slots.holding_mut(slot, id) else {
                continue;
            };
            // Popped: closing again queues it again (at the back).
            c.queued_closed = false;
            if c.closed_at.is_some() {
                self.finish(slot, EndReason::Closed, sink);
                return;
            }
        }
        let mut scanned = 0;
        while let Some(t) = self.pop_timer() {
            let Some((due, _)) = self.armed_due(&t) else {
                continue;
            };
            if due > t.deadline && scanned < EVICT_SCAN {
                scanned += 1;
                self.arm(t.slot, t.id, due);
                continue;
            }
            self.stats.evicted += 1;
            self.finish(t.slot, EndReason::Evicted, sink);
            return;
        }
    }

    fn finish(&mut self, slot: u32, reason: EndReason, sink: &mut dyn Sink) {
        // A compact connection is finished as the full one its SYNs make.
        let slot = if slot & COMPACT != 0 {
            let Some(hash) = self.embryos.get(slot).map(|_| self.embryos.hash(slot)) else {
                return;
            };
            match self.promote(slot, hash, false, sink) {
                Some(s) => s,
                None => return,
            }
        } else {
            slot
        };
        // Read in place and emptied at the end (moving a connection out of its slot copied a
        // kilobyte per connection).
        let Some(c) = self.slots.get_mut(slot) else {
            return;
        };
        c.end_reason = reason;
        let c: &Connection = c;
        self.free.push(slot);
        self.open -= 1;
        let hash = self.hashes[slot as usize];
        if let Ok(e) = self.index.find_entry(hash, |&s| s == slot) {
            e.remove();
        }
        // No history for a successor at the end of the capture (with a million connections
        // open then, it was a million entries nothing would read).
        if reason != EndReason::Superseded && self.ending.is_none() {
            // History is bounded like the table: the oldest facts go first.
            let h = History::of(c, hash);
            self.next_due = self.next_due.min(self.history.deadline(&h));
            if self.history.put(h, self.now) {
                self.stats.history_forgotten += 1;
            }
        }
        sink.connection(c);
        self.slots.clear(slot);
    }

    /// The capture ended: finish every connection still tracked, in the order they started.
    /// (What the end finishes leaves no history: the tracker takes no packets after it.)
    pub fn finish_all(&mut self, sink: &mut dyn Sink) {
        while !self.finish_some(usize::MAX, sink) {}
    }

    /// The capture ended: finish the next `limit` (at least one) of the connections still
    /// tracked, in the order they started, as `finish_all` would; true once none is left.
    /// Lets a caller hand on the end's records in bounded pieces (with a million connections
    /// open, all their records at once cost as much memory again as the connections).
    pub fn finish_some(&mut self, limit: usize, sink: &mut dyn Sink) -> bool {
        if self.ending.is_none() {
            sink.capture_end(self.now);
        }
        let (live, pos) = self.ending.get_or_insert_with(|| {
            let mut live: Vec<(u64, u32)> = self.slots.iter().map(|c| (c.id(), c.slot)).collect();
            live.extend(self.embryos.iter().map(|(h, e)| (e.id(), h)));
            live.sort_unstable();
            (live, 0)
        });
        let (start, end) = (*pos, pos.saturating_add(limit.max(1)).min(live.len()));
        *pos = end;
        for i in start..end {
            // (Looked up again each time: `finish` needs the tracker.)
            let Some(&(id, slot)) = self.ending.as_ref().and_then(|(l, _)| l.get(i)) else {
                break;
            };
            let reason = match self.slots.get(slot).and_then(|c| c.closed_at.get()) {
                Some(_) => EndReason::Closed,
                None => EndReason::CaptureEnd,
            };
            sink.moment(Moment::end(id));
            self.finish(slot, reason, sink);
        }
        let done = self.ending.as_ref().is_none_or(|(l, p)| *p == l.len());
        if done {
            self.ending = None;
        }
        done
    }
}

/// The segment belongs to the connection `h` names (a slot, or an embryo's handle).
#[inline]
fn holds(slots: &Slots, embryos: &Embryos, h: u32, seg: &TcpSegment) -> bool {
    if h & COMPACT != 0 {
        embryos.get(h).is_some_and(|e| e.same_tuple(seg))
    } else {
        slots.get(h).is_some_and(|c| same_tuple(c, seg))
    }
}

/// The tuple hash of the connection `h` names (for the index's rehashing).
fn handle_hash(hashes: &[u64], embryos: &Embryos, h: u32) -> u64 {
    if h & COMPACT != 0 {
        embryos.hash(h)
    } else {
        hashes.get(h as usize).copied().unwrap_or(0)
    }
}

/// When the connection whose live timer `t` is (none: a stale timer) is due, and whether it
/// closed. An embryo never closes: it is due at its last SYN plus the idle timeout.
fn armed_due(
    cfg: &Config,
    slots: &Slots,
    armed: &[i64],
    embryos: &Embryos,
    t: &Timer,
) -> Option<(i64, bool)> {
    if t.slot & COMPACT != 0 {
        let e = embryos
            .get(t.slot)
            .filter(|e| e.id() == t.id && e.armed == t.deadline)?;
        Some((e.last().ts_ns.saturating_add(cfg.idle_timeout_ns), false))
    } else {
        slots
            .armed_by(armed, t)
            .map(|c| (due(cfg, c), c.closed_at.is_some()))
    }
}

/// When the connection is finished unless another packet comes: its last packet plus the
/// linger time once closed, else plus the idle timeout.
fn due(cfg: &Config, c: &Connection) -> i64 {
    match c.closed_at.get() {
        Some(_) => c.last.ts_ns.saturating_add(linger(cfg, c)),
        None => c.last.ts_ns.saturating_add(cfg.idle_timeout_ns),
    }
}

/// How long a closed connection waits for late packets after its last one.
fn linger(cfg: &Config, c: &Connection) -> i64 {
    let reset_attempt = c.handshake.syn_ack.is_none()
        && c.client.isn().is_some()
        && (c.client.rst().is_some() || c.server.rst().is_some());
    if reset_attempt {
        cfg.reset_attempt_linger_ns.max(cfg.closed_linger_ns)
    } else {
        cfg.closed_linger_ns
    }
}

/// `c` began with a SYN-ACK (its SYN not seen yet) that acknowledges `syn`: ISN + 1, or up to
/// the end of the SYN's data (TCP Fast Open).
fn syn_ack_answers(c: &Connection, syn: &TcpSegment) -> bool {
    let Some(ack) = c.server.max_ack().filter(|_| c.role == RoleSource::SynAck) else {
        return false;
    };
    let isn = syn.seq;
    ack == isn + 1 || (ack > isn + 1 && ack <= isn + 1 + syn.payload_len)
}

/// The segment travels between the two ends of `c` (in either direction).
fn same_tuple(c: &Connection, seg: &TcpSegment) -> bool {
    let (a, b) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
    let (cl, sv) = (
        (c.client.addr, c.client.port),
        (c.server.addr, c.server.port),
    );
    (a == cl && b == sv) || (a == sv && b == cl)
}

#[cfg(test)]
mod timer_tests {
    use super::*;
    use proptest::prelude::*;

    fn tracker(slots: usize) -> Tracker {
        let mut t = Tracker::new(Config::default());
        t.armed = vec![0; slots];
        t
    }

    fn pop_all(t: &mut Tracker) -> Vec<Timer> {
        std::iter::from_fn(|| t.pop_timer()).collect()
    }

    /// Three kinds of timers, each armed in order of its own deadlines but interleaved with
    /// the others (first looks, closings, idle re-arms): the queues hold them all, the heap
    /// none, and they pop in (deadline, id) order.
    #[test]
    fn interleaved_ordered_kinds_need_no_heap() {
        let mut t = tracker(300);
        let mut all = Vec::new();
        for i in 0..100i64 {
            for (k, offset) in [(0u64, 2_000i64), (1, 500), (2, 60_000)] {
                let (slot, id) = (i as u32 * 3 + k as u32, i as u64 * 3 + k);
                let deadline = i * 10 + offset;
                t.arm(slot, id, deadline);
                all.push(Timer { deadline, id, slot });
            }
        }
        assert!(t.timers.is_empty(), "{} timers in the heap", t.timers.len());
        all.sort();
        assert_eq!(pop_all(&mut t), all);
    }

    /// A timer's deadline: ascending, anywhere, descending, or one of a few values (so that
    /// many are equal), like the four kinds of run the old hand-made sequence mixed.
    fn deadline() -> impl Strategy<Value = i64> {
        prop_oneof![0i64..5_000, 0i64..1_000, (0i64..7).prop_map(|k| k * 1000)]
    }

    proptest! {
        /// Timers in any order (equal deadlines, repeats of one slot) pop in (deadline, id,
        /// slot) order, as from one heap.
        #[test]
        fn timers_in_any_order_pop_sorted(
            timers in prop::collection::vec((0u32..64, deadline(), 0u64..1 << 24), 0..3_000),
        ) {
            let mut t = tracker(64);
            let mut all = Vec::new();
            for (slot, deadline, id) in timers {
                t.arm(slot, id, deadline);
                all.push(Timer { deadline, id, slot });
            }
            all.sort();
            prop_assert_eq!(pop_all(&mut t), all);
        }
    }
}
