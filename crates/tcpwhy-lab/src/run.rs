//! What every scenario shares: phases with their own capture, the emulator in the router,
//! the analyzer run on the capture, and the report.

use crate::capture::{LiveCapture, PcapWriter, LINKTYPE_ETHERNET};
use crate::emulator::{self, EmulatorConfig, EmulatorStats};
use crate::matrix::Vantage;
use crate::os;
use crate::stats::{ms, Latencies};
use crate::topo::{Topology, TopologyOptions};
use serde_json::{json, Value};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tcpwhy_track::{Config, Connection};

/// Bytes kept of each captured frame over IPv4: all headers (lengths come from the IP header),
/// so the committed captures stay small. Ethernet 14 + IPv4 20 + TCP with the most options 60
/// = 94 (the lab sends no IP options).
pub const SNAPLEN: u32 = 96;
/// Over IPv6: Ethernet 14 + IPv6 40 + TCP 60 = 114 (96 would cut the SACK blocks of a data
/// segment with timestamps and three blocks; the lab sends no extension headers).
pub const SNAPLEN6: u32 = 128;

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Where captures go: a directory (`<dir>/<scenario>-<phase>.pcap`), or a file name
    /// whose stem gets `-<phase>` (and `-<scenario>` when several scenarios run) appended.
    pub capture: CaptureTarget,
    /// Shorter runs (fewer repetitions, shorter idle gaps) for CI.
    pub quick: bool,
    /// stale-syn-timewait: server tcp_rfc1337=1 (about a minute per reconnect).
    pub rfc1337: bool,
    /// seed000-reproducer: how long to loop.
    pub seconds: f64,
    /// Where each phase is captured (all at once, in the same run); empty: the scenario's own
    /// vantage.
    pub vantages: Vec<Vantage>,
    /// The hosts' veths use TSO, GSO and GRO (see [`TopologyOptions::offloads`]).
    pub offloads: bool,
    /// Connect over IPv6.
    pub ipv6: bool,
    /// Capture files name their cell: `<scenario>-<vantage>-<on|off>-ip<4|6>-<phase>.pcap`.
    pub cell_names: bool,
}

impl RunOptions {
    /// The cell part of a capture's name: `<vantage>-<on|off>-ip<4|6>`.
    pub fn cell(&self, v: Vantage) -> String {
        format!(
            "{}-{}-ip{}",
            v.name(),
            if self.offloads { "on" } else { "off" },
            if self.ipv6 { 6 } else { 4 }
        )
    }
}

#[derive(Clone, Debug)]
pub enum CaptureTarget {
    Dir(PathBuf),
    /// (directory, stem, extension, include the scenario name)
    Prefix(PathBuf, String, String, bool),
}

impl CaptureTarget {
    /// The file of one phase's capture; `cell` (see [`RunOptions::cell`]) goes between the
    /// scenario and the phase when given.
    pub fn path(&self, scenario: &str, cell: Option<&str>, phase: &str) -> PathBuf {
        let phase = match cell {
            Some(c) => format!("{c}-{phase}"),
            None => phase.to_string(),
        };
        match self {
            CaptureTarget::Dir(d) => d.join(format!("{scenario}-{phase}.pcap")),
            CaptureTarget::Prefix(dir, stem, ext, with_scenario) => {
                let name = if *with_scenario {
                    format!("{stem}-{scenario}-{phase}.{ext}")
                } else {
                    format!("{stem}-{phase}.{ext}")
                };
                dir.join(name)
            }
        }
    }
}

pub struct Ctx {
    pub opts: RunOptions,
    pub stop: Arc<AtomicBool>,
    /// Where the scenario captures when `opts.vantages` is empty.
    pub default_vantage: Vantage,
}

impl Ctx {
    /// The vantages each phase is captured at.
    pub fn vantages(&self) -> Vec<Vantage> {
        if self.opts.vantages.is_empty() {
            vec![self.default_vantage]
        } else {
            self.opts.vantages.clone()
        }
    }

