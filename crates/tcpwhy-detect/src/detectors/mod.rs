//! The registry: every detector, one file each.
//!
//! Adding a detector (`tfo_fallback.rs` is a small one): a file here that opens with its
//! documentation (what `tcpwhy explain` prints) and holds its `Info`, its type implementing
//! [`Detector`], and its details type; a line in `registry!` below; a line in `details!`
//! (finding.rs) naming its details type. A detector whose state only a few connections need
//! keeps it itself (`tfo_fallback`: a map by connection id); one that every connection
//! needs on every packet keeps it in [`ConnState`] (a `Lazy` field and its `Bit`, or a `Rare`
//! part of `Extra`), beside the others, so that a packet touches one place in memory.

pub(crate) mod accept_queue_full;
pub(crate) mod fast_retransmit;
mod resend;
pub(crate) mod rto_retransmission;
pub(crate) mod spurious_retransmission;
pub(crate) mod syn_flood;
pub(crate) mod syn_scan;

pub(crate) use crate::model::{rtt_ns, MS};
use crate::slots::Part;
pub(crate) use crate::slots::{Lazy, PerSide, Rare, Recycle, WHOLE};
use crate::{Detector, Info};
use tcpwhy_track::{At, Connection, Side};

/// The shortest wait after which any TCP timer resends: Linux's tail loss probe waits at least
/// TCP_TIMEOUT_MIN, 2 jiffies (2 ms at HZ=1000), beyond twice the smoothed round trip, and so
/// does the SYN it sends again after resetting a stale ACK; every retransmission timeout is
/// longer (200 ms on Linux, 1 s by RFC 6298 and for a SYN).
pub(crate) const TIMER_MIN_NS: i64 = 2 * MS;

/// The findings about the capture as a whole, made when it ends from every connection's
/// summary (`crate::half_open`), not by a per-connection detector.
pub static CAPTURE_WIDE: [&Info; 2] = [&syn_flood::INFO, &syn_scan::INFO];

/// Declares the per-connection detectors, each once: its module (a file of this directory)
/// and its type. From the one list come the modules, [`all`], and [`Set`], which holds one of
/// each and calls them directly, in this order, at every packet, stall and finished
/// connection (static dispatch: the compiler sees each detector's early returns). A detector
/// that serves several ids names the others in `Detector::also` (retx: timeout, fast and
/// spurious retransmissions and the accept queue's drops, all read from the same resends).
macro_rules! registry {
    ($($m:ident: $t:ident),* $(,)?) => {
        $(pub(crate) mod $m;)*

        /// One of each detector, in registry order.
        pub fn all() -> Vec<Box<dyn Detector>> {
            vec![$(Box::new(<$m::$t>::default())),*]
        }

        /// Which detectors are on (a field per detector).
        #[derive(Clone, Copy)]
        struct On {
            $($m: bool,)*
        }

        /// Every detector, each on unless all its ids are disabled.
        pub(crate) struct Set {
            on: On,
            $($m: $m::$t,)*
        }

        impl Set {
            /// All detectors except those whose every id is in `disabled`; a detector serving
            /// several ids is told which of them to drop.
            pub fn new(disabled: &[String]) -> Set {
                let mut on = On { $($m: true,)* };
                $(
                    let mut $m = <$m::$t>::default();
                    on.$m = enable(&mut $m, disabled);
                )*
                Set { on, $($m,)* }
            }

            #[inline]
            fn each_segment(
                &mut self,
                cs: &mut ConnState,
                c: &Connection,
                ev: &tcpwhy_track::SegmentEvent<'_>,
                out: &mut Vec<crate::Finding>,
            ) {
                $(if self.on.$m {
                    Detector::segment(&mut self.$m, cs, c, ev, out);
                })*
            }

            pub fn stall(
                &mut self,
                cs: &mut ConnState,
                c: &Connection,
                st: &crate::Stall,
                out: &mut Vec<crate::Finding>,
            ) {
                $(if self.on.$m {
                    Detector::stall(&mut self.$m, cs, c, st, out);
                })*
            }

            pub fn linked(
                &mut self,
                cs: &mut ConnState,
                c: &Connection,
                link: &tcpwhy_track::Link,
            ) {
                $(if self.on.$m {
                    Detector::linked(&mut self.$m, cs, c, link);
                })*
            }

            pub fn finished(
                &mut self,
                cs: &mut ConnState,
                c: &Connection,
                out: &mut Vec<crate::Finding>,
            ) {
                $(if self.on.$m {
                    Detector::finished(&mut self.$m, cs, c, out);
                })*
            }
        }
    };
}

