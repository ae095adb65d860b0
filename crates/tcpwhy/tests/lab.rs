//! `tcpwhy lab` end to end on this kernel (root: CI runs as root). Runs the fast scenarios in
//! their quick form and checks that each reproduces its pathology, that the fix removes it,
//! that the captures show it, that `tcpwhy host` names it on the live namespaces, and that
//! nothing is left behind, also after SIGKILL.
//!
//! Without root these tests fail with a message; set TCPWHY_SKIP_LAB=1 to skip them.

mod common;
use common::{host_over, host_records, tcpwhy, TempDir};
use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lab runs share the machine's netfilter queue numbers and CPU: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn root_or_skip() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root && std::env::var("TCPWHY_SKIP_LAB").as_deref() != Ok("1") {
        panic!("the lab tests need root (CI runs as root); TCPWHY_SKIP_LAB=1 skips them");
    }
    root
}

fn lab_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("twlab{}", "")) && !n.is_empty())
        .map(str::to_string)
        .collect()
}

fn run_json(name: &str, dir: &std::path::Path) -> Value {
    let d = format!("{}/", dir.display());
    let out = tcpwhy(&["lab", "run", name, "--quick", "--json", "--capture", &d]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().next().expect("one line")).expect("JSON")
}

/// The lab ran `tcpwhy analyze` on its captures: the expected finding in the broken one only.
fn assert_diagnosed(v: &Value) {
    assert_eq!(v["named_in_broken"], true, "{v}");
    assert_eq!(v["silent_in_fixed"], true, "{v}");
}

fn phase<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("no phase {name}: {v}"))
}

fn p50(v: &Value, name: &str) -> f64 {
    phase(v, name)["p50_ms"].as_f64().unwrap()
}

/// How many `syn-stale-state` findings `tcpwhy analyze` made of a phase's capture.
fn shown(v: &Value, name: &str) -> u64 {
    phase(v, name)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "syn-stale-state")
        .map_or(0, |f| f["count"].as_u64().unwrap())
}

fn samples(v: &Value, name: &str) -> u64 {
    phase(v, name)["samples"].as_u64().unwrap()
}

