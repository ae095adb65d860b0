//! Slots: the containers a connection's per-detector and per-model states live in, generic over
//! what they hold. `Lazy` and `PerSide` mark in one word (`ConnState::used`) whether a state
//! was looked at; `Rare` boxes a part few connections need; `Extras` holds a connection's rare
//! parts behind one pointer. The detectors (`crate::detectors`) and the models
//! (`crate::model`) both keep their states in these; this module depends on neither.

use tcpwhy_track::Side;

/// One detector's state for one connection (or one direction of it): it exists once the
/// detector has looked at the connection (`get`), and is handed back once at the end (`take`:
/// `None` if the detector never looked). Whether it was looked at is bit `BIT` of the
/// connection's `ConnState::used` (one word for all: a flag beside each state cost 8 bytes of
/// padding each, 168 bytes per connection).
#[derive(Debug, Default)]
pub(crate) struct Lazy<T, const BIT: u32> {
    val: T,
}

impl<T: Default, const BIT: u32> Lazy<T, BIT> {
    const MASK: u32 = 1 << BIT;

    pub fn get(&mut self, used: &mut u32) -> &mut T {
        *used |= Self::MASK;
        &mut self.val
    }

    /// Whether the detector has looked at this state (`get`) since the connection began.
    pub fn looked(&self, used: u32) -> bool {
        used & Self::MASK != 0
    }

    /// The state, if the detector has looked at it.
    pub fn peek(&self, used: u32) -> Option<&T> {
        self.looked(used).then_some(&self.val)
    }

    /// The state to change, if the detector has looked at it (`get` would mark it looked at).
    pub fn peek_mut(&mut self, used: u32) -> Option<&mut T> {
        self.looked(used).then_some(&mut self.val)
    }

    pub fn take(&mut self, used: &mut u32) -> Option<T> {
        claim(used, Self::MASK).then(|| std::mem::take(&mut self.val))
    }
}

/// Clear `mask` in `used`; true if it was set (the state was looked at and is handed back).
fn claim(used: &mut u32, mask: u32) -> bool {
    let set = *used & mask != 0;
    *used &= !mask;
    set
}

/// A state, or the part of one, that few connections need (what a detector found: counts,
/// totals, the first occurrences; a zero window): boxed, allocated when first written. Inline in
/// every open connection's `ConnState` these parts were about a quarter of it.
#[derive(Debug, Clone)]
pub(crate) struct Rare<T>(Option<Box<T>>);

impl<T> Default for Rare<T> {
    fn default() -> Self {
        Rare(None)
    }
}

impl<T: Default> Rare<T> {
    /// The state, allocated now if it was not yet.
    pub fn get(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T> Rare<T> {
    /// Write the state (allocated now if it was not yet).
    pub fn set(&mut self, v: T) {
        match &mut self.0 {
            Some(b) => **b = v,
            None => self.0 = Some(Box::new(v)),
        }
    }

    /// The state if it was written.
    pub fn peek(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The state if it was written.
    pub fn peek_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    pub fn into_inner(self) -> Option<Box<T>> {
        self.0
    }
}

/// The `side` argument of a part that belongs to the whole connection (it is ignored).
pub(crate) const WHOLE: Side = Side::Client;

/// A part of the rare parts' holder `E` (the detectors' `Extra`): where its value for
/// direction `side` (sent by `side`) lives.
pub(crate) trait Part<E>: Sized {
    fn of(e: &mut E, side: Side) -> &mut Rare<Self>;
    fn of_ref(e: &E, side: Side) -> &Rare<Self>;
}

/// A state emptied in place after its connection, keeping what it allocated.
pub(crate) trait Recycle {
    /// Back to the default value, keeping (bounded) buffers.
    fn recycle(&mut self);
}

/// A finished connection's state, emptied when this goes.
pub(crate) struct Finished<'a, T: Recycle>(&'a mut T);

impl<T: Recycle> std::ops::Deref for Finished<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
    }
}

impl<T: Recycle> std::ops::DerefMut for Finished<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
    }
}

impl<T: Recycle> Drop for Finished<'_, T> {
    fn drop(&mut self) {
        self.0.recycle();
    }
}

/// A detector's state for each direction of a connection, by the sending side: bits `BIT`
/// (client) and `BIT + 1` (server) of `ConnState::used`.
#[derive(Debug, Default)]
pub(crate) struct PerSide<T, const BIT: u32> {
    client: T,
    server: T,
}

impl<T: Default, const BIT: u32> PerSide<T, BIT> {
    fn mask(side: Side) -> u32 {
        match side {
            Side::Client => 1 << BIT,
            Side::Server => 1 << (BIT + 1),
        }
    }

    fn val(&mut self, side: Side) -> &mut T {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    pub fn get(&mut self, used: &mut u32, side: Side) -> &mut T {
        *used |= Self::mask(side);
        self.val(side)
    }

    pub fn take(&mut self, used: &mut u32, side: Side) -> Option<T> {
        claim(used, Self::mask(side)).then(|| std::mem::take(self.val(side)))
    }

    /// The state of `side` if the detector has looked at it.
    pub fn peek_mut(&mut self, used: u32, side: Side) -> Option<&mut T> {
        (used & Self::mask(side) != 0).then(|| self.val(side))
    }

    /// Like `take`, for a state that keeps allocations: the state is read in place and
    /// emptied (`Recycle`) when the returned guard goes, its buffers kept for the next
    /// connection in this slot (allocating and freeing them for each of hundreds of
    /// thousands of short connections was 4% of a run).
    pub fn finish(&mut self, used: &mut u32, side: Side) -> Option<Finished<'_, T>>
    where
        T: Recycle,
    {
        claim(used, Self::mask(side)).then(|| Finished(self.val(side)))
    }
}

/// A connection's holder of rare parts (`E`: the detectors' `Extra`), allocated when its first
/// part is written. Generic so that the models (`crate::model`) can keep their own parts in it
/// without naming the detectors' list of parts.
#[derive(Debug)]
pub(crate) struct Extras<E>(Option<Box<E>>);

impl<E> Default for Extras<E> {
    fn default() -> Self {
        Extras(None)
    }
}

impl<E> Extras<E> {
    /// Whether no part was written yet (nothing allocated).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl<E: Default> Extras<E> {
    /// Part `T` of `side`, allocated now (with the holder if need be) if it was not yet.
    #[inline]
    pub fn get<T: Part<E> + Default>(&mut self, side: Side) -> &mut T {
        T::of(self.0.get_or_insert_default(), side).get()
    }

    /// Write part `T` of `side` (allocated now if it was not yet).
    pub fn set<T: Part<E>>(&mut self, side: Side, v: T) {
        T::of(self.0.get_or_insert_default(), side).set(v);
    }

    /// Part `T` of `side` if it was written.
    #[inline]
    pub fn peek<T: Part<E>>(&self, side: Side) -> Option<&T> {
        self.0.as_deref().and_then(|e| T::of_ref(e, side).peek())
    }

    /// Part `T` of `side` if it was written.
    #[inline]
    pub fn peek_mut<T: Part<E>>(&mut self, side: Side) -> Option<&mut T> {
        self.0
            .as_deref_mut()
            .and_then(|e| T::of(e, side).peek_mut())
    }

    /// Part `T` of `side` if it was written, leaving none.
    #[inline]
    pub fn take<T: Part<E>>(&mut self, side: Side) -> Option<Box<T>> {
        self.0
            .as_deref_mut()
            .and_then(|e| std::mem::take(T::of(e, side)).into_inner())
    }
}
