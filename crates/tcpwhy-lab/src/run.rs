//! What every scenario shares: phases with their own capture, the emulator in the router,
//! the analyzer run on the capture, and the report.

use crate::capture::{LiveCapture, PcapWriter, LINKTYPE_ETHERNET};
use crate::emulator::{self, EmulatorConfig, EmulatorStats};
use crate::os;
use crate::stats::{ms, Latencies};
use crate::topo::{Topology, CLIENT_IF};
use serde_json::{json, Value};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tcpwhy_track::{Analyzer, Config, Connection};

/// Bytes kept of each captured frame: all headers (lengths come from the IP header), so the
/// committed captures stay small.
pub const SNAPLEN: u32 = 96;

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
}

#[derive(Clone, Debug)]
pub enum CaptureTarget {
    Dir(PathBuf),
    /// (directory, stem, extension, include the scenario name)
    Prefix(PathBuf, String, String, bool),
}

impl CaptureTarget {
    pub fn path(&self, scenario: &str, phase: &str) -> PathBuf {
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
}

impl Ctx {
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
    pub capture: Option<PathBuf>,
    /// Facts the analyzer found in this phase's capture.
    pub analyzer: Vec<String>,
    /// Findings `tcpwhy analyze` made of this phase's capture: (id, count, total cost ms).
    pub named: Vec<(String, usize, f64)>,
    pub extra: Value,
}

impl Phase {
    pub fn new(name: &str, metric: &'static str) -> Phase {
        Phase {
            name: name.to_string(),
            settings: Vec::new(),
            metric,
            latencies: Latencies::default(),
            capture: None,
            analyzer: Vec::new(),
            named: Vec::new(),
            extra: Value::Null,
        }
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

pub fn start_capture(ns: &str, iface: &str, path: &Path) -> io::Result<RunningCapture> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (iface, p, st) = (iface.to_string(), path.to_path_buf(), Arc::clone(&stop));
    let handle = os::spawn_in(ns, move || {
        let opened = LiveCapture::open(Some(&iface))
            .and_then(|c| PcapWriter::create(&p, SNAPLEN, LINKTYPE_ETHERNET).map(|w| (c, w)));
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

/// The emulator running in the router namespace, with the NFQUEUE rule installed.
pub struct RunningEmulator<'a> {
    topo: &'a Topology,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<EmulatorStats>>>,
}

const QUEUE: u16 = 0;

pub fn start_emulator(topo: &Topology, cfg: EmulatorConfig) -> io::Result<RunningEmulator<'_>> {
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let cfg = EmulatorConfig {
        queue: QUEUE,
        ..cfg
    };
    let handle = os::spawn_in(&topo.router, move || emulator::run(&cfg, &st));
    // Give the emulator time to bind its queue before packets are sent to it.
    std::thread::sleep(Duration::from_millis(100));
    if handle.is_finished() {
        return match handle.join() {
            Ok(Err(e)) => Err(e),
            _ => Err(io::Error::other("emulator stopped at start")),
        };
    }
    let q = QUEUE.to_string();
    topo.iptables(&["-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", &q])?;
    Ok(RunningEmulator {
        topo,
        stop,
        handle: Some(handle),
    })
}

impl RunningEmulator<'_> {
    pub fn finish(mut self) -> io::Result<EmulatorStats> {
        self.shutdown()
    }
    fn shutdown(&mut self) -> io::Result<EmulatorStats> {
        let q = QUEUE.to_string();
        let r = self
            .topo
            .iptables(&["-D", "FORWARD", "-j", "NFQUEUE", "--queue-num", &q]);
        self.stop.store(true, Ordering::Relaxed);
        let stats = match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("emulator thread panicked"))??,
            None => return Err(io::Error::other("emulator already stopped")),
        };
        r?;
        Ok(stats)
    }
}

impl Drop for RunningEmulator<'_> {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.shutdown();
        }
    }
}

/// Capture the client's veth during `f` (the capture point of most field reports: near the
/// client); record the file in the phase.
pub fn captured<T>(
    ctx: &Ctx,
    topo: &Topology,
    scenario: &str,
    phase: &mut Phase,
    f: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    captured_at(ctx, &topo.client, CLIENT_IF, scenario, phase, f)
}

/// Capture interface `iface` of namespace `ns` during `f`.
pub fn captured_at<T>(
    ctx: &Ctx,
    ns: &str,
    iface: &str,
    scenario: &str,
    phase: &mut Phase,
    f: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let path = ctx.opts.capture.path(scenario, &phase.name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let cap = start_capture(ns, iface, &path)?;
    let r = f();
    let (path, _) = cap.finish()?;
    phase.capture = Some(path);
    r
}

/// Run a capture file through the engine of `tcpwhy analyze` into `sink`.
fn analyze_file(path: &Path, sink: &mut dyn tcpwhy_track::Sink) -> io::Result<()> {
    let p = path.to_string_lossy().into_owned();
    let mut cap = tcpwhy_capture::Capture::open(&[p]).map_err(io::Error::other)?;
    let mut an = Analyzer::new(Config::default());
    while let Some(pkt) = cap.next().map_err(io::Error::other)? {
        an.frame(pkt.frame, pkt.ts_ns, pkt.link, pkt.data, pkt.orig_len, sink);
    }
    an.finish(sink);
    Ok(())
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

/// What the analyzer named in a phase's capture: (id, findings, total cost in ms).
pub fn named(phase: &Phase) -> io::Result<Vec<(String, usize, f64)>> {
    let Some(path) = &phase.capture else {
        return Ok(Vec::new());
    };
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
        "capture": p.capture.as_ref().map(|c| c.to_string_lossy().into_owned()),
        "analyzer": p.analyzer,
        "findings": p.named.iter().map(|(id, n, cost)| json!({"id": id, "count": n, "cost_ms": cost})).collect::<Vec<_>>(),
        "extra": p.extra,
    })
}
