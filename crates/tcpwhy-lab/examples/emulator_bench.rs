//! Measures the NFQUEUE emulator for real. Needs root, `ip` and `iptables-legacy`.
//!
//! Builds a throwaway client -- router -- server topology of network namespaces named
//! `twemu-*` (10.123.1.0/24 and 10.123.2.0/24, traffic only inside them), runs the emulator
//! in a thread inside the router namespace, and measures:
//!
//! 1. TCP ping-pong RTT without the emulator (baseline) and through it with delay 0: the
//!    difference, halved, is the added latency per pass;
//! 2. packet rate: a TCP bulk transfer and a small-UDP flood through the emulator (delay 0);
//! 3. TCP ping-pong RTT with 25 ms one-way delay (target 50 ms), idle and under a bulk load.
//!
//! Every namespace is deleted at the end, also on error or panic.
//!
//! ```text
//! cargo run --release -p tcpwhy-lab --example emulator_bench [-- --quick]
//! ```
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};
use tcpwhy_lab::emulator::{self, DropRule, EmulatorConfig, EmulatorStats};
use tcpwhy_wire::TcpFlags;

const NS_CLI: &str = "twemu-cli";
const NS_RTR: &str = "twemu-rtr";
const NS_SRV: &str = "twemu-srv";
const CLI_IP: &str = "10.123.1.2";
const SRV_IP: &str = "10.123.2.2";
const QUEUE: u16 = 7;
const IO_TIMEOUT: Duration = Duration::from_secs(3);

fn cmd(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespaces; dropping it deletes them.
struct Topology;

impl Topology {
    fn create() -> Result<Topology, String> {
        // Leftovers of an earlier, killed run of this program (the names are ours).
        for ns in [NS_CLI, NS_RTR, NS_SRV] {
            let _ = cmd(&["ip", "netns", "del", ns]);
        }
        let topo = Topology;
        for ns in [NS_CLI, NS_RTR, NS_SRV] {
            cmd(&["ip", "netns", "add", ns])?;
            cmd(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        let veth = |a: &str, ans: &str, b: &str, bns: &str| {
            cmd(&[
                "ip", "link", "add", a, "netns", ans, "type", "veth", "peer", "name", b, "netns",
                bns,
            ])
        };
        veth("c0", NS_CLI, "r0", NS_RTR)?;
        veth("s0", NS_SRV, "r1", NS_RTR)?;
        for (ns, dev, addr) in [
            (NS_CLI, "c0", "10.123.1.2/24"),
            (NS_RTR, "r0", "10.123.1.1/24"),
            (NS_RTR, "r1", "10.123.2.1/24"),
            (NS_SRV, "s0", "10.123.2.2/24"),
        ] {
            cmd(&["ip", "-n", ns, "addr", "add", addr, "dev", dev])?;
            cmd(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        cmd(&[
            "ip",
            "-n",
            NS_CLI,
            "route",
            "add",
            "default",
            "via",
            "10.123.1.1",
        ])?;
        cmd(&[
            "ip",
            "-n",
            NS_SRV,
            "route",
            "add",
            "default",
            "via",
            "10.123.2.1",
        ])?;
        cmd(&[
            "ip",
            "netns",
            "exec",
            NS_RTR,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])?;
        Ok(topo)
    }

    fn nfqueue_rule(&self, op: &str) -> Result<(), String> {
        let q = QUEUE.to_string();
        cmd(&[
            "ip",
            "netns",
            "exec",
            NS_RTR,
            "iptables-legacy",
            op,
            "FORWARD",
            "-j",
            "NFQUEUE",
            "--queue-num",
            &q,
        ])
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [NS_CLI, NS_RTR, NS_SRV] {
            if let Err(e) = cmd(&["ip", "netns", "del", ns]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

fn enter(ns: &str) -> io::Result<()> {
    let f = File::open(format!("/var/run/netns/{ns}"))?;
    setns(&f, CloneFlags::CLONE_NEWNET)?;
    Ok(())
}

fn spawn_in<T: Send + 'static>(
    ns: &'static str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> JoinHandle<io::Result<T>> {
    thread::spawn(move || {
        enter(ns)?;
        f()
    })
}

fn join<T>(h: JoinHandle<io::Result<T>>, what: &str) -> Result<T, String> {
    h.join()
        .map_err(|_| format!("{what}: thread panicked"))?
        .map_err(|e| format!("{what}: {e}"))
}

/// The emulator in the router with the NFQUEUE rule installed.
struct Running<'a> {
    topo: &'a Topology,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<EmulatorStats>>>,
}

fn start(topo: &Topology, delay: Duration) -> Result<Running<'_>, String> {
    start_with(topo, delay, Vec::new())
}

fn start_with(
    topo: &Topology,
    delay: Duration,
    drops: Vec<DropRule>,
) -> Result<Running<'_>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let cfg = EmulatorConfig {
        queue: QUEUE,
        delay,
        drops,
    };
    let tid = Arc::new(AtomicU64::new(0));
    let t = Arc::clone(&tid);
    let handle = spawn_in(NS_RTR, move || {
        t.store(nix::unistd::gettid().as_raw() as u64, Ordering::Release);
        emulator::run(&cfg, &st)
    });
    let mut running = Running {
        topo,
        stop,
        handle: Some(handle),
    };
    // Wait until the queue is bound (its line appears in the router's /proc table).
    let bound = spawn_in(NS_RTR, || {
        for _ in 0..300 {
            let t = std::fs::read_to_string("/proc/thread-self/net/netfilter/nfnetlink_queue")
                .unwrap_or_default();
            if t.lines()
                .any(|l| l.split_whitespace().next() == Some(&QUEUE.to_string()))
            {
                return Ok(true);
            }
            thread::sleep(Duration::from_millis(10));
        }
        Ok(false)
    });
    if !join(bound, "bind check")? {
        running.stop()?;
        return Err("emulator did not bind its queue".into());
    }
    // Optional experiment: TWEMU_PRIO="renice -n -10 -p" or "chrt -f -p 10" is run on the
    // emulator thread's id.
    if let Ok(p) = std::env::var("TWEMU_PRIO") {
        let id = tid.load(Ordering::Acquire).to_string();
        let mut args: Vec<&str> = p.split_whitespace().collect();
        args.push(&id);
        cmd(&args)?;
    }
    topo.nfqueue_rule("-A")?;
    Ok(running)
}

impl Running<'_> {
    fn stop(&mut self) -> Result<EmulatorStats, String> {
        let rule = self.topo.nfqueue_rule("-D");
        self.stop.store(true, Ordering::Relaxed);
        let stats = match self.handle.take() {
            Some(h) => join(h, "emulator")?,
            None => return Err("emulator already stopped".into()),
        };
        // -D fails when -A was never run (bind failure path): nothing to remove then.
        let _ = rule;
        Ok(stats)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.stop();
        }
    }
}

fn accept(listener: &TcpListener, deadline: Instant) -> io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, "no connection"))
}

