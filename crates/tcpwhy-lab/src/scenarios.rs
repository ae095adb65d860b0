//! The scenarios: each reproduces one field report (a seed) on this kernel, with and without
//! its fix, and checks what the analyzer sees in its capture.

use crate::emulator::{DropRule, EmulatorConfig};
use crate::matrix::Vantage;
use crate::os;
use crate::run::{captured, connections, start_emulator, Ctx, Outcome, Phase};
use crate::stats::Latencies;
use crate::topo::{Topology, TopologyOptions, SERVER_ADDR};
use crate::traffic::{self, SockOpts};
use serde_json::json;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tcpwhy_wire::TcpFlags;

pub struct Scenario {
    pub name: &'static str,
    pub seed: &'static str,
    pub title: &'static str,
    /// The setting that breaks it.
    pub breaks: &'static str,
    pub fix: &'static str,
    /// Part of the CI run (seconds, not minutes).
    pub fast: bool,
    /// The finding `tcpwhy analyze` must name in the broken capture (and not in the fixed).
    pub expect: Option<&'static str>,
    /// Where it captures when no vantage is asked for.
    pub vantage: Vantage,
    pub run: fn(&Ctx) -> io::Result<Outcome>,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "stale-syn-timewait",
        seed: "004",
        title: "a SYN meets TIME-WAIT of the previous connection on the same port",
        breaks: "client net.ipv4.tcp_timestamps=0; the old connection moved > 15.6 MB per second of its life, so the new ISN lies below the old rcv_nxt; reconnect from the same port",
        fix: "TCP timestamps on (the TIME-WAIT socket then accepts the SYN by PAWS)",
        fast: true,
        expect: Some("syn-stale-state"),
        vantage: Vantage::Client,
        run: stale_syn_timewait,
    },
    Scenario {
        name: "stale-syn-lost-rst",
        seed: "000",
        title: "a SYN meets a stale established socket whose RST was lost",
        breaks: "client SO_LINGER {1,0} close; the router drops that RST; reconnect from the same port",
        fix: "deliver the RST (control: the RST passes)",
        fast: true,
        expect: Some("syn-stale-state"),
        vantage: Vantage::Client,
        run: stale_syn_lost_rst,
    },
    Scenario {
        name: "seed000-reproducer",
        seed: "000",
        title: "the seed's own loop: connect, send 4 bytes, read, close with RST, on loopback",
        breaks: "(the race of seed 000 on kernels before the fix)",
        fix: "this kernel: no connection should take over 100 ms",
        fast: true,
        expect: None,
        vantage: Vantage::Client,
        run: seed000_reproducer,
    },
    Scenario {
        name: "slow-start-after-idle",
        seed: "002",
        title: "a persistent connection restarts slow start after each idle gap",
        breaks: "server net.ipv4.tcp_slow_start_after_idle=1 with cubic; 50 ms RTT; 1 MB response after an idle gap longer than the RTO",
        fix: "net.ipv4.tcp_slow_start_after_idle=0 in the sender's namespace (or BBR)",
        fast: false,
        expect: Some("slow-start-restart"),
        vantage: Vantage::Client,
        run: slow_start_after_idle,
    },
    Scenario {
        name: "nagle-delayed-ack",
        seed: "001",
        title: "a request written in two pieces waits for the server's delayed ACK (Nagle)",
        breaks: "client writes header and body separately without TCP_NODELAY",
        fix: "TCP_NODELAY, or one write per message",
        fast: true,
        expect: Some("nagle-delayed-ack"),
        vantage: Vantage::Client,
        run: nagle_delayed_ack,
    },
    Scenario {
        name: "ehash-chain",
        seed: "003",
        title: "a small established-socket hash table makes every lookup walk long chains",
        breaks: "server namespace created with net.ipv4.tcp_child_ehash_entries=128, filled with idle connections",
        fix: "size the table for the sockets (tcp_child_ehash_entries, thash_entries), or the shared table",
        fast: false,
        expect: None,
        vantage: Vantage::Client,
        run: ehash_chain,
    },
    Scenario {
        name: "syn-backlog-full",
        seed: "-",
        title: "SYNs dropped by a full accept queue wait for the SYN retransmission timer",
        breaks: "listen backlog 1 and no accept() for 3 s while 8 clients connect",
        fix: "a backlog sized for bursts (128; the same 3 s pause before accept())",
        fast: true,
        expect: Some("syn-unanswered"),
        vantage: Vantage::Client,
        run: syn_backlog_full,
    },
    Scenario {
        name: "tail-loss",
        seed: "-",
        title: "the last segment of a response is lost: recovery by loss probe or RTO",
        breaks: "the router drops the last segment of each response once; 20 ms RTT",
        fix: "find the loss (control: nothing dropped)",
        fast: true,
        expect: Some("rto-retransmission"),
        vantage: Vantage::Server,
        run: tail_loss,
    },
];

