//! Snapshot tests: the whole JSON output (`--format json --exchanges`) of the lab captures and
//! a few real-traffic fixtures, compared line by line with fixtures/snapshots/*.jsonl.
//!
//! The snapshots were written by tcpwhy and then reviewed by hand once (the findings' frames
//! and costs against tshark and fixtures/lab/README.md, the connection facts against tshark's
//! conversations, which tests/it/tshark.rs also checks); from then on they guard against any
//! unintended change. After an intended change, rewrite them with
//! `TCPWHY_UPDATE_SNAPSHOTS=1 cargo test --test it snapshots::`, and review the diff before committing.

use std::path::Path;
use std::process::Command;

const CASES: [&str; 16] = [
    "fixtures/lab/stale-syn-timewait-broken.pcap.gz",
    "fixtures/lab/stale-syn-timewait-fixed.pcap.gz",
    "fixtures/lab/stale-syn-lost-rst-broken.pcap",
    "fixtures/lab/stale-syn-lost-rst-control.pcap",
    "fixtures/lab/slow-start-after-idle-broken.pcap.gz",
    "fixtures/lab/slow-start-after-idle-fixed.pcap.gz",
    "fixtures/lab/slow-start-after-idle-bbr.pcap.gz",
    "fixtures/lab/nagle-delayed-ack-broken.pcap",
    "fixtures/lab/nagle-delayed-ack-fixed.pcap",
    "fixtures/lab/syn-backlog-full-broken.pcap",
    "fixtures/lab/syn-backlog-full-fixed.pcap",
    "fixtures/lab/tail-loss-broken.pcap",
    "fixtures/lab/tail-loss-control.pcap",
    "fixtures/captures/bulk-stalls.pcap",
    "fixtures/captures/loopback-http.pcap",
    "fixtures/captures/veth-mixed.pcap",
];

#[test]
fn json_output_matches_the_reviewed_snapshots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let update = std::env::var("TCPWHY_UPDATE_SNAPSHOTS").as_deref() == Ok("1");
    let mut failures = Vec::new();
    for case in CASES {
        // Run from the repository root with a relative path: the summary names the file.
        let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
            .current_dir(&root)
            .args(["analyze", "--format", "json", "--exchanges", case])
            .output()
            .expect("run tcpwhy");
        assert_eq!(out.status.code(), Some(0), "{case}");
        let got = String::from_utf8(out.stdout).expect("UTF-8 output");
        let name = Path::new(case).file_name().unwrap().to_string_lossy();
        let snap = root
            .join("fixtures/snapshots")
            .join(format!("{name}.jsonl"));
        if update {
            std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
            std::fs::write(&snap, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&snap)
            .unwrap_or_else(|_| panic!("{} missing (see this file's doc)", snap.display()));
        if got != want {
            let (i, (g, w)) = got
                .lines()
                .zip(want.lines())
                .enumerate()
                .find(|(_, (g, w))| g != w)
                .unwrap_or((0, ("(line count differs)", "")));
            failures.push(format!(
                "{case}: line {}\n  got:  {g}\n  want: {w}\n  ({} lines vs {})",
                i + 1,
                got.lines().count(),
                want.lines().count()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
