//! Robustness: tcpwhy on every capture of tcpdump's test suite (830 files, many malformed on
//! purpose; ../shared/corpus/tcpdump-tests). No panic, no hang, exit 0 or 2, and with
//! `--format json` every output line parses.

use crate::common::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PER_FILE: Duration = Duration::from_secs(20);

fn corpus_dir() -> PathBuf {
    match std::env::var_os("TCPWHY_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tcpdump-tests"),
    }
}

/// Run with a deadline; the child is killed (by its own PID) if it overstays.
fn run(file: &Path) -> Result<(i32, String, String), String> {
    let dir = TempDir::new("corpus");
    let out_path = dir.join("out");
    let err_path = dir.join("err");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["analyze", "--format", "json"])
        .arg(file)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).map_err(|e| e.to_string())?)
        .stderr(std::fs::File::create(&err_path).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if start.elapsed() > PER_FILE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no result after {PER_FILE:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    Ok((status.code().unwrap_or(-1), out, err))
}

#[test]
fn tcpdump_test_captures_never_panic_or_hang() {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e} (set TCPWHY_CORPUS)", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 800,
        "only {} captures in {}",
        files.len(),
        dir.display()
    );
    let mut failures = Vec::new();
    let (mut ok, mut rejected, mut tcp_conns) = (0, 0, 0);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        match run(f) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok((code, out, err)) => {
                if err.contains("panicked") || !(code == 0 || code == 2) {
                    failures.push(format!("{name}: exit {code}: {err}"));
                    continue;
                }
                if code == 2 {
                    rejected += 1;
                    // One clear line naming the file.
                    let last = err.lines().last().unwrap_or("");
                    if !last.contains(&name) || !last.contains("at byte") {
                        failures.push(format!("{name}: unclear error: {err}"));
                    }
                } else {
                    ok += 1;
                }
                for line in out.lines() {
                    match serde_json::from_str::<serde_json::Value>(line) {
                        Ok(v) => tcp_conns += usize::from(v["type"] == "connection"),
                        Err(e) => failures.push(format!("{name}: bad JSON line ({e}): {line}")),
                    }
                }
            }
        }
    }
    eprintln!(
        "corpus: {} files, {ok} read, {rejected} rejected with a message, {tcp_conns} TCP connections",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
