//! # tcpwhy-watch: the causes of TCP latency named live from the kernel, with no capture
//!
//! BPF programs on tracepoints only (skb:kfree_skb by its record; sock:inet_sock_set_state,
//! tcp:tcp_retransmit_skb, tcp:tcp_send_reset, tcp:tcp_receive_reset, tcp:tcp_cong_state_set,
//! tcp:tcp_probe and tcp:tcp_sendmsg_locked BTF-typed) keep each connection's state in BPF
//! maps and send an event when something is decided (`bpf/watch.bpf.c`); [`judge`] turns
//! the events into connect records and findings with analyze's ids, costs and fixes. Before
//! attaching, each record-reading program's layout is checked against the running kernel's
//! format file (a BTF-typed program is checked by the verifier against the kernel's BTF), and
//! reset and drop reasons are named from the format files.
//!
//! Architecture invariant: this crate changes nothing on the host but what watching needs
//! (BPF programs and maps, which go with the process, and tracefs, mounted when absent and
//! unmounted again); it never reads packets.

pub mod event;
pub mod format;
pub mod judge;

use event::Event;
use judge::{Connect, Judge, Kernel, WatchFinding};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes aligned for the ELF parser, which refuses an object at an odd address
/// (`include_bytes!` alone guarantees no alignment).
#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);

#[cfg(tcpwhy_bpf)]
static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/watch.bpf.o")));

/// The BPF object build.rs compiled (None when clang or libbpf-dev was missing).
#[cfg(tcpwhy_bpf)]
pub const BPF_OBJECT: Option<&[u8]> = Some(&OBJECT.0);
#[cfg(not(tcpwhy_bpf))]
pub const BPF_OBJECT: Option<&[u8]> = None;

/// A tracepoint a program attaches to, and the fields of its record the program reads
/// (name, offset, size), as `bpf/watch.bpf.c` declares them.
pub struct Tracepoint {
    pub program: &'static str,
    pub category: &'static str,
    pub name: &'static str,
    /// A BTF-typed raw tracepoint (tp_btf): the program reads the tracepoint's arguments
    /// (its TP_PROTO), typed from the kernel's BTF and checked by the verifier, not its
    /// record, so there is no layout to check beyond the tracepoint being there; it reads
    /// the socket directly.
    pub btf: bool,
    pub fields: &'static [(&'static str, usize, usize)],
}

pub const TRACEPOINTS: &[Tracepoint] = &[
    Tracepoint {
        program: "on_state",
        category: "sock",
        name: "inet_sock_set_state",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_retransmit",
        category: "tcp",
        name: "tcp_retransmit_skb",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_send_reset",
        category: "tcp",
        name: "tcp_send_reset",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_receive_reset",
        category: "tcp",
        name: "tcp_receive_reset",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_cong_state",
        category: "tcp",
        name: "tcp_cong_state_set",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_drop",
        category: "skb",
        name: "kfree_skb",
        btf: false,
        fields: &[
            ("skbaddr", 8, 8),
            ("rx_sk", 24, 8),
            ("protocol", 32, 2),
            ("reason", 36, 4),
        ],
    },
    Tracepoint {
        program: "on_synack",
        category: "tcp",
        name: "tcp_retransmit_synack",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_probe",
        category: "tcp",
        name: "tcp_probe",
        btf: true,
        fields: &[],
    },
    Tracepoint {
        program: "on_sendmsg",
        category: "tcp",
        name: "tcp_sendmsg_locked",
        btf: true,
        fields: &[],
    },
];

/// Which network namespaces to watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Netns {
    /// Every namespace.
    All,
    /// The namespace with this inode number.
    Inode(u32),
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Stop after this long (else at `stop`).
    pub duration: Option<Duration>,
    /// Only connections this process opened.
    pub pid: Option<u32>,
    /// Only connections opened by a process in this cgroup (v2 id: its directory's inode).
    pub cgroup: Option<u64>,
    pub netns: Netns,
    /// Send every connect() as an event (`Output::Connect`); otherwise only those with a SYN
    /// retransmission or a reset are, and the rest are counted in the kernel.
    pub connections: bool,
    /// Hand `Output::Tick` once a second (live metrics); reading the kernel's histogram for
    /// it is a system call per bucket, so a watch without metrics does not.
    pub ticks: bool,
}