#[test]
fn fast_scenarios_reproduce_and_fixes_remove_them() {
    if !root_or_skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("labtest-fast");
    let before = lab_namespaces();

    // Seed 004: TIME-WAIT answers with old numbers; the retry costs milliseconds (Linux >= 5.6
    // retries 2 jiffies after its RST); with timestamps the SYN is accepted at once.
    let v = run_json("stale-syn-timewait", dir.path());
    assert_diagnosed(&v);
    // Fixed: no retry, so well under half the broken cost (typically 0.1-0.25 ms against
    // 10-15 ms; a CI run, a debug build on two loaded cores, measured 2.05 ms against 15.0, which
    // an absolute 2 ms bound failed although the retry was gone).
    assert!(p50(&v, "broken") > 2.0, "{v}");
    assert!(p50(&v, "fixed") < p50(&v, "broken") / 2.0, "{v}");
    assert!(samples(&v, "broken") >= 3);
    // Every reconnect the client measured as slow shows the exchange, and no other. (Not
    // always all of them: once in a loaded full run the kernel accepted one SYN at once, 0.4 ms,
    // after its old connection had lost 38 segments; the analyzer was right to name only two.)
    let slow = samples(&v, "broken") - phase(&v, "broken")["histogram"]["<1ms"].as_u64().unwrap();
    assert!(slow >= 2, "most reconnects meet TIME-WAIT: {v}");
    assert_eq!(
        shown(&v, "broken"),
        slow,
        "every slow reconnect shows the exchange: {v}"
    );
    assert_eq!(shown(&v, "fixed"), 0);

    // Seed 000: the lost RST leaves a stale socket; the challenge ACK costs the same retry.
    let v = run_json("stale-syn-lost-rst", dir.path());
    assert_diagnosed(&v);
    assert!(p50(&v, "broken") > 2.0, "{v}");
    assert!(p50(&v, "control") < p50(&v, "broken") / 2.0, "{v}");
    assert!(
        phase(&v, "broken")["extra"]["emulator_dropped"]
            .as_u64()
            .unwrap()
            >= 5
    );
    assert_eq!(shown(&v, "broken"), samples(&v, "broken"), "{v}");
    assert_eq!(shown(&v, "control"), 0);

    // Seed 001's class: the second write waits for the server's delayed ACK (>= 40 ms).
    let v = run_json("nagle-delayed-ack", dir.path());
    assert_diagnosed(&v);
    assert!(p50(&v, "broken") > 30.0, "{v}");
    assert!(p50(&v, "fixed") < 5.0, "{v}");

    // A full accept queue drops SYNs: they wait about a second for the retransmission.
    let v = run_json("syn-backlog-full", dir.path());
    assert_diagnosed(&v);
    assert!(
        phase(&v, "broken")["max_ms"].as_f64().unwrap() > 900.0,
        "{v}"
    );
    assert!(
        phase(&v, "fixed")["max_ms"].as_f64().unwrap() < 500.0,
        "{v}"
    );

    // Tail loss: recovery by probe or RTO costs far more than the 20 ms round trip.
    let v = run_json("tail-loss", dir.path());
    assert_diagnosed(&v);
    assert!(
        phase(&v, "broken")["extra"]["emulator_dropped"]
            .as_u64()
            .unwrap()
            >= 1,
        "{v}"
    );
    assert!(
        phase(&v, "broken")["max_ms"].as_f64().unwrap()
            > phase(&v, "control")["max_ms"].as_f64().unwrap() + 20.0,
        "{v}"
    );

    // Seed 000's own loop: no connection over 100 ms on this kernel.
    let v = run_json("seed000-reproducer", dir.path());
    let extra = &phase(&v, "seed-loop")["extra"];
    assert!(extra["connections"].as_u64().unwrap() > 500, "{v}");
    assert_eq!(extra["over_100ms"], 0, "{v}");

    // Each capture was written and is a capture tcpwhy reads.
    for f in [
        "stale-syn-timewait-broken.pcap",
        "nagle-delayed-ack-fixed.pcap",
        "tail-loss-broken.pcap",
    ] {
        let p = dir.join(f);
        let out = tcpwhy(&["analyze", "--format", "json", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{f}");
    }
    assert_eq!(lab_namespaces(), before, "namespaces left behind");
}

/// Sends SIGCONT to a stopped lab run when dropped, also when the test fails while it is held.
struct Held(String);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0]).status();
    }
}

/// `tcpwhy lab run NAME --quick --json` with `tcpwhy host --interval SECS` on its client and
/// server namespaces over the whole run. The run is held (SIGSTOP) from the moment both
/// namespaces exist (about 15 ms in, before their links are even up) until the host has
/// entered them. Returns the lab's report, the host's findings and the two namespace names.
fn run_with_host(
    name: &str,
    dir: &std::path::Path,
    secs: f64,
) -> (Value, Vec<Value>, String, String) {
    let d = format!("{}/", dir.display());
    let child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["lab", "run", name, "--quick", "--json", "--capture", &d])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let prefix = format!("twlab{pid}x");
    let named = |suffix: &str| -> Option<String> {
        std::fs::read_dir("/run/netns")
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(&prefix) && n.ends_with(suffix))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let (c, s) = loop {
        if let (Some(c), Some(s)) = (named("-c"), named("-s")) {
            break (c, s);
        }
        assert!(Instant::now() < deadline, "{name}: no namespaces");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let held = Held(pid);
    // Nothing has been sent yet: the client has opened no connection.
    let opens = run_cmd(
        "ip",
        &["netns", "exec", &c, "nstat", "-asz", "TcpActiveOpens"],
    );
    assert!(
        opens
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("0")),
        "{name}: traffic started before the run was held: {opens}"
    );
    let mut host = host_over(secs, &[&c, &s]);
    drop(held);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.lines().next().expect("one line")).expect("JSON");
    assert!(
        host.try_wait().unwrap().is_none(),
        "{name}: the host's {secs} s ended before the run did"
    );
    let (f, _, _) = host_records(&host.wait_with_output().unwrap());
    (v, f, c, s)
}

fn host_finding<'a>(f: &'a [Value], ns: &str, id: &str) -> &'a Value {
    f.iter()
        .find(|x| x["namespace"] == ns && x["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {ns}: {f:?}"))
}

