//! The vantage matrix: each scenario captured at the client, in the middle and at the server,
//! with the hosts' offloads off and on, over IPv4 and IPv6. A cell is one vantage of one run
//! (every vantage of a run captures the same traffic at once), and holds what the client
//! measured with and without the pathology and what `tcpwhy analyze` made of the cell's
//! captures.

use crate::run::Outcome;
use crate::stats::{ms, Latencies};
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Duration;

/// Where a capture is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Vantage {
    /// The client's veth `c0`, in the client namespace.
    Client,
    /// The router's `rs0`, on the link between the router and the mid: half of the emulated
    /// round trip lies on each side (the client's packets are delayed before it, the
    /// server's before it too).
    Middle,
    /// The server's veth `s0`, in the server namespace.
    Server,
}

impl Vantage {
    pub const ALL: [Vantage; 3] = [Vantage::Client, Vantage::Middle, Vantage::Server];

    pub fn name(self) -> &'static str {
        match self {
            Vantage::Client => "client",
            Vantage::Middle => "middle",
            Vantage::Server => "server",
        }
    }

    pub fn parse(s: &str) -> Option<Vantage> {
        Vantage::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// How far the analyzer's cost may be from the measured difference.
pub const TOLERANCE: f64 = 0.2;

/// What the client measured in one run, broken against fixed (every vantage of the run shares
/// it).
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub broken_p50_ms: f64,
    pub fixed_p50_ms: f64,
    pub broken_samples: usize,
    /// Broken samples slower than the fixed median by more than the noise (1 ms, or 20% of
    /// the fixed median when that is more): the occurrences of the pathology.
    pub occurrences: usize,
    /// What those occurrences took beyond the fixed median, summed: the time the pathology
    /// added in this run, which the analyzer's total cost is held against.
    pub added_ms: f64,
}

/// Broken against fixed; `None` without samples in both.
pub fn measure(broken: &Latencies, fixed: &Latencies) -> Option<Measured> {
    let base = fixed.p50()?;
    let b50 = broken.p50()?;
    let noise = Duration::from_millis(1).max(base.mul_f64(0.2));
    let mut occurrences = 0;
    let mut added = Duration::ZERO;
    for &d in broken.values() {
        let over = d.saturating_sub(base);
        if over > noise {
            occurrences += 1;
            added += over;
        }
    }
    Some(Measured {
        broken_p50_ms: ms(b50),
        fixed_p50_ms: ms(base),
        broken_samples: broken.len(),
        occurrences,
        added_ms: ms(added),
    })
}

/// One vantage of one run of one scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub scenario: String,
    pub vantage: Vantage,
    pub offloads: bool,
    pub ipv6: bool,
    /// The finding the broken capture must name.
    pub expect: String,
    pub measured: Option<Measured>,
    /// The expected finding in the broken capture: (findings, total cost in ms); (0, 0.0)
    /// when it was not named. `None` without a broken capture at this vantage.
    pub named: Option<(usize, f64)>,
    /// The expected finding is absent from every other phase's capture at this vantage.
    pub silent: Option<bool>,
    /// The run failed (nothing else is known).
    pub error: Option<String>,
}

impl Cell {
    /// The analyzer's total cost against the measured added time: (cost - added) / added.
    pub fn deviation(&self) -> Option<f64> {
        let m = self.measured.as_ref()?;
        let (n, cost) = self.named?;
        if n == 0 || m.added_ms <= 0.0 {
            return None;
        }
        Some((cost - m.added_ms) / m.added_ms)
    }

    /// Named, and its cost within [`TOLERANCE`] of the measured added time.
    pub fn within(&self) -> Option<bool> {
        let m = self.measured.as_ref()?;
        let (n, _) = self.named?;
        if m.added_ms <= 0.0 {
            return None;
        }
        Some(n > 0 && self.deviation().is_some_and(|d| d.abs() <= TOLERANCE))
    }

    pub fn to_json(&self) -> Value {
        let m = self.measured.as_ref();
        json!({
            "scenario": self.scenario,
            "vantage": self.vantage.name(),
            "offloads": if self.offloads { "on" } else { "off" },
            "ip": if self.ipv6 { 6 } else { 4 },
            "expected_finding": self.expect,
            "broken_p50_ms": m.map(|m| m.broken_p50_ms),
            "fixed_p50_ms": m.map(|m| m.fixed_p50_ms),
            "broken_samples": m.map(|m| m.broken_samples),
            "occurrences": m.map(|m| m.occurrences),
            "added_ms": m.map(|m| m.added_ms),
            "named": self.named.map(|(n, _)| n > 0),
            "named_count": self.named.map(|(n, _)| n),
            "cost_ms": self.named.map(|(_, c)| c),
            "silent_in_fixed": self.silent,
            "deviation": self.deviation().map(|d| (d * 1000.0).round() / 1000.0),
            "within_20pct": self.within(),
            "error": self.error,
        })
    }
}

