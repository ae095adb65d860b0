//! docs/json-schema.md against the code: every finding id `tcpwhy explain` knows is listed
//! there and nothing else, and every key the JSON output writes (records, their nested
//! objects) is documented in its record's section. The keys are collected from real output:
//! every lab and capture fixture, with `--exchanges`, plus a SYN flood built here.

use crate::common;
use crate::common::{tcpwhy, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn schema() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/json-schema.md");
    std::fs::read_to_string(p).expect("docs/json-schema.md")
}

/// The words (`[a-z0-9_-]+`) inside backtick spans of `text`.
fn backticked_words(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| {
            span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The section of the schema about records of `kind` (from its heading to the next).
fn section(doc: &str, kind: &str) -> String {
    let head = format!("## `\"type\": \"{kind}\"`");
    let start = doc
        .find(&head)
        .unwrap_or_else(|| panic!("no section {head}"));
    let rest = &doc[start + head.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_string()
}

#[test]
fn every_finding_id_is_in_the_schema_and_only_those() {
    let out = tcpwhy(&["explain"]);
    assert!(out.status.success());
    let ids: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(ids.len() >= 20, "{ids:?}");
    let doc = schema();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `id` | stable kebab-case id:"))
        .expect("the finding id row");
    // The row's backticked words are the ids, plus the command `tcpwhy explain ID`.
    let mut listed = backticked_words(row);
    for w in ["id", "tcpwhy", "explain", "ID"] {
        listed.remove(w);
    }
    assert_eq!(ids, listed, "tcpwhy explain against docs/json-schema.md");
}

/// Adds every key of `v` to `keys` under `path` (nested objects as `path.key`; the
/// cause-specific `details` and the summary's maps keyed by reason, link type or vantage are
/// not walked).
fn collect(v: &Value, path: &str, keys: &mut BTreeMap<String, BTreeSet<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                keys.entry(path.to_string()).or_default().insert(k.clone());
                let skip = k == "details"
                    || matches!(
                        k.as_str(),
                        "skipped" | "malformed" | "skipped_link_types" | "vantage"
                    ) && path == "summary";
                if !skip {
                    collect(x, &format!("{path}.{k}"), keys);
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                collect(x, path, keys);
            }
        }
        _ => {}
    }
}

/// One Ethernet + IPv4 + TCP SYN (no options, no payload), for the flood below.
fn syn_frame(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 8;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[18..20].copy_from_slice(&(i as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 9, (i >> 8) as u8, i as u8]);
    f[30..34].copy_from_slice(&[10, 255, 0, 1]);
    f[34..36].copy_from_slice(&(40_000 + (i % 20_000) as u16).to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[38..42].copy_from_slice(&(i.wrapping_mul(2_654_435_761)).to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x02;
    f[48..50].copy_from_slice(&64_240u16.to_be_bytes());
    f
}

/// 300 SYNs from distinct sources to one service, 10 ms apart, never answered, then 4 s of
/// nothing but one late SYN: a flood (no client sent any of them again), for the
/// capture-wide finding's keys.
fn flood_capture(path: &Path) {
    let base = 1_700_000_000_000_000u64;
    let mut records: Vec<(u64, Vec<u8>)> = (0..300u32)
        .map(|i| (base + u64::from(i) * 10_000, syn_frame(i)))
        .collect();
    records.push((base + 7_000_000, syn_frame(300)));
    let out = common::pcap_bytes(1, &records);
    std::fs::write(path, out).expect("write the flood");
}

#[test]
fn every_key_the_json_output_writes_is_documented() {
    let dir = TempDir::new("schema-doc");
    let flood = dir.path().join("flood.pcap");
    flood_capture(&flood);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut inputs: Vec<String> = vec![flood.display().to_string()];
    for sub in ["lab", "captures"] {
        let mut files: Vec<String> = std::fs::read_dir(root.join(sub))
            .expect("fixtures")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".gz")
            })
            .map(|p| p.display().to_string())
            .collect();
        files.sort();
        inputs.extend(files);
    }
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut kinds = BTreeSet::new();
    for input in &inputs {
        let out = tcpwhy(&["analyze", "--format", "json", "--exchanges", input]);
        // Some capture fixtures are broken on purpose (exit 2): their records still count.
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let kind = v["type"].as_str().unwrap_or("?").to_string();
            if v["id"] == "syn-flood" {
                kinds.insert("capture-wide finding".to_string());
            }
            kinds.insert(kind.clone());
            collect(&v, &kind, &mut keys);
        }
    }
    for k in [
        "connection",
        "finding",
        "exchange",
        "stall",
        "summary",
        "capture-wide finding",
    ] {
        assert!(
            kinds.contains(k),
            "no {k} record in the fixtures: {kinds:?}"
        );
    }
    assert!(
        keys.get("finding")
            .is_some_and(|s| s.contains("confidence")),
        "{keys:?}"
    );
    let doc = schema();
    let common = backticked_words(&doc[..doc.find("\n## ").unwrap_or(0)]);
    let mut missing = Vec::new();
    for (path, found) in &keys {
        let kind = path.split('.').next().unwrap_or(path);
        let documented = backticked_words(&section(&doc, kind));
        for key in found {
            if !documented.contains(key) && !common.contains(key) {
                missing.push(format!("{path}.{key}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys the JSON output writes that docs/json-schema.md does not document: {missing:?}"
    );
}