registry! {
    syn_stale_state: SynStaleState,
    syn_unanswered: SynUnanswered,
    syn_refused: SynRefused,
    slow_start_restart: SlowStartRestart,
    nagle_delayed_ack: NagleDelayedAck,
    retx: Retransmissions,
    zero_window: ZeroWindow,
    server_delay: ServerDelay,
    path_latency: PathLatency,
    client_delay: ClientDelay,
    rwnd_limited: RwndLimited,
    sender_limited: SenderLimited,
    connection_reset: ConnectionReset,
    queueing_delay: QueueingDelay,
    capture_loss: CaptureLoss,
    tfo_fallback: TfoFallback,
}

/// Tell `d` which of its ids `disabled` turns off; whether any of them is left on.
fn enable(d: &mut dyn Detector, disabled: &[String]) -> bool {
    let off = |id: &str| disabled.iter().any(|x| x == id);
    let ids: Vec<&'static str> = std::iter::once(d.info())
        .chain(d.also().iter().copied())
        .map(|i| i.id)
        .collect();
    for id in ids.iter().filter(|id| off(id)) {
        d.disable(id);
    }
    !ids.iter().all(|id| off(id))
}

impl Set {
    #[inline]
    pub fn segment(
        &mut self,
        cs: &mut ConnState,
        c: &Connection,
        ev: &tcpwhy_track::SegmentEvent<'_>,
        out: &mut Vec<crate::Finding>,
    ) {
        let f = ev.seg.flags;
        if f.syn()
            && !f.ack()
            && ev.from == Side::Client
            && c.handshake.syn_ack.is_none()
            && cs.first_syn(c).is_none()
        {
            cs.set_first_syn(c, ev.at);
        }
        self.each_segment(cs, c, ev, out);
    }
}

/// What few connections need: the `Rare` parts of the detectors' states (what a detector
/// found, a direction's retransmissions and when it last retransmitted, its zero windows and
/// pauses, when it filled the receiver's window, its latest burst after idle, the SYNs sent
/// again, an exchange's lost time, the exchanges after the first),
/// behind one pointer per connection (`ConnState::extra`), allocated at the first of them and
/// dropped when the connection's state is released; each part is still boxed on its own when
/// first written. Each part was its own 8-byte pointer (or a list) in every open
/// connection's state (184 bytes of it). Parts are found by type (`Part`):
/// `cs.extra.get::<zero_window::State>(side)`.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    syn_stale_state: Rare<syn_stale_state::Stale>,
    syn_refused: Rare<syn_refused::Refused>,
    syn_unanswered: Rare<syn_unanswered::SynsAgain>,
    first_syn: Rare<FirstSyn>,
    client_delay: Rare<client_delay::Late>,
    server_delay: Rare<server_delay::Found>,
    path_latency: Rare<path_latency::Later>,
    exchange: Rare<crate::model::exchange::Delays>,
    slow_start_restart: [Rare<slow_start_restart::Found>; 2],
    after_idle: [Rare<slow_start_restart::AfterIdle>; 2],
    nagle_delayed_ack: [Rare<nagle_delayed_ack::Found>; 2],
    retx: [Rare<retx::Losses>; 2],
    zero_window: [Rare<zero_window::State>; 2],
    rwnd_limited: [Rare<rwnd_limited::Found>; 2],
    sender_limited: [Rare<sender_limited::State>; 2],
    stall_retx: [Rare<crate::model::stall::LastRetx>; 2],
    connection_reset: Rare<connection_reset::Reset>,
}

macro_rules! parts {
    (whole: $($wt:ty => $wf:ident),*; per side: $($st:ty => $sf:ident),*) => {
        $(impl Part<Extra> for $wt {
            #[inline]
            fn of(e: &mut Extra, _: Side) -> &mut Rare<Self> {
                &mut e.$wf
            }
            #[inline]
            fn of_ref(e: &Extra, _: Side) -> &Rare<Self> {
                &e.$wf
            }
        })*
        $(impl Part<Extra> for $st {
            #[inline]
            fn of(e: &mut Extra, side: Side) -> &mut Rare<Self> {
                &mut e.$sf[side as usize]
            }
            #[inline]
            fn of_ref(e: &Extra, side: Side) -> &Rare<Self> {
                &e.$sf[side as usize]
            }
        })*
    };
}

