//! Every input the fuzzer (fuzz/, `cargo +nightly fuzz run pipeline`) found breaking an
//! invariant, kept in fixtures/fuzz/ and checked through the real binary: the JSON output
//! parses, findings cost >= 0 and no more than the capture's span, evidence frames exist and
//! ascend, findings end no earlier than they start, exchange parts add up to their latency.

use crate::common::tcpwhy;
use serde_json::Value;

#[test]
fn fuzz_crashers_hold_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fuzz");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let name = f.to_string_lossy().into_owned();
        let out = tcpwhy(&["analyze", "--format", "json", "--exchanges", &name]);
        assert!(matches!(out.status.code(), Some(0 | 2)), "{name}");
        let recs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
            .collect();
        let summary = recs
            .iter()
            .find(|r| r["type"] == "summary")
            .expect("summary");
        let span = summary["span_ms"].as_f64().unwrap_or(0.0);
        let packets = summary["packets"].as_u64().unwrap();
        for r in &recs {
            match r["type"].as_str() {
                Some("finding") => {
                    let cost = r["cost_ms"].as_f64().unwrap();
                    assert!((0.0..=span + 0.001).contains(&cost), "{name}: {r}");
                    let frames: Vec<u64> = r["frames"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|f| f.as_u64().unwrap())
                        .collect();
                    for &fr in &frames {
                        assert!(fr >= 1 && fr <= packets, "{name}: {r}");
                    }
                    // Evidence in capture order, and a finding ends no earlier than it starts.
                    assert!(frames.windows(2).all(|w| w[0] < w[1]), "{name}: {r}");
                    let (start, end) = (r["start_ns"].as_i64(), r["end_ns"].as_i64());
                    assert!(start.unwrap() <= end.unwrap(), "{name}: {r}");
                }
                Some("exchange") => {
                    let parts: f64 = r["split_ms"]
                        .as_object()
                        .unwrap()
                        .values()
                        .map(|v| v.as_f64().unwrap())
                        .sum();
                    assert!(
                        (parts - r["latency_ms"].as_f64().unwrap()).abs() < 0.01,
                        "{name}: {r}"
                    );
                }
                _ => {}
            }
        }
    }
}