fn server_addr(port: u16) -> SocketAddr {
    SocketAddr::new(
        SERVER_ADDR.parse().unwrap_or(IpAddr::from([10, 201, 2, 2])),
        port,
    )
}

/// A listener running in a namespace until stopped.
pub struct Server {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<io::Result<u64>>,
}

impl Server {
    /// Stop accepting; returns how many connections were served.
    pub fn stop(self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| io::Error::other("server thread panicked"))?
    }
}

/// Listen in namespace `ns`, then run `body(listener, stop)` on that thread. Returns once the
/// listener exists, so clients can connect right away.
fn spawn_listener<F>(
    ns: &str,
    at: SocketAddr,
    backlog: i32,
    opts: SockOpts,
    body: F,
) -> io::Result<Server>
where
    F: FnOnce(std::net::TcpListener, Arc<AtomicBool>) -> io::Result<u64> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = os::spawn_in_on(ns, os::traffic_cpu(), move || {
        let l = match traffic::listen(at, backlog, &opts) {
            Ok(l) => {
                let _ = tx.send(None);
                l
            }
            Err(e) => {
                let _ = tx.send(Some(e.to_string()));
                return Err(e);
            }
        };
        body(l, st)
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(None) => Ok(Server { stop, handle }),
        Ok(Some(e)) => Err(io::Error::other(format!("server on {at}: {e}"))),
        Err(_) => Err(io::Error::other(format!("server on {at} did not start"))),
    }
}

/// A server in the server namespace handling each connection on its own thread.
fn server<F>(
    topo: &Topology,
    port: u16,
    backlog: i32,
    opts: SockOpts,
    handle: F,
) -> io::Result<Server>
where
    F: Fn(std::net::TcpStream) + Send + Sync + 'static,
{
    spawn_listener(
        &topo.server,
        topo.server_addr(port),
        backlog,
        opts,
        move |l, st| traffic::serve(l, st, handle),
    )
}

/// Accept errors that only mean "nothing yet".
fn idle(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Run `f` on a thread inside namespace `ns`, on the traffic CPU, and wait for it.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    os::spawn_in_on(ns, os::traffic_cpu(), f)
        .join()
        .map_err(|_| io::Error::other("lab thread panicked"))?
}

/// Bytes the old connection carries: more than 15.625 MB per second of its life (about
/// 25 ms here), so the new ISN lies below the old rcv_nxt (tcp-signatures.md section 1).
const BULK: usize = 1 << 20;

fn stale_syn_timewait(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    // With tcp_rfc1337 each reconnect waits for TIME-WAIT to end (about a minute).
    let n = if ctx.opts.rfc1337 {
        if ctx.opts.quick {
            1
        } else {
            2
        }
    } else if ctx.opts.quick {
        3
    } else {
        10
    };
    if ctx.opts.rfc1337 {
        topo.sysctl(&topo.server, "net.ipv4.tcp_rfc1337", "1")?;
        out.notes.push("server net.ipv4.tcp_rfc1337=1: the TIME-WAIT socket ignores the client's RST, so the SYN waits for TIME-WAIT to end".into());
    }
    let srv = server(&topo, 5000, 128, SockOpts::default(), |mut s| {
        // Read what the client sends, then close first: this side holds TIME-WAIT.
        let _ = traffic::read_n(&mut s, BULK);
    })?;
    for (pi, (label, ts)) in [("broken", "0"), ("fixed", "1")].into_iter().enumerate() {
        ctx.check()?;
        topo.sysctl(&topo.client, "net.ipv4.tcp_timestamps", ts)?;
        let mut phase = Phase::new(label, "reconnect (connect() from the same port)");
        phase
            .settings
            .push(format!("client net.ipv4.tcp_timestamps={ts}"));
        phase.settings.push(format!(
            "{} MB per old connection, reconnect 20 ms after its close",
            BULK >> 20
        ));
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let name = if ctx.opts.rfc1337 {
            "stale-syn-timewait-rfc1337"
        } else {
            "stale-syn-timewait"
        };
        let lat = captured(ctx, &topo, name, &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                let mut rates = Vec::new();
                for i in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    let port = 41000 + (pi * 100 + i) as u16;
                    let opts = SockOpts {
                        local_port: Some(port),
                        ..SockOpts::default()
                    };
                    let t0 = Instant::now();
                    let (mut s, _) = traffic::connect(to, &opts)?;
                    traffic::write_zeros(&mut s, BULK)?;
                    traffic::read_to_eof(&mut s)?; // the server closes first
                    rates.push(BULK as f64 / t0.elapsed().as_secs_f64() / 1e6);
                    drop(s);
                    // Our FIN's ACK must arrive before the 4-tuple is free here.
                    std::thread::sleep(Duration::from_millis(20));
                    let (s, took) = traffic::connect(to, &opts)?;
                    lat.push(took);
                    drop(s);
                }
                Ok((lat, rates))
            })
        })?;
        let (lat, rates) = lat;
        let min_rate = rates.iter().copied().fold(f64::INFINITY, f64::min);
        phase.extra = json!({"old_connection_mb_per_s_min": (min_rate * 10.0).round() / 10.0});
        phase.latencies = lat;
        out.phases.push(phase);
    }
    srv.stop()?;
    Ok(out)
}

