//! `tcpwhy host`: the pathologies a live Linux host shows or is set up for, per network
//! namespace (crate tcpwhy-hostscan), in text or JSON Lines.

use crate::metrics;
use crate::output::json::SCHEMA_VERSION;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tcpwhy_hostscan::diag::{TCP_ESTABLISHED, TCP_LISTEN, TCP_TIME_WAIT};
use tcpwhy_hostscan::{HostFinding, Snapshot, THIS_NAMESPACE};

#[derive(clap::Args)]
pub struct HostArgs {
    /// Inspect this named network namespace (`ip netns` name; root). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub netns: Vec<String>,
    /// Inspect this namespace and every named one (root).
    #[arg(long, conflicts_with = "netns")]
    pub all_netns: bool,
    /// Read the counters twice, this many seconds apart, and judge their increase (without it
    /// the counter-based checks cannot run: stale-state collisions, SYN drops, retransmissions).
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = HostFormat::Text)]
    pub format: HostFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
    /// Keep reading, one --interval after another (10 s unless given), and serve the latest
    /// as OpenMetrics at http://ADDR/metrics until Ctrl-C, which ends after the reading in
    /// progress (port 0 picks one, said on standard error). No report is printed.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// Write DIR/tcpwhy_host.prom for node_exporter's textfile collector (after each interval
    /// with --serve, else once), written whole: a temporary file renamed.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<std::path::PathBuf>,
}

/// The gauges `--serve` and `--textfile` export: the latest reading.
struct HostMetrics {
    registry: std::sync::Arc<Registry>,
    findings: Family<Vec<(String, String)>, Gauge>,
    impact_ms: Family<Vec<(String, String)>, Gauge<f64, AtomicU64>>,
    ehash_sockets: Family<Vec<(String, String)>, Gauge>,
    ehash_buckets: Family<Vec<(String, String)>, Gauge>,
    accept_queue: Family<Vec<(String, String)>, Gauge>,
    accept_backlog: Family<Vec<(String, String)>, Gauge>,
    restart_risk: Family<Vec<(String, String)>, Gauge>,
}