    /// The capture a scenario reads its own facts from ("capture shows"): the one at its own
    /// vantage when the run took one there, else the first.
    pub fn own_capture<'a>(&self, phase: &'a Phase) -> Option<&'a Path> {
        phase
            .capture_at(self.default_vantage)
            .map(|c| c.path.as_path())
            .or_else(|| phase.capture())
    }

    /// A topology with this run's offloads and IP version.
    pub fn topology(&self) -> io::Result<Topology> {
        Topology::create(&TopologyOptions {
            offloads: self.opts.offloads,
            ipv6: self.opts.ipv6,
            ..TopologyOptions::default()
        })
    }

    pub fn interrupted(&self) -> bool {
        os::interrupted(&self.stop)
    }
    pub fn check(&self) -> io::Result<()> {
        if self.interrupted() {
            Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"))
        } else {
            Ok(())
        }
    }
}

/// One configuration of a scenario: broken, fixed, control...
#[derive(Debug)]
pub struct Phase {
    pub name: String,
    /// What this phase set, in words ("client net.ipv4.tcp_timestamps=0").
    pub settings: Vec<String>,
    /// What the latencies measure ("connect", "response").
    pub metric: &'static str,
    pub latencies: Latencies,
    /// One capture per vantage, all of the same traffic.
    pub captures: Vec<PhaseCapture>,
    /// Facts the analyzer found in this phase's (first) capture.
    pub analyzer: Vec<String>,
    pub extra: Value,
}

/// A phase's capture at one vantage.
#[derive(Debug)]
pub struct PhaseCapture {
    pub vantage: Vantage,
    pub path: PathBuf,
    /// Findings `tcpwhy analyze` made of it: (id, count, total cost ms), filled by
    /// [`analyze_outcome`].
    pub named: Vec<(String, usize, f64)>,
}

impl Phase {
    pub fn new(name: &str, metric: &'static str) -> Phase {
        Phase {
            name: name.to_string(),
            settings: Vec::new(),
            metric,
            latencies: Latencies::default(),
            captures: Vec::new(),
            analyzer: Vec::new(),
            extra: Value::Null,
        }
    }

    /// The first vantage's capture (the scenario's own when no vantage was asked for).
    pub fn capture(&self) -> Option<&Path> {
        self.captures.first().map(|c| c.path.as_path())
    }

    /// The capture taken at `v`.
    pub fn capture_at(&self, v: Vantage) -> Option<&PhaseCapture> {
        self.captures.iter().find(|c| c.vantage == v)
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub phases: Vec<Phase>,
    pub notes: Vec<String>,
}

/// A capture running on a veth in one namespace until `stop`.
pub struct RunningCapture {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<io::Result<u64>>,
    pub path: PathBuf,
}

pub fn start_capture(
    ns: &str,
    iface: &str,
    path: &Path,
    snaplen: u32,
) -> io::Result<RunningCapture> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (iface, p, st) = (iface.to_string(), path.to_path_buf(), Arc::clone(&stop));
    let handle = os::spawn_in_on(ns, os::helper_cpu(), move || {
        let opened = LiveCapture::open(Some(&iface))
            .and_then(|c| PcapWriter::create(&p, snaplen, LINKTYPE_ETHERNET).map(|w| (c, w)));
        let (mut cap, mut w) = match opened {
            Ok(x) => {
                let _ = ready_tx.send(Ok(()));
                x
            }
            Err(e) => {
                let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                return Err(e);
            }
        };
        while !st.load(Ordering::Relaxed) {
            if let Some(pkt) = cap.next()? {
                w.write(pkt.ts_ns, pkt.data, pkt.orig_len)?;
            }
        }
        w.finish()
    });
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(RunningCapture {
            stop,
            handle,
            path: path.to_path_buf(),
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("capture did not start")),
    }
}

impl RunningCapture {
    pub fn finish(self) -> io::Result<(PathBuf, u64)> {
        // Let the last packets of the phase (FINs, final ACKs) arrive.
        std::thread::sleep(Duration::from_millis(100));
        self.stop.store(true, Ordering::Relaxed);
        let n = self
            .handle
            .join()
            .map_err(|_| io::Error::other("capture thread panicked"))??;
        Ok((self.path, n))
    }
}

