//! # tcpwhy-hostscan: the TCP pathologies a live Linux host shows, or is set up for
//!
//! Per network namespace: the TCP sysctls that matter (tcp-signatures.md section 9), the
//! socket counts of /proc/net/sockstat(6), every TCP socket through sock_diag netlink (with
//! tcp_info and the congestion control name), and the Tcp/TcpExt counters, as deltas over an
//! interval when one is given. Checks turn that [`Snapshot`] into [`HostFinding`]s; they are
//! pure functions, tested on built snapshots. Reading needs no privilege in the caller's own
//! namespace; entering another one (`setns`) needs root.
#![forbid(unsafe_code)]

pub mod checks;
pub mod diag;
pub mod proc;

use std::collections::BTreeMap;
use std::io;

/// The sysctls read in every namespace (under /proc/sys/net/).
pub const SYSCTLS: &[&str] = &[
    "ipv4/tcp_slow_start_after_idle",
    "ipv4/tcp_congestion_control",
    "ipv4/tcp_timestamps",
    "ipv4/tcp_tw_reuse",
    "ipv4/ip_local_port_range",
    "ipv4/tcp_fin_timeout",
    "ipv4/tcp_max_tw_buckets",
    "ipv4/tcp_syn_retries",
    "ipv4/tcp_syn_linear_timeouts",
    "ipv4/tcp_synack_retries",
    "ipv4/tcp_max_syn_backlog",
    "core/somaxconn",
    "ipv4/tcp_ehash_entries",
    "ipv4/tcp_child_ehash_entries",
    "ipv4/tcp_rfc1337",
    "ipv4/tcp_invalid_ratelimit",
    "ipv4/tcp_challenge_ack_limit",
    "ipv4/tcp_early_retrans",
    "ipv4/tcp_recovery",
    "ipv4/tcp_rto_min_us",
    "ipv4/tcp_sack",
    "ipv4/tcp_syncookies",
];

/// The label of the namespace tcpwhy runs in (it has no `ip netns` name).
pub const THIS_NAMESPACE: &str = "(this namespace)";

/// What one namespace looks like at one moment (and, with an interval, how its counters moved).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `ip netns` name, or [`THIS_NAMESPACE`].
    pub namespace: String,
    /// Sysctl name (as in [`SYSCTLS`]) -> its text, trimmed.
    pub sysctls: BTreeMap<String, String>,
    /// `TCP.tw`, `TCP6.inuse`, ...
    pub sockstat: BTreeMap<String, u64>,
    /// `TcpExt.ListenDrops`, `Tcp.ActiveOpens`, ... (totals at the end of the interval).
    pub counters: BTreeMap<String, u64>,
    /// Counter increase over `interval_s` (empty without an interval).
    pub deltas: BTreeMap<String, u64>,
    pub interval_s: Option<f64>,
    pub sockets: Vec<diag::Socket>,
    /// What could not be read, and why.
    pub unseen: Vec<String>,
    /// Netlink messages that could not be parsed.
    pub malformed: u32,
}

impl Snapshot {
    /// A sysctl as integers (`ip_local_port_range` gives two).
    pub fn ints(&self, key: &str) -> Option<Vec<i64>> {
        self.sysctls
            .get(key)
            .map(|v| proc::ints(v))
            .filter(|v| !v.is_empty())
    }
    pub fn int(&self, key: &str) -> Option<i64> {
        self.ints(key).and_then(|v| v.first().copied())
    }
}

/// One pathology found on the host, with the same parts as a capture finding: a stable id,
/// an explanation with the numbers, the estimated impact, the evidence, the fix.
#[derive(Clone, Debug, PartialEq)]
pub struct HostFinding {
    pub id: &'static str,
    pub namespace: String,
    /// `now` (happening), or `risk` (set up to happen).
    pub severity: &'static str,
    pub explanation: String,
    /// The estimated cost, in words with numbers ("+3 round trips x 50 ms on the next burst").
    pub impact: String,
    /// For ranking: an estimate of the latency at stake per affected operation, in ms.
    pub impact_ms: f64,
    pub fix: String,
    pub evidence: serde_json::Value,
}

/// Read the calling thread's network namespace (see [`in_namespace`] for another one).
pub fn read_here(name: &str) -> Snapshot {
    let mut s = Snapshot {
        namespace: name.to_string(),
        ..Snapshot::default()
    };
    for key in SYSCTLS {
        match std::fs::read_to_string(format!("/proc/sys/net/{key}")) {
            Ok(v) => {
                s.sysctls.insert((*key).to_string(), v.trim().to_string());
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {} // older kernel: not there
            Err(e) => s.unseen.push(format!("sysctl {key}: {e}")),
        }
    }
    // /proc/thread-self/net is this thread's namespace (after setns), /proc/self/net would be
    // the process leader's.
    for f in ["sockstat", "sockstat6"] {
        match std::fs::read_to_string(format!("/proc/thread-self/net/{f}")) {
            Ok(t) => {
                // sockstat6's lines are TCP6, UDP6, ...: no clash with sockstat's.
                for (k, v) in proc::sockstat(&t) {
                    s.sockstat.entry(k).or_insert(v);
                }
            }
            Err(e) => s.unseen.push(format!("/proc/net/{f}: {e}")),
        }
    }
    s.counters = read_counters(&mut s.unseen);
    match diag::dump() {
        Ok((socks, malformed)) => {
            s.sockets = socks;
            s.malformed = malformed;
        }
        Err(e) => s.unseen.push(format!("sockets (sock_diag): {e}")),
    }
    s
}

fn read_counters(unseen: &mut Vec<String>) -> BTreeMap<String, u64> {
    let mut c = BTreeMap::new();
    for f in ["netstat", "snmp"] {
        match std::fs::read_to_string(format!("/proc/thread-self/net/{f}")) {
            Ok(t) => c.extend(proc::counters(&t)),
            Err(e) => unseen.push(format!("/proc/net/{f}: {e}")),
        }
    }
    c
}

/// Read a namespace; with `interval`, the counters twice, `interval` apart (sockets and
/// sysctls at the end).
pub fn snapshot(
    netns: Option<&str>,
    interval: Option<std::time::Duration>,
) -> io::Result<Snapshot> {
    let name = netns.map(str::to_string);
    let work = move || -> io::Result<Snapshot> {
        if let Some(ns) = &name {
            enter(ns)?;
        }
        let label = name.clone().unwrap_or_else(|| THIS_NAMESPACE.into());
        let mut unseen = Vec::new();
        let before = interval.map(|_| read_counters(&mut unseen));
        if let Some(d) = interval {
            std::thread::sleep(d);
        }
        let mut s = read_here(&label);
        s.unseen.extend(unseen);
        if let (Some(before), Some(d)) = (before, interval) {
            s.interval_s = Some(d.as_secs_f64());
            for (k, v) in &s.counters {
                if let Some(b) = before.get(k) {
                    s.deltas.insert(k.clone(), v.saturating_sub(*b));
                }
            }
        }
        Ok(s)
    };
    // A thread of its own: setns changes the calling thread only, and it ends with it.
    std::thread::spawn(work)
        .join()
        .map_err(|_| io::Error::other("namespace reader panicked"))?
}

/// Enter the network namespace `/run/netns/NAME` (the calling thread only).
fn enter(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::other(format!(
            "--netns {name:?}: not a namespace name"
        )));
    }
    let f = std::fs::File::open(format!("/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("netns {name}: {e}")))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("netns {name}: setns: {e} (needs root)")))
}

/// The named namespaces (`ip netns list`), sorted.
pub fn named_namespaces() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