fn labels(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl HostMetrics {
    fn new() -> HostMetrics {
        let (findings, impact_ms) = (Family::default(), Family::default());
        let (ehash_sockets, ehash_buckets) = (Family::default(), Family::default());
        let (accept_queue, accept_backlog) = (Family::default(), Family::default());
        let restart_risk = Family::default();
        let mut r = Registry::default();
        r.register(
            "tcpwhy_host_findings",
            "Host findings in the latest reading, by id, namespace and severity (now or risk)",
            findings.clone(),
        );
        r.register(
            "tcpwhy_host_impact_milliseconds",
            "A finding's estimated latency at stake per affected operation, by id and namespace",
            impact_ms.clone(),
        );
        r.register(
            "tcpwhy_host_ehash_sockets",
            "Sockets in the established hash (every TCP socket but listeners), by namespace",
            ehash_sockets.clone(),
        );
        r.register("tcpwhy_host_ehash_buckets", "Buckets of the namespace's established hash (tcp_ehash_entries; the global table's size for namespaces that share it)", ehash_buckets.clone());
        r.register(
            "tcpwhy_host_accept_queue",
            "The longest accept queue seen over the interval, by namespace and listener",
            accept_queue.clone(),
        );
        r.register(
            "tcpwhy_host_accept_queue_backlog",
            "The listener's backlog (a queue longer than it is full), by namespace and listener",
            accept_backlog.clone(),
        );
        r.register("tcpwhy_host_slow_start_restart_sockets", "Connections idle past their RTO that will restart slow start on their next write, by namespace", restart_risk.clone());
        HostMetrics {
            registry: std::sync::Arc::new(r),
            findings,
            impact_ms,
            ehash_sockets,
            ehash_buckets,
            accept_queue,
            accept_backlog,
            restart_risk,
        }
    }

    fn update(&self, snaps: &[Snapshot], findings: &[HostFinding]) {
        for f in [
            &self.findings,
            &self.ehash_sockets,
            &self.ehash_buckets,
            &self.accept_queue,
            &self.accept_backlog,
            &self.restart_risk,
        ] {
            f.clear();
        }
        self.impact_ms.clear();
        for f in findings {
            let l = labels(&[
                ("id", f.id.to_string()),
                ("namespace", f.namespace.clone()),
                ("severity", f.severity.to_string()),
            ]);
            self.findings.get_or_create(&l).inc();
            self.impact_ms
                .get_or_create(&labels(&[
                    ("id", f.id.to_string()),
                    ("namespace", f.namespace.clone()),
                ]))
                .set(f.impact_ms);
            if f.id == "host-slow-start-after-idle" {
                if let Some(n) = f.evidence["affected"].as_i64() {
                    self.restart_risk
                        .get_or_create(&labels(&[("namespace", f.namespace.clone())]))
                        .set(n);
                }
            }
        }
        for s in snaps {
            let ns = labels(&[("namespace", s.namespace.clone())]);
            let in_hash = s.sockets.iter().filter(|k| k.state != TCP_LISTEN).count();
            self.ehash_sockets.get_or_create(&ns).set(in_hash as i64);
            if let Some(e) = s.int("ipv4/tcp_ehash_entries").filter(|e| *e != 0) {
                self.ehash_buckets.get_or_create(&ns).set(e.abs());
            }
            for l in &s.listeners {
                let key = labels(&[
                    ("namespace", s.namespace.clone()),
                    ("listener", endpoint(l.local)),
                ]);
                self.accept_queue
                    .get_or_create(&key)
                    .set(i64::from(l.max_queue));
                self.accept_backlog
                    .get_or_create(&key)
                    .set(i64::from(l.backlog));
            }
        }
    }
}

fn endpoint((ip, port): (std::net::IpAddr, u16)) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

/// The formats `host` writes (analyze's HTML report needs a capture).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HostFormat {
    /// Findings ranked by impact, then a line of facts per namespace.
    Text,
    /// JSON Lines: "host-finding" records, a "namespace" record each, a "host-summary"
    /// (docs/json-schema.md).
    Json,
}

/// The namespaces to read, in order, each once: this one (None) and named ones.
fn targets(args: &HostArgs, named: Vec<String>) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    if args.all_netns {
        out.push(None);
        out.extend(named.into_iter().map(Some));
    } else if args.netns.is_empty() {
        out.push(None);
    } else {
        for n in &args.netns {
            if !out.iter().any(|t| t.as_deref() == Some(n.as_str())) {
                out.push(Some(n.clone()));
            }
        }
    }
    out
}

pub fn run(args: &HostArgs) -> io::Result<ExitCode> {
    let interval = match args.interval {
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(_) => {
            return Err(io::Error::other(
                "--interval: seconds, more than 0 and at most 3600",
            ))
        }
        // Serving reads the counters over and over: 10 s apart unless told.
        None if args.serve.is_some() => Some(std::time::Duration::from_secs(10)),
        None => None,
    };
    let root = tcpwhy_hostscan::is_root();
    if (args.all_netns || !args.netns.is_empty()) && !root {
        eprintln!("tcpwhy host: --netns and --all-netns enter other network namespaces, which needs root; without them tcpwhy host inspects its own namespace");
        return Ok(ExitCode::from(2));
    }
    if let Some(d) = &args.textfile {
        if !d.is_dir() {
            eprintln!("tcpwhy host: --textfile {}: not a directory", d.display());
            return Ok(ExitCode::from(2));
        }
    }
    let exported = (args.serve.is_some() || args.textfile.is_some()).then(HostMetrics::new);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let mut server = None;
    if let (Some(addr), Some(m)) = (&args.serve, &exported) {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))?;
        }
        let (h, bound) = metrics::serve(addr, m.registry.clone(), stop.clone())?;
        eprintln!("tcpwhy host: metrics at http://{bound}/metrics");
        server = Some(h);
    }
    loop {
        let (snaps, skipped) = match read_all(args, interval) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("tcpwhy host: {e}");
                stop.store(true, Ordering::Relaxed);
                return Ok(ExitCode::from(2));
            }
        };
        let findings = tcpwhy_hostscan::checks::run(&snaps);
        if let Some(m) = &exported {
            m.update(&snaps, &findings);
            if let Some(d) = &args.textfile {
                metrics::write_textfile(
                    d,
                    "tcpwhy_host.prom",
                    &metrics::prometheus_text(&m.registry),
                )?;
            }
        }
        if args.serve.is_some() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            continue;
        }
        let mut out: Box<dyn Write> = match &args.output {
            Some(p) => Box::new(io::BufWriter::new(
                std::fs::File::create(p)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot write {p}: {e}")))?,
            )),
            None => Box::new(io::BufWriter::new(io::stdout().lock())),
        };
        match args.format {
            HostFormat::Json => json_report(&mut out, &snaps, &findings, args.interval, &skipped)?,
            HostFormat::Text => text_report(&mut out, &snaps, &findings, &skipped)?,
        }
        out.flush()?;
        break;
    }
    if let Some(h) = server {
        let _ = h.join();
    }
    Ok(ExitCode::SUCCESS)
}

