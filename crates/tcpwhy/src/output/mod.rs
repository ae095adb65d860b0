//! Printers: one per output format behind one interface, writing to any `io::Write`.

pub mod annotate;
pub mod html;
pub mod json;
mod json_writer;
pub mod parquet;
pub mod record;
pub mod text;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::IpAddr;
use tcpwhy_capture::ContainerStats;
use tcpwhy_track::{Brief, Connection, Stats, TrackerStats};

/// Everything the summary needs at the end of the run.
pub struct Report<'a> {
    pub files: &'a [String],
    pub stats: &'a Stats,
    pub tracker: &'a TrackerStats,
    pub containers: &'a ContainerStats,
    pub warnings: &'a [String],
    /// The capture filter, and how many frames it did not select.
    pub filter: Option<&'a str>,
    pub filtered_out: u64,
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
    /// This printer reads no more of a connection than its `Brief`: the tracking workers may
    /// send `brief` instead of `connection` (a seventh of the bytes, no heap).
    fn briefs(&self) -> bool {
        false
    }
    /// A finished connection, in brief (only if `briefs` said so).
    fn brief(&mut self, _b: &tcpwhy_track::Brief) {}
    /// The first write error so far, if any.
    fn check(&mut self) -> io::Result<()>;
    /// The end of the run.
    fn summary(&mut self, r: &Report<'_>) -> io::Result<()>;
    /// Records this printer takes already written as JSON lines by the tracking workers
    /// (`line`), so that the reading thread only copies them out; `None`: records as values.
    fn json_lines(&self) -> Option<JsonLines> {
        None
    }
    /// A record written by a worker (only if `json_lines` asked for them): one JSON value,
    /// without its newline.
    fn line(&mut self, _bytes: &[u8], _what: LineOf) {}
}

/// What the workers write as JSON lines for a printer.
#[derive(Clone, Copy, Debug)]
pub struct JsonLines {
    /// Exchange and stall records too (`--exchanges`); without it the workers drop them.
    pub exchanges: bool,
}

/// The record a JSON line holds, with what the reading thread counts of it.
#[derive(Clone, Copy, Debug)]
pub enum LineOf {
    /// A connection: its id and its vantage (`json::vantage_index`).
    Connection {
        id: u64,
        vantage: u8,
    },
    /// A finding: its id, cost and connection (None for a capture-wide one), and whether its
    /// confidence is low.
    Finding {
        id: &'static str,
        cost_ns: i64,
        connection: Option<u64>,
        low: bool,
    },
    Exchange,
    Stall,
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

/// A connection as the slowest-connections tables list it, with `extra` columns of the
/// report's own; ordered by duration, then id.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub struct Row<X> {
    pub duration_ns: i64,
    pub id: u64,
    pub client: String,
    pub server: String,
    pub packets: u64,
    pub c2s: u64,
    pub s2c: u64,
    pub retrans: u32,
    pub hs_rtt_ns: Option<i64>,
    /// `fin by client`, `rst by server`, `none` ...
    pub close: String,
    pub extra: X,
}

/// The `max` slowest connections offered so far. A row (its strings) is made only for a
/// connection that enters.
pub struct Slowest<X> {
    max: usize,
    heap: BinaryHeap<Reverse<Row<X>>>,
}

impl<X: Ord> Slowest<X> {
    pub fn new(max: usize) -> Slowest<X> {
        Slowest {
            max,
            heap: BinaryHeap::new(),
        }
    }

    pub fn offer(&mut self, b: &Brief, extra: X) {
        if self.max == 0 {
            return;
        }
        let d = b.duration_ns;
        if self.heap.len() >= self.max {
            match self.heap.peek() {
                Some(Reverse(min)) if (d, Reverse(b.id)) <= (min.duration_ns, Reverse(min.id)) => {
                    return
                }
                _ => {}
            }
        }
        let close = match b.close.by() {
            Some(by) => format!("{} by {}", b.close.kind(), by.name()),
            None => b.close.kind().to_string(),
        };
        self.heap.push(Reverse(Row {
            duration_ns: d,
            id: b.id,
            client: endpoint(b.client.0, b.client.1),
            server: endpoint(b.server.0, b.server.1),
            packets: b.packets,
            c2s: b.c2s,
            s2c: b.s2c,
            retrans: b.retrans,
            hs_rtt_ns: b.hs_rtt_ns,
            close,
            extra,
        }));
        if self.heap.len() > self.max {
            self.heap.pop();
        }
    }

