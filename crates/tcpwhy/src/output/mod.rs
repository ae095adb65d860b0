//! Printers: one per output format behind one interface, writing to any `io::Write`.

pub mod json;
pub mod text;

use std::io;
use std::net::IpAddr;
use tcpwhy_capture::ContainerStats;
use tcpwhy_track::{Connection, Stats, TrackerStats};

/// Everything the summary needs at the end of the run.
pub struct Report<'a> {
    pub files: &'a [String],
    pub stats: &'a Stats,
    pub tracker: &'a TrackerStats,
    pub containers: &'a ContainerStats,
    pub warnings: &'a [String],
    /// The error that stopped reading, if any (results cover what came before it).
    pub error: Option<String>,
}

pub trait Printer {
    /// A finished connection. Write errors are kept and returned by `check`.
    fn connection(&mut self, c: &Connection);
    /// The first write error so far, if any.
    fn check(&mut self) -> io::Result<()>;
    /// The end of the run.
    fn summary(&mut self, r: &Report<'_>) -> io::Result<()>;
}

/// `ip:port`, with IPv6 in brackets as in URLs (`[::1]:80`).
pub fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}
