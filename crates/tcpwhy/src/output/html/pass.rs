//! The report's second pass: which part of which connection each finding's graph shows, and
//! the packets of those parts, read again from the capture.

use super::*;

/// The part of a connection a finding's graph shows.
/// Graphs of one finding: usually one, one per restarted burst for slow start after idle.
#[derive(Clone, Debug)]
pub(super) struct Windows {
    pub(super) connection: u64,
    pub(super) ranges: Vec<Window>,
}

/// Panels per finding at most.
pub(super) const MAX_PANELS: usize = 4;

impl Windows {
    pub(super) fn of(f: &Finding) -> Windows {
        let rtt = f.details.rtt_ms().map_or(0, |ms| (ms * 1e6) as i64);
        let mut ranges = Vec::new();
        if f.id == "slow-start-restart" && rtt > 0 {
            // Each restarted burst, with the end of the idle gap before it: the burst shaded,
            // labelled with what it took against what it would have taken, its first segment
            // marked.
            let restarts = f.details.restarts();
            let n = restarts.len();
            for (i, r) in restarts.iter().take(MAX_PANELS).enumerate() {
                let label = format!(
                    "burst {} of {n}: {} in {} (at the window before the idle gap: {})",
                    i + 1,
                    fmt_bytes(r.burst_bytes),
                    fmt_ms((r.took_ms * 1e6) as i64),
                    fmt_ms((r.would_take_ms * 1e6) as i64)
                );
                ranges.push(Window {
                    from_ns: r.start_ns - 2 * rtt,
                    to_ns: r.end_ns + 2 * rtt,
                    idle_ms: Some(r.idle_ms),
                    shade: (r.start_ns, r.end_ns),
                    label: Some(label),
                    mark: Some(r.frame),
                });
            }
        }
        if ranges.is_empty() {
            ranges.push(Window::of(f, rtt));
        }
        Windows {
            connection: f.connection,
            ranges,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) from_ns: i64,
    pub(super) to_ns: i64,
    /// The idle gap that ended at the start of this window's burst.
    pub(super) idle_ms: Option<f64>,
    /// The span shaded as the finding's: the whole finding, or one restarted burst.
    pub(super) shade: (i64, i64),
    /// What the panel shows, above the plot (one burst of several).
    pub(super) label: Option<String>,
    /// A frame marked as evidence besides the finding's own (a later burst's first segment).
    pub(super) mark: Option<u64>,
}

impl Window {
    pub(super) fn of(f: &Finding, rtt: i64) -> Window {
        // Saturating: times go up to 2116 (`MAX_TS_NS`), round trips as far, and three round
        // trips past it.
        let span = f.end_ns.saturating_sub(f.start_ns).max(0);
        let margin = (span / 5).max(rtt.saturating_mul(3)).max(2_000_000);
        let from = f.start_ns.saturating_sub(margin);
        // Never more than a minute: the packets around the start of the finding.
        let to = f
            .end_ns
            .saturating_add(margin)
            .min(from.saturating_add(60_000_000_000));
        Window {
            from_ns: from,
            to_ns: to,
            idle_ms: None,
            shade: (f.start_ns, f.end_ns),
            label: None,
            mark: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Pt {
    pub(super) t: i64,
    pub(super) frame: u64,
    pub(super) client: bool,
    pub(super) seq: u32,
    pub(super) ack: u32,
    pub(super) len: u32,
    pub(super) win: u64,
    pub(super) flags: u8,
    pub(super) retx: bool,
}

pub(super) struct Recorder<'a> {
    pub(super) want: HashMap<u64, Vec<(i64, i64)>>,
    pub(super) points: &'a mut HashMap<u64, Vec<Pt>>,
}

impl Sink for Recorder<'_> {
    fn connection(&mut self, _c: &Connection) {}
    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>) {
        let Some(ws) = self.want.get(&c.id()) else {
            return;
        };
        let t = ev.at.ts_ns;
        if !ws.iter().any(|(a, b)| t >= *a && t <= *b) {
            return;
        }
        let v = self.points.entry(c.id()).or_default();
        if v.len() >= MAX_POINTS {
            return;
        }
        let seg = ev.seg;
        v.push(Pt {
            t,
            frame: ev.at.frame(),
            client: ev.from == tcpwhy_track::Side::Client,
            seq: seg.seq.0,
            ack: seg.ack.0,
            len: seg.payload_len,
            win: c
                .endpoint(ev.from)
                .window_scaled()
                .map_or(u64::from(seg.window), u64::from),
            flags: seg.flags.0,
            retx: ev.retransmission,
        });
    }
}

/// Read the capture again and keep the packets of the graphed connections in their windows.
pub(super) fn collect(
    inputs: &Inputs,
    cfg: &Config,
    windows: &[(usize, Windows)],
) -> (HashMap<u64, Vec<Pt>>, Option<String>) {
    let mut points = HashMap::new();
    let mut want: HashMap<u64, Vec<(i64, i64)>> = HashMap::new();
    for (_, w) in windows {
        let ranges = want.entry(w.connection).or_default();
        ranges.extend(w.ranges.iter().map(|r| (r.from_ns, r.to_ns)));
    }
    let mut capture = match inputs.again(true) {
        Ok(c) => c,
        Err(e) => return (points, Some(e.to_string())),
    };
    let mut rec = Recorder {
        want,
        points: &mut points,
    };
    let error = match tcpwhy_engine::track(&mut capture, cfg.clone(), &mut rec, &mut |_, _| Ok(()))
    {
        Ok(run) => run.error.map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    (points, error)
}