fn stale_syn_lost_rst(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 5 } else { 10 };
    let client_ip = topo.client_ip();
    // The server reads the 4-byte request and keeps its socket: a stale socket if the client's
    // RST never arrives.
    let srv = server(&topo, 5000, 128, SockOpts::default(), |mut s| {
        let _ = traffic::read_n(&mut s, 4);
        let _ = traffic::read_to_eof(&mut s);
    })?;
    for (pi, label) in ["broken", "control"].into_iter().enumerate() {
        ctx.check()?;
        let mut phase = Phase::new(label, "reconnect (connect() from the same port)");
        let drops = if label == "broken" {
            phase
                .settings
                .push("router drops the client's RST|ACK (the abortive close)".into());
            // The abortive close sends RST|ACK; the RST answering a challenge ACK in SYN_SENT
            // has no ACK bit and must pass.
            vec![DropRule {
                src: Some(client_ip),
                flags_all: TcpFlags::RST | TcpFlags::ACK,
                ..DropRule::default()
            }]
        } else {
            phase.settings.push("router forwards everything".into());
            Vec::new()
        };
        phase
            .settings
            .push("client SO_LINGER {1,0}, TCP_NODELAY; 4-byte request".into());
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::ZERO,
                drops,
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let lat = captured(ctx, &topo, "stale-syn-lost-rst", &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                for i in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    let port = 42000 + (pi * 100 + i) as u16;
                    let opts = SockOpts {
                        local_port: Some(port),
                        linger0: true,
                        nodelay: true,
                        ..SockOpts::default()
                    };
                    let (mut s, _) = traffic::connect(to, &opts)?;
                    s.write_all(b"ping")?;
                    std::thread::sleep(Duration::from_millis(5));
                    drop(s); // RST
                    std::thread::sleep(Duration::from_millis(5));
                    let (mut s, took) = traffic::connect(to, &opts)?;
                    lat.push(took);
                    s.write_all(b"ping")?;
                    std::thread::sleep(Duration::from_millis(5));
                    let mut b = [0u8; 1];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(1)));
                    let _ = s.read(&mut b);
                }
                Ok(lat)
            })
        });
        let stats = emu.finish()?;
        phase.latencies = lat?;
        phase.extra = json!({"emulator_packets": stats.packets, "emulator_dropped": stats.dropped});
        out.phases.push(phase);
    }
    srv.stop()?;
    Ok(out)
}

fn seed000_reproducer(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let secs = if ctx.opts.quick {
        ctx.opts.seconds.min(3.0)
    } else {
        ctx.opts.seconds
    };
    let mut phase = Phase::new("seed-loop", "connect + 4-byte request + read until close");
    phase.settings.push("127.0.0.1:4242 inside the server namespace; client SO_LINGER {1,0} and TCP_NODELAY, server accept/read/close".into());
    phase.settings.push(format!(
        "{secs} s, no capture (hundreds of thousands of connections)"
    ));
    // The seed's server: one thread, accept, read 4 bytes, close.
    let at: SocketAddr = "127.0.0.1:4242".parse().map_err(io::Error::other)?;
    let srv = spawn_listener(&topo.server, at, 128, SockOpts::default(), |l, st| {
        let mut n = 0u64;
        while !st.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut s, _)) => {
                    let mut b = [0u8; 4];
                    let _ = s.read_exact(&mut b);
                    n += 1;
                }
                Err(e) if idle(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    })?;
    let interrupt = Arc::clone(&ctx.stop);
    let lat = in_ns(&topo.server, move || {
        let mut lat = Latencies::default();
        let to: SocketAddr = "127.0.0.1:4242".parse().map_err(io::Error::other)?;
        let opts = SockOpts {
            linger0: true,
            nodelay: true,
            ..SockOpts::default()
        };
        let t_end = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < t_end && !os::interrupted(&interrupt) {
            let t0 = Instant::now();
            let (mut s, _) = traffic::connect(to, &opts)?;
            s.write_all(b"ping")?;
            let mut b = [0u8; 16];
            let _ = s.read(&mut b);
            drop(s);
            lat.push(t0.elapsed());
        }
        Ok(lat)
    })?;
    let served = srv.stop()?;
    let over = lat.count_over(Duration::from_millis(100));
    phase.extra = json!({
        "connections": lat.len(),
        "served": served,
        "per_second": (lat.len() as f64 / secs).round(),
        "over_100ms": over,
        "histogram": lat.histogram().iter().map(|(k, v)| json!({"range": k, "count": v})).collect::<Vec<_>>(),
    });
    out.notes.push(format!(
        "{} connections in {secs} s ({:.0}/s), {over} took over 100 ms",
        lat.len(),
        lat.len() as f64 / secs
    ));
    phase.latencies = lat;
    out.phases.push(phase);
    Ok(out)
}

