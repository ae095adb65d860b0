//! The terminal report: totals first, then the slowest connections.

use super::json::{vantage_index, VANTAGES};
use super::{count, endpoint, fmt_bytes, group, verb, Printer, Report, Row, Slowest};
use crate::time::rfc3339;
use std::cmp::Reverse;
use std::io::{self, Write};
use tcpwhy_track::{Brief, Connection};

mod details;
mod sections;
mod style;
pub use details::DetailSel;
use details::{Details, Pending, DETAIL_EXCHANGES, DETAIL_FINDINGS};
use sections::*;
use style::fit;
pub use style::Style;

/// Findings of one id (of one confidence part), summed, as the report ranks them.
struct Cause {
    count: u64,
    cost_ns: i64,
    /// The costliest finding, shown as the example.
    example: Option<tcpwhy_detect::Finding>,
}

/// Exchange latencies kept for percentiles (a deterministic uniform sample beyond this).
const LATENCY_SAMPLE: usize = 100_000;

pub struct TextPrinter {
    causes: super::CauseTotals,
    /// The costliest finding of each id, of the confident part and (`true`) of the
    /// low-confidence one, ranked apart (`tcpwhy_detect::confidence`).
    examples: std::collections::BTreeMap<(&'static str, bool), tcpwhy_detect::Finding>,
    exchanges: u64,
    latencies: Vec<i64>,
    split: tcpwhy_detect::Split,
    out: Box<dyn Write>,
    err: Option<io::Error>,
    top: usize,
    slowest: Slowest<()>,
    vantage: [u64; 5],
    closes: [u64; 4],
    retrans_segments: u64,
    with_retrans: u64,
    inferred_roles: u64,
    reused_tuples: u64,
    duplicates: u64,
    /// Print a line per connection as it finishes (live capture).
    live: bool,
    /// Stalls per class: count, summed gap, summed cost.
    stalls: [(u64, i64, i64); 6],
    details: Details,
    style: Style,
}

impl TextPrinter {
    pub fn new(
        out: Box<dyn Write>,
        top: usize,
        live: bool,
        sel: DetailSel,
        style: Style,
    ) -> TextPrinter {
        let out: Box<dyn Write> = match style.width {
            Some(w) => Box::new(style::FitWriter::new(out, w)),
            None => out,
        };
        TextPrinter {
            causes: Default::default(),
            examples: Default::default(),
            exchanges: 0,
            latencies: Vec::new(),
            split: Default::default(),
            out,
            err: None,
            top,
            slowest: Slowest::new(top),
            vantage: [0; 5],
            closes: [0; 4],
            retrans_segments: 0,
            with_retrans: 0,
            inferred_roles: 0,
            reused_tuples: 0,
            duplicates: 0,
            live,
            stalls: [(0, 0, 0); 6],
            details: Details {
                sel,
                ..Default::default()
            },
            style,
        }
    }
}

/// A duration for people: `output::fmt_ms`, with hours (past 10 000 s) and days (past 100 h)
/// for long totals summed over many connections: 12.3 h, 4.6 d.
fn fmt_ms(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 100.0 * 3_600_000.0 {
        format!("{:.1} d", ms / 86_400_000.0)
    } else if ms >= 10_000_000.0 {
        format!("{:.1} h", ms / 3_600_000.0)
    } else {
        super::fmt_ms(ns)
    }
}

impl Printer for TextPrinter {
    fn stall(&mut self, st: &tcpwhy_detect::Stall) {
        let k = &mut self.stalls[st.class as usize];
        k.0 += 1;
        k.1 += st.gap_ns;
        k.2 += st.cost_ns;
        if self.details.wants(st.connection) {
            if matches!(self.details.sel, DetailSel::Ids(_)) {
                self.details.pending.entry(st.connection).or_default()
            } else if let Some(p) = self.details.pending.get_mut(&st.connection) {
                p
            } else {
                return;
            }
            .stalls
            .push(st.clone());
        }
    }

    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        if let DetailSel::Ids(ids) = &self.details.sel {
            if ids.contains(&x.connection) {
                let p = self.details.pending.entry(x.connection).or_default();
                if p.exchanges.len() < DETAIL_EXCHANGES {
                    p.exchanges.push(x.clone());
                } else {
                    p.more_exchanges += 1;
                }
            }
        }
        self.exchanges += 1;
        let n = self.exchanges as usize;
        if self.latencies.len() < LATENCY_SAMPLE {
            self.latencies.push(x.latency_ns);
        } else {
            // Algorithm R with a fixed multiplicative hash: the same input, the same sample.
            let j = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n as u64;
            if (j as usize) < LATENCY_SAMPLE {
                self.latencies[j as usize] = x.latency_ns;
            }
        }
        let s = &mut self.split;
        s.client_ns += x.split.client_ns;
        s.network_ns += x.split.network_ns;
        s.server_ns += x.split.server_ns;
        s.retransmission_ns += x.split.retransmission_ns;
        s.window_ns += x.split.window_ns;
        s.transfer_ns += x.split.transfer_ns;
        s.held_ns += x.split.held_ns;
    }

    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        if self.live && self.err.is_none() {
            let on = if f.capture_wide() {
                "capture".to_string()
            } else {
                f.connection.to_string()
            };
            let r = writeln!(self.out, "[{}] {on}: {}", f.id, f.explanation)
                .and_then(|_| self.out.flush());
            if let Err(e) = r {
                self.err = Some(e);
            }
        }
        if self.details.wants(f.connection) && !f.capture_wide() {
            let p = self.details.pending.entry(f.connection).or_default();
            if p.findings.len() < DETAIL_FINDINGS {
                p.findings.push(f.clone());
            }
        }
        let low = self.causes.add(f);
        let e = self.examples.entry((f.id, low));
        match e {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(f.clone());
            }
            std::collections::btree_map::Entry::Occupied(mut o) if f.cost_ns > o.get().cost_ns => {
                o.insert(f.clone());
            }
            _ => {}
        }
    }

    fn connection(&mut self, c: &Connection) {
        // (Nothing pending, the common case: no hashing per connection.)
        let pending = if self.details.pending.is_empty() {
            None
        } else {
            self.details.pending.remove(&c.id())
        };
        if let Some(p) = pending {
            self.keep_details(c, p);
        }
        self.brief(&c.brief());
    }

    fn briefs(&self) -> bool {
        // Details (and the live lines) read whole connections.
        matches!(self.details.sel, DetailSel::None) && !self.live
    }

    fn brief(&mut self, b: &Brief) {
        self.causes.connection(b.id);
        self.vantage[vantage_index(b.vantage)] += 1;
        let close = b.close;
        let ci = match close.kind() {
            "fin" => 0,
            "rst" => 1,
            "half-closed" => 2,
            _ => 3,
        };
        self.closes[ci] += 1;
        let retrans = b.retrans;
        self.retrans_segments += u64::from(retrans);
        self.with_retrans += u64::from(retrans > 0);
        self.inferred_roles += u64::from(b.inferred_role);
        self.duplicates += u64::from(b.duplicates);
        self.reused_tuples += u64::from(b.reused);
        if self.live && self.err.is_none() {
            let r = writeln!(
                self.out,
                "#{} {} -> {}  {}  {} pkts  {} / {}  retr {}  {}",
                b.id,
                endpoint(b.client.0, b.client.1),
                endpoint(b.server.0, b.server.1),
                fmt_ms(b.duration_ns),
                b.packets,
                fmt_bytes(b.c2s),
                fmt_bytes(b.s2c),
                retrans,
                close.kind()
            )
            .and_then(|_| self.out.flush());
            if let Err(e) = r {
                self.err = Some(e);
            }
        }
        self.slowest.offer(b, ());
    }

    fn check(&mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        self.check()?;
        self.causes_report(r.tracker.connections)?;
        let s = r.stats;
        let o = &mut self.out;
        let span = match (s.first_ts, s.last_ts) {
            (Some(a), Some(b)) => format!(
                " over {} (from {})",
                fmt_ms(b - a),
                &rfc3339(a)[..23].replace('T', " ")
            ),
            _ => String::new(),
        };
        writeln!(
            o,
            "{}, {} TCP, {}{span}",
            count(s.packets, "packet"),
            group(s.tcp_packets),
            count(r.tracker.connections, "connection")
        )?;
        if let Some(f) = r.filter {
            writeln!(
                o,
                "filter {}: {} selected, {} not",
                crate::printable(f),
                count(s.packets, "frame"),
                group(r.filtered_out)
            )?;
        }
        let mut skipped: Vec<String> = s.skipped.iter().map(|(k, v)| format!("{v} {k}")).collect();
        for (lt, n) in &s.skipped_link_types {
            let name = tcpwhy_wire::LinkType(*lt).name().unwrap_or("unknown");
            skipped.push(format!("{n} of link type {name} ({lt})"));
        }
        skipped.retain(|x| !x.ends_with(" link-type"));
        if !skipped.is_empty() {
            writeln!(o, "skipped: {}", skipped.join(", "))?;
        }
        let mut m: Vec<String> = s
            .malformed
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        if r.containers.corrupt_blocks > 0 {
            m.push(format!(
                "{} corrupt pcapng packet blocks",
                r.containers.corrupt_blocks
            ));
        }
        if !m.is_empty() {
            writeln!(o, "malformed (counted and skipped): {}", m.join(", "))?;
        }
        if r.tracker.connections > 0 {
            writeln!(
                o,
                "closed: {} FIN, {} RST, {} half-closed, {} not closed; {} in {}",
                group(self.closes[0]),
                group(self.closes[1]),
                group(self.closes[2]),
                group(self.closes[3]),
                count(self.retrans_segments, "retransmitted segment"),
                count(self.with_retrans, "connection")
            )?;
            let v: Vec<String> = VANTAGES
                .iter()
                .zip(self.vantage)
                .filter(|(_, n)| *n > 0)
                .map(|(v, n)| format!("{} {}", v.name(), group(n)))
                .collect();
            writeln!(o, "capture point (from handshakes): {}", v.join(", "))?;
            if self.reused_tuples > 0 {
                writeln!(
                    o,
                    "{} the 4-tuple of an earlier connection",
                    verb(self.reused_tuples, "connection", "reused", "reused")
                )?;
            }
            if self.duplicates > 0 {
                writeln!(
                    o,
                    "{} captured twice (identical within 25 ms: both ends of a veth, `any`, a copy one hop later?); not counted as retransmissions",
                    verb(self.duplicates, "packet", "was", "were")
                )?;
            }
            if self.inferred_roles > 0 {
                writeln!(
                    o,
                    "{} before the capture (no SYN): client/server inferred",
                    verb(self.inferred_roles, "connection", "began", "began")
                )?;
            }
        }
        if r.tracker.evicted > 0 {
            writeln!(
                o,
                "{} evicted by --max-connections",
                count(r.tracker.evicted, "connection")
            )?;
        }
        if r.tracker.history_forgotten > 0 {
            writeln!(
                o,
                "{} finished connections forgotten early by the history of 4-tuples (--max-connections): a later SYN on their 4-tuples finds no predecessor",
                r.tracker.history_forgotten
            )?;
        }
        self.exchanges_report()?;
        self.stalls_report()?;
        let o = &mut self.out;
        let rows = self.slowest.take_sorted();
        if !rows.is_empty() {
            writeln!(o)?;
            writeln!(
                o,
                "{}",
                self.style.bold("Slowest connections (by duration):")
            )?;
            let table = slowest_table(&rows, self.style.width);
            for line in table {
                writeln!(o, "{line}")?;
            }
        }
        let details = std::mem::take(&mut self.details.done);
        // `--connection` ids that named no connection of this capture.
        let missing: Vec<u64> = match &self.details.sel {
            DetailSel::Ids(ids) => ids
                .iter()
                .copied()
                .filter(|id| !details.keys().any(|k| k.1 == *id))
                .collect(),
            _ => Vec::new(),
        };
        if !details.is_empty() || !missing.is_empty() {
            writeln!(o, "\nConnection details:")?;
            for section in details.values() {
                write!(o, "{section}")?;
            }
            for id in missing {
                writeln!(
                    o,
                    "connection {id}: no connection of this capture has that id (an id is the \
                     frame number of the connection's first packet, as the tables and the JSON \
                     show)"
                )?;
            }
        }
        if let Some(e) = &r.error {
            writeln!(o, "\nstopped early: {}", crate::printable(e))?;
        }
        o.flush()
    }
}