/// One reading of every namespace asked for, all at once so an interval is spent once, not
/// once per namespace. Returns the snapshots and the `--all-netns` entries skipped.
fn read_all(
    args: &HostArgs,
    interval: Option<std::time::Duration>,
) -> io::Result<(Vec<Snapshot>, Vec<String>)> {
    let named = if args.all_netns {
        tcpwhy_hostscan::named_namespaces()
    } else {
        Vec::new()
    };
    let handles: Vec<_> = targets(args, named)
        .into_iter()
        .map(|t| {
            let h = std::thread::spawn({
                let t = t.clone();
                move || tcpwhy_hostscan::snapshot(t.as_deref(), interval)
            });
            (t, h)
        })
        .collect();
    let mut snaps = Vec::new();
    let mut skipped = Vec::new();
    for (name, h) in handles {
        match h.join() {
            Ok(Ok(s)) => snaps.push(s),
            // --all-netns lists /run/netns: an entry that is gone or no namespace (a stale
            // file) is skipped with a warning; a namespace asked for by name is an error.
            Ok(Err(e))
                if args.all_netns
                    && name.is_some()
                    && matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
                    ) =>
            {
                eprintln!("tcpwhy host: warning: skipped {e}");
                skipped.push(e.to_string());
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("a namespace reader panicked")),
        }
    }
    Ok((snaps, skipped))
}

fn states(s: &Snapshot) -> (usize, usize, usize, usize) {
    let n = |st: u8| s.sockets.iter().filter(|k| k.state == st).count();
    (
        s.sockets.len(),
        n(TCP_ESTABLISHED),
        n(TCP_TIME_WAIT),
        n(TCP_LISTEN),
    )
}

fn facts(s: &Snapshot) -> String {
    let (all, est, tw, listen) = states(s);
    let cc = s
        .sysctls
        .get("ipv4/tcp_congestion_control")
        .map_or("?", String::as_str);
    let ssai = s.int("ipv4/tcp_slow_start_after_idle");
    let moot = if cc.starts_with("bbr") && ssai == Some(1) {
        " (tcp_slow_start_after_idle=1 is moot for it)"
    } else {
        ""
    };
    let ehash = match s.int("ipv4/tcp_ehash_entries") {
        Some(e) if e < 0 => format!("shares the global ehash ({} buckets)", -e),
        Some(e) if s.init_namespace == Some(true) => format!("the global ehash ({e} buckets)"),
        Some(e) if s.init_namespace == Some(false) => format!("own ehash of {e} buckets"),
        Some(e) => format!("ehash of {e} buckets"),
        None => "ehash size unknown".into(),
    };
    let range = s
        .ints("ipv4/ip_local_port_range")
        .map(|r| format!("{r:?}"))
        .unwrap_or_else(|| "?".into());
    let server_tw = tcpwhy_hostscan::checks::server_time_wait(s);
    let tw = if server_tw > 0 {
        format!("{tw} TIME-WAIT ({server_tw} on listening ports: closed first by this side as the server)")
    } else {
        format!("{tw} TIME-WAIT")
    };
    format!(
        "{all} TCP sockets ({est} established, {tw}, {listen} listening); congestion control {cc}{moot}; {ehash}; ports {range}; timestamps {}, tw_reuse {}, rfc1337 {}",
        s.int("ipv4/tcp_timestamps").map_or("?".into(), |v| v.to_string()),
        s.int("ipv4/tcp_tw_reuse").map_or("?".into(), |v| v.to_string()),
        s.int("ipv4/tcp_rfc1337").map_or("?".into(), |v| v.to_string()),
    )
}