parts! {
    whole:
        syn_stale_state::Stale => syn_stale_state,
        syn_refused::Refused => syn_refused,
        syn_unanswered::SynsAgain => syn_unanswered,
        FirstSyn => first_syn,
        client_delay::Late => client_delay,
        server_delay::Found => server_delay,
        path_latency::Later => path_latency,
        connection_reset::Reset => connection_reset,
        crate::model::exchange::Delays => exchange;
    per side:
        slow_start_restart::Found => slow_start_restart,
        slow_start_restart::AfterIdle => after_idle,
        nagle_delayed_ack::Found => nagle_delayed_ack,
        retx::Losses => retx,
        zero_window::State => zero_window,
        rwnd_limited::Found => rwnd_limited,
        sender_limited::State => sender_limited,
        crate::model::stall::LastRetx => stall_retx
}

/// A connection's `Extra`, if any part was written.
pub(crate) type Extras = crate::slots::Extras<Extra>;

/// Every detector's state for one connection, side by side: a packet touches one place in
/// memory, not one per detector (each detector had its own table; with hundreds of thousands
/// of connections that was a cache miss per detector per packet).
///
/// In declaration order (`repr(C)`), `used` first: every packet reads and writes it, and it
/// shares the first cache line with `owner`, which `States::get` reads anyway.
/// (Laid out by the compiler, it came last: a second cache miss for each packet of a cold
/// connection, a fifth of the detectors' cycles.)
#[derive(Debug, Default)]
#[repr(C)]
pub struct ConnState {
    /// Which states were looked at: one bit each (`Lazy`, `PerSide`); and bit 31,
    /// `FIRST_SYN_IS_FIRST`.
    pub(crate) used: u32,
    /// The connection the state belongs to (`owner`, a tag of its id; 0: none), for `States`.
    owner: u32,
    /// The parts few connections need (`Extra`).
    pub(crate) extra: Extras,
    pub(crate) syn_unanswered: Lazy<syn_unanswered::State, { Bit::SynUnanswered as u32 }>,
    /// Two small fields of the exchange model and of server-delay, here rather than in their
    /// states: they fill the padding after `syn_unanswered` (in their states they padded each
    /// to the next 8 bytes). The exchange's `has` bits (`exchange::State`) and the exchanges
    /// server-delay has seen.
    pub(crate) exchange_has: u8,
    /// Slow-start-restart's flags of each direction (`slow_start_restart::State`), by the
    /// sending side (`Side as usize`): in padding here, where in the states they would pad
    /// each direction by 7 bytes.
    pub(crate) slow_start_restart_flags: [u8; 2],
    /// Path-latency's segment counts of the exchange under way and the first exchange's
    /// round-trip cap (`path_latency::Segs`), here in padding for the same reason.
    pub(crate) path_latency_segs: u16,
    /// Connection-reset's record of the IP TTL (hop limit) of each side's last segment that
    /// was neither SYN, FIN nor RST (0: none yet), by `Side as usize`: what its own packets
    /// arrive with, against which a reset in its name is judged. In padding here too (the
    /// tracker's `Connection` has no byte left).
    pub(crate) own_ttl: [u8; 2],
    pub(crate) server_delay_exchanges: u32,
    /// Server-delay's fastest exchange so far (last request byte to the first answer byte, in
    /// microseconds, at least 1; 0: none), which bounds the round trip (`bounded_rtt`).
    pub(crate) server_delay_fastest_us: u32,
    pub(crate) client_delay: Lazy<client_delay::State, { Bit::ClientDelay as u32 }>,
    pub(crate) slow_start_restart:
        PerSide<slow_start_restart::State, { Bit::SlowStartRestart as u32 }>,
    pub(crate) nagle_delayed_ack: Lazy<nagle_delayed_ack::State, { Bit::NagleDelayedAck as u32 }>,
    pub(crate) retx: PerSide<retx::State, { Bit::Retx as u32 }>,
    pub(crate) server_delay: Lazy<server_delay::State, { Bit::ServerDelay as u32 }>,
    pub(crate) path_latency: Lazy<path_latency::State, { Bit::PathLatency as u32 }>,
    pub(crate) rwnd_limited: Lazy<rwnd_limited::State, { Bit::RwndLimited as u32 }>,
    pub(crate) exchange: Lazy<crate::model::exchange::State, { Bit::Exchange as u32 }>,
    pub(crate) stall: PerSide<crate::model::stall::Dir, { Bit::Stall as u32 }>,
}

