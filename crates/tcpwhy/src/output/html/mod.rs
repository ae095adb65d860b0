//! The HTML report: one self-contained file (inline CSS, inline SVG, a few lines of inline
//! script for sorting; no network access, no external fonts or scripts).
//!
//! The answer comes first (causes ranked by time lost, as a bar chart), then one section per
//! finding with the picture that proves it: a time-sequence graph of its connection around the
//! finding (data segments, the ACK line, the receive-window line, retransmissions and evidence
//! frames marked, the finding's span shaded, segments per flight labelled), or a ladder of the
//! packets for handshake findings (SYN / ACK / RST / SYN). Then the distribution of exchange
//! latencies split by where their time went, and a sortable table of connections.
//!
//! The graphs need the packets of a few connections, which a streaming first pass has already
//! dropped: `summary` reads the capture a second time (an input that is not a regular file from
//! the copy the first pass kept, crate::input) and keeps only the packets of the findings'
//! connections inside their graph windows. Every string that comes from a capture is
//! escaped.

use super::{count, endpoint, fmt_bytes, fmt_ms, verb, Printer, Report, Slowest};
use crate::input::Inputs;
use crate::time::rfc3339;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};
use tcpwhy_detect::{Exchange, Finding, Stall, StallClass};
use tcpwhy_track::{Brief, Config, Connection, SegmentEvent, Sink};

mod pass;
mod svg;
use pass::*;
use svg::*;

/// Findings listed in the report (the rest are counted in the causes chart only).
const MAX_FINDINGS: usize = 5_000;
/// Findings that get a graph (the costliest).
const MAX_GRAPHS: usize = 100;
/// Rows of the connection table (the slowest).
const MAX_ROWS: usize = 2_000;
/// Packets kept per graph.
const MAX_POINTS: usize = 20_000;
/// Packets drawn in a ladder.
const MAX_LADDER: usize = 40;

const PARTS: [&str; 7] = [
    "network",
    "server",
    "transfer",
    "client",
    "retransmission",
    "window",
    "held",
];
const PART_COLORS: [&str; 7] = [
    "#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#e15759", "#b07aa1", "#edc948",
];
/// Histogram bins: 10^(-2 + k/4) ms, k = 0..BINS (10 us to 100 s).
const BINS: usize = 28;

/// What the connections table adds to a row: findings on the connection and the time they cost.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Lost {
    findings: u32,
    lost_ns: i64,
}

/// A cause's confident findings, summed, as the answer ranks them.
struct Cause {
    count: u64,
    cost_ns: i64,
}

pub struct HtmlPrinter {
    out: Box<dyn Write>,
    err: Option<io::Error>,
    inputs: Inputs,
    cfg: Config,
    findings: Vec<Finding>,
    more_findings: u64,
    /// Findings per cause; the low-confidence ones are ranked apart
    /// (`tcpwhy_detect::confidence`).
    causes: super::CauseTotals,
    /// Findings and time lost per connection, until its record arrives.
    per_conn: HashMap<u64, (u32, i64)>,
    hist: [[u64; PARTS.len()]; BINS],
    exchanges: u64,
    stalls: [(u64, i64); 6],
    rows: Slowest<Lost>,
}

impl HtmlPrinter {
    /// `inputs` are read again at the end for the graphs, with the same tracker configuration
    /// (so connection ids match the first pass).
    pub fn new(out: Box<dyn Write>, inputs: Inputs, cfg: Config) -> HtmlPrinter {
        HtmlPrinter {
            out,
            err: None,
            inputs,
            cfg,
            findings: Vec::new(),
            more_findings: 0,
            causes: Default::default(),
            per_conn: HashMap::new(),
            hist: [[0; PARTS.len()]; BINS],
            exchanges: 0,
            stalls: [(0, 0); 6],
            rows: Slowest::new(MAX_ROWS),
        }
    }
}

