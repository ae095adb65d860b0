//! # tcpwhy-hostscan: the TCP pathologies a live Linux host shows, or is set up for
//!
//! Per network namespace: the TCP sysctls that matter (docs/tcp-signatures.md section 9), the
//! socket counts of /proc/net/sockstat(6), every TCP socket through sock_diag netlink (with
//! tcp_info and the congestion control name), and the Tcp/TcpExt counters (with the host's
//! softnet_stat backlog drops), as deltas over an interval when one is given. Over an interval the TIME-WAIT sockets are also read at its
//! start (to see which ended early) and the listeners every 100 ms (to name the one whose
//! accept queue filled). Checks turn that [`Snapshot`] into [`HostFinding`]s; they are pure
//! functions, tested on built snapshots. Reading needs no privilege in the caller's own
//! namespace; entering another one (`setns`) needs root.
//!
//! Architecture invariant: it reads (procfs, sysctls, sock_diag) and changes nothing on the
//! host; checks are pure functions of a `Snapshot`.
#![forbid(unsafe_code)]

pub mod checks;
pub mod diag;
pub mod proc;

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The sysctls read in every namespace (under /proc/sys/net/).
pub const SYSCTLS: &[&str] = &[
    "ipv4/tcp_slow_start_after_idle",
    "ipv4/tcp_congestion_control",
    "ipv4/tcp_timestamps",
    "ipv4/tcp_tw_reuse",
    "ipv4/tcp_tw_reuse_delay",
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
    /// The namespace's identity (the inode of its nsfs file): two names for one namespace
    /// have the same.
    pub netns_inode: Option<u64>,
    /// Whether this is the initial network namespace, whose established-hash table is the
    /// global one (None: not read).
    pub init_namespace: Option<bool>,
    /// With an interval: the TIME-WAIT sockets at its start.
    pub time_wait_before: Vec<diag::Socket>,
    /// With an interval: every listener's accept queue, sampled through it (and at its end).
    pub listeners: Vec<ListenerSample>,
}

/// A listener's accept queue over the interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSample {
    pub local: (IpAddr, u16),
    /// The listen() backlog (after the somaxconn cap).
    pub backlog: u32,
    /// The longest accept queue seen.
    pub max_queue: u32,
    pub samples: u32,
    /// Samples in which the queue was full: Linux refuses a connection when it holds more
    /// than the backlog (`sk_acceptq_is_full`), so backlog + 1 is full (listen(0) holds one).
    pub full_samples: u32,
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
    match std::fs::read_to_string("/proc/net/softnet_stat") {
        Ok(t) => c.extend(proc::softnet(&t)),
        Err(e) => unseen.push(format!("/proc/net/softnet_stat: {e}")),
    }
    c
}

/// The listeners' accept queues are sampled this often through an interval (or less often,
/// so that an hour's interval takes at most [`MAX_LISTEN_SAMPLES`]).
pub const LISTEN_SAMPLE_EVERY: Duration = Duration::from_millis(100);
pub const MAX_LISTEN_SAMPLES: u32 = 600;

/// Fold one dump of listeners into the samples.
pub fn sample_listeners(into: &mut Vec<ListenerSample>, listeners: &[diag::Socket]) {
    for l in listeners.iter().filter(|l| l.state == diag::TCP_LISTEN) {
        let full = l.rqueue > l.wqueue;
        match into.iter_mut().find(|x| x.local == l.src) {
            Some(x) => {
                x.backlog = l.wqueue;
                x.max_queue = x.max_queue.max(l.rqueue);
                x.samples += 1;
                x.full_samples += u32::from(full);
            }
            None => into.push(ListenerSample {
                local: l.src,
                backlog: l.wqueue,
                max_queue: l.rqueue,
                samples: 1,
                full_samples: u32::from(full),
            }),
        }
    }
}

