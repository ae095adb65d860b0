//! The terminal report: totals first, then the slowest connections.

use super::json::{vantage_index, VANTAGES};
use super::{endpoint, Printer, Report, Row, Slowest};
use crate::time::rfc3339;
use std::cmp::Reverse;
use std::io::{self, Write};
use tcpwhy_track::{Brief, Connection};

/// Findings of one id, summed.
#[derive(Default)]
struct Cause {
    count: u64,
    cost_ns: i64,
    /// The costliest finding, shown as the example.
    example: Option<tcpwhy_detect::Finding>,
}

/// Exchange latencies kept for percentiles (a deterministic uniform sample beyond this).
const LATENCY_SAMPLE: usize = 100_000;

pub struct TextPrinter {
    causes: std::collections::BTreeMap<&'static str, Cause>,
    /// Low-confidence findings, ranked apart (`tcpwhy_detect::confidence`).
    uncertain: std::collections::BTreeMap<&'static str, Cause>,
    cause_connections: super::CauseConnections,
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

/// How the terminal report looks: colours (only on a terminal, never with NO_COLOR) and the
/// width tables and long lines must fit (None: a file or pipe, no limit).
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    pub color: bool,
    pub width: Option<usize>,
}

impl Style {
    /// For standard output: colour and width only when it is a terminal.
    pub fn for_stdout() -> Style {
        use std::io::IsTerminal;
        let tty = io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let width = if tty {
            terminal_size::terminal_size()
                .map(|(w, _)| usize::from(w.0))
                .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
                .filter(|w| *w >= 40)
                .or(Some(80))
        } else {
            None
        };
        Style {
            color: tty && !no_color,
            width,
        }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn red(&self, s: &str) -> String {
        self.paint("1;31", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }

    /// `text` after `first` (already written), wrapped to the width with `indent` on the
    /// following lines.
    fn wrap(&self, first: usize, text: &str, indent: usize) -> String {
        let Some(width) = self.width else {
            return text.to_string();
        };
        let mut out = String::new();
        let mut col = first;
        for word in text.split(' ') {
            let w = word.chars().count();
            if col > indent && col + 1 + w > width {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                col = indent;
            } else if !out.is_empty() {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += w;
        }
        out
    }
}

/// Shorten `s` to `n` characters with an ellipsis in the middle (addresses keep their port).
fn fit(s: &str, n: usize) -> String {
    let len = s.chars().count();
    if len <= n || n < 5 {
        return s.to_string();
    }
    let head = (n - 1) / 2;
    let tail = n - 1 - head;
    let chars: Vec<char> = s.chars().collect();
    let mut o: String = chars[..head].iter().collect();
    o.push('…');
    o.extend(&chars[len - tail..]);
    o
}

/// Which connections get a detailed section (`--connection ID`, `--details`).
#[derive(Default)]
pub enum DetailSel {
    #[default]
    None,
    /// These connection ids, everything about them.
    Ids(std::collections::BTreeSet<u64>),
    /// The `top` connections that lost the most time to findings.
    WithFindings,
}

/// What the detail section keeps of a connection while it is open.
#[derive(Default)]
struct Pending {
    findings: Vec<tcpwhy_detect::Finding>,
    exchanges: Vec<tcpwhy_detect::Exchange>,
    stalls: Vec<tcpwhy_detect::Stall>,
    /// Exchanges beyond the listed ones.
    more_exchanges: u64,
}

/// Exchanges listed per connection in its details.
const DETAIL_EXCHANGES: usize = 50;
/// Findings kept per connection in its details.
const DETAIL_FINDINGS: usize = 200;

#[derive(Default)]
struct Details {
    sel: DetailSel,
    pending: std::collections::HashMap<u64, Pending>,
    /// Rendered sections, keyed for order: (lost time descending, id).
    done: std::collections::BTreeMap<(Reverse<i64>, u64), String>,
}

impl Details {
    fn wants(&self, id: u64) -> bool {
        match &self.sel {
            DetailSel::None => false,
            DetailSel::Ids(ids) => ids.contains(&id),
            DetailSel::WithFindings => true,
        }
    }
}

impl TextPrinter {
    pub fn new(
        out: Box<dyn Write>,
        top: usize,
        live: bool,
        sel: DetailSel,
        style: Style,
    ) -> TextPrinter {
        TextPrinter {
            causes: Default::default(),
            uncertain: Default::default(),
            cause_connections: Default::default(),
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

fn fmt_ms(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn fmt_bytes(b: u64) -> String {
    match b {
        0..=9_999 => format!("{b} B"),
        10_000..=9_999_999 => format!("{:.1} kB", b as f64 / 1e3),
        _ => format!("{:.1} MB", b as f64 / 1e6),
    }
}

impl TextPrinter {
    fn causes_report(&mut self) -> io::Result<()> {
        let st = self.style;
        let mut causes: Vec<(&'static str, Cause)> =
            std::mem::take(&mut self.causes).into_iter().collect();
        let mut uncertain: Vec<(&'static str, Cause)> =
            std::mem::take(&mut self.uncertain).into_iter().collect();
        uncertain.sort_by_key(|(id, c)| (std::cmp::Reverse(c.cost_ns), *id));
        if causes.is_empty() {
            writeln!(self.out, "{}\n", st.green("No latency cause found."))?;
            return self.uncertain_report(&uncertain);
        }
        causes.sort_by_key(|(id, c)| (std::cmp::Reverse(c.cost_ns), *id));
        writeln!(self.out, "{}", st.bold("Causes, ranked by time lost:"))?;
        for (i, (id, c)) in causes.iter().enumerate() {
            let cost = fmt_ms(c.cost_ns);
            let plain_lead = format!("{:>2}. {id}: {cost} ", i + 1);
            let conns = self.cause_connections.count(id);
            let capture_wide = c.example.as_ref().is_some_and(|f| f.capture_wide());
            let rest = if capture_wide {
                "lost: about the capture as a whole, no connection waited on it".to_string()
            } else {
                format!(
                    "lost in {} finding{} on {} connection{}",
                    c.count,
                    if c.count == 1 { "" } else { "s" },
                    conns,
                    if conns == 1 { "" } else { "s" },
                )
            };
            writeln!(
                self.out,
                "{:>2}. {}: {} {}",
                i + 1,
                st.red(id),
                st.bold(&cost),
                st.wrap(plain_lead.chars().count(), &rest, 4)
            )?;
            if let Some(f) = &c.example {
                let lead = if f.capture_wide() {
                    "    ".to_string()
                } else {
                    format!("    e.g. connection {}: ", f.connection)
                };
                writeln!(
                    self.out,
                    "{lead}{}",
                    st.wrap(lead.chars().count(), &f.explanation, 4)
                )?;
                writeln!(
                    self.out,
                    "    {} {}",
                    st.green("fix:"),
                    st.wrap(9, &f.fix, 9)
                )?;
                writeln!(
                    self.out,
                    "    {} {}",
                    st.dim("evidence:"),
                    st.wrap(14, &f.wireshark_filter(), 14)
                )?;
            }
        }
        writeln!(self.out)?;
        self.uncertain_report(&uncertain)
    }

    /// Low-confidence findings, apart from the ranking: each id with its cost and why it is
    /// uncertain.
    fn uncertain_report(&mut self, uncertain: &[(&'static str, Cause)]) -> io::Result<()> {
        if uncertain.is_empty() {
            return Ok(());
        }
        let st = self.style;
        writeln!(
            self.out,
            "{}",
            st.bold("Less certain (low confidence, not ranked above):")
        )?;
        for (id, c) in uncertain {
            let why = c
                .example
                .as_ref()
                .and_then(|f| f.confidence.reasons.first().copied())
                .unwrap_or("");
            let lead = format!(
                "  - {id}: {} in {} finding{}: ",
                fmt_ms(c.cost_ns),
                c.count,
                if c.count == 1 { "" } else { "s" }
            );
            writeln!(self.out, "{lead}{}", st.wrap(lead.chars().count(), why, 6))?;
        }
        writeln!(self.out)
    }
}

impl TextPrinter {
    fn exchanges_report(&mut self) -> io::Result<()> {
        if self.exchanges == 0 {
            return Ok(());
        }
        self.latencies.sort_unstable();
        let pct = |p: f64| {
            let v = &self.latencies;
            v[(((v.len() as f64) * p).ceil() as usize).clamp(1, v.len()) - 1]
        };
        let s = self.split;
        let parts = [
            ("network", s.network_ns),
            ("server", s.server_ns),
            ("transfer", s.transfer_ns),
            ("client", s.client_ns),
            ("retransmission", s.retransmission_ns),
            ("window", s.window_ns),
            ("held segments", s.held_ns),
        ];
        let total: i64 = parts.iter().map(|p| p.1).sum::<i64>().max(1);
        let mut shown: Vec<String> = parts
            .iter()
            .map(|(k, v)| (k, *v as f64 * 100.0 / total as f64))
            .filter(|(_, pct)| *pct >= 0.5)
            .map(|(k, pct)| format!("{k} {pct:.0}%"))
            .collect();
        if shown.is_empty() {
            shown.push("nothing measurable".into());
        }
        writeln!(
            self.out,
            "{} request/response exchanges: latency p50 {}, p99 {}, max {}; time went to {}",
            self.exchanges,
            fmt_ms(pct(0.5)),
            fmt_ms(pct(0.99)),
            fmt_ms(pct(1.0)),
            shown.join(", ")
        )
    }
}

/// The slowest-connections table, fitted to `width`: optional columns go first (handshake
/// RTT, retransmissions, packets, bytes, close), then the address column is shortened.
fn slowest_table(rows: &[Reverse<Row<()>>], width: Option<usize>) -> Vec<String> {
    // (header, right-aligned, optional: dropped in this order when too wide)
    let heads: [(&str, bool, u8); 9] = [
        ("id", true, 0),
        ("client -> server", false, 0),
        ("duration", true, 0),
        ("pkts", true, 3),
        ("c->s", true, 4),
        ("s->c", true, 4),
        ("retr", true, 2),
        ("hs rtt", true, 1),
        ("close", false, 5),
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|Reverse(r)| {
            [
                r.id.to_string(),
                format!("{} -> {}", r.client, r.server),
                fmt_ms(r.duration_ns),
                r.packets.to_string(),
                fmt_bytes(r.c2s),
                fmt_bytes(r.s2c),
                r.retrans.to_string(),
                r.hs_rtt_ns.map(fmt_ms).unwrap_or_else(|| "-".into()),
                r.close.clone(),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = (0..heads.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain(std::iter::once(heads[i].0.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut shown: Vec<bool> = vec![true; heads.len()];
    let total = |shown: &[bool], widths: &[usize]| -> usize {
        shown
            .iter()
            .zip(widths)
            .filter(|(s, _)| **s)
            .map(|(_, w)| w + 2)
            .sum::<usize>()
    };
    if let Some(limit) = width {
        for level in 1..=5u8 {
            if total(&shown, &widths) <= limit {
                break;
            }
            for (i, h) in heads.iter().enumerate() {
                if h.2 == level {
                    shown[i] = false;
                }
            }
        }
        let over = total(&shown, &widths).saturating_sub(limit);
        if over > 0 {
            widths[1] = widths[1].saturating_sub(over).max(20);
        }
    }
    let line = |vals: [&str; 9]| -> String {
        let mut l = String::new();
        for i in (0..heads.len()).filter(|&i| shown[i]) {
            let v = if i == 1 {
                fit(vals[i], widths[i])
            } else {
                vals[i].to_string()
            };
            let pad = widths[i].saturating_sub(v.chars().count());
            if heads[i].1 {
                l.push_str(&" ".repeat(pad));
                l.push_str(&v);
            } else {
                l.push_str(&v);
                l.push_str(&" ".repeat(pad));
            }
            l.push_str("  ");
        }
        l.trim_end().to_string()
    };
    let mut out = vec![line(heads.map(|h| h.0))];
    for c in &cells {
        out.push(line([
            &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7], &c[8],
        ]));
    }
    out
}

impl TextPrinter {
    fn stalls_report(&mut self) -> io::Result<()> {
        let n: u64 = self.stalls.iter().map(|k| k.0).sum();
        if n == 0 {
            return Ok(());
        }
        let cost: i64 = self.stalls.iter().map(|k| k.2).sum();
        let mut parts: Vec<(i64, String)> = tcpwhy_detect::StallClass::ALL
            .iter()
            .zip(self.stalls)
            .filter(|(_, k)| k.0 > 0)
            .map(|(class, k)| (k.1, format!("{} {} ({})", class.name(), k.0, fmt_ms(k.1))))
            .collect();
        parts.sort_by_key(|p| Reverse(p.0));
        let parts: Vec<String> = parts.into_iter().map(|p| p.1).collect();
        writeln!(
            self.out,
            "{n} stall{} in transfers (no progress for over max(2 x RTT, {} ms)), {} beyond a round trip: {}",
            if n == 1 { "" } else { "s" },
            tcpwhy_detect::STALL_FLOOR_NS / 1_000_000,
            fmt_ms(cost),
            parts.join(", ")
        )
    }

    /// Render a finished connection's detail section and keep it (bounded by `--top` when
    /// the selection is "connections with findings").
    fn keep_details(&mut self, c: &Connection, p: Pending) {
        use std::fmt::Write as _;
        let with_findings = matches!(self.details.sel, DetailSel::WithFindings);
        if with_findings && p.findings.is_empty() {
            return;
        }
        let lost: i64 = p.findings.iter().map(|f| f.cost_ns.max(0)).sum();
        let mut s = String::new();
        let close = c.close();
        let _ = writeln!(
            s,
            "\n#{} {} -> {}  {}  {} packets  {} / {}  closed: {}{}",
            c.id(),
            endpoint(c.client.addr, c.client.port),
            endpoint(c.server.addr, c.server.port),
            fmt_ms(c.duration_ns()),
            c.packets(),
            fmt_bytes(c.client.unique_bytes),
            fmt_bytes(c.server.unique_bytes),
            close.kind(),
            close
                .by()
                .map(|b| format!(" by {}", b.name()))
                .unwrap_or_default(),
        );
        let rtt = c
            .handshake_rtt_ns()
            .map(fmt_ms)
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "  handshake RTT {rtt}, capture point {}, retransmitted segments {} / {}",
            c.vantage().name(),
            c.client.retrans_segments(),
            c.server.retrans_segments()
        );
        if p.findings.is_empty() {
            let _ = writeln!(s, "  no finding");
        }
        for f in &p.findings {
            let _ = writeln!(
                s,
                "  [{}] {} lost at {}: {}",
                f.id,
                fmt_ms(f.cost_ns.max(0)),
                &rfc3339(f.start_ns)[11..23],
                f.explanation
            );
            let _ = writeln!(s, "    fix: {}", f.fix);
            let _ = writeln!(s, "    evidence: {}", f.wireshark_filter());
        }
        for st in &p.stalls {
            let _ = writeln!(
                s,
                "  stall ({}): the {} made no progress for {} (frames {}-{}), {} in flight",
                st.class.name(),
                st.sender.name(),
                fmt_ms(st.gap_ns),
                st.start.frame(),
                st.end.frame(),
                fmt_bytes(st.in_flight)
            );
        }
        for x in &p.exchanges {
            let sp = &x.split;
            let parts = [
                ("network", sp.network_ns),
                ("server", sp.server_ns),
                ("transfer", sp.transfer_ns),
                ("client", sp.client_ns),
                ("retransmission", sp.retransmission_ns),
                ("window", sp.window_ns),
                ("held", sp.held_ns),
            ];
            let shown: Vec<String> = parts
                .iter()
                .filter(|(_, v)| *v > 0)
                .map(|(k, v)| format!("{k} {}", fmt_ms(*v)))
                .collect();
            let _ = writeln!(
                s,
                "  exchange {} (frames {}-{}): {} -> {} in {}: {}",
                x.index,
                x.start.frame(),
                x.end.frame(),
                fmt_bytes(x.request_bytes),
                fmt_bytes(x.response_bytes),
                fmt_ms(x.latency_ns),
                shown.join(", ")
            );
        }
        if p.more_exchanges > 0 {
            let _ = writeln!(s, "  ... and {} more exchanges", p.more_exchanges);
        }
        let done = &mut self.details.done;
        done.insert((Reverse(lost), c.id()), s);
        if with_findings && done.len() > self.top.max(1) {
            done.pop_last();
        }
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
        let ranked = if f.confidence.level == tcpwhy_detect::Level::Low {
            &mut self.uncertain
        } else {
            &mut self.causes
        };
        let c = ranked.entry(f.id).or_default();
        c.count += 1;
        c.cost_ns += f.cost_ns.max(0);
        if !f.capture_wide() {
            self.cause_connections.finding(f.connection, f.id);
        }
        if c.example.as_ref().is_none_or(|e| f.cost_ns > e.cost_ns) {
            c.example = Some(f.clone());
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
        self.cause_connections.connection(b.id);
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
        self.causes_report()?;
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
            "{} packets, {} TCP, {} connections{span}",
            s.packets, s.tcp_packets, r.tracker.connections
        )?;
        let mut skipped: Vec<String> = s.skipped.iter().map(|(k, v)| format!("{v} {k}")).collect();
        for (lt, n) in &s.skipped_link_types {
            skipped.push(format!("{n} of link type {lt}"));
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
                "closed: {} FIN, {} RST, {} half-closed, {} not closed; {} retransmitted segments in {} connections",
                self.closes[0], self.closes[1], self.closes[2], self.closes[3],
                self.retrans_segments, self.with_retrans
            )?;
            let v: Vec<String> = VANTAGES
                .iter()
                .zip(self.vantage)
                .filter(|(_, n)| *n > 0)
                .map(|(v, n)| format!("{} {n}", v.name()))
                .collect();
            writeln!(o, "capture point (from handshakes): {}", v.join(", "))?;
            if self.reused_tuples > 0 {
                writeln!(
                    o,
                    "{} connections reused the 4-tuple of an earlier connection",
                    self.reused_tuples
                )?;
            }
            if self.duplicates > 0 {
                writeln!(
                    o,
                    "{} packets were captured twice (identical within 25 ms: both ends of a veth, `any`, a copy one hop later?); not counted as retransmissions",
                    self.duplicates
                )?;
            }
            if self.inferred_roles > 0 {
                writeln!(
                    o,
                    "{} connections began before the capture (no SYN): client/server inferred",
                    self.inferred_roles
                )?;
            }
        }
        if r.tracker.evicted > 0 {
            writeln!(
                o,
                "{} connections evicted by --max-connections",
                r.tracker.evicted
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
        if !details.is_empty() {
            writeln!(o, "\nConnection details:")?;
            for section in details.values() {
                write!(o, "{section}")?;
            }
        }
        if let Some(e) = &r.error {
            writeln!(o, "\nstopped early: {}", crate::printable(e))?;
        }
        o.flush()
    }
}