/// What `run` hands its caller as it happens.
pub enum Output {
    Connect(Connect),
    Finding(WatchFinding),
    /// Once a second: the totals so far that no event carries (for live metrics).
    Tick {
        /// Clean connects the kernel counted without an event.
        kernel_connects: u64,
        events_lost: u64,
        /// `Summary::runs_skipped` so far.
        runs_skipped: u64,
        /// `Summary::openings_unseen` so far.
        openings_unseen: u64,
    },
}

/// Connect latencies in buckets at most 6.25% wide: exact below 16 ns, then 16 per power of
/// two (the four bits after the highest), up to 2^40 ns. The BPF program counts clean
/// connects in the same buckets (`bucket` in bpf/watch.bpf.c), so a day at 20 000 connects a
/// second costs no memory and no event.
#[derive(Clone, Debug)]
pub struct Latencies {
    counts: Vec<u64>,
    pub count: u64,
    /// The largest seen: exact for connects sent as events, the bucket's upper edge for those
    /// the kernel counted.
    pub max_ms: f64,
}

/// The number of buckets, as HIST_BUCKETS in bpf/watch.bpf.c.
pub const HIST_BUCKETS: usize = 608;

/// A duration in ns -> its bucket (the C function `bucket`, bit for bit).
pub fn bucket(ns: u64) -> usize {
    if ns < 16 {
        return ns as usize;
    }
    let l = 63 - ns.leading_zeros() as u64;
    let b = (l - 3) * 16 + ((ns >> (l - 4)) & 15);
    (b as usize).min(HIST_BUCKETS - 1)
}

/// The first duration (ns) past a bucket: its upper edge.
pub fn bucket_end_ns(b: usize) -> u64 {
    if b < 16 {
        return b as u64 + 1;
    }
    let l = (b / 16) as u64 + 3;
    let sub = (b % 16) as u64;
    (16 + sub + 1) << (l - 4)
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            counts: vec![0; HIST_BUCKETS],
            count: 0,
            max_ms: 0.0,
        }
    }
}

impl Latencies {
    pub fn add(&mut self, ms: f64) {
        let ns = (ms * 1e6).max(0.0) as u64;
        self.counts[bucket(ns)] += 1;
        self.count += 1;
        self.max_ms = self.max_ms.max(ms);
    }

    /// `n` connects the kernel counted in bucket `b`.
    pub fn add_bucket(&mut self, b: usize, n: u64) {
        if n == 0 || b >= HIST_BUCKETS {
            return;
        }
        self.counts[b] += n;
        self.count += n;
        self.max_ms = self.max_ms.max(bucket_end_ns(b) as f64 / 1e6);
    }

    /// The latency under which a fraction `q` of the connects finished: the upper edge of its
    /// bucket (at most 6.25% above the true value), never above the largest seen.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some((bucket_end_ns(i) as f64 / 1e6).min(self.max_ms));
            }
        }
        Some(self.max_ms)
    }
}