/// The emulators running in the router and the mid namespaces, with their NFQUEUE rules
/// installed.
pub struct RunningEmulator<'a> {
    topo: &'a Topology,
    parts: Vec<EmulatorPart>,
}

struct EmulatorPart {
    ns: String,
    /// The interface whose arriving packets this part handles.
    iface: &'static str,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<EmulatorStats>>>,
    /// The NFQUEUE rule is in place (and must be removed).
    rule: bool,
}

const QUEUE: u16 = 0;

/// Start the link emulator, one direction in each router: the router delays and drops what
/// the client sends (packets arriving on `rc0`), the mid what the server sends (arriving on
/// `ms0`), each by the whole one-way delay. So the middle vantage, between them, is one
/// one-way delay from each end (it sees half the round trip on each side); and the last
/// router before each host forwards in its receive path, not from the emulator's verdict,
/// so the host's GRO merges back-to-back segments as a NIC's would (a packet the kernel
/// reinjects after a verdict is delivered on its own: no GRO merge behind it). A drop rule
/// goes to the direction of its source address (the client's when it names none). A
/// direction runs only when it has a delay or a drop rule.
pub fn start_emulator(topo: &Topology, cfg: EmulatorConfig) -> io::Result<RunningEmulator<'_>> {
    let server = topo.server_ip();
    let (to_client, to_server): (Vec<_>, Vec<_>) =
        cfg.drops.into_iter().partition(|r| r.src == Some(server));
    let mut emu = RunningEmulator {
        topo,
        parts: Vec::new(),
    };
    for (ns, iface, drops) in [
        (&topo.router, crate::topo::ROUTER_CLIENT_IF, to_server),
        (&topo.mid, crate::topo::MID_SERVER_IF, to_client),
    ] {
        if cfg.delay.is_zero() && drops.is_empty() {
            continue;
        }
        let part = EmulatorConfig {
            queue: QUEUE,
            delay: cfg.delay,
            drops,
        };
        emu.start(ns, iface, part)?;
    }
    Ok(emu)
}

impl RunningEmulator<'_> {
    fn start(&mut self, ns: &str, iface: &'static str, cfg: EmulatorConfig) -> io::Result<()> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        // On the helper CPU: it releases the packets, and the kernel forwards them on the CPU
        // that released them; one CPU keeps them in order.
        let handle = os::spawn_in_on(ns, os::helper_cpu(), move || emulator::run(&cfg, &st));
        // Give the emulator time to bind its queue before packets are sent to it.
        std::thread::sleep(Duration::from_millis(100));
        if handle.is_finished() {
            return match handle.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(io::Error::other("emulator stopped at start")),
            };
        }
        self.parts.push(EmulatorPart {
            ns: ns.to_string(),
            iface,
            stop,
            handle: Some(handle),
            rule: false,
        });
        self.topo.iptables_in(ns, &rule("-A", iface))?;
        if let Some(p) = self.parts.last_mut() {
            p.rule = true;
        }
        Ok(())
    }

    /// Stop every emulator; returns their statistics summed where they add up (packets,
    /// drops, forwarded) and the first one's for the rest.
    pub fn finish(mut self) -> io::Result<EmulatorStats> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<EmulatorStats> {
        let mut total: Option<EmulatorStats> = None;
        let mut err = None;
        for mut p in self.parts.drain(..) {
            if p.rule {
                if let Err(e) = self.topo.iptables_in(&p.ns, &rule("-D", p.iface)) {
                    err.get_or_insert(e);
                }
            }
            p.stop.store(true, Ordering::Relaxed);
            let r = match p.handle.take() {
                Some(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("emulator thread panicked"))),
                None => Err(io::Error::other("emulator already stopped")),
            };
            match (r, &mut total) {
                (Ok(s), None) => total = Some(s),
                (Ok(s), Some(t)) => {
                    t.packets += s.packets;
                    t.dropped += s.dropped;
                    t.forwarded += s.forwarded;
                }
                (Err(e), _) => {
                    err.get_or_insert(e);
                }
            }
        }
        match (err, total) {
            (Some(e), _) => Err(e),
            (None, Some(t)) => Ok(t),
            (None, None) => Ok(EmulatorStats::default()),
        }
    }
}