/// The inode of a namespace file (`/proc/.../ns/net`): a namespace's identity.
fn ns_inode(path: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Read a namespace; with `interval`, the counters and the TIME-WAIT sockets at its start,
/// the listeners through it, and everything at its end.
pub fn snapshot(netns: Option<&str>, interval: Option<Duration>) -> io::Result<Snapshot> {
    let name = netns.map(str::to_string);
    let work = move || -> io::Result<Snapshot> {
        if let Some(ns) = &name {
            enter(ns)?;
        }
        let label = name.clone().unwrap_or_else(|| THIS_NAMESPACE.into());
        let mut unseen = Vec::new();
        let mut listeners = Vec::new();
        let mut time_wait_before = Vec::new();
        let start = Instant::now();
        let before = interval.map(|_| read_counters(&mut unseen));
        if let Some(d) = interval {
            match diag::dump_states(1 << diag::TCP_TIME_WAIT) {
                Ok((tw, _)) => time_wait_before = tw,
                Err(e) => unseen.push(format!("TIME-WAIT sockets at the start: {e}")),
            }
            let every = LISTEN_SAMPLE_EVERY.max(d / MAX_LISTEN_SAMPLES);
            let mut next = start;
            // Bounded by time and by count: at most MAX_LISTEN_SAMPLES + 1 turns.
            for _ in 0..=MAX_LISTEN_SAMPLES {
                let now = Instant::now();
                if now >= start + d {
                    break;
                }
                if now >= next {
                    if let Ok((l, _)) = diag::dump_states(1 << diag::TCP_LISTEN) {
                        sample_listeners(&mut listeners, &l);
                    }
                    next += every;
                }
                std::thread::sleep(
                    next.min(start + d)
                        .saturating_duration_since(Instant::now()),
                );
            }
            // A turn cut short by the count: sleep out the rest of the interval.
            std::thread::sleep((start + d).saturating_duration_since(Instant::now()));
        }
        let mut s = read_here(&label);
        s.unseen.extend(unseen);
        s.netns_inode = ns_inode("/proc/thread-self/ns/net");
        s.init_namespace = match (s.netns_inode, ns_inode("/proc/1/ns/net")) {
            (Some(a), Some(b)) => Some(a == b),
            // PID 1's namespace file is out of reach (a sandbox, or not root): the initial
            // namespace alone has the global net.core sysctls (dev_weight among them).
            _ => Some(std::path::Path::new("/proc/sys/net/core/dev_weight").exists()),
        };
        if let (Some(before), Some(_)) = (before, interval) {
            // The interval as it was, not as asked: a loaded machine wakes late.
            s.interval_s = Some(start.elapsed().as_secs_f64());
            for (k, v) in &s.counters {
                if let Some(b) = before.get(k) {
                    s.deltas.insert(k.clone(), v.saturating_sub(*b));
                }
            }
            sample_listeners(&mut listeners, &s.sockets);
            s.listeners = listeners;
            s.time_wait_before = time_wait_before;
        }
        Ok(s)
    };
    // A thread of its own: setns changes the calling thread only, and it ends with it.
    std::thread::spawn(work)
        .join()
        .map_err(|_| io::Error::other("namespace reader panicked"))?
}

/// Enter the network namespace `/run/netns/NAME` (the calling thread only). The error's kind
/// says what went wrong: `InvalidInput` for a name that is not one or an entry that is no
/// namespace (a stale file left in /run/netns), `NotFound` for no such entry,
/// `PermissionDenied` without the privilege.
fn enter(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--netns {name:?}: not a namespace name"),
        ));
    }
    let f = std::fs::File::open(format!("/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("netns {name}: {e}")))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| match e {
        nix::errno::Errno::EPERM => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("netns {name}: setns: {e} (needs root)"),
        ),
        // setns on a file that is not a namespace: the mount behind the name is gone.
        nix::errno::Errno::EINVAL => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("netns {name}: /run/netns/{name} is not a network namespace (a stale entry; `ip netns delete {name}` removes it)"),
        ),
        e => io::Error::other(format!("netns {name}: setns: {e}")),
    })
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