/// Said when no interval was given: the counters' lifetime totals cannot be judged.
const NO_INTERVAL: &str = "Counters not judged: run with --interval N to judge their increase over N seconds (stale-state collisions, SYN drops, retransmissions and TIME-WAIT ended early need it).";

fn text_report(
    out: &mut dyn Write,
    snaps: &[Snapshot],
    findings: &[HostFinding],
    skipped: &[String],
) -> io::Result<()> {
    // The list is in parentheses already: this namespace's label goes in without its own.
    let names: Vec<&str> = snaps
        .iter()
        .map(|s| match s.namespace.as_str() {
            THIS_NAMESPACE => "this namespace",
            named => named,
        })
        .collect();
    if findings.is_empty() {
        writeln!(
            out,
            "No host pathology found in {} namespace{} ({}).",
            snaps.len(),
            if snaps.len() == 1 { "" } else { "s" },
            names.join(", ")
        )?;
    } else {
        writeln!(out, "Host pathologies, ranked by impact:")?;
        for (i, f) in findings.iter().enumerate() {
            writeln!(
                out,
                "{:>2}. {} [{}{}]: {}",
                i + 1,
                f.id,
                f.namespace,
                if f.severity == "risk" {
                    ", waiting to happen"
                } else {
                    ""
                },
                f.explanation
            )?;
            writeln!(out, "    impact: {}", f.impact)?;
            writeln!(out, "    fix: {}", f.fix)?;
        }
    }
    if snaps.iter().any(|s| s.interval_s.is_none()) {
        writeln!(out, "{NO_INTERVAL}")?;
    }
    writeln!(out)?;
    for s in snaps {
        writeln!(out, "{}: {}", s.namespace, facts(s))?;
        if let Some(t) = s.interval_s {
            let moved: Vec<String> = s
                .deltas
                .iter()
                .filter(|(k, v)| **v > 0 && k.starts_with("Tcp"))
                .take(12)
                .map(|(k, v)| format!("{} +{v}", k.split_once('.').map_or(k.as_str(), |x| x.1)))
                .collect();
            writeln!(
                out,
                "  counters over {t:.1} s: {}",
                if moved.is_empty() {
                    "none moved".into()
                } else {
                    moved.join(", ")
                }
            )?;
        }
        for u in &s.unseen {
            writeln!(out, "  could not see: {u}")?;
        }
        if s.malformed > 0 {
            writeln!(out, "  {} netlink messages could not be read", s.malformed)?;
        }
    }
    for k in skipped {
        writeln!(out, "skipped: {k}")?;
    }
    Ok(())
}

