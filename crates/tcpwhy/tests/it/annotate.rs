//! `--annotate FILE`: the capture written back as pcapng with a comment on every evidence
//! frame, read back by tshark: the comments sit on exactly the frames the findings cite, and
//! every packet keeps its time, lengths, link type and decoding, from pcap or pcapng input,
//! a file or a pipe, with any number of threads.

use crate::common::{have_tshark, lab_fixture, tcpwhy, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

fn tshark(file: &str, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("tshark runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Per frame, what tshark says of its time, lengths, encapsulation and protocols.
fn frames(file: &str) -> String {
    tshark(
        file,
        &[
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
            "-e",
            "frame.encap_type",
            "-e",
            "frame.protocols",
        ],
    )
}

/// Frame number -> its comments, as tshark reads them.
fn comments(file: &str) -> BTreeMap<u64, String> {
    tshark(
        file,
        &[
            "-Y",
            "frame.comment contains \"tcpwhy\"",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "frame.comment",
        ],
    )
    .lines()
    .filter_map(|l| {
        let (n, c) = l.split_once('\t')?;
        Some((n.parse().ok()?, c.to_string()))
    })
    .collect()
}

/// The evidence frames of the JSON findings, and the ids citing each.
fn evidence(json: &[u8]) -> BTreeMap<u64, BTreeSet<String>> {
    let mut m: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for v in String::from_utf8_lossy(json)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "finding")
    {
        for f in v["frames"].as_array().into_iter().flatten() {
            if let Some(f) = f.as_u64() {
                m.entry(f)
                    .or_default()
                    .insert(v["id"].as_str().unwrap_or("?").to_string());
            }
        }
    }
    m
}

#[test]
fn comments_on_the_evidence_frames_and_every_packet_kept() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let dir = TempDir::new("annotate");
    let input = lab_fixture("stale-syn-timewait-broken.pcap.gz");
    let plain = dir.join("input.pcap");
    let gz = std::fs::read(&input).expect("the fixture");
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut gunzip(&gz), &mut raw).expect("gunzip");
    std::fs::write(&plain, &raw).expect("write");
    let plain = plain.to_string_lossy().to_string();
    let mut outputs = Vec::new();
    for threads in ["1", "3"] {
        let out = dir
            .join(format!("a{threads}.pcapng"))
            .to_string_lossy()
            .to_string();
        let r = tcpwhy(&[
            "analyze",
            "--format",
            "json",
            "--threads",
            threads,
            "--annotate",
            &out,
            &input,
        ]);
        assert_eq!(
            r.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
        let want = evidence(&r.stdout);
        assert!(want.len() >= 10, "{want:?}");
        let got = comments(&out);
        assert_eq!(
            got.keys().copied().collect::<Vec<_>>(),
            want.keys().copied().collect::<Vec<_>>(),
            "commented frames = evidence frames"
        );
        for (frame, ids) in &want {
            for id in ids {
                assert!(
                    got[frame].contains(&format!("tcpwhy: {id},")),
                    "{frame}: {}",
                    got[frame]
                );
            }
            assert!(
                got[frame].contains("ms lost, connection "),
                "{}",
                got[frame]
            );
        }
        assert_eq!(
            frames(&out),
            frames(&plain),
            "time, lengths, link type, decoding"
        );
        outputs.push(std::fs::read(&out).expect("the annotated file"));
    }
    assert_eq!(
        outputs[0], outputs[1],
        "the same file with any number of threads"
    );
    // Text and HTML reports annotate the same frames; a pipe is read once and still written.
    for format in ["text", "html"] {
        let out = dir
            .join(format!("{format}.pcapng"))
            .to_string_lossy()
            .to_string();
        let r = tcpwhy(&["analyze", "--format", format, "--annotate", &out, &input]);
        assert_eq!(r.status.code(), Some(0));
        assert_eq!(
            std::fs::read(&out).ok().as_ref(),
            Some(&outputs[0]),
            "{format}"
        );
    }
    let out = dir.join("pipe.pcapng").to_string_lossy().to_string();
    let bin = env!("CARGO_BIN_EXE_tcpwhy");
    let r = Command::new("sh")
        .args([
            "-c",
            &format!("cat {plain} | {bin} analyze --quiet --annotate {out} -"),
        ])
        .output()
        .expect("sh runs");
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(frames(&out), frames(&plain));
    assert_eq!(comments(&out).len(), evidence(&outputs_json(&input)).len());
}

/// A pcapng input with two link types on two interfaces keeps each packet's link type.
#[test]
fn pcapng_input_keeps_its_link_types() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let dir = TempDir::new("annotate-ng");
    let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/captures/pcapng-two-linktypes.pcapng")
        .to_string_lossy()
        .to_string();
    let out = dir.join("a.pcapng").to_string_lossy().to_string();
    let r = tcpwhy(&["analyze", "--annotate", &out, &input]);
    assert_eq!(r.status.code(), Some(0));
    let (a, b) = (frames(&out), frames(&input));
    assert_eq!(a.lines().count(), b.lines().count());
    let mut simple = 0;
    for (got, want) in a.lines().zip(b.lines()) {
        match want.strip_prefix('\t') {
            // A simple packet block has no time: tcpwhy takes it as stamped at the packet
            // before it, and an enhanced packet block carries that time.
            Some(rest) => {
                simple += 1;
                assert_eq!(got.split_once('\t').map(|x| x.1), Some(rest));
            }
            None => assert_eq!(got, want),
        }
    }
    assert_eq!(simple, 1, "the fixture's one simple packet block");
}

fn outputs_json(input: &str) -> Vec<u8> {
    tcpwhy(&["analyze", "--format", "json", input]).stdout
}

/// The fixture is gzip: gunzip with the system's gzip (the test needs no crate for it).
fn gunzip(gz: &[u8]) -> std::io::Cursor<Vec<u8>> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = gz.to_vec();
    let feeder = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data));
    let out = child.wait_with_output().expect("gzip ends");
    let _ = feeder.join();
    std::io::Cursor::new(out.stdout)
}