/// What a watch saw, at its end.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seconds: f64,
    pub events: u64,
    /// Events the BPF programs could not queue (the ring buffer was full): their connects
    /// and findings are missing from the output.
    pub events_lost: u64,
    /// Program runs the kernel skipped: a tracepoint fired while the same program was
    /// running on that CPU (an interrupt nested in it), so the program did not see the event
    /// (the kernel's `recursion_misses` of each program). A skipped state change or reset can
    /// leave a connect unreported; the output cannot say which.
    pub runs_skipped: u64,
    /// connect()s that closed while still marked as opening: their leaving SYN-SENT was not
    /// seen (a skipped run, `runs_skipped`), so no connect record or finding was made.
    pub openings_unseen: u64,
    /// Ring-buffer records of the wrong size (never expected; counted, not trusted).
    pub malformed: u64,
    pub connects: u64,
    pub failed_connects: u64,
    pub latencies: Latencies,
    /// id -> (findings, time lost in ns).
    pub findings: BTreeMap<&'static str, (u64, u64)>,
    /// Server-side findings folded into the client's finding of the same connection (both
    /// ends on the watched host): one wait, counted once.
    pub folded: u64,
    /// 4-tuples with one dropped SYN and no handshake after it while watched: a wait that
    /// cannot be priced.
    pub unresolved_drops: u64,
    /// Timeout resends a D-SACK proved unneeded (the receiver had the data): not findings.
    pub spurious_resends: u64,
    /// The tracepoints attached (`category:name`).
    pub attached: Vec<String>,
    /// One line per tracepoint that could not be used, and which findings that removes.
    pub unavailable: Vec<String>,
}

/// The directory tracefs is mounted on, if it is.
fn tracefs() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

/// Mounts tracefs on /sys/kernel/tracing when it is not mounted, and unmounts it on drop.
struct TracefsMount {
    mounted_here: bool,
}

impl TracefsMount {
    fn ensure() -> io::Result<(TracefsMount, PathBuf)> {
        if let Some(p) = tracefs() {
            return Ok((
                TracefsMount {
                    mounted_here: false,
                },
                p,
            ));
        }
        let at = Path::new("/sys/kernel/tracing");
        nix::mount::mount(
            Some("nodev"),
            at,
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| {
            io::Error::other(format!(
                "tracefs is not mounted and mounting it on {} failed ({e}): no tracepoint can be attached",
                at.display()
            ))
        })?;
        Ok((TracefsMount { mounted_here: true }, at.to_path_buf()))
    }
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = nix::mount::umount("/sys/kernel/tracing");
        }
    }
}

/// CONFIG_HZ from /proc/config.gz or /boot/config-RELEASE.
pub fn kernel_hz() -> Option<u32> {
    let text = std::fs::File::open("/proc/config.gz")
        .ok()
        .and_then(|f| {
            let mut s = String::new();
            flate2::read::GzDecoder::new(f)
                .read_to_string(&mut s)
                .ok()
                .map(|_| s)
        })
        .or_else(|| {
            let release = nix::sys::utsname::uname().ok()?;
            std::fs::read_to_string(format!(
                "/boot/config-{}",
                release.release().to_string_lossy()
            ))
            .ok()
        })?;
    config_hz(&text)
}

/// The `CONFIG_HZ=N` line of a kernel configuration.
pub fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|hz| *hz > 0)
}

/// The inode number of a network namespace file (`/proc/self/ns/net`, `/run/netns/NAME`).
pub fn netns_inode(path: &Path) -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(path)?.ino();
    u32::try_from(ino).map_err(|_| io::Error::other(format!("{}: inode {ino}", path.display())))
}

/// The cgroup (v2) id of a cgroup directory: its inode number, what
/// bpf_get_current_cgroup_id returns for a process in it. The directory must be on the
/// cgroup2 file system (a v1 hierarchy's inodes are another numbering).
pub fn cgroup_id(path: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    let on_v2 = nix::sys::statfs::statfs(path)
        .is_ok_and(|f| f.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    if !m.is_dir() || !on_v2 {
        return Err(io::Error::other(format!(
            "not a cgroup v2 directory{}",
            cgroup2_root()
                .map(|r| format!(" (cgroup2 is mounted on {})", r.display()))
                .unwrap_or_else(|| " (cgroup2 is not mounted)".into())
        )));
    }
    Ok(m.ino())
}

/// Where the cgroup2 file system is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
/// hybrid host), from /proc/self/mounts.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, at, kind) = (f.next()?, f.next()?, f.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(at))
    })
}

