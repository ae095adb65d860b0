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

/// Per-connection (and per-direction) state a detector keeps while a connection is open: an
/// array indexed by the tracker's slot (dense, reused after a connection is finished), two
/// entries per slot, each tagged with the connection id it belongs to. No hashing per packet,
/// and memory bounded by the tracker's table.
#[derive(Debug)]
pub(crate) struct PerConn<T> {
    slab: Vec<Entry<T>>,
}

#[derive(Debug, Default)]
struct Entry<T> {
    /// The connection this state belongs to (ids start at 1: 0 is empty).
    id: u64,
    val: T,
}

impl<T> Default for PerConn<T> {
    fn default() -> Self {
        PerConn { slab: Vec::new() }
    }
}

impl<T: Default> PerConn<T> {
    fn index(c: &Connection, side: Side) -> usize {
        c.slot as usize * 2 + usize::from(side == Side::Client)
    }

    /// The state of `c`'s `side`, fresh if it belonged to an earlier connection in that slot.
    pub fn get(&mut self, c: &Connection, side: Side) -> &mut T {
        let i = Self::index(c, side);
        if i >= self.slab.len() {
            let len = (i + 1).max(self.slab.len() + self.slab.len() / 2).max(64);
            self.slab.resize_with(len, Entry::default);
        }
        let e = &mut self.slab[i];
        if e.id != c.id {
            e.id = c.id;
            e.val = T::default();
        }
        &mut e.val
    }

    /// The state of `c`'s `side` if it has any, leaving the entry empty.
    pub fn take(&mut self, c: &Connection, side: Side) -> Option<T> {
        let e = self.slab.get_mut(Self::index(c, side))?;
        if e.id != c.id {
            return None;
        }
        e.id = 0;
        Some(std::mem::take(&mut e.val))
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