/// Server -> client data flights in a capture: segments of `mss` bytes per burst (a
/// super-segment of a capture with offloads counts by its bytes), bursts split by gaps over
/// `gap_ms`. Returns the bursts of each period after an idle gap over `idle_ms`.
fn flights_after_idle(
    path: &std::path::Path,
    server_port: u16,
    mss: u32,
    idle_ms: i64,
    gap_ms: i64,
) -> io::Result<Vec<Vec<u32>>> {
    let p = path.to_string_lossy().into_owned();
    let mut cap = tcpwhy_capture::Capture::open(&[p]).map_err(io::Error::other)?;
    let mut bursts: Vec<Vec<u32>> = Vec::new();
    let mut last: Option<i64> = None;
    let mut cur: Option<u32> = None;
    while let Some(pkt) = cap.next().map_err(io::Error::other)? {
        let Ok(tcpwhy_wire::Decoded::Tcp(seg)) =
            tcpwhy_wire::decode(pkt.link, pkt.data, pkt.orig_len)
        else {
            continue;
        };
        if seg.src_port != server_port || seg.payload_len == 0 {
            continue;
        }
        let segs = seg.payload_len.div_ceil(mss.max(1));
        let gap = last.map_or(i64::MAX, |t| (pkt.ts_ns - t) / 1_000_000);
        last = Some(pkt.ts_ns);
        if gap > idle_ms {
            if let Some(c) = cur.take() {
                if let Some(b) = bursts.last_mut() {
                    b.push(c)
                }
            }
            bursts.push(Vec::new());
            cur = Some(segs);
        } else if gap > gap_ms {
            if let Some(c) = cur.take() {
                if let Some(b) = bursts.last_mut() {
                    b.push(c)
                }
            }
            cur = Some(segs);
        } else {
            cur = Some(cur.unwrap_or(0) + segs);
        }
    }
    if let (Some(c), Some(b)) = (cur, bursts.last_mut()) {
        b.push(c);
    }
    Ok(bursts)
}

fn slow_start_after_idle(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    // The gap must be several RTOs (~250 ms here): cwnd halves once per RTO of idle down to the
    // initial window (tcp_cwnd_restart), so 1 s leaves it at 1/16, 3 s at the initial window.
    let (responses, gap) = if ctx.opts.quick { (2, 3.0) } else { (5, 3.0) };
    const RESPONSE: usize = 1 << 20;
    for (pi, (label, ssai, cc)) in [
        ("broken", "1", "cubic"),
        ("fixed", "0", "cubic"),
        ("bbr", "1", "bbr"),
    ]
    .into_iter()
    .enumerate()
    {
        ctx.check()?;
        topo.sysctl(&topo.server, "net.ipv4.tcp_slow_start_after_idle", ssai)?;
        let mut phase = Phase::new(label, "1 MB response after an idle gap");
        phase.settings.push(format!(
            "server net.ipv4.tcp_slow_start_after_idle={ssai}, TCP_CONGESTION {cc}"
        ));
        phase.settings.push(format!(
            "50 ms RTT (25 ms each way in the router), {responses} responses {gap} s apart"
        ));
        let port = 5000 + pi as u16;
        let srv = server(
            &topo,
            port,
            16,
            SockOpts {
                congestion: Some(cc),
                ..SockOpts::default()
            },
            |mut s| {
                let mut b = [0u8; 1];
                while matches!(s.read(&mut b), Ok(1)) {
                    if traffic::write_zeros(&mut s, RESPONSE).is_err() {
                        break;
                    }
                }
            },
        )?;
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::from_millis(25),
                drops: Vec::new(),
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(port);
        let lat = captured(ctx, &topo, "slow-start-after-idle", &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                let (mut s, _) = traffic::connect(to, &SockOpts::default())?;
                for r in 0..=responses {
                    if os::interrupted(&stop) {
                        break;
                    }
                    if r > 0 {
                        std::thread::sleep(Duration::from_secs_f64(gap));
                    }
                    let t0 = Instant::now();
                    s.write_all(b"r")?;
                    let got = traffic::read_n(&mut s, RESPONSE)?;
                    if got < RESPONSE {
                        return Err(io::Error::other("response cut short"));
                    }
                    // The first response is a cold start for every configuration.
                    if r > 0 {
                        lat.push(t0.elapsed());
                    }
                }
                Ok(lat)
            })
        });
        let emu_stats = emu.finish();
        srv.stop()?;
        phase.latencies = lat?;
        let emu_stats = emu_stats?;
        if let Some(path) = ctx.own_capture(&phase).map(std::path::Path::to_path_buf) {
            // MSS with timestamps: 1500 - IP header - 20 - 12.
            let mss = if topo.ipv6 { 1428 } else { MSS as u32 };
            let flights = flights_after_idle(&path, port, mss, 500, 20)?;
            let firsts: Vec<u32> = flights
                .iter()
                .skip(1)
                .filter_map(|f| f.first().copied())
                .collect();
            let rounds: Vec<usize> = flights.iter().skip(1).map(|f| f.len()).collect();
            phase.analyzer.push(format!("first flight after each idle gap: {firsts:?} segments; round trips per response: {rounds:?}"));
            phase.extra = json!({"flights": flights, "emulator_packets": emu_stats.packets});
        }
        out.phases.push(phase);
    }
    Ok(out)
}