fn json_report(
    out: &mut dyn Write,
    snaps: &[Snapshot],
    findings: &[HostFinding],
    interval: Option<f64>,
    skipped: &[String],
) -> io::Result<()> {
    let mut line = |v: serde_json::Value| -> io::Result<()> {
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")
    };
    for f in findings {
        line(json!({
            "type": "host-finding",
            "version": SCHEMA_VERSION,
            "id": f.id,
            "namespace": f.namespace,
            "severity": f.severity,
            "explanation": f.explanation,
            "impact": f.impact,
            "impact_ms": f.impact_ms,
            "fix": f.fix,
            "evidence": f.evidence,
        }))?;
    }
    for s in snaps {
        let (all, est, tw, listen) = states(s);
        line(json!({
            "type": "namespace",
            "version": SCHEMA_VERSION,
            "namespace": s.namespace,
            "sysctls": sysctls_json(&s.sysctls),
            "sockstat": s.sockstat,
            "sockets": {"total": all, "established": est, "time_wait": tw, "time_wait_on_listening_ports": tcpwhy_hostscan::checks::server_time_wait(s), "listen": listen},
            "counter_deltas": if s.interval_s.is_some() { json!(s.deltas.iter().filter(|(_, v)| **v > 0).collect::<std::collections::BTreeMap<_, _>>()) } else { serde_json::Value::Null },
            "unseen": s.unseen,
            "malformed_netlink_messages": s.malformed,
        }))?;
    }
    line(json!({
        "type": "host-summary",
        "version": SCHEMA_VERSION,
        "namespaces": snaps.len(),
        "findings": findings.len(),
        "interval_s": interval,
        "counters_judged": interval.is_some(),
        "skipped_namespaces": skipped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(names: &[&str]) -> String {
        let snaps: Vec<Snapshot> = names
            .iter()
            .map(|n| Snapshot {
                namespace: n.to_string(),
                ..Snapshot::default()
            })
            .collect();
        let mut out = Vec::new();
        text_report(&mut out, &snaps, &[], &[]).expect("writes to a vector");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn nothing_found_names_the_namespaces_once_in_parentheses() {
        let one = report(&[THIS_NAMESPACE]);
        assert!(
            one.starts_with("No host pathology found in 1 namespace (this namespace).\n"),
            "{one}"
        );
        let two = report(&[THIS_NAMESPACE, "lab-a"]);
        assert!(
            two.starts_with("No host pathology found in 2 namespaces (this namespace, lab-a).\n"),
            "{two}"
        );
        // A named namespace keeps its name as it is, parentheses and all.
        let odd = report(&["(lab)"]);
        assert!(
            odd.starts_with("No host pathology found in 1 namespace ((lab)).\n"),
            "{odd}"
        );
    }
}

/// The sysctls as JSON: a value of several numbers (ip_local_port_range, tcp_rmem) is an
/// array of them, so no reader splits a string on tabs; any other value is its text.
fn sysctls_json(sysctls: &std::collections::BTreeMap<String, String>) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> = sysctls
        .iter()
        .map(|(k, v)| {
            let parts: Vec<&str> = v.split_whitespace().collect();
            let nums: Option<Vec<i64>> = parts.iter().map(|p| p.parse().ok()).collect();
            let value = match nums {
                Some(n) if parts.len() > 1 => json!(n),
                _ => json!(v),
            };
            (k.clone(), value)
        })
        .collect();
    serde_json::Value::Object(m)
}

#[cfg(test)]
mod sysctl_tests {
    use super::sysctls_json;
    use serde_json::json;

    #[test]
    fn several_numbers_are_an_array_anything_else_its_text() {
        let m = [
            ("ipv4/ip_local_port_range", "32768\t60999"),
            ("ipv4/tcp_rmem", "4096 131072 6291456"),
            ("ipv4/tcp_rfc1337", "0"),
            ("ipv4/tcp_congestion_control", "bbr"),
            ("ipv4/tcp_allowed_congestion_control", "reno cubic"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into_iter()
        .collect();
        let j = sysctls_json(&m);
        assert_eq!(j["ipv4/ip_local_port_range"], json!([32768, 60999]));
        assert_eq!(j["ipv4/tcp_rmem"], json!([4096, 131072, 6291456]));
        assert_eq!(j["ipv4/tcp_rfc1337"], "0");
        assert_eq!(j["ipv4/tcp_congestion_control"], "bbr");
        assert_eq!(j["ipv4/tcp_allowed_congestion_control"], "reno cubic");
    }
}