fn connect(port: u16) -> io::Result<TcpStream> {
    let addr: SocketAddr = format!("{SRV_IP}:{port}")
        .parse()
        .map_err(io::Error::other)?;
    let mut last = io::Error::other("unreached");
    for _ in 0..5 {
        match TcpStream::connect_timeout(&addr, IO_TIMEOUT) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(last)
}

fn listen(port: u16) -> io::Result<TcpListener> {
    TcpListener::bind(format!("{SRV_IP}:{port}"))
}

/// Server side of the ping-pong: echoes `size`-byte messages until EOF, at most `max`.
fn echo_server(port: u16, size: usize, max: usize, ready: Arc<AtomicBool>) -> io::Result<()> {
    let l = listen(port)?;
    ready.store(true, Ordering::Release);
    let mut s = accept(&l, Instant::now() + Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    let mut buf = vec![0u8; size];
    for _ in 0..max {
        match s.read_exact(&mut buf) {
            Ok(()) => s.write_all(&buf)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn wait_ready(ready: &AtomicBool) {
    for _ in 0..500 {
        if ready.load(Ordering::Acquire) {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// TCP ping-pong from client to server: `n` round trips (after 5 warm-up ones) of `size`
/// bytes, stopping early at `limit`. Returns the RTTs.
fn ping_pong(port: u16, n: usize, size: usize, limit: Duration) -> Result<Vec<Duration>, String> {
    let ready = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ready);
    let server = spawn_in(NS_SRV, move || echo_server(port, size, n + 10, r));
    wait_ready(&ready);
    let client = spawn_in(NS_CLI, move || {
        let mut s = connect(port)?;
        let mut buf = vec![7u8; size];
        let mut rtts = Vec::with_capacity(n);
        let end = Instant::now() + limit;
        for i in 0..n + 5 {
            if Instant::now() > end {
                break;
            }
            let t = Instant::now();
            s.write_all(&buf)?;
            s.read_exact(&mut buf)?;
            if i >= 5 {
                rtts.push(t.elapsed());
            }
        }
        s.shutdown(Shutdown::Both)?;
        Ok(rtts)
    });
    let rtts = join(client, "ping-pong client")?;
    join(server, "ping-pong server")?;
    Ok(rtts)
}

/// TCP bulk transfer client -> server for `dur`. Returns bytes received by the server.
fn bulk(port: u16, dur: Duration, stop: Option<Arc<AtomicBool>>) -> Result<u64, String> {
    let ready = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ready);
    let server = spawn_in(NS_SRV, move || {
        let l = listen(port)?;
        r.store(true, Ordering::Release);
        let mut s = accept(&l, Instant::now() + Duration::from_secs(10))?;
        let mut buf = vec![0u8; 1 << 18];
        let mut total = 0u64;
        let end = Instant::now() + dur + Duration::from_secs(10);
        while Instant::now() < end {
            match s.read(&mut buf)? {
                0 => break,
                n => total += n as u64,
            }
        }
        Ok(total)
    });
    wait_ready(&ready);
    let client = spawn_in(NS_CLI, move || {
        let mut s = connect(port)?;
        let buf = vec![0x5au8; 1 << 16];
        let end = Instant::now() + dur;
        while Instant::now() < end && !stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            s.write_all(&buf)?;
        }
        s.shutdown(Shutdown::Write)?;
        Ok(())
    });
    join(client, "bulk client")?;
    join(server, "bulk server")
}

/// Small UDP datagrams client -> server as fast as the client can send for `dur` (at most
/// 10 M). Returns (sent, received).
fn udp_flood(port: u16, dur: Duration) -> Result<(u64, u64), String> {
    let got = Arc::new(AtomicU64::new(0));
    let g = Arc::clone(&got);
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    let ready = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ready);
    let server = spawn_in(NS_SRV, move || {
        let s = UdpSocket::bind(format!("{SRV_IP}:{port}"))?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        r.store(true, Ordering::Release);
        let mut buf = [0u8; 2048];
        let end = Instant::now() + dur + Duration::from_secs(5);
        while Instant::now() < end {
            match s.recv(&mut buf) {
                Ok(_) => {
                    g.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) if d.load(Ordering::Relaxed) => break,
                Err(_) => {}
            }
        }
        Ok(())
    });
    wait_ready(&ready);
    let client = spawn_in(NS_CLI, move || {
        let s = UdpSocket::bind(format!("{CLI_IP}:0"))?;
        s.connect(format!("{SRV_IP}:{port}"))?;
        let payload = [0xa5u8; 32];
        let end = Instant::now() + dur;
        let mut sent = 0u64;
        while sent < 10_000_000 {
            if sent % 256 == 0 && Instant::now() > end {
                break;
            }
            if s.send(&payload).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    });
    let sent = join(client, "udp client")?;
    thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    join(server, "udp server")?;
    Ok((sent, got.load(Ordering::Relaxed)))
}

fn pct(v: &mut [Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rtt_json(v: &mut [Duration]) -> serde_json::Value {
    serde_json::json!({
        "n": v.len(),
        "p50_us": us(pct(v, 0.5)),
        "p99_us": us(pct(v, 0.99)),
        "max_us": us(pct(v, 1.0)),
        "min_us": us(pct(v, 0.0)),
    })
}

fn emu_line(name: &str, s: &EmulatorStats) {
    println!(
        "  emulator[{name}]: {} pkts, max_held {}, late p50/p99/max {}/{}/{} us, cpu {:.2}s of {:.2}s, kernel drops {}+{}, overruns {}, verdict errors {}",
        s.packets,
        s.max_held,
        s.late_p50_us,
        s.late_p99_us,
        s.late_max_us,
        s.cpu_time.as_secs_f64(),
        s.elapsed.as_secs_f64(),
        s.kernel_queue_dropped,
        s.kernel_user_dropped,
        s.overruns,
        s.verdict_errors
    );
}

/// Drop rules on the real kernel path: the client's first SYN (connect then takes the 1 s SYN
/// retransmission), and the server's 7th data segment (one ping-pong waits for a retransmit).
fn drop_check(
    topo: &Topology,
    next_port: &mut impl FnMut() -> u16,
    report: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    let cli: std::net::IpAddr = CLI_IP.parse().map_err(|e| format!("{e}"))?;
    let srv: std::net::IpAddr = SRV_IP.parse().map_err(|e| format!("{e}"))?;
    let rules = vec![
        DropRule {
            src: Some(cli),
            dst: Some(srv),
            flags_all: TcpFlags::SYN,
            flags_none: TcpFlags::ACK,
            min_payload: 0,
            max_payload: None,
            skip: 0,
            count: 1,
        },
        DropRule {
            src: Some(srv),
            dst: None,
            flags_all: 0,
            flags_none: 0,
            min_payload: 1,
            max_payload: None,
            skip: 6, // the 7th response: past the 5 warm-up round trips
            count: 1,
        },
    ];
    let mut emu = start_with(topo, Duration::ZERO, rules)?;
    let t = Instant::now();
    let mut rtts = ping_pong(next_port(), 10, 64, Duration::from_secs(20))?;
    let total = t.elapsed();
    let s = emu.stop()?;
    let max_rtt = pct(&mut rtts, 1.0);
    println!(
        "drop rules: dropped {} (expect 2), ping-pong took {:.0} ms (SYN retransmit ~1 s), slowest RTT {:.0} ms (data retransmit)",
        s.dropped,
        ms(total),
        ms(max_rtt)
    );
    let ok = s.dropped == 2
        && total >= Duration::from_millis(900)
        && max_rtt >= Duration::from_millis(150);
    report.insert(
        "drop_check".into(),
        serde_json::json!({"ok": ok, "dropped": s.dropped, "total_ms": ms(total), "max_rtt_ms": ms(max_rtt)}),
    );
    if !ok {
        return Err("drop rules did not behave as expected".into());
    }
    Ok(())
}

fn overhead_and_rate(
    topo: &Topology,
    scale: impl Fn(usize) -> usize,
    rate_dur: Duration,
    next_port: &mut impl FnMut() -> u16,
    report: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    // Interleaved rounds (baseline, emulator, baseline, ...): wake-up latencies in this VM
    // drift, so one pair of runs can mislead. Per pass = half the RTT difference.
    let rounds = if scale(10) < 10 { 2 } else { 5 };
    let (mut base, mut zero) = (Vec::new(), Vec::new());
    let mut diffs = Vec::new();
    let mut s0 = EmulatorStats::default();
    for _ in 0..rounds {
        let mut b = ping_pong(next_port(), scale(2000), 64, Duration::from_secs(20))?;
        let mut emu = start(topo, Duration::ZERO)?;
        let mut z = ping_pong(next_port(), scale(2000), 64, Duration::from_secs(20))?;
        s0 = emu.stop()?;
        diffs.push((us(pct(&mut z, 0.5)) - us(pct(&mut b, 0.5))) / 2.0);
        base.extend(b);
        zero.extend(z);
    }
    diffs.sort_by(f64::total_cmp);
    let per_pass = diffs[diffs.len() / 2];
    let per_pass99 = (us(pct(&mut zero, 0.99)) - us(pct(&mut base, 0.99))) / 2.0;
    println!(
        "ping-pong RTT baseline p50 {:.1} us p99 {:.1} us; through emulator (delay 0) p50 {:.1} us p99 {:.1} us",
        us(pct(&mut base, 0.5)),
        us(pct(&mut base, 0.99)),
        us(pct(&mut zero, 0.5)),
        us(pct(&mut zero, 0.99))
    );
    let shown: Vec<String> = diffs.iter().map(|d| format!("{d:.1}")).collect();
    println!(
        "=> added latency per pass: p50 {per_pass:.1} us (median of rounds [{}]), p99 {per_pass99:.1} us",
        shown.join(", ")
    );
    emu_line("delay 0 ping-pong, last round", &s0);
    report.insert("rtt_baseline".into(), rtt_json(&mut base));
    report.insert("rtt_delay0".into(), rtt_json(&mut zero));
    report.insert("per_pass_p50_us".into(), per_pass.into());
    report.insert("per_pass_rounds_us".into(), diffs.clone().into());
    report.insert("per_pass_p99_us".into(), per_pass99.into());

    // 2. Packet rate, delay 0.
    let t = Instant::now();
    let base_bytes = bulk(next_port(), rate_dur, None)?;
    let base_secs = t.elapsed().as_secs_f64();
    let mut emu = start(topo, Duration::ZERO)?;
    let t = Instant::now();
    let bytes = bulk(next_port(), rate_dur, None)?;
    let secs = t.elapsed().as_secs_f64();
    let sb = emu.stop()?;
    println!(
        "bulk TCP: baseline {:.0} Mbit/s; through emulator {:.0} Mbit/s, {:.0} pkts/s ({:.0} per emulator CPU-second)",
        base_bytes as f64 * 8.0 / base_secs / 1e6,
        bytes as f64 * 8.0 / secs / 1e6,
        sb.packets as f64 / secs,
        sb.packets as f64 / sb.cpu_time.as_secs_f64().max(1e-9)
    );
    emu_line("bulk", &sb);
    report.insert(
        "bulk".into(),
        serde_json::json!({
            "baseline_mbit_s": base_bytes as f64 * 8.0 / base_secs / 1e6,
            "mbit_s": bytes as f64 * 8.0 / secs / 1e6,
            "pkts_per_s": sb.packets as f64 / secs,
            "pkts_per_cpu_s": sb.packets as f64 / sb.cpu_time.as_secs_f64().max(1e-9),
            "emulator": sb.to_json(),
        }),
    );

    let mut emu = start(topo, Duration::ZERO)?;
    let t = Instant::now();
    let (sent, got) = udp_flood(next_port(), rate_dur)?;
    let secs = t.elapsed().as_secs_f64();
    let su = emu.stop()?;
    let flood_secs = rate_dur.as_secs_f64();
    println!(
        "UDP flood: sent {sent}, received {got}; emulator {:.0} pkts/s over {flood_secs:.0}s ({:.0} per emulator CPU-second)",
        su.packets as f64 / flood_secs,
        su.packets as f64 / su.cpu_time.as_secs_f64().max(1e-9)
    );
    emu_line("udp", &su);
    report.insert(
        "udp_flood".into(),
        serde_json::json!({
            "sent": sent, "received": got, "secs": secs,
            "pkts_per_s": su.packets as f64 / flood_secs,
            "pkts_per_cpu_s": su.packets as f64 / su.cpu_time.as_secs_f64().max(1e-9),
            "emulator": su.to_json(),
        }),
    );

    Ok(())
}

fn bench(quick: bool) -> Result<serde_json::Value, String> {
    let topo = Topology::create()?;
    let scale = |n: usize| if quick { n / 5 } else { n };
    let rate_dur = Duration::from_secs(if quick { 1 } else { 3 });
    let mut port = 5000u16;
    let mut next_port = || {
        port += 1;
        port
    };
    let mut report = serde_json::Map::new();

    let only_delay = std::env::args().any(|a| a == "--only-delay");
    if !only_delay {
        drop_check(&topo, &mut next_port, &mut report)?;
        // 1. Per-pass overhead.
        overhead_and_rate(&topo, scale, rate_dur, &mut next_port, &mut report)?;
    }

    // 3. 25 ms each way.
    let delay = Duration::from_millis(25);
    let mut emu = start(&topo, delay)?;
    let mut idle = ping_pong(next_port(), scale(400), 64, Duration::from_secs(40))?;
    let sd = emu.stop()?;
    println!(
        "delay 25 ms, idle: RTT p50 {:.3} ms p99 {:.3} ms max {:.3} ms min {:.3} ms (n={})",
        ms(pct(&mut idle, 0.5)),
        ms(pct(&mut idle, 0.99)),
        ms(pct(&mut idle, 1.0)),
        ms(pct(&mut idle, 0.0)),
        idle.len()
    );
    emu_line("25ms idle", &sd);
    report.insert("rtt_delay25".into(), rtt_json(&mut idle));
    report.insert("emulator_delay25".into(), sd.to_json());

    let mut emu = start(&topo, delay)?;
    let stop_bulk = Arc::new(AtomicBool::new(false));
    let sbk = Arc::clone(&stop_bulk);
    let bulk_port = next_port();
    let loader = thread::spawn(move || bulk(bulk_port, Duration::from_secs(60), Some(sbk)));
    thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let loaded = ping_pong(next_port(), scale(200), 64, Duration::from_secs(30));
    let secs = t.elapsed().as_secs_f64() + 0.5;
    stop_bulk.store(true, Ordering::Relaxed);
    let load_bytes = loader
        .join()
        .map_err(|_| "bulk loader panicked".to_string())?;
    let sl = emu.stop()?;
    let mut loaded = loaded?;
    let load_bytes = load_bytes?;
    println!(
        "delay 25 ms, under bulk load ({:.0} Mbit/s): RTT p50 {:.3} ms p99 {:.3} ms max {:.3} ms (n={})",
        load_bytes as f64 * 8.0 / secs / 1e6,
        ms(pct(&mut loaded, 0.5)),
        ms(pct(&mut loaded, 0.99)),
        ms(pct(&mut loaded, 1.0)),
        loaded.len()
    );
    emu_line("25ms loaded", &sl);
    report.insert("rtt_delay25_loaded".into(), rtt_json(&mut loaded));
    report.insert(
        "load_mbit_s".into(),
        (load_bytes as f64 * 8.0 / secs / 1e6).into(),
    );
    report.insert("emulator_delay25_loaded".into(), sl.to_json());

    Ok(serde_json::Value::Object(report))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    match bench(quick) {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("emulator_bench: {e}");
            std::process::exit(1);
        }
    }
}