#[test]
fn host_names_the_lab_scenarios_on_their_namespaces() {
    if !root_or_skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("labtest-host");
    let before = lab_namespaces();

    // Seed 004: the client's reconnects from the same port meet the server's TIME-WAIT.
    let (v, f, c, s) = run_with_host("stale-syn-timewait", dir.path(), 3.0);
    let slow = samples(&v, "broken") - phase(&v, "broken")["histogram"]["<1ms"].as_u64().unwrap();
    assert!(slow >= 2, "{v}");
    // The client: each slow reconnect one SYN retransmission after an RST, as the lab timed.
    let st = host_finding(&f, &c, "host-stale-state-collisions");
    assert_eq!(
        st["evidence"]["syn_retransmits_after_rst"], slow,
        "{st}\n{v}"
    );
    // The server: every reconnect of both phases took a TIME-WAIT over (broken: refused, then
    // reset by the client; fixed: accepted by its timestamp), and none was left.
    let all = samples(&v, "broken") + samples(&v, "fixed");
    let p = host_finding(&f, &s, "host-port-reuse-risk");
    assert_eq!(p["evidence"]["ended_early"], all, "{p}\n{v}");
    assert_eq!(p["evidence"]["created_in_interval"], all, "{p}");

    // A full accept queue: the server names the listener, the clients' SYNs wait.
    let (v, f, c, s) = run_with_host("syn-backlog-full", dir.path(), 8.0);
    let b = host_finding(&f, &s, "host-syn-backlog");
    let l = &b["evidence"]["listeners"];
    assert_eq!(
        l.as_array().unwrap().len(),
        1,
        "only the broken phase's: {b}"
    );
    assert_eq!(l[0]["local"], "10.201.2.2:5000");
    assert_eq!(l[0]["backlog"], 1);
    assert!(
        b["evidence"]["listen_overflows"].as_u64().unwrap() >= 1,
        "{b}"
    );
    // The capture saw this many connections retransmit their SYN; the host counted at least
    // one retransmission each.
    let retried: u64 = phase(&v, "broken")["analyzer"][0]
        .as_str()
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{v}"));
    assert!(retried >= 1, "{v}");
    let r = host_finding(&f, &c, "host-retransmissions");
    let syn = r["evidence"]["syn_retransmits_per_s"].as_f64().unwrap()
        * r["evidence"]["interval_s"].as_f64().unwrap();
    assert!(syn.round() as u64 >= retried, "{r}\n{v}");
    assert!(
        !f.iter().any(|x| x["id"] == "host-stale-state-collisions"),
        "dropped SYNs are not stale state: {f:?}"
    );
    assert_eq!(lab_namespaces(), before, "namespaces left behind");
}

#[test]
fn killed_run_is_cleaned_by_lab_clean() {
    if !root_or_skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("labtest-kill");
    // `lab clean` removes every dead run's leftovers, not only this test's. A machine can start
    // with some (CI once did: twlab1757x0-*, from a run killed before the machine image was
    // taken): clean them first, so that "before" holds only live state the clean must keep.
    assert_eq!(tcpwhy(&["lab", "clean"]).status.code(), Some(0));
    // What the host looks like outside the lab's namespaces, before.
    let root_state = || {
        let links = run_cmd("ip", &["-o", "link", "show"]);
        let rules = run_cmd("iptables-legacy-save", &[]);
        let rules: Vec<String> = rules
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect();
        let queues =
            std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue").unwrap_or_default();
        (links, rules, queues)
    };
    let before_root = root_state();
    let before = lab_namespaces();
    // Slow start after idle runs the NFQUEUE emulator (delay line in the router namespace).
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["lab", "run", "slow-start-after-idle", "--capture"])
        .arg(format!("{}/", dir.path().display()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mine = |n: &String| n.starts_with(&format!("twlab{pid}x"));
    // Wait until the emulator has bound its queue inside the router namespace.
    let bound = || {
        lab_namespaces()
            .iter()
            .filter(|n| mine(n) && n.ends_with("-r"))
            .any(|r| {
                !run_cmd(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        r,
                        "cat",
                        "/proc/net/netfilter/nfnetlink_queue",
                    ],
                )
                .trim()
                .is_empty()
            })
    };
    while !bound() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(bound(), "the run never bound its NFQUEUE");
    std::thread::sleep(Duration::from_millis(300));
    // What the run recorded it changed (namespaces, sysctls and their old values).
    let state: String = std::fs::read_dir("/run/tcpwhy-lab")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("twlab{pid}x"))
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(state.contains("netns "), "{state}");
    child.kill().unwrap(); // SIGKILL: no cleanup runs
    child.wait().unwrap();
    assert!(
        lab_namespaces().iter().any(mine),
        "SIGKILL left the namespaces (as expected)"
    );
    let out = tcpwhy(&["lab", "clean"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("deleted namespace"));
    assert!(
        !lab_namespaces().iter().any(mine),
        "lab clean left namespaces"
    );
    assert_eq!(lab_namespaces(), before);
    // Every sysctl the run recorded is back to its old value.
    for line in state.lines() {
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        if let ["sysctl", key, old] = parts[..] {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            let now = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(now.trim(), old.trim(), "{key}");
        }
    }
    // No link, firewall rule or NFQUEUE binding outside the (deleted) namespaces changed.
    assert_eq!(root_state(), before_root);
    assert!(!std::fs::read_dir("/run/tcpwhy-lab")
        .map(|d| d.flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("twlab{pid}x"))))
        .unwrap_or(false));
}

