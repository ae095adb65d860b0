//! # tcpwhy-track: packets to connections
//!
//! The engine under every tcpwhy front end. [`Analyzer`] takes captured frames (from a file, a
//! live interface or a test), decodes them, counts what it skips, and feeds TCP segments to the
//! [`Tracker`], which follows every connection (each generation of each 4-tuple) and hands
//! finished ones to a [`Sink`].
//!
//! ```
//! use tcpwhy_track::{Analyzer, Config, Connection};
//! use tcpwhy_wire::LinkType;
//! let mut done = Vec::new();
//! let mut sink = |c: &Connection| done.push(c.id());
//! let mut a = Analyzer::new(Config::default());
//! // Raw IPv4 SYN 10.0.0.1:40000 -> 10.0.0.2:80 (link type 101).
//! let syn = [
//!     0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
//!     0x9c, 0x40, 0, 80, 0, 0, 0, 100, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
//! ];
//! a.frame(1, 1_000_000_000, LinkType::RAW, &syn, 40, &mut sink);
//! a.finish(&mut sink);
//! assert_eq!(done, vec![1]);
//! assert_eq!(a.stats().tcp_packets, 1);
//! ```
//!
//! Architecture invariant: the tracker knows TCP, not causes. It tells a `Sink` what happened
//! to each connection and never judges a delay; it does no I/O and reads no clock (time is
//! the capture's).
#![forbid(unsafe_code)]

mod account;
mod analyzer;
mod config;
mod conn;
mod embryo;
mod endpoint;
mod flow;
mod history;
mod retry;
mod sink;
mod slots;
mod table;

pub use analyzer::{Analyzer, Frontend, Stats};
pub use config::Config;
pub use conn::{
    Brief, Close, Connection, EndReason, Handshake, Predecessor, RoleSource, Side, Vantage,
    ANSWER_LOST_MIN_NS,
};
pub use endpoint::{At, Endpoint, RttStats, Ts};
pub use flow::{flow_hash, shard_of};
pub use retry::{Link, RetryWatch, MAX_PAIRS as RETRY_WATCH_MAX_PAIRS};
pub use sink::{Moment, SegmentEvent, Sink};
pub use table::{Tracker, TrackerStats};

#[cfg(test)]
mod tests;
