//! Capture filters select the packets tcpdump selects: for every fixture and every capture of
//! the real-world corpus that tcpdump reads, and a set of expressions covering host, net, port,
//! portrange, src/dst, tcp, ip, ip6, vlan, and/or/not and parentheses, `tcpwhy analyze FILE
//! EXPR` must report the same frames, TCP segments, bytes and connections as tcpwhy on what
//! `tcpdump -r FILE -w - EXPR` wrote (tcpdump's selection, read by the reader tested against
//! tshark elsewhere), and the frames it did not select must add up to the whole file.

use crate::common;
use crate::common::{fixtures, tcpwhy, TempDir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXPRESSIONS: &[&str] = &[
    "tcp",
    "port 80",
    "tcp port 80 or tcp port 443",
    "not port 80",
    "net 10.0.0.0/8",
    "src net 192.168.0.0/16 and tcp",
    "dst portrange 1-1023",
    "ip and (port 21 or port 20 or port 445)",
    "ip6",
    "vlan or (host 127.0.0.1 and not src port 80)",
    "tcp[tcpflags] & (tcp-syn|tcp-rst) != 0",
];

fn summary(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    assert_eq!(v["type"], "summary", "last line is the summary: {last}");
    v
}

fn captures() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .collect();
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/real");
    if let Ok(dir) = std::fs::read_dir(&real) {
        all.extend(dir.flatten().map(|e| e.path()));
    } else {
        eprintln!("{} is absent: the fixtures alone", real.display());
    }
    all.retain(|p| {
        let n = p.to_string_lossy();
        n.ends_with(".pcap") || n.ends_with(".pcapng")
    });
    all.sort();
    all
}

#[test]
fn selects_the_packets_tcpdump_selects() {
    assert!(
        Command::new("tcpdump").arg("--version").output().is_ok(),
        "tcpdump is needed for this test: apt-get install tcpdump"
    );
    let tmp = TempDir::new("filter");
    let (mut compared, mut selected_any) = (0, 0);
    for cap in captures() {
        let file = cap.to_string_lossy().into_owned();
        let whole = tcpwhy(&["analyze", "--format", "json", "--threads", "1", &file]);
        if whole.status.code() != Some(0) {
            continue; // a fixture of a bad file: tests/it/analyze.rs checks its error
        }
        let all_frames = summary(&whole.stdout)["packets"].as_u64().unwrap_or(0);
        for expr in EXPRESSIONS {
            let picked = tmp.join("picked.pcap");
            let dump = Command::new("tcpdump")
                .args(["-r", &file, "-w"])
                .arg(&picked)
                .arg(expr)
                .output()
                .expect("run tcpdump");
            if !dump.status.success() {
                // libpcap reads no pcapng with two link types, nor some fixtures' odd link
                // types: nothing to compare with.
                continue;
            }
            let ours = tcpwhy(&["analyze", "--format", "json", "--threads", "1", &file, expr]);
            assert_eq!(
                ours.status.code(),
                Some(0),
                "{file} {expr}: {}",
                String::from_utf8_lossy(&ours.stderr)
            );
            let ours = summary(&ours.stdout);
            let theirs = tcpwhy(
                &["analyze", "--format", "json", "--threads", "1"]
                    .into_iter()
                    .chain([picked.to_str().unwrap_or_default()])
                    .collect::<Vec<_>>(),
            );
            let theirs = summary(&theirs.stdout);
            for field in ["packets", "tcp_packets", "bytes", "connections"] {
                assert_eq!(
                    ours[field], theirs[field],
                    "{file} with {expr:?}: {field} differs from tcpdump's selection"
                );
            }
            assert_eq!(ours["filter"], *expr);
            let (kept, dropped) = (
                ours["packets"].as_u64().unwrap_or(0),
                ours["filtered_out"].as_u64().unwrap_or(0),
            );
            assert_eq!(
                kept + dropped,
                all_frames,
                "{file} {expr}: every frame counted"
            );
            selected_any += usize::from(kept > 0 && dropped > 0);
            compared += 1;
        }
    }
    eprintln!("{compared} capture x filter pairs agree with tcpdump");
    // The fixtures alone give more than 200 pairs; a filter that selected all or nothing
    // everywhere would prove little.
    assert!(compared >= 200, "only {compared} pairs compared");
    assert!(
        selected_any >= 50,
        "only {selected_any} pairs split a capture"
    );
}

#[test]
fn a_filter_that_does_not_compile_is_one_line_and_exit_2() {
    let f = common::fixture("sample.pcap");
    let out = tcpwhy(&["analyze", &f, "--filter", "port eighty"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("tcpwhy: capture filter \"port eighty\": "),
        "{err}"
    );
    // Trailing words and --filter together: which one was meant?
    let out = tcpwhy(&["analyze", &f, "--filter", "tcp", "port", "80"]);
    assert_eq!(out.status.code(), Some(2));
    // A missing file that looks like one fails as a file, not as a host name to look up.
    let out = tcpwhy(&["analyze", &f, "missing.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.pcap: at byte 0: cannot open"));
}

#[test]
fn the_text_report_says_what_the_filter_left_out() {
    let f = common::fixture("sample.pcap");
    let out = tcpwhy(&["analyze", &f, "--filter", "port 1"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("filter port 1: "))
        .unwrap_or_else(|| panic!("no filter line in:\n{text}"));
    let whole = summary(&tcpwhy(&["analyze", "--format", "json", &f]).stdout);
    let n = whole["packets"].as_u64().unwrap_or(0);
    assert!(n > 0);
    assert_eq!(
        line,
        format!("filter port 1: 0 frames selected, {} not", group(n))
    );
}

/// Digits grouped by spaces in threes from five digits on, as the text report writes counts.
fn group(n: u64) -> String {
    let s = n.to_string();
    if s.len() < 5 {
        return s;
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}
