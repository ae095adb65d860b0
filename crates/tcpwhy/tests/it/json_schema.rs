//! The JSON Schemas in schema/ hold for real output: every record tcpwhy analyze writes for
//! every fixture (the repository's captures, the lab's, and the real-world corpus when it is
//! beside the repository), with exchanges and stalls, with and without a capture filter.
//! `tcpwhy host` records are checked the same way in tests/host.rs (common::host_records),
//! which makes a host finding of every id on namespaces it builds.

use crate::common;
use crate::common::{check_schema, tcpwhy};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn every_record_of_every_fixture_matches_its_schema() {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for f in common::all_captures() {
        for extra in [&[][..], &["--filter", "tcp port 80 or tcp port 443"][..]] {
            let mut args = vec!["analyze", "--format", "json", "--exchanges", "-q", &f];
            args.extend_from_slice(extra);
            let out = tcpwhy(&args);
            if out.status.code() == Some(2) && out.stdout.is_empty() {
                continue; // a fixture of a bad file: no records
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let v: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{f}: a line that is not JSON ({e}): {line}"));
                check_schema(&v);
                *seen
                    .entry(v["type"].as_str().unwrap_or("").to_string())
                    .or_default() += 1;
            }
        }
    }
    eprintln!("records checked: {seen:?}");
    for kind in ["connection", "finding", "exchange", "stall", "summary"] {
        assert!(
            seen.get(kind).is_some_and(|n| *n > 0),
            "no {kind} record met"
        );
    }
}

/// The schema's list of finding ids is the detectors' list (`tcpwhy explain`).
#[test]
fn the_finding_schema_names_every_detector() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/finding.schema.json"),
    )
    .expect("schema/finding.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("JSON");
    let listed: Vec<&str> = schema["properties"]["id"]["enum"]
        .as_array()
        .expect("an enum of ids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let out = tcpwhy(&["explain"]);
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(ids.len() >= 18, "{ids:?}");
    assert_eq!(listed, ids);
}

/// A record that breaks the schema is caught: the check is not vacuous.
#[test]
#[should_panic(expected = "breaks schema/connection.schema.json")]
fn a_record_with_an_undocumented_field_fails() {
    let (conns, _) = common::analyze_json(&[&common::fixture("sample.pcap")]);
    let mut c = conns.into_iter().next().expect("a connection");
    c["surprise"] = Value::from(1);
    check_schema(&c);
}
