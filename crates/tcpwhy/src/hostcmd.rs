//! `tcpwhy host`: the pathologies a live Linux host shows or is set up for, per network
//! namespace (crate tcpwhy-hostscan), in text or JSON Lines.

use crate::output::json::SCHEMA_VERSION;
use crate::Format;
use serde_json::json;
use std::io::{self, Write};
use std::process::ExitCode;
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
    /// Read the counters twice, this many seconds apart, and judge their increase.
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// Output format (text or json).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
}

pub fn run(args: &HostArgs) -> io::Result<ExitCode> {
    if args.format == Format::Html {
        return Err(io::Error::other("tcpwhy host: --format text or json"));
    }
    let interval = match args.interval {
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(_) => {
            return Err(io::Error::other(
                "--interval: seconds, more than 0 and at most 3600",
            ))
        }
        None => None,
    };
    let root = tcpwhy_hostscan::is_root();
    if (args.all_netns || !args.netns.is_empty()) && !root {
        eprintln!("tcpwhy host: --netns and --all-netns enter other network namespaces, which needs root; without them tcpwhy host inspects its own namespace");
        return Ok(ExitCode::from(2));
    }
    let mut targets: Vec<Option<String>> = Vec::new();
    if args.all_netns {
        targets.push(None);
        targets.extend(tcpwhy_hostscan::named_namespaces().into_iter().map(Some));
    } else if args.netns.is_empty() {
        targets.push(None);
    } else {
        targets.extend(args.netns.iter().cloned().map(Some));
    }
    // Read them all at once so an interval is spent once, not once per namespace.
    let handles: Vec<_> = targets
        .into_iter()
        .map(|t| std::thread::spawn(move || tcpwhy_hostscan::snapshot(t.as_deref(), interval)))
        .collect();
    let mut snaps = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => snaps.push(s),
            Ok(Err(e)) => {
                eprintln!("tcpwhy host: {e}");
                return Ok(ExitCode::from(2));
            }
            Err(_) => return Err(io::Error::other("a namespace reader panicked")),
        }
    }
    if !root {
        for s in &mut snaps {
            s.unseen.push(
                "not root: other namespaces (--netns, --all-netns), and other users' sockets may hide some tcp_info".into(),
            );
        }
    }
    let findings = tcpwhy_hostscan::checks::run(&snaps);
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot write {p}: {e}")))?,
        )),
        None => Box::new(io::BufWriter::new(io::stdout().lock())),
    };
    match args.format {
        Format::Json => json_report(&mut out, &snaps, &findings, args.interval)?,
        _ => text_report(&mut out, &snaps, &findings)?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
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
        Some(e) => format!("own ehash of {e} buckets"),
        None => "ehash size unknown".into(),
    };
    let range = s
        .ints("ipv4/ip_local_port_range")
        .map(|r| format!("{r:?}"))
        .unwrap_or_else(|| "?".into());
    format!(
        "{all} TCP sockets ({est} established, {tw} TIME-WAIT, {listen} listening); congestion control {cc}{moot}; {ehash}; ports {range}; timestamps {}, tw_reuse {}, rfc1337 {}",
        s.int("ipv4/tcp_timestamps").map_or("?".into(), |v| v.to_string()),
        s.int("ipv4/tcp_tw_reuse").map_or("?".into(), |v| v.to_string()),
        s.int("ipv4/tcp_rfc1337").map_or("?".into(), |v| v.to_string()),
    )
}

fn text_report(
    out: &mut dyn Write,
    snaps: &[Snapshot],
    findings: &[HostFinding],
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
                "  counters over {t:.0} s: {}",
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
    Ok(())
}

fn json_report(
    out: &mut dyn Write,
    snaps: &[Snapshot],
    findings: &[HostFinding],
    interval: Option<f64>,
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
            "sysctls": s.sysctls,
            "sockstat": s.sockstat,
            "sockets": {"total": all, "established": est, "time_wait": tw, "listen": listen},
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
        text_report(&mut out, &snaps, &[]).expect("writes to a vector");
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
