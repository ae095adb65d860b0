//! The report's sections: causes ranked by time lost, the less certain ones, exchange
//! latencies and where their time went, the slowest connections, stalls, a connection's details.

use super::*;

impl TextPrinter {
    /// The causes of the confident part (or of the low-confidence one) ranked by time lost,
    /// each with its costliest finding.
    fn ranked(&mut self, low: bool) -> Vec<(&'static str, Cause)> {
        self.causes
            .ranked_part(low)
            .into_iter()
            .map(|(id, count, cost_ns)| {
                let example = self.examples.remove(&(id, low));
                (
                    id,
                    Cause {
                        count,
                        cost_ns,
                        example,
                    },
                )
            })
            .collect()
    }

    /// The causes found (`connections`: how many the capture held).
    pub(super) fn causes_report(&mut self, connections: u64) -> io::Result<()> {
        let st = self.style;
        let causes = self.ranked(false);
        let uncertain = self.ranked(true);
        if causes.is_empty() && connections == 0 {
            // Nothing was analysed: "no cause" would read as a healthy capture.
            writeln!(self.out, "{}\n", st.bold("No TCP connection to analyse."))?;
            return self.uncertain_report(&uncertain);
        }
        if causes.is_empty() {
            writeln!(self.out, "{}\n", st.green("No latency cause found."))?;
            return self.uncertain_report(&uncertain);
        }
        writeln!(self.out, "{}", st.bold("Causes, ranked by time lost:"))?;
        for (i, (id, c)) in causes.iter().enumerate() {
            let cost = fmt_ms(c.cost_ns);
            let plain_lead = format!("{:>2}. {id}: {cost} ", i + 1);
            let conns = self.causes.connections(id);
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
    pub(super) fn uncertain_report(
        &mut self,
        uncertain: &[(&'static str, Cause)],
    ) -> io::Result<()> {
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
    pub(super) fn exchanges_report(&mut self) -> io::Result<()> {
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
pub(super) fn slowest_table(rows: &[Reverse<Row<()>>], width: Option<usize>) -> Vec<String> {
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
    pub(super) fn stalls_report(&mut self) -> io::Result<()> {
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
    pub(super) fn keep_details(&mut self, c: &Connection, p: Pending) {
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