/// cgroup (v2) ids -> their paths under the cgroup2 mount, found by walking the tree (at
/// most 100 000 directories), again at most every 10 s when an id is not known.
#[derive(Default)]
pub struct Cgroups {
    paths: std::collections::HashMap<u64, String>,
    walked: Option<Instant>,
}

impl Cgroups {
    pub fn path(&mut self, id: u64) -> Option<&str> {
        if id == 0 {
            return None;
        }
        if !self.paths.contains_key(&id)
            && self
                .walked
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            match cgroup2_root() {
                Some(root) => self.walk(&root),
                None => self.walked = Some(Instant::now()),
            }
        }
        self.paths.get(&id).map(String::as_str)
    }

    fn walk(&mut self, root: &Path) {
        use std::os::unix::fs::MetadataExt;
        self.walked = Some(Instant::now());
        let mut stack = vec![root.to_path_buf()];
        let mut seen = 0;
        while let Some(d) = stack.pop() {
            seen += 1;
            if seen > 100_000 {
                break;
            }
            if let Ok(m) = std::fs::metadata(&d) {
                let rel = d
                    .strip_prefix(root)
                    .map_or(String::new(), |r| r.display().to_string());
                self.paths.insert(m.ino(), format!("/{rel}"));
            }
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
        }
    }
}

/// CLOCK_MONOTONIC now, in ns: the clock of the events' times.
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Checks a tracepoint's record against the layout its program reads: None when it
/// matches, else why not.
fn layout_problem(dir: &Path, tp: &Tracepoint) -> Option<String> {
    let path = dir
        .join("events")
        .join(tp.category)
        .join(tp.name)
        .join("format");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Some("not on this kernel".to_string())
        }
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    let have = format::fields(&text);
    for (name, offset, size) in tp.fields {
        match have.get(*name) {
            Some(f) if f.offset == *offset && f.size == *size => {}
            Some(f) => {
                return Some(format!(
                    "its field {name} is at offset {} size {}, the program reads offset {offset} size {size}",
                    f.offset, f.size
                ))
            }
            None => return Some(format!("it has no field {name}")),
        }
    }
    None
}

/// The finding ids that need a tracepoint.
fn ids_needing(tp: &Tracepoint) -> Vec<&'static str> {
    let full = format!("{}:{}", tp.category, tp.name);
    judge::IDS
        .iter()
        .filter(|(_, needs)| needs.contains(&full.as_str()))
        .map(|(id, _)| *id)
        .collect()
}

/// Counts a finding in the summary and hands it on.
fn finding(
    summary: &mut Summary,
    f: WatchFinding,
    out: &mut impl FnMut(Output) -> io::Result<()>,
) -> io::Result<()> {
    let t = summary.findings.entry(f.id).or_default();
    t.0 += 1;
    t.1 += f.cost_ns;
    out(Output::Finding(f))
}