/// A message of `len` bytes whose first 4 bytes say its length (so the server can read it
/// whole however it was written).
fn message(len: usize) -> Vec<u8> {
    let mut m = vec![0x33u8; len.max(4)];
    m[..4].copy_from_slice(&(len.max(4) as u32).to_be_bytes());
    m
}

fn echo_server(mut s: std::net::TcpStream) {
    let mut hdr = [0u8; 4];
    while s.read_exact(&mut hdr).is_ok() {
        let len = u32::from_be_bytes(hdr) as usize;
        if len < 4 || traffic::read_n(&mut s, len - 4).ok() != Some(len - 4) {
            break;
        }
        if s.write_all(b"ok").is_err() {
            break;
        }
    }
}

/// Ping-pong `n` messages of `len` bytes written in `pieces` writes; latency per exchange.
fn ping_pong(
    s: &mut std::net::TcpStream,
    len: usize,
    pieces: usize,
    n: usize,
    stop: &AtomicBool,
) -> io::Result<Latencies> {
    let m = message(len);
    let cut = if pieces == 2 { m.len() / 2 } else { m.len() };
    let mut lat = Latencies::default();
    let mut b = [0u8; 2];
    for _ in 0..n {
        if os::interrupted(stop) {
            break;
        }
        let t0 = Instant::now();
        s.write_all(&m[..cut])?;
        if cut < m.len() {
            s.write_all(&m[cut..])?;
        }
        s.read_exact(&mut b)?;
        lat.push(t0.elapsed());
    }
    Ok(lat)
}

const MSS: usize = 1448;

fn nagle_delayed_ack(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 20 } else { 50 };
    let srv = server(&topo, 5000, 64, SockOpts::default(), echo_server)?;
    for (label, nodelay) in [("broken", false), ("fixed", true)] {
        ctx.check()?;
        let mut phase = Phase::new(
            label,
            "request (100-byte header + 100-byte body in two writes) to response",
        );
        phase.settings.push(format!(
            "client TCP_NODELAY {}",
            if nodelay { "on" } else { "off" }
        ));
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let lat = captured(ctx, &topo, "nagle-delayed-ack", &mut phase, || {
            in_ns(&topo.client, move || {
                let (mut s, _) = traffic::connect(
                    to,
                    &SockOpts {
                        nodelay,
                        ..SockOpts::default()
                    },
                )?;
                ping_pong(&mut s, 200, 2, n, &stop)
            })
        })?;
        phase.latencies = lat;
        out.phases.push(phase);
    }
    // Seed 001's method: latency against message size, one write and two writes.
    let stop = Arc::clone(&ctx.stop);
    let per = if ctx.opts.quick { 5 } else { 10 };
    let to = topo.server_addr(5000);
    let sweep = in_ns(&topo.client, move || {
        let mut rows = Vec::new();
        for pieces in [1usize, 2] {
            let (mut s, _) = traffic::connect(to, &SockOpts::default())?;
            // Leave quick-ACK mode first (the first exchanges of a connection are ACKed at once).
            ping_pong(&mut s, 64, 1, 20, &stop)?;
            for quarter in 2..=14usize {
                let len = MSS * quarter / 4;
                let l = ping_pong(&mut s, len, pieces, per, &stop)?;
                rows.push((pieces, len, l.p50().unwrap_or_default()));
            }
        }
        Ok(rows)
    })?;
    let slow: Vec<String> = sweep
        .iter()
        .filter(|(_, _, p50)| *p50 > Duration::from_millis(10))
        .map(|(w, len, p50)| {
            format!(
                "{w}-write {:.2} MSS: {:.1} ms",
                *len as f64 / MSS as f64,
                p50.as_secs_f64() * 1e3
            )
        })
        .collect();
    let one_write_slow = sweep
        .iter()
        .filter(|(w, _, p)| *w == 1 && *p > Duration::from_millis(10))
        .count();
    out.notes.push(format!(
        "size sweep 0.5..3.5 MSS ({MSS} bytes), median of {per} exchanges each: {} slow sizes ({} of them one-write){}",
        slow.len(),
        one_write_slow,
        if slow.is_empty() { String::new() } else { format!(": {}", slow.join("; ")) }
    ));
    if let Some(p) = out.phases.first_mut() {
        p.extra = json!({"size_sweep": sweep.iter().map(|(w, len, p50)| json!({"writes": w, "bytes": len, "p50_ms": crate::stats::ms(*p50)})).collect::<Vec<_>>()});
    }
    srv.stop()?;
    Ok(out)
}