/// The bit of `ConnState::used` each state of `ConnState` marks (`Lazy`, `PerSide`), numbered
/// by the compiler so that no two states share one: a per-direction state (`PerSide`) takes
/// its variant's bit for the client and the next for the server, which a `...Server` variant
/// holds. A new state adds a variant here (below bit 31, `FIRST_SYN_IS_FIRST`).
#[repr(u32)]
enum Bit {
    SynUnanswered,
    ClientDelay,
    SlowStartRestart,
    _SlowStartRestartServer,
    NagleDelayedAck,
    Retx,
    _RetxServer,
    ServerDelay,
    PathLatency,
    RwndLimited,
    Exchange,
    Stall,
    _StallServer,
    /// How many bits the states take.
    Count,
}

const _: () = assert!((Bit::Count as u32) < 31, "bit 31 is FIRST_SYN_IS_FIRST");

/// `ConnState::exchange_has` bit (its padding): rwnd-limited found the receiver's window
/// holding a sender of this connection; queueing-delay, finishing after it, then leaves the
/// inflated round trip to the receiver (its slow ACKs are not a queue).
pub(crate) const RECEIVER_HELD: u8 = 0x80;

/// `ConnState::used` bit: the client's first SYN is the connection's first packet
/// (`ConnState::first_syn`).
const FIRST_SYN_IS_FIRST: u32 = 1 << 31;

/// The client's first SYN when it is not the connection's first packet (a part of `Extra`).
#[derive(Debug)]
pub(crate) struct FirstSyn(At);

impl ConnState {
    /// The client's first SYN (without ACK) before any SYN-ACK: shared by the three handshake
    /// detectors, set by `Set::segment` before they run, forgotten by `States::release`.
    /// Nearly always the connection's first packet, which the connection record holds: one
    /// bit of `used` says so (an `Option<At>` here was 16 bytes of every connection); in
    /// `Extra` otherwise.
    #[inline]
    pub(crate) fn first_syn(&self, c: &Connection) -> Option<At> {
        if self.used & FIRST_SYN_IS_FIRST != 0 {
            Some(c.first)
        } else {
            self.extra.peek::<FirstSyn>(WHOLE).map(|f| f.0)
        }
    }

    pub(crate) fn set_first_syn(&mut self, c: &Connection, at: At) {
        if at == c.first {
            self.used |= FIRST_SYN_IS_FIRST;
        } else {
            self.extra.set(WHOLE, FirstSyn(at));
        }
    }
}

impl crate::model::exchange::Place for ConnState {
    type Extra = Extra;

    #[inline(always)]
    fn exchange(&mut self) -> (&mut crate::model::exchange::State, &mut u8, &mut Extras) {
        (
            self.exchange.get(&mut self.used),
            &mut self.exchange_has,
            &mut self.extra,
        )
    }

    fn exchange_taken(&mut self) -> (Option<crate::model::exchange::State>, &mut u8, &mut Extras) {
        (
            self.exchange.take(&mut self.used),
            &mut self.exchange_has,
            &mut self.extra,
        )
    }
}

impl crate::model::stall::Place for ConnState {
    type Extra = Extra;

    #[inline(always)]
    fn stall(&mut self, side: Side) -> (&mut crate::model::stall::Dir, &mut Extras) {
        (self.stall.get(&mut self.used, side), &mut self.extra)
    }

    fn stall_done(&mut self) {
        self.stall.take(&mut self.used, Side::Client);
        self.stall.take(&mut self.used, Side::Server);
    }
}

/// Each detector's bytes per connection (`Lazy` and `PerSide` add nothing to their states:
/// the "looked at" bits are in `ConnState::used`).
impl crate::half_open::HalfOpen {
    /// The capture-level findings: a SYN flood, a SYN scan (each at most once). Here, not in
    /// half_open.rs, so that the tally does not depend on the detectors that read it.
    pub fn findings(&self) -> Vec<crate::Finding> {
        let mut out = Vec::new();
        if self.flood_on {
            out.extend(syn_flood::finding(self));
        }
        if self.scan_on {
            out.extend(syn_scan::finding(self));
        }
        out
    }
}