/// The cells of one run: one per vantage the broken phase was captured at. The first phase is
/// the broken one, the second the fixed (or control) one it is measured against; the expected
/// finding must be absent from the second and every later phase.
pub fn cells(scenario: &str, expect: &str, offloads: bool, ipv6: bool, o: &Outcome) -> Vec<Cell> {
    let Some(broken) = o.phases.first() else {
        return Vec::new();
    };
    let measured = o
        .phases
        .get(1)
        .and_then(|fixed| measure(&broken.latencies, &fixed.latencies));
    broken
        .captures
        .iter()
        .map(|c| {
            let (n, cost) = c
                .named
                .iter()
                .find(|(id, _, _)| id == expect)
                .map_or((0, 0.0), |(_, n, cost)| (*n, *cost));
            let others: Vec<bool> = o.phases[1..]
                .iter()
                .filter_map(|p| p.capture_at(c.vantage))
                .map(|pc| pc.named.iter().all(|(id, _, _)| id != expect))
                .collect();
            Cell {
                scenario: scenario.to_string(),
                vantage: c.vantage,
                offloads,
                ipv6,
                expect: expect.to_string(),
                measured: measured.clone(),
                named: Some((n, cost)),
                silent: (!others.is_empty()).then(|| others.iter().all(|&s| s)),
                error: None,
            }
        })
        .collect()
}

/// The cells of a run that failed.
pub fn failed_cells(
    scenario: &str,
    expect: &str,
    vantages: &[Vantage],
    offloads: bool,
    ipv6: bool,
    error: &str,
) -> Vec<Cell> {
    vantages
        .iter()
        .map(|&vantage| Cell {
            scenario: scenario.to_string(),
            vantage,
            offloads,
            ipv6,
            expect: expect.to_string(),
            measured: None,
            named: None,
            silent: None,
            error: Some(error.to_string()),
        })
        .collect()
}

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