/// The TCP line of `/proc/net/sockstat` in the server namespace (in use, TIME-WAIT ...).
fn server_sockstat(topo: &Topology) -> String {
    os::run(
        "ip",
        &["netns", "exec", &topo.server, "cat", "/proc/net/sockstat"],
    )
    .ok()
    .and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("TCP:"))
            .map(str::to_string)
    })
    .unwrap_or_default()
}

fn ehash_chain(ctx: &Ctx) -> io::Result<Outcome> {
    let mut out = Outcome::default();
    let steps: &[u64] = if ctx.opts.quick {
        &[0, 20_000, 50_000]
    } else {
        &[0, 50_000, 100_000, 200_000]
    };
    const BUCKETS: u32 = 128;
    // Every fill connection gets its own 4-tuple: 4 extra client addresses x 63 000 ports.
    const EXTRA_IPS: [&str; 4] = ["10.201.1.3", "10.201.1.4", "10.201.1.5", "10.201.1.6"];
    const PORTS: u64 = 63_000;
    for (label, ehash) in [("own-table-128", Some(BUCKETS)), ("shared-table", None)] {
        ctx.check()?;
        // IPv4 only (its fill uses four extra IPv4 client addresses); no capture.
        let topo = Topology::create(&TopologyOptions {
            server_ehash_entries: ehash,
            ..TopologyOptions::default()
        })?;
        let entries = topo.sysctl_get(&topo.server, "net.ipv4.tcp_ehash_entries")?;
        let mut phase = Phase::new(
            label,
            "1-byte round trip on a connection made before the fill",
        );
        phase.settings.push(format!(
            "server namespace tcp_ehash_entries = {entries} (negative: the shared global table)"
        ));
        if let Some(n) = ehash {
            if entries.trim() != n.to_string() {
                return Err(io::Error::other(format!("tcp_ehash_entries reads {entries}, expected {n}: kernel without tcp_child_ehash_entries?")));
            }
        }
        // The fill connections wait in the accept queue (this host allows 20 000 descriptors per
        // process, not 200 000): full sockets in the established hash, no descriptor needed.
        topo.sysctl(&topo.server, "net.core.somaxconn", "400000")?;
        topo.sysctl(&topo.client, "net.ipv4.ip_local_port_range", "1024 65000")?;
        for ip in EXTRA_IPS {
            os::run(
                "ip",
                &[
                    "-n",
                    &topo.client,
                    "addr",
                    "add",
                    &format!("{ip}/24"),
                    "dev",
                    crate::topo::CLIENT_IF,
                ],
            )?;
        }
        // Fill server: never accepts. The client closes each fill connection at once, so the
        // server side holds it in CLOSE_WAIT in the accept queue.
        let fill = spawn_listener(
            &topo.server,
            server_addr(5000),
            400_000,
            SockOpts::default(),
            |_l, st| {
                while !st.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(0)
            },
        )?;
        let pp = server(&topo, 6000, 16, SockOpts::default(), |mut s| {
            let _ = os::pin_to_cpu(0);
            let mut b = [0u8; 1];
            while matches!(s.read(&mut b), Ok(1)) {
                if s.write_all(&b).is_err() {
                    break;
                }
            }
        })?;
        let stop = Arc::clone(&ctx.stop);
        let steps_v = steps.to_vec();
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<(u64, f64, Latencies)>();
        // The measuring connection lives in its own thread; the filler tells it when a step is full.
        let measurer = os::spawn_in(&topo.client, move || {
            os::pin_to_cpu(0)?;
            let (mut s, _) = traffic::connect(
                server_addr(6000),
                &SockOpts {
                    nodelay: true,
                    ..SockOpts::default()
                },
            )?;
            let mut b = [0u8; 1];
            while let Ok(k) = rx.recv() {
                let mut lat = Latencies::default();
                let t_end = Instant::now() + Duration::from_millis(1500);
                let t0 = Instant::now();
                let mut n = 0u64;
                while Instant::now() < t_end {
                    let t = Instant::now();
                    s.write_all(b"x")?;
                    s.read_exact(&mut b)?;
                    lat.push(t.elapsed());
                    n += 1;
                }
                let _ = done_tx.send((k, n as f64 / t0.elapsed().as_secs_f64(), lat));
            }
            Ok(())
        });
        let topo_ref = &topo;
        let mut rows = Vec::new();
        let filler = {
            let stop = Arc::clone(&stop);
            os::spawn_in(&topo.client, move || {
                let mut made = 0u64;
                let mut errors = 0u64;
                let mut step_done = Vec::new();
                for &k in &steps_v {
                    let t0 = Instant::now();
                    while made < k
                        && !os::interrupted(&stop)
                        && t0.elapsed() < Duration::from_secs(60)
                    {
                        let i = made + errors;
                        let Some(ip) = EXTRA_IPS.get((i / PORTS) as usize) else {
                            return Err(io::Error::other("fill: out of 4-tuples"));
                        };
                        let port = 1024 + i % PORTS;
                        let s = socket2::Socket::new(
                            socket2::Domain::IPV4,
                            socket2::Type::STREAM,
                            None,
                        )?;
                        s.set_reuse_address(true)?;
                        let local: SocketAddr =
                            format!("{ip}:{port}").parse().map_err(io::Error::other)?;
                        s.bind(&local.into())?;
                        match s.connect_timeout(&server_addr(5000).into(), Duration::from_secs(5)) {
                            // Closing at once: the server's side waits in CLOSE_WAIT.
                            Ok(()) => made += 1,
                            Err(_) => errors += 1,
                        }
                        drop(s);
                        if errors > 1_000 {
                            return Err(io::Error::other("fill: too many connect errors"));
                        }
                    }
                    step_done.push((k, made, t0.elapsed().as_secs_f64()));
                    let _ = tx.send(k);
                    // Wait for the measurement of this step before adding more.
                    std::thread::sleep(Duration::from_millis(1700));
                }
                Ok(step_done)
            })
        };
        let fill_steps = filler
            .join()
            .map_err(|_| io::Error::other("filler panicked"))??;
        let mut all = Latencies::default();
        for _ in 0..fill_steps.len() {
            match done_rx.recv_timeout(Duration::from_secs(10)) {
                Ok((k, rate, lat)) => {
                    rows.push(json!({"target": k, "round_trips_per_s": rate.round(), "p50_ms": lat.p50().map(crate::stats::ms)}));
                    if k == *steps.last().unwrap_or(&0) {
                        all.extend(lat);
                    }
                }
                Err(_) => break,
            }
        }
        let tw = server_sockstat(topo_ref);
        pp.stop()?;
        fill.stop()?;
        let _ = measurer.join();
        phase.analyzer.push(format!(
            "server namespace /proc/net/sockstat at the end: {tw}"
        ));
        phase.extra = json!({"steps": rows, "fill": fill_steps.iter().map(|(k, m, s)| json!({"target": k, "made": m, "seconds": s})).collect::<Vec<_>>()});
        phase.latencies = all;
        out.phases.push(phase);
    }
    // The ratio that matters: rate at the largest fill against rate with no fill, per table.
    for p in &out.phases {
        if let Some(steps) = p.extra["steps"].as_array() {
            let first = steps
                .first()
                .and_then(|s| s["round_trips_per_s"].as_f64())
                .unwrap_or(0.0);
            let last = steps
                .last()
                .and_then(|s| s["round_trips_per_s"].as_f64())
                .unwrap_or(0.0);
            if last > 0.0 {
                out.notes.push(format!(
                    "{}: {:.0} round trips/s empty, {:.0} at the largest fill ({:.1}x slower)",
                    p.name,
                    first,
                    last,
                    first / last
                ));
            }
        }
    }
    Ok(out)
}

