//! The graphs as inline SVG: a finding's time-sequence graph and a handshake's packet ladder.

use super::*;

pub(super) fn flag_names(f: u8) -> String {
    use tcpwhy_wire::TcpFlags as F;
    let mut v = Vec::new();
    for (bit, name) in [
        (F::SYN, "SYN"),
        (F::FIN, "FIN"),
        (F::RST, "RST"),
        (F::PSH, "PSH"),
        (F::ACK, "ACK"),
        (F::URG, "URG"),
        (F::ECE, "ECE"),
        (F::CWR, "CWR"),
    ] {
        if f & bit != 0 {
            v.push(name);
        }
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

/// Handshake and waiting findings: the packets as a ladder between client and server, evidence
/// in colour, a long wait inside the finding as a labelled row.
pub(super) fn ladder(h: &mut String, f: &Finding, pts: &[Pt]) {
    let evidence: BTreeSet<u64> = f.frames.iter().copied().collect();
    // The evidence frames and the packets around them, at most MAX_LADDER.
    let first_ev = pts
        .iter()
        .position(|p| evidence.contains(&p.frame))
        .unwrap_or(0);
    let start = first_ev.saturating_sub(3);
    let shown: Vec<&Pt> = pts.iter().skip(start).take(MAX_LADDER).collect();
    let Some(t0) = shown.first().map(|p| p.t) else {
        let _ = write!(h, "<p class=\"muted\">(no packets in the graph window)</p>");
        return;
    };
    // A long wait inside the finding's span gets a row of its own between the packets around
    // it, labelled with its length: a ladder's rows are evenly spaced, and the wait is what
    // a client-delay or server-delay finding is about.
    enum Row<'a> {
        Packet(&'a Pt),
        Wait(i64),
    }
    let span = (f.end_ns - f.start_ns).max(0);
    let mut rows: Vec<Row> = Vec::with_capacity(shown.len() + 2);
    for (i, p) in shown.iter().enumerate() {
        if let Some(prev) = i.checked_sub(1).map(|j| shown[j]) {
            let gap = p.t - prev.t;
            let inside = prev.t.max(f.start_ns) < p.t.min(f.end_ns);
            if inside && gap >= (span / 4).max(1_000_000) {
                rows.push(Row::Wait(gap));
            }
        }
        rows.push(Row::Packet(p));
    }
    let (w, row, top) = (1000.0, 30.0, 40.0);
    let height = top + row * rows.len() as f64 + 10.0;
    let (xc, xs) = (260.0, 760.0);
    let _ = write!(
        h,
        "<svg class=\"graph ladder\" viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\" role=\"img\" aria-label=\"packet ladder\">\
         <text x=\"{xc}\" y=\"16\" text-anchor=\"middle\" font-weight=\"bold\">client {}</text>\
         <text x=\"{xs}\" y=\"16\" text-anchor=\"middle\" font-weight=\"bold\">server {}</text>\
         <line x1=\"{xc}\" y1=\"24\" x2=\"{xc}\" y2=\"{height}\" stroke=\"#888\"/>\
         <line x1=\"{xs}\" y1=\"24\" x2=\"{xs}\" y2=\"{height}\" stroke=\"#888\"/>\
         <text x=\"10\" y=\"34\" class=\"muted\">time (capture)</text><text x=\"990\" y=\"34\" text-anchor=\"end\">frame</text>",
        esc(&endpoint(f.client.0, f.client.1)),
        esc(&endpoint(f.server.0, f.server.1)),
    );
    for (i, item) in rows.iter().enumerate() {
        let y = top + row * (i as f64 + 0.5);
        let p = match item {
            Row::Packet(p) => *p,
            Row::Wait(gap) => {
                let who = match f.id {
                    "client-delay" => "the client waited",
                    "server-delay" => "the server took",
                    _ => "no packet for",
                };
                let _ = write!(
                    h,
                    "<rect class=\"wait\" x=\"{xc}\" y=\"{:.1}\" width=\"{}\" height=\"{}\" fill=\"#e15759\" fill-opacity=\"0.12\"/>\
                     <text x=\"{}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"#b8323a\">&#8942; {who} {} &#8942;</text>",
                    y - row / 2.0 + 3.0,
                    xs - xc,
                    row - 6.0,
                    (xc + xs) / 2.0,
                    y + 4.0,
                    fmt_ms(*gap)
                );
                continue;
            }
        };
        let (x1, x2) = if p.client { (xc, xs) } else { (xs, xc) };
        let ev = evidence.contains(&p.frame);
        let color = if ev { "#d62728" } else { "#888" };
        let width = if ev { 2.2 } else { 1.0 };
        let dir = if x2 > x1 { -1.0 } else { 1.0 };
        let mut label = flag_names(p.flags);
        if p.flags & tcpwhy_wire::TcpFlags::SYN != 0 || p.len > 0 {
            let _ = write!(label, " seq={}", p.seq);
        }
        if p.flags & tcpwhy_wire::TcpFlags::ACK != 0 {
            let _ = write!(label, " ack={}", p.ack);
        }
        if p.len > 0 {
            let _ = write!(label, " len={}", p.len);
        }
        let _ = write!(
            h,
            "<line x1=\"{x1}\" y1=\"{y:.1}\" x2=\"{x2}\" y2=\"{y:.1}\" stroke=\"{color}\" stroke-width=\"{width}\"/>\
             <polygon points=\"{x2},{y:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\"{}>{}</text>\
             <text x=\"10\" y=\"{:.1}\">+{}</text><text x=\"990\" y=\"{:.1}\" text-anchor=\"end\"{}>#{}</text>",
            x2 + dir * 9.0,
            y - 4.0,
            x2 + dir * 9.0,
            y + 4.0,
            (xc + xs) / 2.0,
            y - 5.0,
            if ev { " font-weight=\"bold\"" } else { "" },
            esc(&label),
            y + 4.0,
            fmt_ms(p.t - t0),
            y + 4.0,
            if ev { " font-weight=\"bold\"" } else { "" },
            p.frame
        );
    }
    let _ = writeln!(h, "</svg>");
}

/// A nice step for `n` ticks over `range`.
pub(super) fn nice_step(range: f64, n: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / n;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Data findings: sequence vs time for the data sender, with the peer's ACK and window lines.
pub(super) fn time_sequence(h: &mut String, f: &Finding, w: &Window, pts: &[Pt]) {
    // Whose data: the finding says so, else the side that sent the most in the window.
    let side = |p: &Pt| p.client;
    let bytes = |client: bool| -> u64 {
        pts.iter()
            .filter(|p| side(p) == client)
            .map(|p| u64::from(p.len))
            .sum()
    };
    let client_sends = match (f.details.sender(), f.details.receiver()) {
        (Some("client"), _) | (_, Some("server")) => true,
        (Some("server"), _) | (_, Some("client")) => false,
        _ => bytes(true) > bytes(false),
    };
    let data: Vec<&Pt> = pts
        .iter()
        .filter(|p| side(p) == client_sends && p.len > 0)
        .collect();
    let acks: Vec<&Pt> = pts
        .iter()
        .filter(|p| side(p) != client_sends && p.flags & tcpwhy_wire::TcpFlags::ACK != 0)
        .collect();
    let Some(base) = data
        .first()
        .map(|p| p.seq)
        .or_else(|| acks.first().map(|p| p.ack))
    else {
        let _ = write!(h, "<p class=\"muted\">(no packets in the graph window)</p>");
        return;
    };
    let rel = |s: u32| -> f64 { s.wrapping_sub(base) as i32 as f64 };
    let (t0, t1) = (w.from_ns, w.to_ns.max(w.from_ns + 1));
    let mut ymin = 0f64;
    let mut ymax = 1f64;
    for p in &data {
        ymin = ymin.min(rel(p.seq));
        ymax = ymax.max(rel(p.seq) + f64::from(p.len));
    }
    for p in &acks {
        ymin = ymin.min(rel(p.ack));
        ymax = ymax.max(rel(p.ack));
    }
    let ymax = ymax + (ymax - ymin) * 0.12;
    let (width, height, l, r, t, b) = (1000.0, 380.0, 70.0, 20.0, 24.0, 40.0);
    let x = |ts: i64| l + (ts - t0) as f64 / (t1 - t0) as f64 * (width - l - r);
    let y = |v: f64| height - b - (v - ymin) / (ymax - ymin).max(1.0) * (height - b - t);
    let clip = format!("clip-{}-{}-{}", f.connection, f.start_ns, w.from_ns);
    let _ = write!(
        h,
        "<svg class=\"graph tsg\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"time-sequence graph\">\
         <defs><clipPath id=\"{clip}\"><rect x=\"{l}\" y=\"{t}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        width - l - r,
        height - b - t
    );
    // The finding's span (or this panel's burst), shaded.
    let (fs, fe) = (w.shade.0.max(t0), w.shade.1.min(t1));
    let shaded = fe > fs;
    if shaded {
        let _ = write!(
            h,
            "<rect class=\"s-finding\" x=\"{:.1}\" y=\"{t}\" width=\"{:.1}\" height=\"{}\" fill=\"#e15759\" fill-opacity=\"0.08\"/>",
            x(fs),
            (x(fe) - x(fs)).max(1.0),
            height - b - t
        );
    }
    // An idle gap before the finding (slow start after idle): say how long, at its end.
    if let Some(idle) = w.idle_ms {
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{}\" fill=\"#b8323a\">&#8592; {} idle before</text>",
            x(t0) + 4.0,
            t + 14.0,
            fmt_ms((idle * 1e6) as i64)
        );
    }
    if let Some(label) = &w.label {
        let _ = write!(
            h,
            "<text class=\"panel-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-weight=\"bold\">{}</text>",
            width - r - 6.0,
            t + 14.0,
            esc(label)
        );
    }
    // Axes and ticks.
    let xs = nice_step((t1 - t0) as f64 / 1e6, 8.0);
    let mut v = 0.0;
    while v <= (t1 - t0) as f64 / 1e6 + 1e-9 {
        let xx = x(t0 + (v * 1e6) as i64);
        let _ = write!(
            h,
            "<line x1=\"{xx:.1}\" y1=\"{t}\" x2=\"{xx:.1}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{xx:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            height - b,
            height - b + 15.0,
            trim_num(v)
        );
        v += xs;
    }
    let ys = nice_step(ymax - ymin, 6.0);
    let mut v = (ymin / ys).ceil() * ys;
    while v <= ymax {
        let yy = y(v);
        let _ = write!(
            h,
            "<line x1=\"{l}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            width - r,
            l - 4.0,
            yy + 4.0,
            fmt_bytes(v.max(0.0) as u64)
        );
        v += ys;
    }
    let _ = write!(
        h,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">ms from {}</text>\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{} sequence (relative)</text>\
         <g clip-path=\"url(#{clip})\">",
        (l + width - r) / 2.0,
        height - 6.0,
        esc(&rfc3339(t0)),
        (t + height - b) / 2.0,
        (t + height - b) / 2.0,
        if client_sends { "client" } else { "server" }
    );
    // Receive window line (ack + window) and ACK line, as steps. The window line is drawn
    // only where it falls inside the plot (a window far above the data is off the scale).
    let mut win = String::new();
    let mut ackl = String::new();
    let mut last: Option<(f64, f64, f64)> = None;
    let mut win_shown = false;
    for p in &acks {
        let (xx, ya, yw) = (x(p.t), y(rel(p.ack)), y(rel(p.ack) + p.win as f64));
        win_shown |= rel(p.ack) + p.win as f64 <= ymax;
        if let Some((_, pa, pw)) = last {
            let _ = write!(ackl, " {xx:.1},{pa:.1}");
            let _ = write!(win, " {xx:.1},{pw:.1}");
        }
        let _ = write!(ackl, " {xx:.1},{ya:.1}");
        let _ = write!(win, " {xx:.1},{yw:.1}");
        last = Some((xx, ya, yw));
    }
    if let Some((_, pa, pw)) = last {
        let _ = write!(ackl, " {:.1},{pa:.1}", width - r);
        let _ = write!(win, " {:.1},{pw:.1}", width - r);
    }
    if win_shown {
        let _ = write!(
            h,
            "<polyline class=\"s-win\" points=\"{win}\" fill=\"none\" stroke=\"#b5a300\" stroke-dasharray=\"4 3\"/>"
        );
    }
    if !acks.is_empty() {
        let _ = write!(
            h,
            "<polyline class=\"s-ack\" points=\"{ackl}\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1.4\"/>"
        );
    }
    // Evidence frames, under the segments: a circle must not hide a retransmission.
    let mut evidence: BTreeSet<u64> = f.frames.iter().copied().collect();
    evidence.extend(w.mark);
    let mut circles = 0;
    for p in pts.iter().filter(|p| evidence.contains(&p.frame)) {
        let yy = if side(p) == client_sends {
            y(rel(p.seq) + f64::from(p.len))
        } else {
            y(rel(p.ack))
        };
        circles += 1;
        let _ = write!(
            h,
            "<circle class=\"s-ev\" data-frame=\"{}\" cx=\"{:.1}\" cy=\"{yy:.1}\" r=\"5\" fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"2\"><title>evidence frame {}</title></circle>",
            p.frame,
            x(p.t),
            p.frame
        );
    }
    // Data segments: vertical bars from seq to seq+len; retransmissions last, on top, in red
    // with a marker that stays visible when the bar is a pixel tall.
    for p in data.iter().filter(|p| !p.retx) {
        let xx = x(p.t);
        let _ = write!(
            h,
            "<line class=\"s-data\" x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#1f77b4\" stroke-width=\"2\"><title>frame {}</title></line>",
            y(rel(p.seq)),
            y(rel(p.seq) + f64::from(p.len)).min(y(rel(p.seq)) - 1.5),
            p.frame
        );
    }
    let mut resent = 0;
    for p in data.iter().filter(|p| p.retx) {
        let xx = x(p.t);
        let (y0, y1) = (
            y(rel(p.seq)),
            y(rel(p.seq) + f64::from(p.len)).min(y(rel(p.seq)) - 1.5),
        );
        resent += 1;
        let _ = write!(
            h,
            "<g class=\"s-retx\"><title>retransmission, frame {}</title>\
             <line x1=\"{xx:.1}\" y1=\"{y0:.1}\" x2=\"{xx:.1}\" y2=\"{y1:.1}\" stroke=\"#d62728\" stroke-width=\"2.5\"/>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"#d62728\" transform=\"rotate(45 {xx:.1} {y1:.1})\"/></g>",
            p.frame,
            xx - 3.0,
            y1 - 3.0
        );
    }
    // Flights: data sent back to back, separated by gaps of a third of a round trip or more.
    let rtt_ns = f.details.rtt_ms().map_or(0, |ms| (ms * 1e6) as i64);
    let gap = (rtt_ns / 3).max(1_000_000);
    let mut flights: Vec<(i64, i64, f64, u32)> = Vec::new();
    for p in data.iter().filter(|p| !p.retx) {
        match flights.last_mut() {
            Some(fl) if p.t - fl.1 < gap => {
                fl.1 = p.t;
                fl.2 = fl.2.max(rel(p.seq) + f64::from(p.len));
                fl.3 += 1;
            }
            _ => flights.push((p.t, p.t, rel(p.seq) + f64::from(p.len), 1)),
        }
    }
    let flights_labelled = flights.len() > 1 && flights.len() <= 40;
    if flights_labelled {
        for fl in &flights {
            let _ = write!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1f77b4\">{}</text>",
                (x(fl.0) + x(fl.1)) / 2.0,
                y(fl.2) - 6.0,
                fl.3
            );
        }
    }
    let _ = writeln!(
        h,
        "</g><rect x=\"{l}\" y=\"{t}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/></svg>",
        width - l - r,
        height - b - t
    );
    // The legend names what this graph draws, nothing else.
    let sent_data = data.iter().any(|p| !p.retx);
    let entries = [
        (
            sent_data,
            "s-data",
            "background:#1f77b4",
            if flights_labelled {
                "data (numbers: segments per flight)"
            } else {
                "data"
            },
        ),
        (resent > 0, "s-retx", "background:#d62728", "retransmission"),
        (!acks.is_empty(), "s-ack", "background:#2ca02c", "ACK"),
        (win_shown, "s-win", "background:#b5a300", "receive window"),
        (
            circles > 0,
            "s-ev",
            "border:2px solid #ff7f0e;border-radius:50%",
            "evidence frame",
        ),
        (
            shaded,
            "s-finding",
            "background:#f8d8d9",
            if w.label.is_some() {
                "the burst"
            } else {
                "the finding"
            },
        ),
    ];
    let _ = write!(h, "<div class=\"legend\">");
    for (shown, series, style, name) in entries {
        if shown {
            let _ = write!(
                h,
                "<span data-series=\"{series}\"><i class=\"sw\" style=\"{style}\"></i>{name}</span>"
            );
        }
    }
    let _ = writeln!(h, "</div>");
}

pub(super) fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}