fn ms_text(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The matrix as a Markdown table (readable in a terminal, and the README's form).
pub fn table(cells: &[Cell]) -> String {
    let mut t = String::new();
    t.push_str(
        "| scenario | vantage | offloads | IP | broken p50 ms | fixed p50 ms | added ms (n) | named | fixed silent | cost ms | cost vs added | within 20% |\n",
    );
    t.push_str("|---|---|---|---|---:|---:|---:|---|---|---:|---:|---|\n");
    for c in cells {
        let ip = if c.ipv6 { "6" } else { "4" };
        let off = if c.offloads { "on" } else { "off" };
        if let Some(e) = &c.error {
            let _ = writeln!(
                t,
                "| {} | {} | {off} | {ip} | FAILED: {} | | | | | | | |",
                c.scenario,
                c.vantage.name(),
                e.replace('|', "/")
            );
            continue;
        }
        let (b, f, added) = match &c.measured {
            Some(m) => (
                ms_text(m.broken_p50_ms),
                ms_text(m.fixed_p50_ms),
                format!("{} ({})", ms_text(m.added_ms), m.occurrences),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (named, cost) = match c.named {
            Some((n, cost)) if n > 0 => (format!("yes x{n}"), ms_text(cost)),
            Some(_) => ("NO".into(), "-".into()),
            None => ("-".into(), "-".into()),
        };
        let dev = c
            .deviation()
            .map_or("-".into(), |d| format!("{:+.0}%", d * 100.0));
        let _ = writeln!(
            t,
            "| {} | {} | {off} | {ip} | {b} | {f} | {added} | {named} | {} | {cost} | {dev} | {} |",
            c.scenario,
            c.vantage.name(),
            yes_no(c.silent),
            yes_no(c.within()),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Phase, PhaseCapture};
    use std::path::PathBuf;

    fn lat(ms: &[f64]) -> Latencies {
        let mut l = Latencies::default();
        for &m in ms {
            l.push(Duration::from_secs_f64(m / 1e3));
        }
        l
    }

    /// Findings of one capture: (id, count, total cost ms).
    type Named<'a> = &'a [(&'a str, usize, f64)];

    fn phase(name: &str, ms: &[f64], named: &[(Vantage, Named<'_>)]) -> Phase {
        let mut p = Phase::new(name, "test");
        p.latencies = lat(ms);
        for (v, n) in named {
            p.captures.push(PhaseCapture {
                vantage: *v,
                path: PathBuf::from(format!("{name}-{}.pcap", v.name())),
                named: n
                    .iter()
                    .map(|(id, k, c)| (id.to_string(), *k, *c))
                    .collect(),
            });
        }
        p
    }

    #[test]
    fn measure_sums_the_slow_samples_over_the_fixed_median() {
        // syn-backlog-full's shape: half the connections fast, half 3 s late.
        let m = measure(
            &lat(&[0.1, 0.12, 3048.0, 0.09, 3050.0, 3047.0, 0.11, 3049.0]),
            &lat(&[0.1, 0.09, 0.11]),
        )
        .unwrap();
        assert_eq!(m.occurrences, 4);
        assert!((m.added_ms - (3048.0 + 3050.0 + 3047.0 + 3049.0 - 4.0 * 0.1)).abs() < 0.01);
        assert_eq!(m.broken_samples, 8);
        // Noise: 20% of a 25 ms median is 5 ms; a 4 ms slower sample is not an occurrence.
        let m = measure(&lat(&[29.0, 272.0, 270.0]), &lat(&[25.0, 25.0, 26.0])).unwrap();
        assert_eq!(m.occurrences, 2);
        assert!((m.added_ms - (247.0 + 245.0)).abs() < 0.01);
        assert_eq!(m.broken_p50_ms, 270.0);
        assert_eq!(m.fixed_p50_ms, 25.0);
        assert!(measure(&lat(&[1.0]), &lat(&[])).is_none());
    }

    #[test]
    fn cells_per_vantage_with_verdicts() {
        let id = "syn-stale-state";
        let o = Outcome {
            phases: vec![
                phase(
                    "broken",
                    &[12.0, 12.0, 12.0],
                    &[
                        (Vantage::Client, &[(id, 3, 35.0)]),
                        (Vantage::Middle, &[(id, 3, 20.0), ("other", 1, 5.0)]),
                        (Vantage::Server, &[("other", 1, 5.0)]),
                    ],
                ),
                phase(
                    "fixed",
                    &[0.1, 0.1, 0.1],
                    &[
                        (Vantage::Client, &[]),
                        (Vantage::Middle, &[]),
                        (Vantage::Server, &[(id, 1, 1.0)]),
                    ],
                ),
            ],
            notes: Vec::new(),
        };
        let c = cells("stale-syn-timewait", id, true, false, &o);
        assert_eq!(c.len(), 3);
        // Added: 3 x (12 - 0.1) = 35.7 ms.
        let m = c[0].measured.as_ref().unwrap();
        assert_eq!(m.occurrences, 3);
        assert!((m.added_ms - 35.7).abs() < 0.001);
        assert_eq!(c[0].named, Some((3, 35.0)));
        assert_eq!(c[0].within(), Some(true));
        assert_eq!(c[0].silent, Some(true));
        // 20 against 35.7: 44% short.
        assert_eq!(c[1].within(), Some(false));
        assert!((c[1].deviation().unwrap() + 0.4398).abs() < 0.001);
        // Not named in the broken capture, named in the fixed one.
        assert_eq!(c[2].named, Some((0, 0.0)));
        assert_eq!(c[2].within(), Some(false));
        assert_eq!(c[2].silent, Some(false));
        let t = table(&c);
        assert_eq!(t.lines().count(), 5, "{t}");
        assert!(t.contains("| stale-syn-timewait | client | on | 4 | 12.0 | 0.10 | 35.7 (3) | yes x3 | yes | 35.0 | -2% | yes |"), "{t}");
        assert!(
            t.contains("| server | on | 4 | 12.0 | 0.10 | 35.7 (3) | NO | NO | - | - | NO |"),
            "{t}"
        );
        assert_eq!(c[1].to_json()["within_20pct"], false);
        assert_eq!(c[0].to_json()["ip"], 4);
    }

    #[test]
    fn failed_runs_and_names() {
        let c = failed_cells(
            "tail-loss",
            "rto-retransmission",
            &Vantage::ALL,
            false,
            true,
            "x|y",
        );
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].within(), None);
        assert!(table(&c).contains("FAILED: x/y"));
        for v in Vantage::ALL {
            assert_eq!(Vantage::parse(v.name()), Some(v));
        }
        assert_eq!(Vantage::parse("all"), None);
    }
}