    /// The rows kept, slowest first, leaving none.
    pub fn take_sorted(&mut self) -> Vec<Reverse<Row<X>>> {
        std::mem::take(&mut self.heap).into_sorted_vec()
    }
}

/// A duration: 0.123 ms below 100 ms, 120 ms below 10 s, then 12.3 s.
pub fn fmt_ms(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms.abs() >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms.abs() >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// A size: bytes below 10 kB, then kB below 10 MB, then MB.
pub fn fmt_bytes(b: u64) -> String {
    match b {
        0..=9_999 => format!("{b} B"),
        10_000..=9_999_999 => format!("{:.1} kB", b as f64 / 1e3),
        _ => format!("{:.1} MB", b as f64 / 1e6),
    }
}

/// `ip:port`, with IPv6 in brackets as in URLs (`[::1]:80`).
pub fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

/// One cause's findings, summed: all of them, and the low-confidence ones among them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub findings: u64,
    /// Time lost (a negative cost counts as none, as a record's `cost_ms` shows it).
    pub cost_ns: i64,
    pub low: u64,
    pub low_cost_ns: i64,
}

impl Tally {
    /// Findings and time lost of the confident part (level medium or high), or of the low one.
    pub fn part(&self, low: bool) -> (u64, i64) {
        if low {
            (self.low, self.low_cost_ns)
        } else {
            (self.findings - self.low, self.cost_ns - self.low_cost_ns)
        }
    }
}

/// The totals every printer reports per cause (the text and HTML rankings, the JSON
/// summary's `causes`), counted in one place: findings, time lost, distinct connections.
#[derive(Default)]
pub struct CauseTotals {
    by_id: std::collections::BTreeMap<&'static str, Tally>,
    connections: CauseConnections,
}

impl CauseTotals {
    /// A finding of cause `id` (on `connection`: None for a capture-wide one).
    pub fn finding(&mut self, id: &'static str, cost_ns: i64, connection: Option<u64>, low: bool) {
        let t = self.by_id.entry(id).or_default();
        let cost = cost_ns.max(0);
        t.findings += 1;
        t.cost_ns += cost;
        if low {
            t.low += 1;
            t.low_cost_ns += cost;
        }
        if let Some(c) = connection {
            self.connections.finding(c, id);
        }
    }

    /// Finding `f` (its cost, its connection unless capture-wide, whether its confidence is
    /// low); returns whether it is low.
    pub fn add(&mut self, f: &tcpwhy_detect::Finding) -> bool {
        let low = f.confidence.level == tcpwhy_detect::Level::Low;
        let conn = (!f.capture_wide()).then_some(f.connection);
        self.finding(f.id, f.cost_ns, conn, low);
        low
    }

    /// The record of connection `id`: none of its findings come after it.
    pub fn connection(&mut self, id: u64) {
        self.connections.connection(id);
    }

    /// Distinct connections cause `id` was found on (its findings of any confidence).
    pub fn connections(&self, id: &str) -> u64 {
        self.connections.count(id)
    }

