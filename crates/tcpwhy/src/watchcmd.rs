//! `tcpwhy watch`: the causes of TCP latency named live from kernel tracepoints (crate
//! tcpwhy-watch), in text or JSON Lines, until a duration passes or Ctrl-C.

use crate::metrics;
use crate::output::json::SCHEMA_VERSION;
use crate::time::rfc3339;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use serde_json::json;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tcpwhy_watch::judge::{Process, WatchFinding};
use tcpwhy_watch::{Netns, Options, Output, Summary};

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Watch this named network namespace (`ip netns` name) instead of tcpwhy's own.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Watch every network namespace.
    #[arg(long, conflicts_with = "netns")]
    pub all_netns: bool,
    /// Only connections this process opens, and its writes that meet a slow-start restart.
    /// Packets a server drops belong to no process yet: they are left out.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Only connections opened by processes in this cgroup (v2), e.g.
    /// /sys/fs/cgroup/system.slice/nginx.service or a container's cgroup (as with --pid,
    /// packets a server drops are left out).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<std::path::PathBuf>,
    /// Stop after this many seconds (else at Ctrl-C).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = WatchFormat::Text)]
    pub format: WatchFormat,
    /// With --format json: also a "connect" record per connect() (its latency, retries and
    /// resets). Without it connects are counted and their latency summarised at the end.
    #[arg(long)]
    pub connections: bool,
    /// Serve OpenMetrics at http://ADDR/metrics while watching (e.g. 127.0.0.1:9917; port 0
    /// picks one, said on standard error).
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// Write DIR/tcpwhy_watch.prom for node_exporter's textfile collector every 10 s and at
    /// the end (written whole: a temporary file renamed).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<std::path::PathBuf>,
}

/// The metrics `--serve` and `--textfile` export, live.
struct Metrics {
    registry: Arc<Registry>,
    findings: Family<Vec<(String, String)>, Counter>,
    lost_seconds: Family<Vec<(String, String)>, Counter<f64, AtomicU64>>,
    connects: Family<Vec<(String, String)>, Counter>,
    events_lost: Counter,
    runs_skipped: Counter,
    openings_unseen: Counter,
    kernel_connects: u64,
    events_lost_seen: u64,
    runs_skipped_seen: u64,
    openings_unseen_seen: u64,
}

impl Metrics {
    fn new() -> Metrics {
        let mut r = Registry::default();
        let findings = Family::default();
        let lost_seconds = Family::default();
        let connects = Family::default();
        let events_lost = Counter::default();
        let runs_skipped = Counter::default();
        let openings_unseen = Counter::default();
        r.register(
            "tcpwhy_watch_findings",
            "Findings named by tcpwhy watch, by id, network namespace (inode) and command",
            findings.clone(),
        );
        r.register_with_unit(
            "tcpwhy_watch_lost",
            "Time the findings cost, by id, network namespace (inode) and command",
            Unit::Seconds,
            lost_seconds.clone(),
        );
        r.register(
            "tcpwhy_watch_connects",
            "connect() calls that left SYN-SENT, by outcome (established or failed)",
            connects.clone(),
        );
        r.register(
            "tcpwhy_watch_events_lost",
            "Events the BPF programs could not queue (ring buffer full)",
            events_lost.clone(),
        );
        r.register(
            "tcpwhy_watch_program_runs_skipped",
            "BPF program runs the kernel skipped (a tracepoint fired while the program ran on that CPU): events watch did not see",
            runs_skipped.clone(),
        );
        r.register(
            "tcpwhy_watch_openings_unseen",
            "connect() calls whose socket closed while watch still had it opening: it left SYN-SENT unseen, with no record or finding",
            openings_unseen.clone(),
        );
        Metrics {
            registry: Arc::new(r),
            findings,
            lost_seconds,
            connects,
            events_lost,
            runs_skipped,
            openings_unseen,
            kernel_connects: 0,
            events_lost_seen: 0,
            runs_skipped_seen: 0,
            openings_unseen_seen: 0,
        }
    }

