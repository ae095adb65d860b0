//! `tcpwhy lab`: run the scenarios of `tcpwhy-lab` and report broken against fixed.

use serde_json::json;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tcpwhy_lab::matrix::{self, Cell, Vantage};
use tcpwhy_lab::run::{phase_json, CaptureTarget, Ctx, Outcome, RunOptions};
use tcpwhy_lab::scenarios::{Scenario, SCENARIOS};
use tcpwhy_lab::stats::ms;
use tcpwhy_lab::{os, topo};

#[derive(clap::Subcommand)]
pub enum LabCommand {
    /// List the scenarios.
    List,
    /// Run scenarios (root): each with and without its fix.
    Run(RunArgs),
    /// Remove what a killed lab run left behind (namespaces, sysctls) (root).
    Clean,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Scenario names (see `tcpwhy lab list`).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Run every scenario.
    #[arg(long)]
    pub all: bool,
    /// Only the fast scenarios (the CI set), with shorter runs.
    #[arg(long)]
    pub quick: bool,
    /// Where captures go: a directory, or FILE whose name gets -PHASE (and -SCENARIO) added.
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// JSON Lines output, one object per scenario.
    #[arg(long)]
    pub json: bool,
    /// stale-syn-timewait: server tcp_rfc1337=1 (the extreme: about a minute per reconnect).
    #[arg(long)]
    pub rfc1337: bool,
    /// seed000-reproducer: seconds to loop.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Where to capture, all at once in the same run: client (its veth), middle (the router's
    /// link to the second router: half the delay on each side), server (its veth), or all.
    /// Comma-separated. Default: the scenario's own (tail-loss: server; others: client).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "WHERE")]
    pub vantage: Vec<VantageArg>,
    /// The hosts' offloads: on (TSO, GSO and GRO on the client's and server's veths, so
    /// captures hold super-segments), off, or both (one run each). Default off.
    #[arg(long, value_enum, value_name = "on|off|both")]
    pub offloads: Option<OffloadsArg>,
    /// IP version: 4, 6 or both (one run each). Default 4.
    #[arg(long, value_enum, value_name = "4|6|both")]
    pub ip: Option<IpArg>,
    /// The vantage matrix: every vantage, offloads on and off, IPv4 and IPv6 (unless given),
    /// of the scenarios with a capture; prints the table of cells at the end.
    #[arg(long)]
    pub matrix: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VantageArg {
    Client,
    Middle,
    Server,
    All,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadsArg {
    On,
    Off,
    Both,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpArg {
    #[value(name = "4")]
    V4,
    #[value(name = "6")]
    V6,
    Both,
}

/// The cells asked for: vantages (empty: the scenario's own), offloads and IP versions.
struct Cells {
    vantages: Vec<Vantage>,
    offloads: Vec<bool>,
    ipv6: Vec<bool>,
    /// Any of --vantage, --offloads, --ip, --matrix: name the cells in capture files and
    /// print the matrix.
    on: bool,
}

fn cells_asked(args: &RunArgs) -> Cells {
    let mut vantages = Vec::new();
    for v in &args.vantage {
        let add: &[Vantage] = match v {
            VantageArg::Client => &[Vantage::Client],
            VantageArg::Middle => &[Vantage::Middle],
            VantageArg::Server => &[Vantage::Server],
            VantageArg::All => &Vantage::ALL,
        };
        for a in add {
            if !vantages.contains(a) {
                vantages.push(*a);
            }
        }
    }
    vantages.sort();
    if vantages.is_empty() && args.matrix {
        vantages = Vantage::ALL.to_vec();
    }
    let offloads = match args.offloads {
        Some(OffloadsArg::On) => vec![true],
        Some(OffloadsArg::Off) => vec![false],
        Some(OffloadsArg::Both) => vec![false, true],
        None if args.matrix => vec![false, true],
        None => vec![false],
    };
    let ipv6 = match args.ip {
        Some(IpArg::V4) => vec![false],
        Some(IpArg::V6) => vec![true],
        Some(IpArg::Both) => vec![false, true],
        None if args.matrix => vec![false, true],
        None => vec![false],
    };
    let on =
        args.matrix || !args.vantage.is_empty() || args.offloads.is_some() || args.ip.is_some();
    Cells {
        vantages,
        offloads,
        ipv6,
        on,
    }
}

fn need_root(what: &str) -> Option<ExitCode> {
    if os::is_root() {
        return None;
    }
    eprintln!(
        "tcpwhy lab {what}: needs root (network namespaces, NFQUEUE, AF_PACKET); run it with sudo"
    );
    Some(ExitCode::from(2))
}

pub fn run(cmd: &LabCommand) -> io::Result<ExitCode> {
    let mut out = io::stdout().lock();
    match cmd {
        LabCommand::List => {
            for s in SCENARIOS {
                writeln!(
                    out,
                    "{:<22} seed {:<4} {}{}",
                    s.name,
                    s.seed,
                    s.title,
                    if s.fast { "" } else { " (slow)" }
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Clean => {
            if let Some(c) = need_root("clean") {
                return Ok(c);
            }
            let done = topo::clean_all()?;
            if done.is_empty() {
                writeln!(out, "nothing to clean")?;
            }
            for d in done {
                writeln!(out, "{d}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_scenarios(args, &mut out),
    }
}

/// The scenarios to run. With cells asked for, every one with a capture and a finding to
/// check (the others have no vantage), slow ones too (--quick shortens them).
fn select(args: &RunArgs, cells: bool) -> Result<Vec<&'static Scenario>, String> {
    if args.all {
        return Ok(SCENARIOS
            .iter()
            .filter(|s| !args.quick || s.fast || cells)
            .filter(|s| !cells || s.expect.is_some())
            .collect());
    }
    if args.names.is_empty() {
        return Err("name a scenario (tcpwhy lab list) or use --all".into());
    }
    args.names
        .iter()
        .map(|n| {
            let s = SCENARIOS
                .iter()
                .find(|s| s.name == n)
                .ok_or_else(|| format!("no scenario {n:?} (tcpwhy lab list)"))?;
            if cells && s.expect.is_none() {
                return Err(format!(
                    "{n} records no capture: --vantage, --offloads, --ip and --matrix do not apply"
                ));
            }
            Ok(s)
        })
        .collect()
}

/// Where the captures go. Without `--capture`, a new directory of this run's own under
/// `TMPDIR` (or /tmp): made atomically with a random name and mode 0700, so no other user can
/// have planted a link where root writes, nor read the captures.
fn capture_target(args: &RunArgs, several: bool) -> io::Result<CaptureTarget> {
    Ok(match &args.capture {
        None => CaptureTarget::Dir(private_dir(&std::env::temp_dir())?),
        Some(p) if p.is_dir() || p.to_string_lossy().ends_with('/') => {
            CaptureTarget::Dir(p.clone())
        }
        Some(p) => {
            let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
            let stem = p
                .file_stem()
                .map_or("lab".into(), |s| s.to_string_lossy().into_owned());
            let ext = p
                .extension()
                .map_or("pcap".into(), |s| s.to_string_lossy().into_owned());
            CaptureTarget::Prefix(dir, stem, ext, several)
        }
    })
}

/// A new directory `tcpwhy-lab-XXXXXX` in `parent`, mode 0700, kept after the run.
fn private_dir(parent: &Path) -> io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix("tcpwhy-lab-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)?;
    Ok(dir.keep())
}

fn run_scenarios(args: &RunArgs, out: &mut impl Write) -> io::Result<ExitCode> {
    let asked = cells_asked(args);
    let chosen = match select(args, asked.on) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpwhy lab run: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(c) = need_root("run") {
        return Ok(c);
    }
    let stop = os::interrupt_flag()?;
    // Ctrl-C sets `stop`; scenarios notice it between steps and clean up on the way out. If a
    // scenario is stuck in a blocking call, the watchdog undoes this run's changes itself
    // (what `tcpwhy lab clean` would do) and exits.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (stop, done) = (std::sync::Arc::clone(&stop), std::sync::Arc::clone(&done));
        std::thread::spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if os::interrupted(&stop) {
                std::thread::sleep(std::time::Duration::from_secs(3));
                if !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let cleaned = topo::clean_all().unwrap_or_default();
                    eprintln!(
                        "tcpwhy lab: interrupted; removed what the run set up ({} steps)",
                        cleaned.len()
                    );
                    std::process::exit(130);
                }
                return;
            }
        });
    }
    let several = chosen.len() > 1;
    let mut runs = Vec::new();
    for s in chosen {
        for &offloads in &asked.offloads {
            for &ipv6 in &asked.ipv6 {
                runs.push((s, offloads, ipv6));
            }
        }
    }
    let mut ctx = Ctx {
        opts: RunOptions {
            capture: match capture_target(args, several) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("tcpwhy lab run: cannot make a directory for the captures: {e}");
                    return Ok(ExitCode::from(2));
                }
            },
            quick: args.quick,
            rfc1337: args.rfc1337,
            seconds: args.seconds,
            vantages: asked.vantages.clone(),
            offloads: false,
            ipv6: false,
            cell_names: asked.on,
        },
        stop,
        default_vantage: Vantage::Client,
    };
    let mut failed = 0;
    let mut all_cells: Vec<Cell> = Vec::new();
    for (s, offloads, ipv6) in runs {
        if ctx.interrupted() {
            break;
        }
        ctx.opts.offloads = offloads;
        ctx.opts.ipv6 = ipv6;
        ctx.default_vantage = s.vantage;
        let setup = format!(
            "offloads {}, IPv{}",
            if offloads { "on" } else { "off" },
            if ipv6 { 6 } else { 4 }
        );
        if !args.json {
            writeln!(out, "== {} (seed {}): {}", s.name, s.seed, s.title)?;
            if asked.on {
                let v: Vec<&str> = ctx.vantages().iter().map(|v| v.name()).collect();
                writeln!(out, "   cells:  {setup}, captured at {}", v.join(", "))?;
            }
            writeln!(out, "   breaks: {}", s.breaks)?;
            writeln!(out, "   fix:    {}", s.fix)?;
            out.flush()?;
        }
        let t0 = std::time::Instant::now();
        let mut result = (s.run)(&ctx);
        if let Ok(o) = &mut result {
            // The diagnosis end to end: what `tcpwhy analyze` names in each capture.
            tcpwhy_lab::run::analyze_outcome(o)?;
        }
        let secs = t0.elapsed().as_secs_f64();
        let cells: Vec<Cell> = match (s.expect, &result) {
            (Some(id), Ok(o)) if asked.on => matrix::cells(s.name, id, offloads, ipv6, o),
            (Some(id), Err(e)) if asked.on => {
                matrix::failed_cells(s.name, id, &ctx.vantages(), offloads, ipv6, &e.to_string())
            }
            _ => Vec::new(),
        };
        match &result {
            Ok(o) if args.json => {
                let v = json!({
                    "type": "lab",
                    "scenario": s.name,
                    "seed": s.seed,
                    "title": s.title,
                    "breaks": s.breaks,
                    "fix": s.fix,
                    "seconds": (secs * 10.0).round() / 10.0,
                    "phases": o.phases.iter().map(phase_json).collect::<Vec<_>>(),
                    "ratio_p50": ratio(o),
                    "expected_finding": s.expect,
                    "named_in_broken": verdict(s, o).0,
                    "silent_in_fixed": verdict(s, o).1,
                    "notes": o.notes,
                    "offloads": if offloads { "on" } else { "off" },
                    "ip": if ipv6 { 6 } else { 4 },
                    "cells": cells.iter().map(Cell::to_json).collect::<Vec<_>>(),
                    "error": null,
                });
                writeln!(out, "{v}")?;
            }
            Ok(o) => {
                print_outcome(out, o, ctx.default_vantage, secs)?;
                if let (Some(id), (Some(named), Some(silent))) = (s.expect, verdict(s, o)) {
                    writeln!(
                        out,
                        "   diagnosis: {id} {} in the {} capture, {} in the others",
                        if named { "named" } else { "NOT named" },
                        o.phases[0].name,
                        if silent { "absent" } else { "ALSO named" }
                    )?;
                }
                for c in &cells {
                    writeln!(
                        out,
                        "   cell {:<7} {}: {}",
                        c.vantage.name(),
                        setup,
                        cell_line(c)
                    )?;
                }
            }
            Err(e) => {
                failed += 1;
                if args.json {
                    let v = json!({"type": "lab", "scenario": s.name, "offloads": if offloads { "on" } else { "off" }, "ip": if ipv6 { 6 } else { 4 }, "cells": cells.iter().map(Cell::to_json).collect::<Vec<_>>(), "error": e.to_string()});
                    writeln!(out, "{v}")?;
                } else {
                    writeln!(out, "   FAILED: {e}")?;
                }
            }
        }
        out.flush()?;
        all_cells.extend(cells);
    }
    if asked.on {
        if args.json {
            let v = json!({"type": "matrix", "cells": all_cells.iter().map(Cell::to_json).collect::<Vec<_>>()});
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "\n== vantage matrix (added: what the broken runs took beyond the fixed median, summed over the slow samples; cost: the expected finding's total cost in the broken capture)")?;
            write!(out, "{}", matrix::table(&all_cells))?;
        }
        out.flush()?;
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    // The run's own directory is removed when no scenario wrote a capture in it.
    if let (None, CaptureTarget::Dir(dir)) = (&args.capture, &ctx.opts.capture) {
        let _ = std::fs::remove_dir(dir);
    }
    if ctx.interrupted() {
        eprintln!("tcpwhy lab: interrupted; everything the run set up was removed");
        return Ok(ExitCode::from(130));
    }
    Ok(if failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// One cell in words.
fn cell_line(c: &Cell) -> String {
    let added = c.measured.as_ref().map_or("-".into(), |m| {
        format!("{:.1} ms in {} samples", m.added_ms, m.occurrences)
    });
    let named = match c.named {
        Some((n, cost)) if n > 0 => format!("{} x{n}, {cost:.1} ms", c.expect),
        _ => format!("{} NOT named", c.expect),
    };
    let within = match (c.within(), c.deviation()) {
        (Some(true), Some(d)) => format!("within 20% ({:+.0}%)", d * 100.0),
        (Some(false), Some(d)) => format!("NOT within 20% ({:+.0}%)", d * 100.0),
        _ => "no cost to compare".into(),
    };
    format!("added {added}; {named}; {within}")
}

/// (the expected finding was named in the broken phase's first capture, and in no other
/// phase's first capture).
fn verdict(s: &Scenario, o: &Outcome) -> (Option<bool>, Option<bool>) {
    let Some(id) = s.expect else {
        return (None, None);
    };
    let has = |p: &tcpwhy_lab::run::Phase| {
        p.captures
            .first()
            .is_some_and(|c| c.named.iter().any(|(x, _, _)| x == id))
    };
    let named = o.phases.first().map(has);
    let silent = Some(o.phases.iter().skip(1).all(|p| !has(p)));
    (named, silent)
}

/// p50 of the first phase (broken) over p50 of the second (fixed or control).
fn ratio(o: &Outcome) -> Option<f64> {
    let a = o.phases.first()?.latencies.p50()?;
    let b = o.phases.get(1)?.latencies.p50()?;
    if b.is_zero() {
        return None;
    }
    Some((a.as_secs_f64() / b.as_secs_f64() * 10.0).round() / 10.0)
}

fn fmt(d: Option<std::time::Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.3} ms", ms(d)))
}

fn print_outcome(out: &mut impl Write, o: &Outcome, own: Vantage, secs: f64) -> io::Result<()> {
    for p in &o.phases {
        let l = &p.latencies;
        // The scenario's facts come from its own vantage's capture (see Ctx::own_capture).
        let used = p
            .capture_at(own)
            .or_else(|| p.captures.first())
            .map(|c| c.vantage);
        let own = match used {
            Some(v) if p.captures.len() > 1 => format!(" ({})", v.name()),
            _ => String::new(),
        };
        writeln!(
            out,
            "   {:<14} {}: p50 {}  p99 {}  max {}  (n={})",
            p.name,
            p.metric,
            fmt(l.p50()),
            fmt(l.p99()),
            fmt(l.max()),
            l.len()
        )?;
        for s in &p.settings {
            writeln!(out, "   {:<14}   set: {s}", "")?;
        }
        for a in &p.analyzer {
            writeln!(out, "   {:<14}   capture shows{own}: {a}", "")?;
        }
        let several = p.captures.len() > 1;
        for c in &p.captures {
            let names: Vec<String> = c
                .named
                .iter()
                .map(|(id, n, cost)| format!("{id} x{n} ({cost:.1} ms)"))
                .collect();
            let names = if names.is_empty() {
                "nothing".to_string()
            } else {
                names.join(", ")
            };
            let at = if several {
                format!(" ({})", c.vantage.name())
            } else {
                String::new()
            };
            writeln!(out, "   {:<14}   tcpwhy analyze names{at}: {names}", "")?;
            writeln!(out, "   {:<14}   capture{at}: {}", "", c.path.display())?;
        }
    }
    if let Some(r) = ratio(o) {
        writeln!(
            out,
            "   ratio of medians ({} / {}): {r}x",
            o.phases[0].name, o.phases[1].name
        )?;
    }
    for n in &o.notes {
        writeln!(out, "   note: {n}")?;
    }
    writeln!(out, "   ({secs:.1} s)")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each run's default directory is new, private (0700) and where TMPDIR says; a name
    /// another user planted in the parent beforehand is never the one chosen.
    #[test]
    fn the_default_capture_directory_is_private_and_new() {
        let parent = tempfile::tempdir().expect("a temporary directory");
        let planted = parent.path().join("tcpwhy-lab");
        std::os::unix::fs::symlink("/etc", &planted).expect("plant a link");
        let a = private_dir(parent.path()).expect("a directory");
        let b = private_dir(parent.path()).expect("another");
        assert_ne!(a, b);
        for d in [&a, &b] {
            assert_eq!(d.parent(), Some(parent.path()));
            assert_ne!(d, &planted);
            let m = std::fs::symlink_metadata(d).expect("it exists");
            assert!(m.is_dir() && !m.file_type().is_symlink());
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", d.display());
        }
    }
}
