//! `tcpwhy host` on states built in network namespaces this test creates (root; CI runs as
//! root): a small established-hash table filled with TIME-WAIT sockets, TIME-WAIT to one
//! destination filling a narrow port range, a full accept queue, an idle cubic connection with
//! a grown window; and silence on a fresh namespace. Traffic stays on each namespace's own
//! loopback. Namespaces and the parent's sysctl are restored on drop, also on failure.

mod common;
use common::tcpwhy;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces made by this test, deleted on drop; the parent's tcp_child_ehash_entries put back.
struct Lab {
    names: Vec<String>,
    child_ehash: Option<String>,
}

const CHILD_EHASH: &str = "/proc/sys/net/ipv4/tcp_child_ehash_entries";

impl Lab {
    fn ns(&mut self, tag: &str, child_ehash: Option<u32>) -> String {
        let name = format!("twhost{}-{tag}", std::process::id());
        if let Some(n) = child_ehash {
            self.child_ehash
                .get_or_insert_with(|| std::fs::read_to_string(CHILD_EHASH).unwrap());
            std::fs::write(CHILD_EHASH, n.to_string()).unwrap();
        }
        ip(&["netns", "add", &name]);
        self.names.push(name.clone());
        if let Some(old) = &self.child_ehash {
            std::fs::write(CHILD_EHASH, old.trim()).unwrap();
        }
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        name
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(old) = &self.child_ehash {
            let _ = std::fs::write(CHILD_EHASH, old.trim());
        }
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn sysctl(ns: &str, kv: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw", kv])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{kv}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `f` on a thread inside namespace `ns`.
fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        tcpwhy_lab::os::enter_netns(&ns).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn host(ns: &str) -> (Vec<Value>, Vec<Value>) {
    let out = tcpwhy(&["host", "--netns", ns, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let f = recs
        .iter()
        .filter(|r| r["type"] == "host-finding")
        .cloned()
        .collect();
    let n = recs
        .iter()
        .filter(|r| r["type"] == "namespace")
        .cloned()
        .collect();
    (f, n)
}

fn skip() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: tcpwhy host --netns needs root");
        return true;
    }
    false
}

#[test]
fn small_ehash_and_narrow_port_range_filled_with_time_wait() {
    if skip() {
        return;
    }
    let mut lab = Lab {
        names: vec![],
        child_ehash: None,
    };
    let a = lab.ns("a", Some(128));
    sysctl(&a, "net.ipv4.ip_local_port_range=40000 40999");
    // A namespace with its own table starts with tcp_max_tw_buckets = half its size (64).
    sysctl(&a, "net.ipv4.tcp_max_tw_buckets=100000");
    // tcp_tw_reuse=2 (the default) lets loopback connections take over TIME-WAIT ports,
    // which would empty the pool this test fills.
    sysctl(&a, "net.ipv4.tcp_tw_reuse=0");
    // 900 connections to each of two servers, the client closing first: up to 1800 TIME-WAIT
    // sockets on the client side, 900 per destination (90% of the 1000 ports). On a busy
    // machine some of them end otherwise (seen: 1069 to 1800): the checks need 1024 (8 per
    // bucket) and 250 per destination.
    inside(&a, || {
        for port in [5000u16, 5001] {
            let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
            let server = std::thread::spawn(move || {
                for _ in 0..900 {
                    let (mut s, _) = l.accept().unwrap();
                    let mut b = [0u8; 8];
                    let _ = s.read(&mut b); // until the client's FIN
                }
            });
            for _ in 0..900 {
                let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.write_all(b"x").unwrap();
                c.shutdown(Shutdown::Both).unwrap();
            }
            server.join().unwrap();
        }
    });
    // And 600 connections held open (1200 established sockets in the same table), so the
    // load does not depend on how many TIME-WAIT sockets a busy machine leaves.
    let held = inside(&a, || {
        let l = TcpListener::bind(("127.0.0.1", 5002)).unwrap();
        let mut socks = Vec::new();
        for _ in 0..600 {
            let c = TcpStream::connect(("127.0.0.1", 5002)).unwrap();
            let (s, _) = l.accept().unwrap();
            socks.push((c, s));
        }
        (l, socks)
    });
    let (f, n) = host(&a);
    drop(held);
    let ids: Vec<&str> = f.iter().filter_map(|x| x["id"].as_str()).collect();
    assert!(ids.contains(&"host-ehash-load"), "{f:?} {n:?}");
    assert!(ids.contains(&"host-port-exhaustion"), "{f:?}");
    let e = f.iter().find(|x| x["id"] == "host-ehash-load").unwrap();
    assert_eq!(e["evidence"]["tcp_ehash_entries"], 128);
    let tw = e["evidence"]["time_wait"].as_u64().unwrap();
    assert!((250..=3600).contains(&tw), "{e}");
    assert!(
        e["evidence"]["sockets_in_table"].as_u64().unwrap() >= 1200 + tw,
        "{e}"
    );
    assert!(e["evidence"]["per_bucket"].as_f64().unwrap() >= 8.0, "{e}");
    let p = f
        .iter()
        .find(|x| x["id"] == "host-port-exhaustion")
        .unwrap();
    assert!(p["evidence"]["held"].as_u64().unwrap() >= 500, "{p}");
    assert_eq!(n[0]["sysctls"]["ipv4/tcp_ehash_entries"], "128");
}

#[test]
fn a_full_accept_queue() {
    if skip() {
        return;
    }
    let mut lab = Lab {
        names: vec![],
        child_ehash: None,
    };
    let b = lab.ns("b", None);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let ns = b.clone();
    let holder = std::thread::spawn(move || {
        tcpwhy_lab::os::enter_netns(&ns).unwrap();
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 6000)).into())
            .unwrap();
        s.listen(1).unwrap(); // never accepted
        let mut conns = Vec::new();
        for _ in 0..4 {
            if let Ok(c) = TcpStream::connect_timeout(
                &"127.0.0.1:6000".parse().unwrap(),
                Duration::from_millis(300),
            ) {
                conns.push(c);
            }
        }
        ready_tx.send(()).unwrap();
        let _ = rx.recv_timeout(Duration::from_secs(30));
        drop((s, conns));
    });
    ready_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let (f, _) = host(&b);
    tx.send(()).unwrap();
    holder.join().unwrap();
    let s = f
        .iter()
        .find(|x| x["id"] == "host-syn-backlog")
        .unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(s["evidence"]["listeners"][0]["local"], "127.0.0.1:6000");
    assert_eq!(s["evidence"]["listeners"][0]["backlog"], 1);
    assert!(
        s["evidence"]["listeners"][0]["max_accept_queue"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn an_idle_cubic_connection_restarts_slow_start() {
    if skip() {
        return;
    }
    let mut lab = Lab {
        names: vec![],
        child_ehash: None,
    };
    let c = lab.ns("c", None);
    sysctl(&c, "net.ipv4.tcp_slow_start_after_idle=1");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let ns = c.clone();
    let holder = std::thread::spawn(move || {
        tcpwhy_lab::os::enter_netns(&ns).unwrap();
        let l = TcpListener::bind("127.0.0.1:7000").unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0;
            while got < 8 << 20 {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            s
        });
        let opts = tcpwhy_lab::traffic::SockOpts {
            congestion: Some("cubic"),
            ..Default::default()
        };
        let (mut s, _) =
            tcpwhy_lab::traffic::connect("127.0.0.1:7000".parse().unwrap(), &opts).unwrap();
        s.write_all(&vec![0u8; 8 << 20]).unwrap(); // grows cwnd well past 10
        let peer = reader.join().unwrap();
        std::thread::sleep(Duration::from_millis(600)); // idle > RTO (about 200 ms here)
        ready_tx.send(()).unwrap();
        let _ = rx.recv_timeout(Duration::from_secs(30));
        drop((s, peer));
    });
    ready_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let (f, _) = host(&c);
    tx.send(()).unwrap();
    holder.join().unwrap();
    let s = f
        .iter()
        .find(|x| x["id"] == "host-slow-start-after-idle")
        .unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(s["severity"], "now");
    let sock = &s["evidence"]["sockets"][0];
    assert_eq!(sock["congestion_control"], "cubic");
    assert_eq!(sock["remote"], "127.0.0.1:7000");
    assert!(sock["cwnd"].as_u64().unwrap() > 10, "{sock}");
    assert!(
        sock["idle_ms"].as_u64().unwrap() > sock["rto_ms"].as_u64().unwrap(),
        "{sock}"
    );
    assert!(sock["extra_round_trips"].as_f64().unwrap() >= 1.0, "{sock}");
}

#[test]
fn a_fresh_namespace_is_healthy_and_root_is_required_for_others() {
    if skip() {
        return;
    }
    let mut lab = Lab {
        names: vec![],
        child_ehash: None,
    };
    let d = lab.ns("d", None);
    // Linux's own default (slow start after idle on, with cubic) is a risk tcpwhy names; on
    // this kernel the default is BBR, for which it is moot. Make it moot either way.
    let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    if !cc.starts_with("bbr") {
        sysctl(&d, "net.ipv4.tcp_slow_start_after_idle=0");
    }
    let (f, n) = host(&d);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(n[0]["namespace"], d.as_str());
    let text = tcpwhy(&["host", "--netns", &d]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with("No host pathology found in 1 namespace"),
        "{text}"
    );
    assert!(text.lines().count() <= 6, "a few lines: {text}");
    // A name that is not a namespace: one line, exit 2.
    let bad = tcpwhy(&["host", "--netns", "../etc"]);
    assert_eq!(bad.status.code(), Some(2));
    // --all-netns sees ours among the named ones.
    let out = tcpwhy(&["host", "--all-netns", "--format", "json"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("\"namespace\":\"{d}\"")));
}