#[cfg(test)]
pub(crate) fn print_sizes() {
    use std::mem::size_of;
    for (name, size) in [
        ("extra (pointer)", size_of::<Extras>()),
        ("syn_unanswered", size_of::<syn_unanswered::State>()),
        ("client_delay", size_of::<client_delay::State>()),
        (
            "slow_start_restart",
            2 * size_of::<slow_start_restart::State>(),
        ),
        ("nagle_delayed_ack", size_of::<nagle_delayed_ack::State>()),
        ("retx", 2 * size_of::<retx::State>()),
        ("server_delay", size_of::<server_delay::State>()),
        ("path_latency", size_of::<path_latency::State>()),
        ("rwnd_limited", size_of::<rwnd_limited::State>()),
        ("exchange", size_of::<crate::model::exchange::State>()),
        ("stall", 2 * size_of::<crate::model::stall::Dir>()),
    ] {
        eprintln!("  {name:<20} {size:>5} bytes");
    }
}

/// The `ConnState` of every tracked connection, indexed by the tracker's slot (dense, reused
/// after a connection is finished), each tagged with the connection id it belongs to. Stored
/// in fixed chunks: growing never moves the states already there.
#[derive(Default)]
pub(crate) struct States {
    chunks: Vec<Box<[Entry]>>,
}

/// A connection's state on cache-line boundaries (640 bytes, 10 lines, which the state fills:
/// a new field fits only in the padding between the small ones, or by making room),
/// `ConnState::used` and `owner` in the first line.
#[derive(Default)]
#[repr(C, align(64))]
struct Entry {
    state: ConnState,
}

const _: () = assert!(
    std::mem::size_of::<Entry>() == 640,
    "the state outgrew 10 cache lines"
);

/// The `ConnState::owner` tag of connection `id`: its low 32 bits, never 0 (a free entry).
fn owner(id: u64) -> u32 {
    (id as u32).max(1)
}

const CHUNK: usize = 128;

impl States {
    /// The state of `c`, fresh if its slot belonged to an earlier connection.
    #[inline]
    pub fn get(&mut self, c: &Connection) -> &mut ConnState {
        let i = c.slot as usize;
        if self.chunks.len() <= i / CHUNK {
            self.grow(i / CHUNK);
        }
        let e = &mut self.chunks[i / CHUNK][i % CHUNK];
        let owner = owner(c.id());
        if e.state.owner != owner {
            // A released slot is already empty: every detector took its state out when the
            // connection finished. Only a slot never released needs clearing.
            if e.state.owner != 0 {
                e.state = ConnState::default();
            }
            e.state.owner = owner;
        }
        &mut e.state
    }

    /// Chunks up to and including `chunk`.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, chunk: usize) {
        while self.chunks.len() <= chunk {
            self.chunks
                .push((0..CHUNK).map(|_| Entry::default()).collect());
        }
    }

    /// Forget `c` (its detectors have taken what they keep): also the few fields outside the
    /// detectors' states (the first-SYN bit, `exchange_has`, `slow_start_restart_flags`,
    /// `server_delay_exchanges`, `server_delay_fastest_us`, `path_latency_segs`) and
    /// the `Extra`. Every finished connection comes here, so this is the one place they are
    /// cleared for the slot's next connection.
    pub fn release(&mut self, c: &Connection) {
        let i = c.slot as usize;
        if let Some(e) = self.chunks.get_mut(i / CHUNK).map(|ch| &mut ch[i % CHUNK]) {
            if e.state.owner == owner(c.id()) {
                e.state.owner = 0;
                e.state.used &= !FIRST_SYN_IS_FIRST;
                e.state.exchange_has = 0;
                e.state.slow_start_restart_flags = [0; 2];
                e.state.server_delay_exchanges = 0;
                e.state.server_delay_fastest_us = 0;
                e.state.path_latency_segs = 0;
                e.state.extra = Extras::default();
            }
        }
    }
}

/// The round trip between the capture point and `sender` (its share of the handshake; 0
/// without one): how long after an ACK seen here the data it releases can be seen here.
pub(crate) fn to_sender(c: &Connection, sender: Side) -> i64 {
    match sender {
        Side::Client => c.syn_ack_to_ack_ns(),
        Side::Server => c.syn_to_syn_ack_ns(),
    }
    .unwrap_or(0)
}

/// The largest segment `side` may send: the MSS its peer announced (536 without one, RFC 9293).
pub(crate) fn send_mss(c: &Connection, side: Side) -> u32 {
    u32::from(c.endpoint(side.other()).mss().unwrap_or(536))
}

pub(crate) fn side_name(c: &Connection, side: Side) -> String {
    let e = c.endpoint(side);
    let ep = match e.addr {
        std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
        std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    };
    format!("the {} ({ep})", side.name())
}

#[cfg(test)]
mod set_tests {
    use super::*;