/// A command's standard output ("" if it cannot run).
fn run_cmd(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn lab_list_needs_no_root_and_names_every_scenario() {
    let out = tcpwhy(&["lab", "list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "stale-syn-timewait",
        "stale-syn-lost-rst",
        "seed000-reproducer",
        "slow-start-after-idle",
        "nagle-delayed-ack",
        "ehash-chain",
        "syn-backlog-full",
        "tail-loss",
    ] {
        assert!(text.contains(name), "{name} missing");
    }
}

#[test]
fn analyze_interface_reports_live_connections_until_ctrl_c() {
    if !root_or_skip() {
        return;
    }
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["analyze", "--interface", "lo", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let server = std::thread::spawn(move || {
        for _ in 0..3 {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 5];
            s.read_exact(&mut b).unwrap();
            s.write_all(b"world").unwrap();
        }
    });
    for _ in 0..3 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
    }
    server.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Ctrl-C: the summary comes after it.
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let server_ep = format!("127.0.0.1:{port}");
    let mine: Vec<&Value> = records
        .iter()
        .filter(|r| r["server"] == server_ep.as_str())
        .collect();
    assert_eq!(mine.len(), 3, "{text}");
    for c in mine {
        assert_eq!(c["c2s"]["unique_bytes"], 5);
        assert_eq!(c["s2c"]["unique_bytes"], 5);
        assert_eq!(c["vantage"], "local");
    }
    assert_eq!(records.last().unwrap()["type"], "summary");
    assert_eq!(records.last().unwrap()["files"][0], "live:lo");
}

/// A live connection is printed when its linger after the close ends (2 s), by the clock, while
/// the wire stays quiet: not at the next packet, not at Ctrl-C. The capture filter (trailing
/// words, as tcpdump takes them) keeps other loopback traffic out of the report.
#[test]
fn analyze_interface_prints_a_finished_connection_by_the_clock() {
    if !root_or_skip() {
        return;
    }
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let port_s = port.to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args([
            "analyze",
            "--interface",
            "lo",
            "--format",
            "json",
            "tcp",
            "port",
            &port_s,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((std::time::Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        s.write_all(b"world").unwrap();
    });
    {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
    }
    server.join().unwrap();
    let closed = std::time::Instant::now();
    // Nothing more on this port: the record must come by the clock.
    let (when, line) = rx
        .recv_timeout(Duration::from_secs(8))
        .expect("the connection record within 8 s of the close, without another packet");
    let after = when.duration_since(closed);
    let rec: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(rec["type"], "connection", "{line}");
    assert_eq!(rec["server"], format!("127.0.0.1:{port}"), "{line}");
    assert!(
        after >= Duration::from_millis(1500) && after <= Duration::from_secs(4),
        "printed {after:?} after the close; the linger is 2 s"
    );
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(0));
    let rest: Vec<Value> = rx
        .try_iter()
        .map(|(_, l)| serde_json::from_str(&l).unwrap())
        .collect();
    let summary = rest.last().expect("the summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["connections"], 1, "{summary}");
    assert_eq!(summary["filter"], format!("tcp port {port}"));
}