fn syn_backlog_full(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    const CLIENTS: usize = 8;
    for (pi, (label, backlog, pause)) in [("broken", 1, 3.0f64), ("fixed", 128, 3.0)]
        .into_iter()
        .enumerate()
    {
        ctx.check()?;
        let mut phase = Phase::new(
            label,
            "connect() (the handshake; the reply waits for accept() in both)",
        );
        phase.settings.push(format!(
            "listen backlog {backlog}, accept() starts after {pause} s, {CLIENTS} clients at once"
        ));
        let port = 5000 + pi as u16;
        let srv = spawn_listener(
            &topo.server,
            topo.server_addr(port),
            backlog,
            SockOpts::default(),
            move |l, st| {
                std::thread::sleep(Duration::from_secs_f64(pause));
                let mut n = 0u64;
                while !st.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            let mut b = [0u8; 1];
                            let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                            if s.read_exact(&mut b).is_ok() {
                                let _ = s.write_all(b"!");
                            }
                            n += 1;
                        }
                        Err(e) if idle(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(n)
            },
        )?;
        let to = topo.server_addr(port);
        let lat = captured(ctx, &topo, "syn-backlog-full", &mut phase, || {
            in_ns(&topo.client, move || {
                let handles: Vec<_> = (0..CLIENTS)
                    .map(|_| {
                        std::thread::spawn(move || -> io::Result<Duration> {
                            let (mut s, took) = traffic::connect(to, &SockOpts::default())?;
                            s.set_read_timeout(Some(Duration::from_secs(30)))?;
                            // A request right away, as clients do: it also completes the handshake
                            // on the server side when the final ACK was dropped by the full queue.
                            s.write_all(b"?")?;
                            let mut b = [0u8; 1];
                            s.read_exact(&mut b)?;
                            Ok(took)
                        })
                    })
                    .collect();
                let mut lat = Latencies::default();
                for h in handles {
                    lat.push(
                        h.join()
                            .map_err(|_| io::Error::other("client panicked"))??,
                    );
                }
                Ok(lat)
            })
        });
        let served = srv.stop();
        phase.latencies = lat?;
        served?;
        if let Some(path) = ctx.own_capture(&phase) {
            let conns = connections(path)?;
            let retried = conns
                .iter()
                .filter(|c| c.client.syn_retransmits() > 0)
                .count();
            let max_retries = conns
                .iter()
                .map(|c| c.client.syn_retransmits())
                .max()
                .unwrap_or(0);
            phase.analyzer.push(format!(
                "{retried} of {} connections retransmitted their SYN (up to {max_retries} times)",
                conns.len()
            ));
        }
        out.phases.push(phase);
    }
    Ok(out)
}