/// `id` is a finding about the capture as a whole (`syn-flood`, `syn-scan`).
fn capture_wide(id: &str) -> bool {
    tcpwhy_detect::detectors::CAPTURE_WIDE
        .iter()
        .any(|i| i.id == id)
}

/// Escape text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

impl Printer for HtmlPrinter {
    fn finding(&mut self, f: &Finding) {
        self.causes.add(f);
        if !f.capture_wide() {
            let p = self.per_conn.entry(f.connection).or_default();
            p.0 += 1;
            p.1 += f.cost_ns.max(0);
        }
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(f.clone());
        } else {
            self.more_findings += 1;
        }
    }

    fn exchange(&mut self, x: &Exchange) {
        self.exchanges += 1;
        let s = &x.split;
        let parts = [
            s.network_ns,
            s.server_ns,
            s.transfer_ns,
            s.client_ns,
            s.retransmission_ns,
            s.window_ns,
            s.held_ns,
        ];
        let dominant = (0..parts.len()).max_by_key(|&i| parts[i]).unwrap_or(0);
        let ms = (x.latency_ns.max(1) as f64) / 1e6;
        let bin = ((ms.log10() + 2.0) * 4.0)
            .floor()
            .clamp(0.0, (BINS - 1) as f64) as usize;
        self.hist[bin][dominant] += 1;
    }

    fn stall(&mut self, s: &Stall) {
        let k = &mut self.stalls[s.class as usize];
        k.0 += 1;
        k.1 += s.gap_ns;
    }

    fn connection(&mut self, c: &Connection) {
        self.brief(&c.brief());
    }

    fn briefs(&self) -> bool {
        true
    }

    fn brief(&mut self, b: &Brief) {
        self.causes.connection(b.id);
        let (findings, lost_ns) = self.per_conn.remove(&b.id).unwrap_or_default();
        self.rows.offer(b, Lost { findings, lost_ns });
    }

    fn check(&mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        self.check()?;
        // The costliest findings get graphs; their packets come from a second pass. (Not the
        // capture-wide ones: no connection of theirs to draw.)
        let mut order: Vec<usize> = (0..self.findings.len())
            .filter(|&i| !self.findings[i].capture_wide())
            .collect();
        order.sort_by_key(|&i| (Reverse(self.findings[i].cost_ns), i));
        order.truncate(MAX_GRAPHS);
        let windows: Vec<(usize, Windows)> = order
            .iter()
            .map(|&i| (i, Windows::of(&self.findings[i])))
            .collect();
        let (points, second_pass_error) = if windows.is_empty() {
            (HashMap::new(), None)
        } else {
            collect(&self.inputs, &self.cfg, &windows)
        };
        let html = self.render(r, &windows, &points, second_pass_error);
        self.out.write_all(html.as_bytes())?;
        self.out.flush()
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:18px 24px 60px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d9de;padding-bottom:4px}
h3{font-size:15px;margin:0 0 6px}
.muted{color:#5f6b76}.answer{font-size:16px;background:#fff;border-left:4px solid #e15759;padding:10px 14px;margin:12px 0}
.ok{border-left-color:#59a14f}
section.finding{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 14px;margin:14px 0}
.cost{font-weight:600;color:#b8323a}code{background:#eef1f4;padding:1px 4px;border-radius:3px;font-size:12.5px;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%}h3,p{overflow-wrap:anywhere}
pre{background:#eef1f4;padding:8px;overflow:auto;font-size:12px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:12.5px}
th,td{border-bottom:1px solid #e3e6ea;padding:3px 6px;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#eef1f4;position:sticky;top:0}th:hover{background:#dfe4ea}
td.l,th.l{text-align:left}
svg{display:block;max-width:100%;height:auto;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#333}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
"#;

const SCRIPT: &str = r#"
(function(){
  document.querySelectorAll('table.sortable').forEach(function(t){
    var ths=t.querySelectorAll('th');
    ths.forEach(function(th,i){
      th.addEventListener('click',function(){
        var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        var asc=th.getAttribute('data-dir')!=='asc';
        ths.forEach(function(h){h.removeAttribute('data-dir');});
        th.setAttribute('data-dir',asc?'asc':'desc');
        rows.sort(function(a,b){
          var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v');
          var nx=parseFloat(x),ny=parseFloat(y),c;
          if(!isNaN(nx)&&!isNaN(ny)){c=nx-ny;}else{c=String(x).localeCompare(String(y));}
          return asc?c:-c;
        });
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  document.body.setAttribute('data-ready','yes');
})();
"#;

impl HtmlPrinter {
    fn render(
        &mut self,
        r: &Report<'_>,
        windows: &[(usize, Windows)],
        points: &HashMap<u64, Vec<Pt>>,
        second_pass_error: Option<String>,
    ) -> String {
        let mut h = String::with_capacity(256 * 1024);
        let files: Vec<String> = r.files.iter().map(|f| esc(f)).collect();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
             <title>tcpwhy: {}</title><style>{CSS}</style></head><body><main>\n",
            files.join(", ")
        );
        let _ = writeln!(
            h,
            "<h1>Why was this TCP slow?</h1><div class=\"muted\">tcpwhy {} &middot; {}{}</div>",
            env!("CARGO_PKG_VERSION"),
            files.join(", "),
            r.filter.map_or(String::new(), |f| format!(
                " &middot; filter <code>{}</code> ({} frames not selected)",
                esc(f),
                r.filtered_out
            ))
        );
        self.render_answer(&mut h, r);
        self.render_findings(&mut h, windows, points, second_pass_error.as_deref());
        self.render_latencies(&mut h);
        self.render_table(&mut h);
        let _ = writeln!(h, "<script>{SCRIPT}</script></main></body></html>");
        h
    }

    fn render_answer(&self, h: &mut String, r: &Report<'_>) {
        let s = r.stats;
        let span = match (s.first_ts, s.last_ts) {
            (Some(a), Some(b)) => format!(" over {} from {}", fmt_ms(b - a), esc(&rfc3339(a))),
            _ => String::new(),
        };
        let causes: Vec<(&'static str, Cause)> = self
            .causes
            .ranked_part(false)
            .into_iter()
            .map(|(id, count, cost_ns)| (id, Cause { count, cost_ns }))
            .collect();
        // Only findings about the capture as a whole (a flood, a scan): nothing cost a
        // connection time, so nothing "cost the most".
        let capture_wide_only = causes.iter().all(|(id, _)| capture_wide(id));
        if causes.is_empty() && r.tracker.connections == 0 {
            let _ = writeln!(
                h,
                "<div class=\"answer\">No TCP connection to analyse.</div>"
            );
        } else if causes.is_empty() {
            let _ = writeln!(
                h,
                "<div class=\"answer ok\">No latency cause found in {}.</div>",
                count(r.tracker.connections, "connection")
            );
        } else if capture_wide_only {
            let ids: Vec<String> = causes
                .iter()
                .map(|c| format!("<b>{}</b>", esc(c.0)))
                .collect();
            let _ = writeln!(
                h,
                "<div class=\"answer\">No connection lost time to a known cause; found: {}.</div>",
                ids.join(", ")
            );
        } else {
            let total: i64 = causes.iter().map(|c| c.1.cost_ns).sum();
            let _ = writeln!(
                h,
                "<div class=\"answer\"><b>{}</b> cost the most: {} lost in {} finding{}{}.</div>",
                esc(causes[0].0),
                fmt_ms(causes[0].1.cost_ns),
                causes[0].1.count,
                if causes[0].1.count == 1 { "" } else { "s" },
                if causes.len() > 1 {
                    format!(
                        " ({} lost to all {} causes, summed over the connections: they overlap \
                         in time, so the sum can exceed the capture's span)",
                        fmt_ms(total),
                        causes.len()
                    )
                } else {
                    String::new()
                }
            );
        }
        if !causes.is_empty() {
            let _ = writeln!(h, "<h2>Causes, ranked by time lost</h2>");
            // Horizontal bar chart.
            let row_h = 26;
            let (w, left, right) = (1000, 190, 260);
            let height = 10 + row_h * causes.len() as i64;
            let max = causes[0].1.cost_ns.max(1) as f64;
            let _ = write!(
                h,
                "<svg class=\"causes\" viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\" role=\"img\" aria-label=\"causes ranked by time lost\">"
            );
            for (i, (id, c)) in causes.iter().enumerate() {
                let y = 5 + row_h * i as i64;
                let bw = ((c.cost_ns as f64 / max) * (w - left - right) as f64).max(1.0);
                let conns = self.causes.connections(id);
                let on = if capture_wide(id) {
                    "the capture as a whole".to_string()
                } else {
                    format!("{conns} connection{}", if conns == 1 { "" } else { "s" })
                };
                let _ = write!(
                    h,
                    "<a href=\"#cause-{id}\"><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text></a>\
                     <rect x=\"{left}\" y=\"{}\" width=\"{bw:.1}\" height=\"{}\" fill=\"#e15759\"/>\
                     <text x=\"{:.1}\" y=\"{}\">{} &middot; {} finding{} on {on}</text>",
                    left - 8,
                    y + 16,
                    esc(id),
                    y + 3,
                    row_h - 8,
                    left as f64 + bw + 6.0,
                    y + 16,
                    fmt_ms(c.cost_ns),
                    c.count,
                    if c.count == 1 { "" } else { "s" },
                );
            }
            let _ = writeln!(h, "</svg>");
        }
        let _ = writeln!(
            h,
            "<p class=\"muted\">{}, {} TCP, {}{span}.</p>",
            count(s.packets, "packet"),
            s.tcp_packets,
            count(r.tracker.connections, "connection")
        );
        if r.tracker.evicted > 0 {
            let _ = writeln!(
                h,
                "<p class=\"muted\">{} evicted by --max-connections.</p>",
                verb(r.tracker.evicted, "connection", "was", "were")
            );
        }
        for w in r.warnings {
            let _ = writeln!(h, "<p class=\"muted\">warning: {}</p>", esc(w));
        }
        if let Some(e) = &r.error {
            let _ = writeln!(h, "<p class=\"answer\">stopped early: {}</p>", esc(e));
        }
    }

    fn render_findings(
        &self,
        h: &mut String,
        windows: &[(usize, Windows)],
        points: &HashMap<u64, Vec<Pt>>,
        second_pass_error: Option<&str>,
    ) {
        if self.findings.is_empty() {
            return;
        }
        let _ = writeln!(h, "<h2>Findings</h2>");
        if let Some(e) = second_pass_error {
            let _ = writeln!(
                h,
                "<p class=\"answer\">graphs incomplete: reading the capture again failed: {}</p>",
                esc(e)
            );
        }
        if self.findings.len() > MAX_GRAPHS {
            let _ = writeln!(
                h,
                "<p class=\"muted\">Graphs for the {MAX_GRAPHS} costliest of {} findings.</p>",
                self.findings.len()
            );
        }
        if self.more_findings > 0 {
            let _ = writeln!(
                h,
                "<p class=\"muted\">{} more findings are counted above but not listed.</p>",
                self.more_findings
            );
        }
        let graph_of: HashMap<usize, &Windows> = windows.iter().map(|(i, w)| (*i, w)).collect();
        // Grouped by cause (in the ranking's order), then by time; the low-confidence ones
        // after all the others, apart.
        let ranked = self.causes.ranked_part(false);
        let uncertain = self.causes.ranked_part(true);
        let low = |f: &Finding| f.confidence.level == tcpwhy_detect::Level::Low;
        let groups = ranked
            .into_iter()
            .map(|(id, _, _)| (id, false))
            .chain(uncertain.into_iter().map(|(id, _, _)| (id, true)));
        let mut n = 0usize;
        let mut apart = false;
        for (id, uncertain) in groups {
            if uncertain && !apart {
                apart = true;
                let _ = writeln!(
                    h,
                    "<h2>Less certain</h2><p class=\"muted\">Findings of low confidence: what the capture leaves unknown about their connections (the reason is under each) could make their cause or cost wrong. Not ranked above.</p>"
                );
            }
            if !uncertain {
                let _ = writeln!(h, "<div id=\"cause-{}\"></div>", esc(id));
            }
            for (i, f) in self
                .findings
                .iter()
                .enumerate()
                .filter(|(_, f)| f.id == id && low(f) == uncertain)
            {
                n += 1;
                let about = if f.capture_wide() {
                    "the capture as a whole".to_string()
                } else {
                    format!(
                        "connection {} &middot; {} &rarr; {}",
                        f.connection,
                        esc(&endpoint(f.client.0, f.client.1)),
                        esc(&endpoint(f.server.0, f.server.1)),
                    )
                };
                let _ = write!(
                    h,
                    "<section class=\"finding\" id=\"f-{n}\" data-id=\"{}\"><h3>{} &middot; {about} <span class=\"cost\">{} lost</span></h3>\
                     <div class=\"muted\">{} &middot; {}</div><p>{}</p><p><b>Fix:</b> {}</p>\
                     <p>Evidence (Wireshark display filter): <code>{}</code></p>",
                    esc(f.id),
                    esc(f.id),
                    fmt_ms(f.cost_ns.max(0)),
                    esc(&rfc3339(f.start_ns)),
                    fmt_ms(f.end_ns - f.start_ns),
                    esc(&f.explanation),
                    esc(&f.fix),
                    esc(&f.wireshark_filter()),
                );
                if f.confidence.level != tcpwhy_detect::Level::High {
                    let _ = write!(
                        h,
                        "<p class=\"muted\">Confidence {}: {}.</p>",
                        f.confidence.level.name(),
                        esc(&f.confidence.reasons.join("; "))
                    );
                }
                for w in graph_of.get(&i).map(|w| &w.ranges[..]).unwrap_or(&[]) {
                    let pts: Vec<Pt> = points
                        .get(&f.connection)
                        .map(|v| {
                            v.iter()
                                .filter(|p| p.t >= w.from_ns && p.t <= w.to_ns)
                                .copied()
                                .collect()
                        })
                        .unwrap_or_default();
                    if f.id.starts_with("syn-") || f.id == "client-delay" {
                        ladder(h, f, &pts);
                    } else {
                        time_sequence(h, f, w, &pts);
                    }
                }
                if f.details != tcpwhy_detect::Details::None {
                    let pretty =
                        serde_json::to_string_pretty(&f.details).unwrap_or_else(|_| "{}".into());
                    let _ = write!(
                        h,
                        "<details><summary>details</summary><pre>{}</pre></details>",
                        esc(&pretty)
                    );
                }
                let _ = writeln!(h, "</section>");
            }
        }
    }

    fn render_latencies(&self, h: &mut String) {
        let stalls: u64 = self.stalls.iter().map(|s| s.0).sum();
        if self.exchanges == 0 && stalls == 0 {
            return;
        }
        let _ = writeln!(h, "<h2>Exchange latencies</h2>");
        if self.exchanges > 0 {
            let _ = writeln!(
                h,
                "<p class=\"muted\">{} request/response exchanges, by latency (log scale), coloured by the part that dominated each.</p>",
                self.exchanges
            );
            let (w, hh, l, b, t) = (1000.0, 260.0, 50.0, 40.0, 10.0);
            let max = self
                .hist
                .iter()
                .map(|r| r.iter().sum::<u64>())
                .max()
                .unwrap_or(1)
                .max(1) as f64;
            // 30 on the right: the last decade's label ("100 s") is centred on the last edge.
            let bw = (w - l - 30.0) / BINS as f64;
            let _ = write!(
                h,
                "<svg class=\"hist\" viewBox=\"0 0 {w} {hh}\" width=\"{w}\" height=\"{hh}\" role=\"img\" aria-label=\"exchange latency histogram\">"
            );
            for (k, row) in self.hist.iter().enumerate() {
                let mut y = hh - b;
                for (p, &count) in row.iter().enumerate() {
                    if count == 0 {
                        continue;
                    }
                    let bh = count as f64 / max * (hh - b - t);
                    y -= bh;
                    let _ = write!(
                        h,
                        "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} exchanges, {}</title></rect>",
                        l + k as f64 * bw + 1.0,
                        bw - 2.0,
                        PART_COLORS[p],
                        count,
                        PARTS[p]
                    );
                }
            }
            // Decade labels.
            for d in 0..=7 {
                let x = l + (d * 4) as f64 * bw;
                let label = [
                    "10 us", "100 us", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s",
                ][d];
                let _ = write!(
                    h,
                    "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                    hh - b,
                    hh - b + 5.0,
                    hh - b + 18.0
                );
            }
            let _ = write!(
                h,
                "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text></svg>",
                hh - b,
                w - 30.0,
                hh - b,
                l - 4.0,
                t + 10.0,
                max as u64
            );
            let _ = write!(h, "<div class=\"legend\">");
            // Only the parts some bar shows.
            for (p, name) in PARTS.iter().enumerate() {
                if self.hist.iter().all(|row| row[p] == 0) {
                    continue;
                }
                let _ = write!(
                    h,
                    "<span><i class=\"sw\" style=\"background:{}\"></i>{name}</span>",
                    PART_COLORS[p]
                );
            }
            let _ = writeln!(h, "</div>");
        }
        if stalls > 0 {
            let parts: Vec<String> = StallClass::ALL
                .iter()
                .zip(self.stalls)
                .filter(|(_, s)| s.0 > 0)
                .map(|(c, s)| format!("{} {} ({})", c.name(), s.0, fmt_ms(s.1)))
                .collect();
            let _ = writeln!(
                h,
                "<p>{stalls} stalls in transfers (no progress for over max(2 x RTT, 30 ms)): {}</p>",
                esc(&parts.join(", "))
            );
        }
    }

    fn render_table(&mut self, h: &mut String) {
        let rows = self.rows.take_sorted();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            h,
            "<h2>Connections</h2><p class=\"muted\">The {} slowest, by duration; click a column to sort.</p>",
            rows.len()
        );
        let _ = writeln!(
            h,
            "<div class=\"scroll\"><table class=\"sortable\" id=\"connections\"><thead><tr><th>id</th><th class=\"l\">client</th><th class=\"l\">server</th>\
             <th>duration</th><th>packets</th><th>client bytes</th><th>server bytes</th><th>retrans</th><th>hs rtt</th>\
             <th>findings</th><th>lost</th><th class=\"l\">close</th></tr></thead><tbody>"
        );
        for Reverse(r) in rows {
            let rtt = r.hs_rtt_ns;
            let _ = writeln!(
                h,
                "<tr><td data-v=\"{}\">{}</td><td class=\"l\" data-v=\"{}\">{}</td><td class=\"l\" data-v=\"{}\">{}</td>\
                 <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>\
                 <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>\
                 <td class=\"l\" data-v=\"{}\">{}</td></tr>",
                r.id,
                r.id,
                esc(&r.client),
                esc(&r.client),
                esc(&r.server),
                esc(&r.server),
                r.duration_ns,
                fmt_ms(r.duration_ns),
                r.packets,
                r.packets,
                r.c2s,
                fmt_bytes(r.c2s),
                r.s2c,
                fmt_bytes(r.s2c),
                r.retrans,
                r.retrans,
                rtt.unwrap_or(-1),
                rtt.map(fmt_ms).unwrap_or_else(|| "-".into()),
                r.extra.findings,
                r.extra.findings,
                r.extra.lost_ns,
                if r.extra.lost_ns > 0 { fmt_ms(r.extra.lost_ns) } else { "-".into() },
                esc(&r.close),
                esc(&r.close),
            );
        }
        let _ = writeln!(h, "</tbody></table></div>");
    }
}
