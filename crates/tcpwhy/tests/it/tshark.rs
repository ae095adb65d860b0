//! Cross-check against tshark: for every fixture, the connections, and the packets and frame
//! bytes per direction, equal what tshark reports (its `tcp.stream` conversations, the same
//! ones `tshark -q -z conv,tcp` lists).

use crate::common::*;
use std::collections::BTreeMap;
use std::process::Command;

/// One side of a conversation: (endpoint, frames it sent, frame bytes it sent).
type Half = (String, u64, u64);

/// A conversation with its two halves in a canonical order, so the lists can be compared.
fn canon(mut a: Half, mut b: Half) -> (Half, Half) {
    if a.0 > b.0 {
        std::mem::swap(&mut a, &mut b);
    }
    (a, b)
}

fn endpoint(addr: &str, port: &str) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// tshark's conversations from its per-frame fields, grouped by `tcp.stream`.
fn tshark_conversations(file: &str) -> Vec<(Half, Half)> {
    let out = Command::new("tshark")
        .args([
            "-n",
            "-r",
            file,
            "-Y",
            "tcp",
            "-T",
            "fields",
            "-E",
            "separator=,",
        ])
        .args([
            "-e",
            "tcp.stream",
            "-e",
            "ip.src",
            "-e",
            "ipv6.src",
            "-e",
            "tcp.srcport",
        ])
        .args([
            "-e",
            "ip.dst",
            "-e",
            "ipv6.dst",
            "-e",
            "tcp.dstport",
            "-e",
            "frame.len",
        ])
        .output()
        .expect("run tshark");
    let mut streams: BTreeMap<u64, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    let mut peers: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 8 || f[0].is_empty() {
            continue;
        }
        // Tunnelled packets list several addresses; the innermost (last) carries the TCP.
        let pick = |v4: &str, v6: &str| {
            let s = if v6.is_empty() { v4 } else { v6 };
            s.rsplit(';').next().unwrap_or(s).to_string()
        };
        let stream: u64 = f[0].parse().expect("stream number");
        let src = endpoint(&pick(f[1], f[2]), f[3]);
        let dst = endpoint(&pick(f[4], f[5]), f[6]);
        let len: u64 = f[7].parse().expect("frame length");
        let e = streams
            .entry(stream)
            .or_default()
            .entry(src.clone())
            .or_default();
        e.0 += 1;
        e.1 += len;
        peers.entry(stream).or_insert((src, dst));
    }
    let mut convs: Vec<(Half, Half)> = streams
        .into_iter()
        .map(|(id, sides)| {
            let (a, b) = &peers[&id];
            let get = |k: &String| sides.get(k).copied().unwrap_or_default();
            let (fa, ba) = get(a);
            let (fb, bb) = get(b);
            canon((a.clone(), fa, ba), (b.clone(), fb, bb))
        })
        .collect();
    convs.sort();
    convs
}

/// Frames per conversation from `tshark -q -z conv,tcp` (its byte columns switch to kB
/// above 10 000, so only frames are compared from it).
fn tshark_conv_table_frames(file: &str) -> Vec<u64> {
    let out = Command::new("tshark")
        .args(["-n", "-q", "-z", "conv,tcp", "-r", file])
        .output()
        .unwrap();
    let mut totals: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("<->"))
        .map(|l| {
            // "A <-> B  f1 b1 unit  f2 b2 unit  total tb unit  start  duration"
            let after: Vec<&str> = l.split("<->").nth(1).unwrap().split_whitespace().collect();
            after[7].parse().expect("total frames")
        })
        .collect();
    totals.sort();
    totals
}

fn tcpwhy_conversations(files: &[&str]) -> Vec<(Half, Half)> {
    let (conns, _) = analyze_json(files);
    let mut v: Vec<(Half, Half)> = conns
        .iter()
        .map(|c| {
            let half = |ep: &str, dir: &str| {
                (
                    c[ep].as_str().unwrap().to_string(),
                    c[dir]["packets"].as_u64().unwrap(),
                    c[dir]["bytes"].as_u64().unwrap(),
                )
            };
            canon(half("client", "c2s"), half("server", "s2c"))
        })
        .collect();
    v.sort();
    v
}