    fn output(&mut self, o: &Output) {
        match o {
            Output::Finding(f) => {
                let labels = vec![
                    ("id".to_string(), f.id.to_string()),
                    ("netns".to_string(), f.netns.to_string()),
                    ("command".to_string(), f.process.command.clone()),
                ];
                self.findings.get_or_create(&labels).inc();
                self.lost_seconds
                    .get_or_create(&labels)
                    .inc_by(f.cost_ns as f64 / 1e9);
            }
            Output::Connect(c) => {
                let outcome = if c.established {
                    "established"
                } else {
                    "failed"
                };
                self.connects
                    .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
                    .inc();
            }
            Output::Tick {
                kernel_connects,
                events_lost,
                runs_skipped,
                openings_unseen,
            } => {
                self.connects
                    .get_or_create(&vec![("outcome".to_string(), "established".to_string())])
                    .inc_by(kernel_connects.saturating_sub(self.kernel_connects));
                self.kernel_connects = (*kernel_connects).max(self.kernel_connects);
                self.events_lost
                    .inc_by(events_lost.saturating_sub(self.events_lost_seen));
                self.events_lost_seen = (*events_lost).max(self.events_lost_seen);
                self.runs_skipped
                    .inc_by(runs_skipped.saturating_sub(self.runs_skipped_seen));
                self.runs_skipped_seen = (*runs_skipped).max(self.runs_skipped_seen);
                self.openings_unseen
                    .inc_by(openings_unseen.saturating_sub(self.openings_unseen_seen));
                self.openings_unseen_seen = (*openings_unseen).max(self.openings_unseen_seen);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    /// A line per finding as it happens, a summary at the end.
    Text,
    /// JSON Lines: "watch-finding" records (and "connect" ones with --connections) as they
    /// happen, a "watch-summary" at the end (docs/json-schema.md).
    Json,
}

/// CLOCK_MONOTONIC (the events' clock) to wall-clock time, as the two stand now.
struct Clock {
    offset_ns: i64,
}

impl Clock {
    fn now() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        Clock {
            offset_ns: wall - tcpwhy_watch::monotonic_ns() as i64,
        }
    }

    fn wall(&self, mono_ns: u64) -> i64 {
        mono_ns as i64 + self.offset_ns
    }
}

fn process_json(p: &Process) -> serde_json::Value {
    if p.pid == 0 {
        serde_json::Value::Null
    } else {
        json!({"pid": p.pid, "command": p.command})
    }
}

fn finding_json(f: &WatchFinding, clock: &Clock, cgroup: Option<&str>) -> serde_json::Value {
    json!({
        "type": "watch-finding",
        "version": SCHEMA_VERSION,
        "id": f.id,
        "start": rfc3339(clock.wall(f.start_ns)),
        "start_ns": clock.wall(f.start_ns),
        "end": rfc3339(clock.wall(f.end_ns)),
        "end_ns": clock.wall(f.end_ns),
        "cost_ms": f.cost_ns as f64 / 1e6,
        "netns": f.netns,
        "process": process_json(&f.process),
        "cgroup": cgroup,
        "local": f.local.to_string(),
        "remote": f.remote.to_string(),
        "explanation": f.explanation,
        "fix": f.fix,
        "evidence": f.evidence,
    })
}

fn summary_json(s: &Summary) -> serde_json::Value {
    let q = |p| s.latencies.quantile_ms(p);
    json!({
        "type": "watch-summary",
        "version": SCHEMA_VERSION,
        "seconds": s.seconds,
        "events": s.events,
        "events_lost": s.events_lost,
        "program_runs_skipped": s.runs_skipped,
        "openings_unseen": s.openings_unseen,
        "malformed_events": s.malformed,
        "connects": s.connects,
        "failed_connects": s.failed_connects,
        "connect_ms": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": (s.latencies.count > 0).then_some(s.latencies.max_ms)},
        "findings": s.findings.iter().map(|(id, (n, ns))| (id.to_string(), json!({"count": n, "ms_lost": *ns as f64 / 1e6}))).collect::<serde_json::Map<_, _>>(),
        "folded_server_findings": s.folded,
        "unresolved_drops": s.unresolved_drops,
        "spurious_resends": s.spurious_resends,
        "attached": s.attached,
        "unavailable": s.unavailable,
    })
}

fn text_summary(out: &mut dyn Write, s: &Summary) -> io::Result<()> {
    writeln!(
        out,
        "Watched {:.1} s: {} connect() calls ({} failed){}.",
        s.seconds,
        s.connects,
        s.failed_connects,
        match (s.latencies.quantile_ms(0.5), s.latencies.quantile_ms(0.99)) {
            (Some(a), Some(b)) => format!(
                "; connect latency p50 {a:.2} ms, p99 {b:.2} ms, max {:.2} ms",
                s.latencies.max_ms
            ),
            _ => String::new(),
        }
    )?;
    if s.findings.is_empty() {
        writeln!(out, "No latency cause seen.")?;
    } else {
        let mut v: Vec<_> = s.findings.iter().collect();
        v.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(b.0)));
        writeln!(out, "Causes, ranked by time lost:")?;
        for (i, (id, (n, ns))) in v.iter().enumerate() {
            writeln!(
                out,
                "{:>2}. {id}: {:.3} ms lost in {n} finding{}",
                i + 1,
                *ns as f64 / 1e6,
                if *n == 1 { "" } else { "s" }
            )?;
        }
    }
    if s.folded > 0 {
        writeln!(
            out,
            "{} server-side finding{} folded into the client's finding of the same connection (both ends watched here): counted once.",
            s.folded,
            if s.folded == 1 { "" } else { "s" }
        )?;
    }
    if s.spurious_resends > 0 {
        writeln!(
            out,
            "{} timeout resend{} proved unneeded by the receiver's D-SACK (it had the data): not counted above.",
            s.spurious_resends,
            if s.spurious_resends == 1 { "" } else { "s" }
        )?;
    }
    if s.unresolved_drops > 0 {
        writeln!(
            out,
            "note: {} dropped SYN{} with no handshake after {} while watched: the wait cannot be priced, and is not counted above.",
            s.unresolved_drops,
            if s.unresolved_drops == 1 { "" } else { "s" },
            if s.unresolved_drops == 1 { "it" } else { "them" }
        )?;
    }
    if s.events_lost > 0 {
        writeln!(
            out,
            "warning: {} events were lost (the ring buffer was full): their connects and findings are missing above",
            s.events_lost
        )?;
    }
    if s.runs_skipped > 0 {
        writeln!(
            out,
            "warning: the kernel skipped {} run{} of watch's programs (a tracepoint fired while the program was already running on that CPU): the connects and findings of those events may be missing above",
            s.runs_skipped,
            if s.runs_skipped == 1 { "" } else { "s" }
        )?;
    }
    if s.openings_unseen > 0 {
        writeln!(
            out,
            "warning: {} connect(){} left SYN-SENT unseen (a run of watch's program the kernel skipped): no connect record or finding for {}",
            s.openings_unseen,
            if s.openings_unseen == 1 { "" } else { "s" },
            if s.openings_unseen == 1 { "it" } else { "them" }
        )?;
    }
    if s.malformed > 0 {
        writeln!(out, "warning: {} malformed events skipped", s.malformed)?;
    }
    for u in &s.unavailable {
        writeln!(out, "unavailable: {u}")?;
    }
    Ok(())
}

