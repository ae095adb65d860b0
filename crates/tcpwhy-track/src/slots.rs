//! Where the tracker keeps its connections.

use crate::conn::Connection;

/// Connections stored in fixed chunks: growing never moves (copies) the ones already stored.
pub(crate) struct Slots {
    pub(crate) chunks: Vec<Box<[Slot]>>,
    pub(crate) len: usize,
}

pub(crate) const CHUNK: usize = 256;

/// An entry in a deadline queue; stale when the slot now holds another connection. Queues pop
/// in (deadline, id) order, so connections due at once finish in the order they started.
/// `slot` is an embryo's handle (`crate::embryo::COMPACT` set) while the connection is compact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timer {
    pub(crate) deadline: i64,
    pub(crate) id: u64,
    pub(crate) slot: u32,
}

/// A connection on 32-byte boundaries: 448 bytes (432 of them the connection), 14 x 32, so
/// each spans 7 or 8 cache lines wherever it starts.
#[derive(Default)]
#[repr(align(32))]
pub(crate) struct Slot(Option<Connection>);

const _: () =
    assert!(std::mem::size_of::<Slot>() == std::mem::size_of::<Connection>().div_ceil(32) * 32);

impl Slots {
    pub(crate) fn get(&self, slot: u32) -> Option<&Connection> {
        let i = slot as usize;
        self.chunks.get(i / CHUNK)?[i % CHUNK].0.as_ref()
    }
    pub(crate) fn get_mut(&mut self, slot: u32) -> Option<&mut Connection> {
        let i = slot as usize;
        self.chunks.get_mut(i / CHUNK)?[i % CHUNK].0.as_mut()
    }
    /// The connection in `slot` if it is still connection `id` (a queued entry naming a slot
    /// is stale once its connection finished, even if another took the slot since).
    pub(crate) fn holding(&self, slot: u32, id: u64) -> Option<&Connection> {
        self.get(slot).filter(|c| c.id() == id)
    }
    pub(crate) fn holding_mut(&mut self, slot: u32, id: u64) -> Option<&mut Connection> {
        self.get_mut(slot).filter(|c| c.id() == id)
    }
    /// The connection a timer belongs to, if the timer is its live one (`armed`: each slot's
    /// live deadline).
    pub(crate) fn armed_by(&self, armed: &[i64], t: &Timer) -> Option<&Connection> {
        self.holding(t.slot, t.id)
            .filter(|_| armed.get(t.slot as usize) == Some(&t.deadline))
    }
    pub(crate) fn clear(&mut self, slot: u32) {
        let i = slot as usize;
        if let Some(chunk) = self.chunks.get_mut(i / CHUNK) {
            chunk[i % CHUNK].0 = None;
        }
    }
    pub(crate) fn put(&mut self, slot: u32, c: Connection) {
        let i = slot as usize;
        if let Some(chunk) = self.chunks.get_mut(i / CHUNK) {
            chunk[i % CHUNK].0 = Some(c);
        }
    }
    /// A slot never used before.
    pub(crate) fn grow(&mut self) -> u32 {
        if self.len == self.chunks.len() * CHUNK {
            self.chunks.push((0..CHUNK).map(|_| Slot(None)).collect());
        }
        self.len += 1;
        (self.len - 1) as u32
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Connection> {
        self.chunks
            .iter()
            .flat_map(|c| c.iter().filter_map(|s| s.0.as_ref()))
    }
}