#[cfg(test)]
mod words_tests {
    use super::{count, fmt_ms, group, verb};

    #[test]
    fn counts_agree_and_long_numbers_are_grouped() {
        assert_eq!(count(1, "connection"), "1 connection");
        assert_eq!(count(0, "connection"), "0 connections");
        assert_eq!(count(4_551_650, "packet"), "4 551 650 packets");
        assert_eq!(group(9999), "9999");
        assert_eq!(group(10_000), "10 000");
        assert_eq!(group(123_456_789), "123 456 789");
        assert_eq!(verb(1, "packet", "was", "were"), "1 packet was");
        assert_eq!(verb(3, "packet", "was", "were"), "3 packets were");
    }

    #[test]
    fn long_durations_take_a_larger_unit() {
        let ms = 1_000_000i64;
        assert_eq!(fmt_ms(12 * ms / 100), "0.120 ms");
        assert_eq!(fmt_ms(120 * ms), "120 ms");
        assert_eq!(fmt_ms(12_300 * ms), "12.3 s");
        // 398 153.8 s, summed over connections, is 110.6 h: past 100 h, days.
        assert_eq!(fmt_ms(398_153_800 * ms), "4.6 d");
        assert_eq!(fmt_ms(50 * 3_600_000 * ms), "50.0 h");
        assert_eq!(fmt_ms(9_999_000 * ms), "9999.0 s");
        assert_eq!(fmt_ms(400 * 3_600_000 * ms), "16.7 d");
    }
}
