//! Printers: one per output format behind one interface, writing to any `io::Write`.

pub mod html;
pub mod json;
mod json_fast;
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
    /// A finding (before the record of its connection).
    fn finding(&mut self, f: &tcpwhy_detect::Finding);
    /// A request/response exchange (before the record of its connection).
    fn exchange(&mut self, x: &tcpwhy_detect::Exchange);
    /// A stall in a transfer (before the record of its connection).
    fn stall(&mut self, s: &tcpwhy_detect::Stall);
    /// A finished connection. Write errors are kept and returned by `check`.
    fn connection(&mut self, c: &Connection);
    /// The first write error so far, if any.
    fn check(&mut self) -> io::Result<()>;
    /// The end of the run.
    fn summary(&mut self, r: &Report<'_>) -> io::Result<()>;
}

/// Lets the detectors write into a printer, counting findings per id for `--fail-on`.
pub struct ToPrinter<'a> {
    pub printer: &'a mut dyn Printer,
    pub ids: std::collections::BTreeMap<&'static str, u64>,
}

impl tcpwhy_detect::Output for ToPrinter<'_> {
    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        *self.ids.entry(f.id).or_insert(0) += 1;
        self.printer.finding(f);
    }
    fn connection(&mut self, c: &Connection) {
        self.printer.connection(c);
    }
    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        self.printer.exchange(x);
    }
    fn stall(&mut self, s: &tcpwhy_detect::Stall) {
        self.printer.stall(s);
    }
    fn check(&mut self) -> io::Result<()> {
        self.printer.check()
    }
}

/// `ip:port`, with IPv6 in brackets as in URLs (`[::1]:80`).
pub fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}