/// The iptables arguments that add (`-A`) or delete (`-D`) the rule sending the packets that
/// arrive on `iface` to the emulator.
fn rule(op: &'static str, iface: &'static str) -> [&'static str; 8] {
    [
        op,
        "FORWARD",
        "-i",
        iface,
        "-j",
        "NFQUEUE",
        "--queue-num",
        "0",
    ]
}

impl Drop for RunningEmulator<'_> {
    fn drop(&mut self) {
        if !self.parts.is_empty() {
            let _ = self.shutdown();
        }
    }
}

/// Where vantage `v` captures: (namespace, interface).
pub fn vantage_point(topo: &Topology, v: Vantage) -> (&str, &'static str) {
    match v {
        Vantage::Client => (&topo.client, crate::topo::CLIENT_IF),
        Vantage::Middle => (&topo.router, crate::topo::ROUTER_SERVER_IF),
        Vantage::Server => (&topo.server, crate::topo::SERVER_IF),
    }
}

/// Capture the phase at every vantage of the run (see [`Ctx::vantages`]) during `f`; record
/// the files in the phase. The captures stop also when `f` fails.
pub fn captured<T>(
    ctx: &Ctx,
    topo: &Topology,
    scenario: &str,
    phase: &mut Phase,
    f: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let snaplen = if topo.ipv6 { SNAPLEN6 } else { SNAPLEN };
    let mut running = Vec::new();
    for v in ctx.vantages() {
        let cell = ctx.opts.cell_names.then(|| ctx.opts.cell(v));
        let path = ctx
            .opts
            .capture
            .path(scenario, cell.as_deref(), &phase.name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let (ns, iface) = vantage_point(topo, v);
        // Captures started before a failure stop when `running` is dropped (their threads
        // end with the stop flag set by finish, or when the run ends).
        match start_capture(ns, iface, &path, snaplen) {
            Ok(c) => running.push((v, c)),
            Err(e) => {
                for (_, c) in running {
                    let _ = c.finish();
                }
                return Err(e);
            }
        }
    }
    let r = f();
    let mut first_err = None;
    for (vantage, c) in running {
        match c.finish() {
            Ok((path, _)) => phase.captures.push(PhaseCapture {
                vantage,
                path,
                named: Vec::new(),
            }),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    let r = r?;
    match first_err {
        Some(e) => Err(e),
        None => Ok(r),
    }
}

/// Run a capture file through the engine of `tcpwhy analyze` into `sink`.
fn analyze_file<S: tcpwhy_track::Sink>(path: &Path, sink: &mut S) -> io::Result<()> {
    let p = path.to_string_lossy().into_owned();
    let mut cap = tcpwhy_capture::Capture::open(&[p]).map_err(io::Error::other)?;
    let run = tcpwhy_engine::track(&mut cap, Config::default(), sink, &mut |_, _| Ok(()))?;
    match run.error {
        Some(e) => Err(io::Error::other(e)),
        None => Ok(()),
    }
}

/// The findings `tcpwhy analyze` makes of a capture: (id, cost in ns) per finding.
pub fn findings(path: &Path) -> io::Result<Vec<(&'static str, i64)>> {
    struct Keep(Vec<(&'static str, i64)>);
    impl tcpwhy_detect::Output for Keep {
        fn finding(&mut self, f: &tcpwhy_detect::Finding) {
            self.0.push((f.id, f.cost_ns));
        }
        fn connection(&mut self, _c: &Connection) {}
    }
    let mut keep = Keep(Vec::new());
    analyze_file(path, &mut tcpwhy_detect::Detectors::new(&[], &mut keep))?;
    Ok(keep.0)
}

/// What the analyzer named in a capture: (id, findings, total cost in ms).
pub fn named(path: &Path) -> io::Result<Vec<(String, usize, f64)>> {
    let mut by: std::collections::BTreeMap<&str, (usize, i64)> = Default::default();
    for (id, cost) in findings(path)? {
        let e = by.entry(id).or_default();
        e.0 += 1;
        e.1 += cost;
    }
    Ok(by
        .into_iter()
        .map(|(k, (n, c))| (k.to_string(), n, ms_ns(c)))
        .collect())
}

/// The diagnosis end to end: what `tcpwhy analyze` names in every capture of every phase.
pub fn analyze_outcome(o: &mut Outcome) -> io::Result<()> {
    for p in &mut o.phases {
        for c in &mut p.captures {
            c.named = named(&c.path)?;
        }
    }
    Ok(())
}

fn ms_ns(ns: i64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

/// Every connection in a capture file, via the same engine as `tcpwhy analyze`.
pub fn connections(path: &Path) -> io::Result<Vec<Connection>> {
    let mut out = Vec::new();
    analyze_file(path, &mut |c: &Connection| out.push(c.clone()))?;
    out.sort_by_key(|c| c.id());
    Ok(out)
}

pub fn phase_json(p: &Phase) -> Value {
    let l = &p.latencies;
    json!({
        "phase": p.name,
        "settings": p.settings,
        "metric": p.metric,
        "samples": l.len(),
        "p50_ms": l.p50().map(ms),
        "p99_ms": l.p99().map(ms),
        "max_ms": l.max().map(ms),
        "histogram": l.histogram().iter().map(|(k, n)| (k.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "capture": p.capture().map(|c| c.to_string_lossy().into_owned()),
        "analyzer": p.analyzer,
        "findings": p.captures.first().map_or(json!([]), |c| findings_json(&c.named)),
        "vantages": p.captures.iter().map(|c| json!({
            "vantage": c.vantage.name(),
            "capture": c.path.to_string_lossy(),
            "findings": findings_json(&c.named),
        })).collect::<Vec<_>>(),
        "extra": p.extra,
    })
}

fn findings_json(named: &[(String, usize, f64)]) -> Value {
    named
        .iter()
        .map(|(id, n, cost)| json!({"id": id, "count": n, "cost_ms": cost}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulator_rule_names_the_queue() {
        assert_eq!(rule("-A", "rc0")[7], QUEUE.to_string());
        assert_eq!(rule("-D", "ms0")[..4], ["-D", "FORWARD", "-i", "ms0"]);
    }

    #[test]
    fn snaplen_keeps_every_header() {
        // Ethernet + IP without options or extension headers + TCP with 40 bytes of options.
        assert!(SNAPLEN as usize >= 14 + 20 + 60);
        assert!(SNAPLEN6 as usize >= 14 + 40 + 60);
    }

    #[test]
    fn capture_names_carry_the_cell() {
        let opts = RunOptions {
            capture: CaptureTarget::Dir(PathBuf::from("/x")),
            quick: true,
            rfc1337: false,
            seconds: 1.0,
            vantages: vec![Vantage::Middle],
            offloads: true,
            ipv6: true,
            cell_names: true,
        };
        let cell = opts.cell(Vantage::Middle);
        assert_eq!(
            opts.capture.path("tail-loss", Some(&cell), "broken"),
            PathBuf::from("/x/tail-loss-middle-on-ip6-broken.pcap")
        );
        assert_eq!(
            opts.capture.path("tail-loss", None, "broken"),
            PathBuf::from("/x/tail-loss-broken.pcap")
        );
        let p = CaptureTarget::Prefix(PathBuf::from("/y"), "run".into(), "pcap".into(), true);
        assert_eq!(
            p.path("nagle-delayed-ack", Some("client-off-ip4"), "fixed"),
            PathBuf::from("/y/run-nagle-delayed-ack-client-off-ip4-fixed.pcap")
        );
    }
}
