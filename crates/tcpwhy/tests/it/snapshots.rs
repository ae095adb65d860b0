//! Snapshot tests (insta): the whole JSON output (`--format json --exchanges`) of the lab
//! captures and a few real-traffic fixtures, and the text report (as written to a pipe: no
//! colour, no wrapping) of the lab's broken runs and one control, in fixtures/snapshots/.
//!
//! The JSON snapshots were written by tcpwhy and then reviewed by hand once (the findings'
//! frames and costs against tshark and fixtures/lab/README.md, the connection facts against
//! tshark's conversations, which tests/it/tshark.rs also checks); the text snapshots were
//! reviewed against them (every cause, cost, frame and count of the report is a field of the
//! JSON). From then on they guard against any unintended change. After an intended change:
//! `INSTA_UPDATE=always cargo test --test it snapshots::` (or `cargo insta review`), and
//! review the diff before committing.

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

/// The text report of these (a subset: each report is one screen to review).
const TEXT_CASES: [&str; 6] = [
    "fixtures/lab/stale-syn-timewait-broken.pcap.gz",
    "fixtures/lab/stale-syn-lost-rst-broken.pcap",
    "fixtures/lab/slow-start-after-idle-broken.pcap.gz",
    "fixtures/lab/nagle-delayed-ack-broken.pcap",
    "fixtures/lab/syn-backlog-full-broken.pcap",
    "fixtures/lab/tail-loss-control.pcap",
];

/// tcpwhy's output on `case` (run from the repository root with a relative path, so that the
/// report names the file as the snapshot does).
fn run(case: &str, args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .current_dir(&root)
        .arg("analyze")
        .args(args)
        .arg(case)
        .output()
        .expect("run tcpwhy");
    assert_eq!(out.status.code(), Some(0), "{case}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Compares `got` with the snapshot `name` in fixtures/snapshots.
fn check(name: &str, got: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots");
    insta::with_settings!({
        snapshot_path => dir,
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, got);
    });
}

fn file_name(case: &str) -> String {
    Path::new(case)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn json_output_matches_the_reviewed_snapshots() {
    for case in CASES {
        let got = run(case, &["--format", "json", "--exchanges"]);
        check(&format!("{}.json", file_name(case)), &got);
    }
}

#[test]
fn text_report_matches_the_reviewed_snapshots() {
    for case in TEXT_CASES {
        let got = run(case, &["--color", "never"]);
        check(&format!("{}.text", file_name(case)), &got);
    }
}