    #[test]
    fn every_state_has_its_own_used_bit() {
        // 13 states (7 per connection, 3 per direction): looked at, each sets a bit of its
        // own (two sharing one would hand one's state back as the other's); taken, each
        // clears its bit and only its bit.
        let mut cs = ConnState::default();
        let u = &mut cs.used;
        cs.syn_unanswered.get(u);
        cs.server_delay.get(u);
        cs.path_latency.get(u);
        cs.client_delay.get(u);
        cs.exchange.get(u);
        cs.nagle_delayed_ack.get(u);
        cs.rwnd_limited.get(u);
        for side in [Side::Client, Side::Server] {
            cs.slow_start_restart.get(u, side);
            cs.retx.get(u, side);
            cs.stall.get(u, side);
        }
        assert_eq!(cs.used.count_ones(), 13, "{:b}", cs.used);
        assert_eq!(
            cs.used,
            (1 << Bit::Count as u32) - 1,
            "the bits are 0..Bit::Count"
        );
        let u = &mut cs.used;
        let mut left = 13;
        let mut check = |taken: bool, u: &u32| {
            assert!(taken);
            left -= 1;
            assert_eq!(u.count_ones(), left, "{u:b}");
        };
        check(cs.syn_unanswered.take(u).is_some(), u);
        check(cs.server_delay.take(u).is_some(), u);
        check(cs.path_latency.take(u).is_some(), u);
        check(cs.client_delay.take(u).is_some(), u);
        check(cs.exchange.take(u).is_some(), u);
        check(cs.nagle_delayed_ack.take(u).is_some(), u);
        check(cs.rwnd_limited.take(u).is_some(), u);
        for side in [Side::Client, Side::Server] {
            check(cs.slow_start_restart.take(u, side).is_some(), u);
            check(cs.retx.finish(u, side).is_some(), u);
            check(cs.stall.take(u, side).is_some(), u);
        }
        assert_eq!(cs.used, 0);
        assert!(cs.exchange.take(&mut cs.used).is_none(), "taken once");
    }

    #[test]
    fn every_part_of_the_extra_has_its_own_place() {
        // Parts cannot share a place (each field of `Extra` has its part's type); what can go
        // wrong is the side: a per-side part must have one place per side, a connection-wide
        // part one place whatever the side. Also: nothing is allocated before the first part,
        // and a part is taken once.
        let mut x = Extras::default();
        assert!(x.is_empty(), "nothing allocated until a part is written");
        let (c, s) = (Side::Client, Side::Server);
        x.get::<syn_refused::Refused>(WHOLE);
        x.set(WHOLE, client_delay::Late(At::new(1, 10), At::new(2, 20)));
        x.get::<sender_limited::State>(c);
        x.get::<retx::Losses>(s);
        assert!(!x.is_empty());
        assert!(x.peek::<syn_refused::Refused>(WHOLE).is_some());
        assert!(
            x.peek::<syn_refused::Refused>(s).is_some(),
            "one place whatever the side"
        );
        assert!(x.peek::<syn_stale_state::Stale>(WHOLE).is_none());
        assert!(x.peek::<server_delay::Found>(WHOLE).is_none());
        assert!(x.peek::<sender_limited::State>(c).is_some());
        assert!(x.peek::<sender_limited::State>(s).is_none());
        assert!(x.peek::<retx::Losses>(c).is_none());
        assert!(x.peek::<zero_window::State>(s).is_none());
        let late = x.take::<client_delay::Late>(WHOLE).expect("written");
        assert_eq!((late.0.frame(), late.1.frame()), (1, 2));
        assert!(x.take::<client_delay::Late>(WHOLE).is_none(), "taken once");
        assert!(x.take::<retx::Losses>(s).is_some());
        assert!(x.take::<retx::Losses>(c).is_none());
    }

    #[test]
    fn a_detector_is_off_only_when_every_id_it_serves_is_disabled() {
        let set = Set::new(&[]);
        assert!(set.on.syn_refused && set.on.retx && set.on.capture_loss);
        let set = Set::new(&["rto-retransmission".to_string(), "syn-refused".to_string()]);
        assert!(!set.on.syn_refused, "its only id is off");
        assert!(
            set.on.retx,
            "fast and spurious retransmissions are still on"
        );
        let all_retx = [
            "rto-retransmission",
            "fast-retransmit",
            "spurious-retransmission",
            "accept-queue-full",
        ];
        let set = Set::new(&all_retx.map(String::from));
        assert!(!set.on.retx && set.on.syn_refused);
    }
}