/// Watch until `opts.duration` has passed or `stop` is set, handing each connect and
/// finding to `out` as it is decided. Errors only when nothing can be watched (not root,
/// built without BPF, no BTF, no tracefs, no tracepoint attached); a tracepoint that is
/// missing or laid out differently is left out and said in `Summary::unavailable`. `say`
/// receives those lines (prefixed "warning: ") before watching starts, then one line saying
/// what is attached, once it is.
pub fn run(
    opts: &Options,
    stop: &AtomicBool,
    mut say: impl FnMut(&str),
    mut out: impl FnMut(Output) -> io::Result<()>,
) -> io::Result<Summary> {
    let Some(object) = BPF_OBJECT else {
        return Err(io::Error::other(
            "this tcpwhy was built without its BPF programs (clang and libbpf-dev were missing at build time): nothing can be watched",
        ));
    };
    if !nix::unistd::geteuid().is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "watch loads BPF programs, which needs root (CAP_BPF and CAP_PERFMON): nothing can be watched (`tcpwhy host` shows the same kinds of trouble from counters, without BPF)",
        ));
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(io::Error::other(
            "no BTF at /sys/kernel/btf/vmlinux (a kernel built without CONFIG_DEBUG_INFO_BTF): the programs cannot be fitted to this kernel's structures; nothing can be watched",
        ));
    }
    let (_mount, dir) = TracefsMount::ensure()?;
    let mut summary = Summary::default();
    let mut usable = Vec::new();
    for tp in TRACEPOINTS {
        match layout_problem(&dir, tp) {
            None => usable.push(tp),
            Some(why) => {
                let line = format!(
                    "{}:{}: {why}; unavailable: {}",
                    tp.category,
                    tp.name,
                    match ids_needing(tp).as_slice() {
                        [] => "nothing".to_string(),
                        ids => ids.join(", "),
                    }
                );
                say(&format!("warning: {line}"));
                summary.unavailable.push(line);
            }
        }
    }
    let send_reset =
        std::fs::read_to_string(dir.join("events/tcp/tcp_send_reset/format")).unwrap_or_default();
    let kfree_skb =
        std::fs::read_to_string(dir.join("events/skb/kfree_skb/format")).unwrap_or_default();
    let mut judge = Judge::new(Kernel {
        hz: kernel_hz(),
        reset_reasons: format::symbols(&send_reset, "reason"),
        drop_reasons: format::symbols(&kfree_skb, "reason"),
    });
    // Drop reasons the kfree_skb program tells apart, by name (0 never names a drop).
    let drop_reason = |name: &str| -> u32 {
        judge
            .kernel
            .drop_reasons
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map_or(0, |(k, _)| *k)
    };
    let listen_overflow = drop_reason("TCP_LISTEN_OVERFLOW");
    let no_socket = drop_reason("NO_SOCKET");
    if judge.kernel.hz.is_none() {
        let line = "CONFIG_HZ unknown (no /proc/config.gz or /boot/config-RELEASE): the RTO, kept in jiffies, cannot be priced; unavailable: rto-retransmission".to_string();
        say(&format!("warning: {line}"));
        summary.unavailable.push(line);
    }
    let tgid = opts.pid.unwrap_or(0);
    let ns = match opts.netns {
        Netns::All => 0,
        Netns::Inode(i) => i,
    };
    let mut bpf = aya::EbpfLoader::new()
        .set_global("target_tgid", &tgid, true)
        .set_global("target_netns", &ns, true)
        .set_global("send_all_connects", &u32::from(opts.connections), true)
        .set_global("target_cgroup", &opts.cgroup.unwrap_or(0), true)
        .set_global("drop_listen_overflow", &listen_overflow, true)
        .set_global("drop_no_socket", &no_socket, true)
        .load(object)
        .map_err(|e| io::Error::other(format!("loading the BPF programs: {e:?}")))?;
    // The kernel's BTF, parsed once for the BTF-typed tracepoints.
    let mut btf: Option<aya::Btf> = None;
    for tp in usable {
        let attached = bpf
            .program_mut(tp.program)
            .ok_or_else(|| format!("no program {}", tp.program))
            .and_then(|p| {
                if tp.btf {
                    let p: &mut aya::programs::BtfTracePoint =
                        p.try_into().map_err(|e| format!("{e}"))?;
                    if btf.is_none() {
                        btf = Some(aya::Btf::from_sys_fs().map_err(|e| format!("{e}"))?);
                    }
                    let btf = btf.as_ref().ok_or("no BTF")?;
                    p.load(tp.name, btf).map_err(|e| format!("{e}"))?;
                    p.attach().map(|_| ()).map_err(|e| format!("{e}"))
                } else {
                    let p: &mut aya::programs::TracePoint =
                        p.try_into().map_err(|e| format!("{e}"))?;
                    p.load().map_err(|e| format!("{e}"))?;
                    p.attach(tp.category, tp.name)
                        .map(|_| ())
                        .map_err(|e| format!("{e}"))
                }
            });
        match attached {
            Ok(_) => summary
                .attached
                .push(format!("{}:{}", tp.category, tp.name)),
            Err(e) => {
                let line = format!(
                    "{}:{}: attaching failed ({e}); unavailable: {}",
                    tp.category,
                    tp.name,
                    ids_needing(tp).join(", ")
                );
                say(&format!("warning: {line}"));
                summary.unavailable.push(line);
            }
        }
    }
    if summary.attached.is_empty() {
        return Err(io::Error::other(
            "no tracepoint could be attached: nothing can be watched",
        ));
    }
    let mut ring = aya::maps::RingBuf::try_from(
        bpf.take_map("events")
            .ok_or_else(|| io::Error::other("the BPF object has no map `events`"))?,
    )
    .map_err(|e| io::Error::other(format!("the ring buffer: {e}")))?;
    // The programs' descriptors, whose fdinfo counts the runs the kernel skipped.
    let prog_fds: Vec<i32> = bpf
        .programs()
        .filter_map(|(_, p)| p.fd().ok())
        .map(|fd| {
            use std::os::fd::{AsFd, AsRawFd};
            fd.as_fd().as_raw_fd()
        })
        .collect();
    let runs_skipped = || prog_fds.iter().map(|&fd| recursion_misses(fd)).sum::<u64>();
    let openings_unseen: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
        bpf.take_map("openings_unseen")
            .ok_or_else(|| io::Error::other("the BPF object has no map `openings_unseen`"))?,
    )
    .map_err(|e| io::Error::other(format!("the unseen-opening counter: {e}")))?;
    let lost: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
        bpf.take_map("lost")
            .ok_or_else(|| io::Error::other("the BPF object has no map `lost`"))?,
    )
    .map_err(|e| io::Error::other(format!("the lost-event counter: {e}")))?;
    say(&format!(
        "watching {} ({}){}",
        summary.attached.join(", "),
        match opts.netns {
            Netns::All => "every network namespace".to_string(),
            Netns::Inode(i) => format!("network namespace {i}"),
        },
        opts.pid
            .map(|p| format!(", process {p}"))
            .unwrap_or_default()
            + &opts
                .cgroup
                .map(|c| format!(", cgroup id {c}"))
                .unwrap_or_default()
    ));
    let hist: Option<aya::maps::PerCpuArray<_, u64>> = bpf
        .take_map("connect_hist")
        .map(aya::maps::PerCpuArray::try_from)
        .transpose()
        .map_err(|e| io::Error::other(format!("the latency histogram: {e}")))?;
    let hist_count = |b: usize| -> u64 {
        hist.as_ref()
            .and_then(|h| h.get(&(b as u32), 0).ok())
            .map_or(0, |v| v.iter().sum())
    };
    let start = Instant::now();
    let mut next_tick = start + Duration::from_secs(1);
    // The ring buffer is drained every 10 ms while events come, every 100 ms when the last
    // drain found none (an idle host wakes the process 10 times a second, not 100): 4 MB
    // holds about 29 000 events, so even a burst of 200 000 events a second starting just
    // after an idle drain loses nothing before the next one.
    let (busy, idle) = (Duration::from_millis(10), Duration::from_millis(100));
    loop {
        let before = summary.events;
        while let Some(item) = ring.next() {
            summary.events += 1;
            let Some(e) = Event::parse(&item) else {
                summary.malformed += 1;
                continue;
            };
            drop(item);
            let (c, f) = judge.judge(&e);
            if let Some(c) = c {
                summary.connects += 1;
                if c.established {
                    summary.latencies.add(c.ms());
                } else {
                    summary.failed_connects += 1;
                }
                out(Output::Connect(c))?;
            }
            if let Some(f) = f {
                finding(&mut summary, f, &mut out)?;
            }
        }
        for f in judge.due(monotonic_ns()) {
            finding(&mut summary, f, &mut out)?;
        }
        if opts.ticks && Instant::now() >= next_tick {
            next_tick += Duration::from_secs(1);
            out(Output::Tick {
                kernel_connects: (0..HIST_BUCKETS).map(hist_count).sum(),
                events_lost: lost.get(&0, 0).unwrap_or(0),
                runs_skipped: runs_skipped(),
                openings_unseen: openings_unseen.get(&0, 0).unwrap_or(0),
            })?;
        }
        let done =
            stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| start.elapsed() >= d);
        if done {
            break;
        }
        std::thread::sleep(if summary.events > before { busy } else { idle });
    }
    // Server-side findings still held, and drops no handshake followed, are said now.
    for f in judge.due(u64::MAX) {
        finding(&mut summary, f, &mut out)?;
    }
    summary.folded = judge.folded;
    summary.spurious_resends = judge.spurious_resends;
    summary.unresolved_drops = judge.unresolved_drops;
    summary.seconds = start.elapsed().as_secs_f64();
    summary.events_lost = lost.get(&0, 0).unwrap_or(0);
    summary.runs_skipped = runs_skipped();
    summary.openings_unseen = openings_unseen.get(&0, 0).unwrap_or(0);
    // The clean connects the kernel counted without an event.
    for b in 0..HIST_BUCKETS {
        let n = hist_count(b);
        summary.connects += n;
        summary.latencies.add_bucket(b, n);
    }
    Ok(summary)
}