    /// Every cause with its tally, ranked by time lost, then by id.
    pub fn ranked(&self) -> Vec<(&'static str, Tally)> {
        let mut v: Vec<(&'static str, Tally)> = self.by_id.iter().map(|(k, t)| (*k, *t)).collect();
        v.sort_by_key(|(id, t)| (std::cmp::Reverse(t.cost_ns), *id));
        v
    }

    /// The causes with findings of the confident part (or of the low one), with that part's
    /// findings and time lost, ranked by that time, then by id.
    pub fn ranked_part(&self, low: bool) -> Vec<(&'static str, u64, i64)> {
        let mut v: Vec<(&'static str, u64, i64)> = self
            .by_id
            .iter()
            .map(|(id, t)| {
                let (n, cost) = t.part(low);
                (*id, n, cost)
            })
            .filter(|(_, n, _)| *n > 0)
            .collect();
        v.sort_by_key(|(id, _, cost)| (std::cmp::Reverse(*cost), *id));
        v
    }
}

/// On how many distinct connections each cause was found, in memory bounded by the connections
/// that have findings and are still open (a set of connection ids per cause grew with the
/// capture: 10 M entries for 10 M connections). Relies on the printers' order: a connection's
/// findings all come before its record ([`Printer::connection`]), which ends its entry here.
#[derive(Default)]
struct CauseConnections {
    /// Cause index (a bit in the masks) -> count of distinct connections.
    counts: Vec<u64>,
    ids: Vec<&'static str>,
    /// Open connection -> the causes already counted for it (bit i: `ids[i]`, i < 64).
    open: std::collections::HashMap<u64, u64>,
    /// Causes beyond the 64th (there are 14 detectors; this keeps any count correct).
    overflow: std::collections::HashSet<(u64, usize)>,
}

impl CauseConnections {
    /// A finding of cause `id` on connection `conn`.
    pub fn finding(&mut self, conn: u64, id: &'static str) {
        let i = match self.ids.iter().position(|&x| x == id) {
            Some(i) => i,
            None => {
                self.ids.push(id);
                self.counts.push(0);
                self.ids.len() - 1
            }
        };
        let new = if i < 64 {
            let mask = self.open.entry(conn).or_insert(0);
            let new = *mask & (1 << i) == 0;
            *mask |= 1 << i;
            new
        } else {
            self.overflow.insert((conn, i))
        };
        self.counts[i] += u64::from(new);
    }

    /// The record of connection `conn`: none of its findings come after it.
    pub fn connection(&mut self, conn: u64) {
        if self.open.is_empty() {
            return; // (most connections have no finding: no hashing)
        }
        if self.open.remove(&conn).is_some() && !self.overflow.is_empty() {
            self.overflow.retain(|&(c, _)| c != conn);
        }
    }

    /// Distinct connections cause `id` was found on.
    pub fn count(&self, id: &str) -> u64 {
        self.ids
            .iter()
            .position(|&x| x == id)
            .map_or(0, |i| self.counts[i])
    }
}

/// `n` with its digits in groups of three when it has five or more ("4 551 650", "9999").
pub(crate) fn group(n: u64) -> String {
    let d = n.to_string();
    if d.len() < 5 {
        return d;
    }
    let mut o = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            o.push(' ');
        }
        o.push(c);
    }
    o
}

/// `n` and `noun`, plural unless `n` is 1 ("1 connection", "4 551 650 packets").
pub(crate) fn count(n: u64, noun: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {noun}{s}", group(n))
}

/// `count(n, noun)` and the verb that agrees with it ("1 packet was", "2 packets were").
pub(crate) fn verb(n: u64, noun: &str, one: &str, many: &str) -> String {
    format!("{} {}", count(n, noun), if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::CauseConnections;

    #[test]
    fn counts_each_connection_once_per_cause_and_forgets_finished_ones() {
        let mut c = CauseConnections::default();
        // Connection 1: two findings of a, one of b; connection 2 interleaved: one of a.
        c.finding(1, "a");
        c.finding(2, "a");
        c.finding(1, "a");
        c.finding(1, "b");
        assert_eq!((c.count("a"), c.count("b"), c.count("z")), (2, 1, 0));
        c.connection(1);
        c.connection(2);
        assert!(c.open.is_empty(), "finished connections are forgotten");
        // A later connection with the same cause counts again.
        c.finding(3, "b");
        assert_eq!(c.count("b"), 2);
    }

    #[test]
    fn more_causes_than_bits_still_count_distinct_connections() {
        let ids: Vec<&'static str> = (0..70)
            .map(|i| &*Box::leak(format!("cause-{i}").into_boxed_str()))
            .collect();
        let mut c = CauseConnections::default();
        for conn in [7, 8] {
            for _ in 0..2 {
                for &id in &ids {
                    c.finding(conn, id);
                }
            }
        }
        assert!(ids.iter().all(|id| c.count(id) == 2));
        c.connection(7);
        c.finding(9, ids[69]);
        assert_eq!(c.count(ids[69]), 3);
        assert!(c.overflow.iter().all(|&(conn, _)| conn != 7));
    }
}