fn tail_loss(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 8 } else { 20 };
    // Nine full segments and a short tail: only the tail is shorter than TAIL_MAX, so the
    // router can pick it out (PSH also marks segments in the middle of a response).
    const TAIL: usize = 500;
    const TAIL_MAX: u32 = 1000;
    const RESPONSE: usize = 9 * MSS + TAIL;
    let server_ip = topo.server_ip();
    for (pi, label) in ["broken", "control"].into_iter().enumerate() {
        ctx.check()?;
        let mut phase = Phase::new(label, "request to complete 10-segment response");
        let port = 5000 + pi as u16;
        let srv = server(&topo, port, 16, SockOpts::default(), |mut s| {
            let mut b = [0u8; 1];
            while matches!(s.read(&mut b), Ok(1)) {
                if traffic::write_zeros(&mut s, RESPONSE).is_err() {
                    break;
                }
            }
        })?;
        // Dropping the 1st, 3rd, 5th ... short data segment drops every tail once and lets its
        // retransmission (loss probe or RTO) through.
        let drops = if label == "broken" {
            phase
                .settings
                .push("the mid router drops the last (short) segment of each response once (on the server's side of the middle vantage)".into());
            (0..n as u32)
                .map(|i| DropRule {
                    src: Some(server_ip),
                    min_payload: 1,
                    max_payload: Some(TAIL_MAX),
                    skip: 2 * i,
                    count: 1,
                    ..DropRule::default()
                })
                .collect()
        } else {
            phase.settings.push("nothing dropped".into());
            Vec::new()
        };
        phase
            .settings
            .push("20 ms RTT (10 ms each way), one connection, requests 200 ms apart".into());
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::from_millis(10),
                drops,
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(port);
        // At the server by default: the dropped segment and its retransmission are both on the
        // wire there.
        let lat = captured(ctx, &topo, "tail-loss", &mut phase, || {
            in_ns(&topo.client, move || {
                let (mut s, _) = traffic::connect(
                    to,
                    &SockOpts {
                        nodelay: true,
                        ..SockOpts::default()
                    },
                )?;
                let mut lat = Latencies::default();
                for _ in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    let t0 = Instant::now();
                    s.write_all(b"r")?;
                    traffic::read_n(&mut s, RESPONSE)?;
                    lat.push(t0.elapsed());
                }
                Ok(lat)
            })
        });
        let stats = emu.finish();
        srv.stop()?;
        phase.latencies = lat?;
        let stats = stats?;
        phase.extra = json!({"emulator_dropped": stats.dropped});
        if let Some(path) = ctx.own_capture(&phase) {
            let conns = connections(path)?;
            let retrans: u32 = conns.iter().map(|c| c.server.retrans_segments()).sum();
            phase.analyzer.push(format!(
                "server retransmitted {retrans} segments; emulator dropped {}",
                stats.dropped
            ));
        }
        out.phases.push(phase);
    }
    Ok(out)
}
