//! The history of finished connections a later SYN on the same 4-tuple is compared with.

use crate::conn::{Close, Connection, Predecessor};
use crate::flow::FlowKey;
use hashbrown::HashTable;
use std::net::IpAddr;
use tcpwhy_wire::Seq;

/// What the next SYN on a 4-tuple needs to know about the connection finished on it: its
/// [`Predecessor`] packed (96 bytes; 136 as the predecessor and its client's address and
/// port beside the key): the sequence numbers that may be unknown carry a bit in `known`,
/// the client is one bit of the key, and the deadline is the last packet's time plus
/// `HistoryRing::keep_ns`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct History {
    pub(crate) key: FlowKey,
    pub(crate) hash: u64,
    pub(crate) id: u64,
    pub(crate) last_ts: i64,
    pub(crate) client_first_ts: i64,
    pub(crate) client_next_seq: Seq,
    pub(crate) server_next_seq: Seq,
    pub(crate) client_isn: Seq,
    pub(crate) close: Close,
    /// Which of `client_next_seq`, `server_next_seq`, `client_isn` are known (bits 0, 1, 2).
    pub(crate) known: u8,
    pub(crate) timestamps: bool,
    /// The client is the key's `lo` end (either, when both ends are the same).
    pub(crate) client_lo: bool,
    /// Still the tuple's latest (not taken by a new connection, not replaced).
    pub(crate) live: bool,
}

impl History {
    pub(crate) fn of(c: &Connection, hash: u64) -> History {
        let (p, client) = history_of(c);
        let key = FlowKey::of_conn(c);
        let seq = |s: Option<Seq>, bit: u8| (s.unwrap_or(Seq(0)), s.map_or(0, |_| bit));
        let (client_next_seq, a) = seq(p.client_next_seq, 1);
        let (server_next_seq, b) = seq(p.server_next_seq, 2);
        let (client_isn, i) = seq(p.client_isn, 4);
        History {
            key,
            hash,
            id: p.id,
            last_ts: p.last_ts,
            client_first_ts: p.client_first_ts,
            client_next_seq,
            server_next_seq,
            client_isn,
            close: p.close,
            known: a | b | i,
            timestamps: p.timestamps,
            client_lo: key.lo == client,
            live: true,
        }
    }

    /// The predecessor as `history_of` gave it, and its client's end.
    pub(crate) fn predecessor(&self) -> (Predecessor, (IpAddr, u16)) {
        let seq = |s: Seq, bit: u8| (self.known & bit != 0).then_some(s);
        let p = Predecessor {
            id: self.id,
            close: self.close,
            last_ts: self.last_ts,
            same_client: true,
            client_next_seq: seq(self.client_next_seq, 1),
            server_next_seq: seq(self.server_next_seq, 2),
            client_isn: seq(self.client_isn, 4),
            client_first_ts: self.client_first_ts,
            timestamps: self.timestamps,
        };
        let client = if self.client_lo {
            self.key.lo
        } else {
            self.key.hi
        };
        (p, client)
    }
}

/// Entries in chunks allocated as the ring fills: growing never copies the ones stored, and
/// holds no more than one chunk beyond them (a vector that doubles held up to twice).
pub(crate) struct HistoryEntries {
    pub(crate) chunks: Vec<Vec<History>>,
}

pub(crate) const HISTORY_CHUNK: usize = 4096;

const _: () = assert!(std::mem::size_of::<History>() <= 96);

impl HistoryEntries {
    #[inline]
    pub(crate) fn get(&self, pos: usize) -> &History {
        &self.chunks[pos / HISTORY_CHUNK][pos % HISTORY_CHUNK]
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, pos: usize) -> &mut History {
        &mut self.chunks[pos / HISTORY_CHUNK][pos % HISTORY_CHUNK]
    }

    /// Positions stored so far (every chunk but the last is full).
    pub(crate) fn len(&self) -> usize {
        self.chunks
            .last()
            .map_or(0, |c| (self.chunks.len() - 1) * HISTORY_CHUNK + c.len())
    }

    /// Store at position `len()`; a new chunk holds at
    /// most `room` entries (the ring's places left), so the last never outgrows its
    /// allocation.
    pub(crate) fn push(&mut self, h: History, room: usize) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < HISTORY_CHUNK => c.push(h),
            _ => {
                let mut c = Vec::with_capacity(room.clamp(1, HISTORY_CHUNK));
                c.push(h);
                self.chunks.push(c);
            }
        }
    }
}

/// What the next SYN on a 4-tuple needs to know about the connections finished on it:
/// entries oldest first in a ring (allocated as it fills, at most `cap`), found through an
/// index of their positions by the tuple's hash. An entry is forgotten when its tuple gets a
/// newer one, when a new connection takes it, when its deadline passes, or when the ring
/// needs its place. (A map of entries held up to twice the entries' memory in empty
/// buckets.)
pub(crate) struct HistoryRing {
    pub(crate) ring: HistoryEntries,
    pub(crate) head: usize,
    pub(crate) len: usize,
    pub(crate) cap: usize,
    /// An entry is kept this long after its connection's last packet (capture time).
    pub(crate) keep_ns: i64,
    pub(crate) index: HashTable<u32>,
}

impl HistoryRing {
    pub(crate) fn new(cap: usize, keep_ns: i64) -> HistoryRing {
        HistoryRing {
            ring: HistoryEntries { chunks: Vec::new() },
            head: 0,
            len: 0,
            cap: cap.max(1),
            keep_ns,
            index: HashTable::new(),
        }
    }