/// (what tcpwhy reads, what tshark reads): compressed and rotated inputs are compared with the
/// capture they were made from.
fn cases() -> Vec<(Vec<String>, String)> {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    let mut cases = Vec::new();
    for (name, facts) in expected.as_object().unwrap() {
        if facts["error"].as_bool() == Some(true) || name.starts_with("rotated-") {
            continue;
        }
        let original = match name.as_str() {
            "loopback-http.pcap.gz" | "compressed-no-extension" => "loopback-http.pcap",
            "veth-mixed.zst" => "veth-mixed.pcap",
            other => other,
        };
        cases.push((vec![fixture(name)], fixture(original)));
    }
    cases.push((
        vec![fixture("rotated-1.pcap"), fixture("rotated-2.pcap")],
        fixture("veth-mixed.pcap"),
    ));
    cases
}

#[test]
fn every_fixture_matches_tshark() {
    if !have_tshark() {
        return;
    }
    let mut checked = 0;
    for (ours, theirs) in cases() {
        let files: Vec<&str> = ours.iter().map(String::as_str).collect();
        let mut mine = tcpwhy_conversations(&files);
        let mut tshark = tshark_conversations(&theirs);
        if theirs.contains("-frags") || theirs.contains("ipv6-exthdr") {
            // tshark reassembles IP fragments and shows the TCP segment in the frame of the
            // *last* fragment; tcpwhy reads the TCP header in the *first* fragment. Both count
            // one packet; the frame bytes differ by design, so compare packets only.
            for (a, b) in mine.iter_mut().chain(tshark.iter_mut()) {
                a.2 = 0;
                b.2 = 0;
            }
        }
        assert_eq!(mine, tshark, "{ours:?} vs tshark on {theirs}");
        let mut frames: Vec<u64> = mine.iter().map(|(a, b)| a.1 + b.1).collect();
        frames.sort();
        assert_eq!(
            frames,
            tshark_conv_table_frames(&theirs),
            "conv,tcp frames for {theirs}"
        );
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} fixtures checked");
}

/// Every finding's `wireshark_filter`, on every lab capture (the vantage cells too), is a
/// display filter the installed tshark (4.x) accepts, and it selects exactly the finding's
/// evidence frames.
#[test]
fn every_wireshark_filter_parses_in_tshark_and_selects_the_evidence() {
    if !have_tshark() {
        return;
    }
    let mut files: Vec<String> = Vec::new();
    for dir in ["../../fixtures/lab", "../../fixtures/lab/vantage"] {
        let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for e in std::fs::read_dir(&d).expect("fixture directory") {
            let p = e.expect("entry").path();
            let name = p.to_string_lossy().into_owned();
            if name.ends_with(".pcap") || name.ends_with(".pcap.gz") {
                files.push(name);
            }
        }
    }
    files.sort();
    let mut checked = 0;
    for file in &files {
        let out = tcpwhy(&["analyze", "--format", "json", file]);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
            if v["type"] != "finding" {
                continue;
            }
            let filter = v["wireshark_filter"].as_str().expect("a filter");
            let want: Vec<u64> = v["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .filter_map(|f| f.as_u64())
                .collect();
            let t = Command::new("tshark")
                .args([
                    "-n",
                    "-r",
                    file,
                    "-Y",
                    filter,
                    "-T",
                    "fields",
                    "-e",
                    "frame.number",
                ])
                .output()
                .expect("tshark");
            assert!(
                t.status.success(),
                "{file}: tshark rejects {filter:?}: {}",
                String::from_utf8_lossy(&t.stderr)
            );
            let got: Vec<u64> = String::from_utf8_lossy(&t.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            assert_eq!(got, want, "{file}: {filter}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} findings checked");
}
