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

mod stale_syn;
use stale_syn::{stale_syn_lost_rst, stale_syn_timewait};
mod seed000;
use seed000::seed000_reproducer;
mod slow_start;
use slow_start::slow_start_after_idle;
mod nagle;
use nagle::nagle_delayed_ack;
mod ehash;
use ehash::ehash_chain;
mod syn_backlog;
use syn_backlog::syn_backlog_full;
mod tail_loss;
use tail_loss::tail_loss;

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
/// 25 ms here), so the new ISN lies below the old rcv_nxt (docs/tcp-signatures.md section 1).
const BULK: usize = 1 << 20;

const MSS: usize = 1448;