/// The runs of the BPF program behind descriptor `fd` (of this process) that the kernel
/// skipped because the program was already running on that CPU: the `recursion_misses` line
/// of its fdinfo (Linux 5.12 and later; 0 when the line is absent or unreadable).
fn recursion_misses(fd: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()
        .and_then(|t| parse_recursion_misses(&t))
        .unwrap_or(0)
}

fn parse_recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skipped_runs_come_from_the_programs_fdinfo() {
        // A BPF program's fdinfo as Linux 6.18 prints it (read from /proc/PID/fdinfo/FD of
        // a running `tcpwhy watch`, the count set here).
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t2071\nprog_type:\t26\nprog_jited:\t1\nprog_tag:\t327778e9b97487c5\nmemlock:\t12288\nprog_id:\t520\nrun_time_ns:\t0\nrun_cnt:\t0\nrecursion_misses:\t3\nverified_insns:\t1402\n";
        assert_eq!(parse_recursion_misses(info), Some(3));
        assert_eq!(parse_recursion_misses("pos:\t0\n"), None);
    }

    /// skb:kfree_skb's record as Linux 6.18 lays it out (its format file's field lines; the
    /// print format, with every drop reason, is left out).
    const KFREE_SKB: &str = "name: kfree_skb
ID: 2310
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:void * skbaddr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * location;\toffset:16;\tsize:8;\tsigned:0;
\tfield:void * rx_sk;\toffset:24;\tsize:8;\tsigned:0;
\tfield:unsigned short protocol;\toffset:32;\tsize:2;\tsigned:0;
\tfield:enum skb_drop_reason reason;\toffset:36;\tsize:4;\tsigned:0;
";

    #[test]
    fn a_tracepoint_laid_out_differently_is_left_out_and_said() {
        // kfree_skb's 6.18 record under a tracefs directory of our own; then the same with
        // `reason` moved, renamed, and the tracepoint absent.
        let tp = TRACEPOINTS
            .iter()
            .find(|t| t.name == "kfree_skb")
            .expect("kfree_skb is watched");
        let dir = tempfile::tempdir().expect("temporary directory");
        let events = dir.path().join("events/skb/kfree_skb");
        std::fs::create_dir_all(&events).unwrap();
        let format = events.join("format");
        // The format file laid out as `text`: what is wrong with it, if anything.
        let problem = |text: &str| {
            std::fs::write(&format, text).unwrap();
            layout_problem(dir.path(), tp)
        };
        assert_eq!(problem(KFREE_SKB), None);
        assert_eq!(
            problem(&KFREE_SKB.replace("reason;\toffset:36;", "reason;\toffset:40;")).as_deref(),
            Some("its field reason is at offset 40 size 4, the program reads offset 36 size 4")
        );
        assert_eq!(
            problem(
                &KFREE_SKB.replace("enum skb_drop_reason reason;", "enum skb_drop_reason why;")
            )
            .as_deref(),
            Some("it has no field reason")
        );
        std::fs::remove_file(&format).unwrap();
        assert_eq!(
            layout_problem(dir.path(), tp).as_deref(),
            Some("not on this kernel")
        );
        // What is then said: the finding ids that lose the tracepoint.
        assert_eq!(
            ids_needing(tp),
            [
                "syn-stale-state (server side)",
                "syn-unanswered (server side)",
                "accept-queue-full"
            ]
        );
    }

    #[test]
    fn hz_from_a_kernel_config() {
        assert_eq!(
            config_hz("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
            Some(250)
        );
        assert_eq!(config_hz("CONFIG_HZ_1000=y\n"), None);
        assert_eq!(config_hz("CONFIG_HZ=0\n"), None);
    }

    #[test]
    fn buckets_are_exact_then_at_most_one_sixteenth_wide() {
        // Below 16 ns a bucket per nanosecond; 16..31 continue them; then 16 per octave.
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(15), 15);
        assert_eq!(bucket(16), 16);
        assert_eq!(bucket(31), 31);
        assert_eq!(bucket(32), 32);
        assert_eq!(bucket(33), 32);
        assert_eq!(bucket(34), 33);
        // 1 ms = 2^19.93 ns: octave 19, the four bits after the top one are 1110 (14).
        assert_eq!(bucket(1_000_000), (19 - 3) * 16 + 14);
        assert_eq!(bucket(u64::MAX), HIST_BUCKETS - 1);
        // Every value lies below its bucket's end and at or past the previous bucket's end,
        // and a bucket is at most 1/16 of its lower edge wide.
        for ns in [1u64, 17, 100, 999, 1_000_000, 12_345_678, 1 << 39] {
            let b = bucket(ns);
            assert!(ns < bucket_end_ns(b), "{ns}");
            if b > 0 {
                let lo = bucket_end_ns(b - 1);
                assert!(lo <= ns, "{ns}");
                assert!((bucket_end_ns(b) - lo) * 16 <= lo.max(16), "{ns}");
            }
        }
    }

    #[test]
    fn latency_quantiles_are_within_a_sixteenth() {
        let mut l = Latencies::default();
        // 1..=1000 ms: the median is 500 ms, the 99th percentile 990 ms.
        for ms in 1..=1000 {
            l.add(f64::from(ms));
        }
        let p50 = l.quantile_ms(0.5).unwrap();
        let p99 = l.quantile_ms(0.99).unwrap();
        assert!((500.0..=500.0 * 17.0 / 16.0).contains(&p50), "{p50}");
        assert!((990.0..=1000.0).contains(&p99), "{p99}");
        assert_eq!(l.quantile_ms(1.0), Some(1000.0));
        assert_eq!(Latencies::default().quantile_ms(0.5), None);
        // Counts from the kernel's buckets join them: 1000 more at about 0.1 ms move the
        // median down to that bucket's end.
        let b = bucket(100_000);
        l.add_bucket(b, 1000);
        assert_eq!(l.count, 2000);
        let p50 = l.quantile_ms(0.5).unwrap();
        assert!((0.1..=0.1 * 17.0 / 16.0).contains(&p50), "{p50}");
        l.add_bucket(HIST_BUCKETS, 5);
        assert_eq!(l.count, 2000);
    }

    #[test]
    fn every_tracepoint_names_what_it_serves() {
        // Each program's tracepoint feeds at least one finding (receive_reset: syn-refused).
        for tp in TRACEPOINTS {
            assert!(!ids_needing(tp).is_empty(), "{}", tp.name);
        }
    }
}