    /// When the entry is forgotten (capture time).
    #[inline]
    pub(crate) fn deadline(&self, h: &History) -> i64 {
        h.last_ts.saturating_add(self.keep_ns)
    }

    /// The tuple's entry, taken out (`None` if there is none or it is past its deadline).
    pub(crate) fn take(&mut self, hash: u64, key: &FlowKey, now: i64) -> Option<History> {
        let ring = &self.ring;
        let e = self
            .index
            .find_entry(hash, |&p| ring.get(p as usize).key == *key)
            .ok()?;
        let pos = *e.get() as usize;
        e.remove();
        let h = self.ring.get_mut(pos);
        h.live = false;
        let h = *h;
        (self.deadline(&h) > now).then_some(h)
    }

    /// Keep `h`; true if the ring was full and forgot, to make room, a connection still
    /// within its time (`keep_ns`) at `now`.
    pub(crate) fn put(&mut self, h: History, now: i64) -> bool {
        if let Some(old) = self.take(h.hash, &h.key, i64::MIN) {
            debug_assert!(old.key == h.key);
        }
        let mut forgot = false;
        if self.len == self.cap {
            // (An entry past its time may still be here: `expire` runs after the timers that
            // finish connections, and the ring is in the order connections finished.)
            let oldest = self.ring.get(self.head);
            forgot = oldest.live && self.deadline(oldest) > now;
            self.pop_oldest();
        }
        let pos = (self.head + self.len) % self.cap;
        let filled = self.ring.len();
        if pos == filled {
            self.ring.push(h, self.cap - filled);
        } else {
            *self.ring.get_mut(pos) = h;
        }
        self.len += 1;
        let ring = &self.ring;
        self.index
            .insert_unique(h.hash, pos as u32, |&p| ring.get(p as usize).hash);
        forgot
    }

    pub(crate) fn pop_oldest(&mut self) {
        let head = self.head;
        let h = *self.ring.get(head);
        if h.live {
            if let Ok(e) = self.index.find_entry(h.hash, |&p| p as usize == head) {
                e.remove();
            }
        }
        self.head = (self.head + 1) % self.cap;
        self.len -= 1;
    }

    /// Forget entries whose deadline has passed (the oldest first; an entry behind a later
    /// deadline waits, and `take` ignores it once due).
    pub(crate) fn expire(&mut self, now: i64) {
        while self.len > 0 && self.deadline(self.ring.get(self.head)) <= now {
            self.pop_oldest();
        }
    }

    pub(crate) fn next_deadline(&self) -> i64 {
        if self.len > 0 {
            self.deadline(self.ring.get(self.head))
        } else {
            i64::MAX
        }
    }
}

/// What the next connection on the tuple needs to know about `c`, and who its client was.
pub(crate) fn history_of(c: &Connection) -> (Predecessor, (IpAddr, u16)) {
    let p = Predecessor {
        id: c.id(),
        close: c.close(),
        last_ts: c.last.ts_ns,
        same_client: true,
        client_next_seq: c.client.next_seq(),
        server_next_seq: c.server.next_seq(),
        client_isn: c.client.isn(),
        client_first_ts: c.first.ts_ns,
        timestamps: c.client.timestamps() && c.server.timestamps(),
    };
    (p, (c.client.addr, c.client.port))
}

#[cfg(test)]
mod history_tests {
    use super::*;
    use crate::flow::fmix64;
    use std::net::Ipv4Addr;

    /// The entry of a connection on client port `port` whose last packet was at `last_ms`.
    fn entry(port: u16, last_ms: i64) -> History {
        let key = FlowKey::new(
            (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), port),
            (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80),
        );
        History {
            key,
            hash: fmix64(u64::from(port)),
            id: u64::from(port),
            last_ts: last_ms * 1_000_000,
            client_first_ts: 0,
            client_next_seq: Seq(0),
            server_next_seq: Seq(0),
            client_isn: Seq(0),
            close: Close::Open,
            known: 0,
            timestamps: false,
            client_lo: true,
            live: true,
        }
    }

    /// A full ring forgets its oldest entry to make room. Only a live entry still within its
    /// time counts as forgotten early (the summary warns of those): not one past its time
    /// that `expire` had not dropped yet, nor one a new connection already took.
    #[test]
    fn only_entries_still_within_their_time_count_as_forgotten() {
        let ms = 1_000_000;
        let mut h = HistoryRing::new(2, 5_000 * ms);
        assert!(!h.put(entry(1, 0), 100 * ms));
        assert!(!h.put(entry(2, 10), 100 * ms));
        // Full: entry 1 (until 5.0 s) goes at 1 s, within its time.
        assert!(h.put(entry(3, 20), 1_000 * ms));
        // Entry 2 (until 5.01 s) goes at 6 s, past its time.
        assert!(!h.put(entry(4, 30), 6_000 * ms));
        // Entry 3 was taken by a new connection on its tuple: not live any more.
        let e3 = entry(3, 20);
        assert!(h.take(e3.hash, &e3.key, 1_500 * ms).is_some());
        assert!(!h.put(entry(5, 40), 2_000 * ms));
        // Entry 4 (until 5.03 s) goes at 2 s, within its time.
        assert!(h.put(entry(6, 50), 2_000 * ms));
    }
}
