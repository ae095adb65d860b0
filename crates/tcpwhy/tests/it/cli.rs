//! The command line around the analysis: shell completions and manual pages generated from
//! the CLI definition, and `--version` naming the commit the binary was built from.

use crate::common;
use crate::common::tcpwhy;

fn stdout(args: &[&str]) -> (Option<i32>, String) {
    let out = tcpwhy(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn completions_for_each_shell_know_the_subcommands_and_options() {
    let (code, bash) = stdout(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(bash.contains("_tcpwhy()"), "{bash}");
    for word in [
        "analyze",
        "explain",
        "host",
        "lab",
        "--max-connections",
        "--fail-on",
    ] {
        assert!(bash.contains(word), "bash completion lacks {word}");
    }
    let (_, zsh) = stdout(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef tcpwhy"), "{zsh}");
    assert!(zsh.contains("--format"));
    let (_, fish) = stdout(&["completions", "fish"]);
    assert!(fish.contains("complete -c tcpwhy"), "{fish}");
    assert!(fish.contains("-l color"), "{fish}");
    let (code, _) = stdout(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "an unknown shell is a usage error");
    // bash itself accepts the script and registers the completion.
    if let Ok(out) = std::process::Command::new("bash")
        .args(["-c", &format!("{bash}\ncomplete -p tcpwhy")])
        .output()
    {
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains("_tcpwhy") && said.contains("tcpwhy"),
            "{said}"
        );
    }
}

#[test]
fn manual_pages_in_roff() {
    let (code, page) = stdout(&["man"]);
    assert_eq!(code, Some(0));
    assert!(
        page.contains(".TH tcpwhy 1"),
        "{}",
        &page[..page.len().min(400)]
    );
    assert!(page.contains("Why was this TCP connection slow?"));
    for sub in ["analyze", "explain", "host", "lab", "completions"] {
        assert!(page.contains(sub), "the page lists {sub}");
    }
    let (code, analyze) = stdout(&["man", "analyze"]);
    assert_eq!(code, Some(0));
    assert!(analyze.contains(".TH tcpwhy-analyze 1"), "{analyze}");
    assert!(analyze.contains("max\\-connections"), "{analyze}");
    let (code, _) = stdout(&["man", "nope"]);
    assert_eq!(code, Some(2));
    // man(1) renders it where man-db is installed.
    let rendered = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} man analyze | MANWIDTH=100 man -l - 2>/dev/null",
                env!("CARGO_BIN_EXE_tcpwhy")
            ),
        ])
        .output();
    if let Ok(out) = rendered {
        let text = String::from_utf8_lossy(&out.stdout);
        if !text.is_empty() {
            assert!(text.contains("--max-connections"), "{text}");
        }
    }
}

#[test]
fn version_names_the_commit() {
    let (code, v) = stdout(&["--version"]);
    assert_eq!(code, Some(0));
    let v = v.trim();
    let rest = v
        .strip_prefix(&format!("tcpwhy {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        rest == "unknown" || (rest.len() == 12 && rest.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    // In a git checkout it is HEAD (the build script runs again when HEAD moves).
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Ok(out) = head {
        if out.status.success() {
            assert_eq!(rest, String::from_utf8_lossy(&out.stdout).trim());
        }
    }
}

/// Options that did nothing now say so: an unknown `--connection` id, `--exchanges` with a
/// report that has no exchange records, `--threads 0`, a terminal as standard input; the usage
/// line shows that a capture is required.
#[test]
fn options_that_cannot_apply_say_so() {
    let f = common::lab_fixture("stale-syn-timewait-broken.pcap.gz");
    let out = tcpwhy(&["analyze", "--connection", "999999,2256", &f]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("connection 999999: no connection of this capture has that id"),
        "{text}"
    );
    assert!(!text.contains("connection 2256: no connection"), "{text}");
    let out = tcpwhy(&["analyze", "--exchanges", &f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--exchanges adds records to --format json only"),
        "{err}"
    );
    let out = tcpwhy(&["analyze", "--exchanges", "--format", "json", &f]);
    assert!(String::from_utf8_lossy(&out.stderr).is_empty());
    let out = tcpwhy(&["analyze", "--threads", "0", &f]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
    let help = String::from_utf8_lossy(&tcpwhy(&["analyze", "--help"]).stdout).to_string();
    assert!(
        help.contains("Usage: tcpwhy analyze [OPTIONS] <CAPTURE>..."),
        "{help}"
    );
    // Standard input on a terminal (util-linux script makes one): an error at once, with a hint.
    let bin = env!("CARGO_BIN_EXE_tcpwhy");
    if let Ok(out) = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("timeout 5 {bin} analyze -; echo rc=$?"),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::null())
        .output()
    {
        let said = String::from_utf8_lossy(&out.stdout);
        if !said.is_empty() {
            assert!(said.contains("standard input is a terminal"), "{said}");
            assert!(said.contains("rc=2"), "{said}");
        }
    }
}

/// The JSON summary's `causes` are the finding records added up per id (counted here from
/// the records), ranked by time lost, with any number of threads.
#[test]
fn json_summary_causes_add_up_the_findings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/lab");
    for name in [
        "stale-syn-timewait-broken.pcap.gz",
        "nagle-delayed-ack-broken.pcap",
    ] {
        let f = root.join(name).to_string_lossy().to_string();
        for threads in ["1", "3"] {
            let out = tcpwhy(&["analyze", "--format", "json", "--threads", threads, &f]);
            let recs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let mut want: std::collections::BTreeMap<
                String,
                (u64, f64, std::collections::BTreeSet<u64>),
            > = Default::default();
            for r in recs.iter().filter(|r| r["type"] == "finding") {
                let e = want
                    .entry(r["id"].as_str().unwrap_or("?").to_string())
                    .or_default();
                e.0 += 1;
                e.1 += r["cost_ms"].as_f64().unwrap_or(0.0);
                e.2.extend(r["connection"].as_u64());
            }
            assert!(!want.is_empty(), "{name}: no findings");
            let causes = recs
                .iter()
                .find(|r| r["type"] == "summary")
                .map(|s| s["causes"].clone())
                .expect("a summary");
            let got = causes.as_array().expect("a list");
            assert_eq!(got.len(), want.len(), "{name}: {causes}");
            let costs: Vec<f64> = got
                .iter()
                .map(|c| c["cost_ms"].as_f64().unwrap_or(-1.0))
                .collect();
            assert!(costs.windows(2).all(|w| w[0] >= w[1]), "ranked: {causes}");
            for c in got {
                let (n, cost, conns) = &want[c["id"].as_str().unwrap_or("?")];
                assert_eq!(c["findings"], *n, "{name}: {c}");
                assert_eq!(c["connections"], conns.len(), "{name}: {c}");
                assert!(
                    (c["cost_ms"].as_f64().unwrap_or(-1.0) - cost).abs() < 0.01,
                    "{c}"
                );
            }
        }
    }
}
