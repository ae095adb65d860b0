//! The registry: every detector, one file each.

mod capture_loss;
mod client_delay;
mod fast_retransmit;
mod nagle_delayed_ack;
mod path_latency;
mod retx;
mod rto_retransmission;
mod rwnd_limited;
mod sender_limited;
mod server_delay;
mod slow_start_restart;
mod syn_refused;
mod syn_stale_state;
mod syn_unanswered;
mod zero_window;

use crate::Detector;
use tcpwhy_track::{Connection, Side};

pub fn all() -> Vec<Box<dyn Detector>> {
    vec![
        Box::new(syn_stale_state::SynStaleState::default()),
        Box::new(syn_unanswered::SynUnanswered::default()),
        Box::new(syn_refused::SynRefused::default()),
        Box::new(slow_start_restart::SlowStartRestart::default()),
        Box::new(nagle_delayed_ack::NagleDelayedAck::default()),
        Box::new(retx::Retransmissions::default()),
        Box::new(zero_window::ZeroWindow::default()),
        Box::new(server_delay::ServerDelay::default()),
        Box::new(path_latency::PathLatency::default()),
        Box::new(client_delay::ClientDelay::default()),
        Box::new(rwnd_limited::RwndLimited::default()),
        Box::new(sender_limited::SenderLimited::default()),
        Box::new(capture_loss::CaptureLoss),
    ]
}

/// One detector's state for one connection (or one direction of it): it exists once the
/// detector has looked at the connection (`get`), and is handed back once at the end (`take`:
/// `None` if the detector never looked).
#[derive(Debug, Default)]
pub(crate) struct Lazy<T> {
    used: bool,
    val: T,
}

impl<T: Default> Lazy<T> {
    pub fn get(&mut self) -> &mut T {
        self.used = true;
        &mut self.val
    }

    pub fn take(&mut self) -> Option<T> {
        if !self.used {
            return None;
        }
        self.used = false;
        Some(std::mem::take(&mut self.val))
    }
}

/// A detector's state for each direction of a connection, by the sending side.
#[derive(Debug, Default)]
pub(crate) struct PerSide<T> {
    client: Lazy<T>,
    server: Lazy<T>,
}

impl<T: Default> PerSide<T> {
    pub fn get(&mut self, side: Side) -> &mut T {
        match side {
            Side::Client => self.client.get(),
            Side::Server => self.server.get(),
        }
    }

    pub fn take(&mut self, side: Side) -> Option<T> {
        match side {
            Side::Client => self.client.take(),
            Side::Server => self.server.take(),
        }
    }
}

/// Every detector's state for one connection, side by side: a packet touches one place in
/// memory, not one per detector (each detector had its own table; with hundreds of thousands
/// of connections that was a cache miss per detector per packet).
#[derive(Debug, Default)]
pub struct ConnState {
    pub(crate) syn_stale_state: Lazy<syn_stale_state::State>,
    pub(crate) syn_unanswered: Lazy<syn_unanswered::State>,
    pub(crate) syn_refused: Lazy<syn_refused::State>,
    pub(crate) slow_start_restart: PerSide<slow_start_restart::State>,
    pub(crate) nagle_delayed_ack: PerSide<nagle_delayed_ack::State>,
    pub(crate) retx: PerSide<retx::State>,
    pub(crate) zero_window: PerSide<zero_window::State>,
    pub(crate) server_delay: Lazy<server_delay::State>,
    pub(crate) path_latency: Lazy<path_latency::State>,
    pub(crate) client_delay: Lazy<client_delay::State>,
    pub(crate) rwnd_limited: PerSide<rwnd_limited::State>,
    pub(crate) sender_limited: PerSide<sender_limited::State>,
    pub(crate) exchange: Lazy<crate::exchange::State>,
    pub(crate) stall: PerSide<crate::stall::Dir>,
}

#[cfg(test)]
pub(crate) fn print_sizes() {
    use std::mem::size_of;
    for (name, size) in [
        ("syn_stale_state", size_of::<Lazy<syn_stale_state::State>>()),
        ("syn_unanswered", size_of::<Lazy<syn_unanswered::State>>()),
        ("syn_refused", size_of::<Lazy<syn_refused::State>>()),
        (
            "slow_start_restart",
            size_of::<PerSide<slow_start_restart::State>>(),
        ),
        (
            "nagle_delayed_ack",
            size_of::<PerSide<nagle_delayed_ack::State>>(),
        ),
        ("retx", size_of::<PerSide<retx::State>>()),
        ("zero_window", size_of::<PerSide<zero_window::State>>()),
        ("server_delay", size_of::<Lazy<server_delay::State>>()),
        ("path_latency", size_of::<Lazy<path_latency::State>>()),
        ("client_delay", size_of::<Lazy<client_delay::State>>()),
        ("rwnd_limited", size_of::<PerSide<rwnd_limited::State>>()),
        (
            "sender_limited",
            size_of::<PerSide<sender_limited::State>>(),
        ),
        ("exchange", size_of::<Lazy<crate::exchange::State>>()),
        ("stall", size_of::<PerSide<crate::stall::Dir>>()),
    ] {
        eprintln!("  {name:<20} {size:>5} bytes");
    }
}

/// The `ConnState` of every tracked connection, indexed by the tracker's slot (dense, reused
/// after a connection is finished), each tagged with the connection id it belongs to. Stored
/// in fixed chunks: growing never moves the states already there.
#[derive(Default)]
pub(crate) struct States {
    chunks: Vec<Box<[(u64, ConnState)]>>,
}

const CHUNK: usize = 128;

impl States {
    /// The state of `c`, fresh if its slot belonged to an earlier connection.
    pub fn get(&mut self, c: &Connection) -> &mut ConnState {
        let i = c.slot as usize;
        while self.chunks.len() <= i / CHUNK {
            self.chunks
                .push((0..CHUNK).map(|_| (0, ConnState::default())).collect());
        }
        let e = &mut self.chunks[i / CHUNK][i % CHUNK];
        if e.0 != c.id {
            // A released slot is already empty: every detector took its state out when the
            // connection finished. Only a slot never released needs clearing.
            if e.0 != 0 {
                e.1 = ConnState::default();
            }
            e.0 = c.id;
        }
        &mut e.1
    }

    /// Forget `c` (its detectors have taken what they keep).
    pub fn release(&mut self, c: &Connection) {
        let i = c.slot as usize;
        if let Some(e) = self.chunks.get_mut(i / CHUNK).map(|ch| &mut ch[i % CHUNK]) {
            if e.0 == c.id {
                e.0 = 0;
            }
        }
    }
}

/// The connection's round trip as well as the capture tells it: the handshake, else the
/// smallest full-path sample.
pub(crate) fn rtt_ns(c: &Connection) -> Option<i64> {
    c.handshake
        .rtt_ns()
        .or_else(|| c.rtt_summary().map(|r| r.0))
        .filter(|r| *r > 0)
}

pub(crate) fn side_name(c: &Connection, side: Side) -> String {
    let e = c.endpoint(side);
    let ep = match e.addr {
        std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
        std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    };
    format!("the {} ({ep})", side.name())
}

pub(crate) const MS: i64 = 1_000_000;