pub fn run(args: &WatchArgs) -> io::Result<ExitCode> {
    let duration = match args.duration {
        Some(s) if s.is_finite() && s > 0.0 && s <= 31_536_000.0 => {
            Some(Duration::from_secs_f64(s))
        }
        Some(_) => {
            return Err(io::Error::other(
                "--duration: seconds, more than 0 and at most a year",
            ))
        }
        None => None,
    };
    let netns = if args.all_netns {
        Netns::All
    } else {
        let path = match &args.netns {
            Some(n) if n.is_empty() || n.contains('/') || n == "." || n == ".." => {
                return Err(io::Error::other(format!(
                    "--netns {n:?}: not a namespace name"
                )))
            }
            Some(n) => std::path::PathBuf::from("/run/netns").join(n),
            None => "/proc/self/ns/net".into(),
        };
        Netns::Inode(
            tcpwhy_watch::netns_inode(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        )
    };
    let cgroup = match &args.cgroup {
        Some(p) => Some(
            tcpwhy_watch::cgroup_id(p)
                .map_err(|e| io::Error::new(e.kind(), format!("--cgroup {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let opts = Options {
        duration,
        pid: args.pid,
        cgroup,
        netns,
        connections: args.connections && args.format == WatchFormat::Json,
        ticks: args.serve.is_some() || args.textfile.is_some(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let mut exported = (args.serve.is_some() || args.textfile.is_some()).then(Metrics::new);
    let mut server = None;
    if let (Some(addr), Some(m)) = (&args.serve, &exported) {
        let (h, bound) = metrics::serve(addr, m.registry.clone(), stop.clone())?;
        eprintln!("tcpwhy watch: metrics at http://{bound}/metrics");
        server = Some(h);
    }
    if let Some(d) = &args.textfile {
        if !d.is_dir() {
            return Err(io::Error::other(format!(
                "--textfile {}: not a directory",
                d.display()
            )));
        }
    }
    const TEXTFILE: &str = "tcpwhy_watch.prom";
    let mut textfile_due = std::time::Instant::now();
    let mut cgroups = tcpwhy_watch::Cgroups::default();
    let stdout = io::stdout();
    let mut out = io::LineWriter::new(stdout.lock());
    let format = args.format;
    let connections = args.connections;
    let result = tcpwhy_watch::run(
        &opts,
        &stop,
        |line| eprintln!("tcpwhy watch: {line}"),
        |o| {
            if let Some(m) = exported.as_mut() {
                m.output(&o);
                if let (Some(d), true) = (&args.textfile, std::time::Instant::now() >= textfile_due)
                {
                    textfile_due += Duration::from_secs(10);
                    metrics::write_textfile(d, TEXTFILE, &metrics::prometheus_text(&m.registry))?;
                }
            }
            // The offset between the clocks is read at each record: a wall-clock step while
            // watch runs (NTP setting a fresh machine's clock) moves the records with it, as
            // it moves the timestamps of a capture taken beside them.
            let clock = Clock::now();
            match (o, format) {
                (Output::Finding(f), WatchFormat::Json) => {
                    writeln!(
                        out,
                        "{}",
                        finding_json(&f, &clock, cgroups.path(f.process.cgroup))
                    )
                }
                (Output::Connect(c), WatchFormat::Json) if connections => writeln!(
                    out,
                    "{}",
                    json!({
                        "type": "connect",
                        "version": SCHEMA_VERSION,
                        "start": rfc3339(clock.wall(c.start_ns)),
                        "ms": c.ms(),
                        "outcome": if c.established { "established" } else { "failed" },
                        "netns": c.netns,
                        "process": process_json(&c.process),
                        "local": c.local.to_string(),
                        "remote": c.remote.to_string(),
                        "syn_retransmits": c.syn_retransmits,
                        "resets_sent": c.resets_sent,
                        "resets_received": c.resets_received,
                    })
                ),
                (Output::Finding(f), WatchFormat::Text) => writeln!(
                    out,
                    "{} {}: {:.3} ms lost, {} -> {} (netns {}{})\n    {}\n    fix: {}",
                    rfc3339(clock.wall(f.start_ns))
                        .get(11..23)
                        .unwrap_or_default(),
                    f.id,
                    f.cost_ns as f64 / 1e6,
                    f.local,
                    f.remote,
                    f.netns,
                    cgroups
                        .path(f.process.cgroup)
                        .map(|p| format!(", cgroup {p}"))
                        .unwrap_or_default(),
                    f.explanation,
                    f.fix
                ),
                (Output::Connect(_), _) | (Output::Tick { .. }, _) => Ok(()),
            }
        },
    );
    if let (Some(d), Some(m)) = (&args.textfile, &exported) {
        metrics::write_textfile(d, TEXTFILE, &metrics::prometheus_text(&m.registry))?;
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = server {
        let _ = h.join();
    }
    let summary = match result {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("tcpwhy watch: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    match format {
        WatchFormat::Json => writeln!(out, "{}", summary_json(&summary))?,
        WatchFormat::Text => text_summary(&mut out, &summary)?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
