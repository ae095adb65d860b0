//! The terminal report: colours only on a terminal and never with NO_COLOR (or as `--color`
//! and CLICOLOR_FORCE say), tables that fit the terminal's width, `--quiet`. A terminal is made with util-linux `script` (a pty).

use crate::common::{fixture, lab_fixture, tcpwhy, TempDir};
use std::path::Path;
use std::process::Command;

/// Run `tcpwhy ARGS` on a pty of `cols` columns; its output (CR LF turned into LF).
fn on_a_terminal(args: &str, cols: u32, env: &[(&str, &str)]) -> Option<String> {
    let bin = env!("CARGO_BIN_EXE_tcpwhy");
    let mut cmd = Command::new("script");
    cmd.args([
        "-qec",
        &format!("stty rows 50 cols {cols}; {bin} {args}"),
        "/dev/null",
    ]);
    cmd.env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"))
}

#[test]
fn colours_only_on_a_terminal_and_never_with_no_color() {
    let f = lab_fixture("stale-syn-timewait-broken.pcap.gz");
    let piped = tcpwhy(&["analyze", &f]);
    assert!(
        !piped.stdout.contains(&0x1b),
        "escape codes in piped output"
    );
    let Some(tty) = on_a_terminal(&format!("analyze {f}"), 120, &[]) else {
        eprintln!("skipped: util-linux script is not available");
        return;
    };
    assert!(tty.contains("\x1b[1;31msyn-stale-state\x1b[0m"), "{tty}");
    let plain = on_a_terminal(&format!("analyze {f}"), 120, &[("NO_COLOR", "1")]).unwrap();
    assert!(!plain.contains('\x1b'), "{plain}");
    assert!(plain.contains("syn-stale-state"));
    // -o FILE is never coloured either.
    let dir = TempDir::new("term");
    let out = dir.join("r.txt");
    on_a_terminal(&format!("analyze -o {} {f}", out.display()), 120, &[]).unwrap();
    assert!(!std::fs::read_to_string(&out).unwrap().contains('\x1b'));
}

#[test]
fn tables_and_long_lines_fit_the_terminal_width() {
    let f = fixture("veth-mixed.pcap");
    // Piped: the full table, as wide as it needs (107 columns here).
    let piped = String::from_utf8(tcpwhy(&["analyze", &f]).stdout).unwrap();
    let table: Vec<&str> = piped
        .lines()
        .skip_while(|l| !l.starts_with("Slowest connections"))
        .skip(1)
        .collect();
    assert!(
        table[0].contains("hs rtt") && table[0].contains("retr"),
        "{piped}"
    );
    assert!(table.iter().any(|l| l.chars().count() > 72));
    let Some(tty) = on_a_terminal(&format!("analyze {f}"), 72, &[("NO_COLOR", "1")]) else {
        eprintln!("skipped: util-linux script is not available");
        return;
    };
    let table: Vec<&str> = tty
        .lines()
        .skip_while(|l| !l.starts_with("Slowest connections"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(table.len() > 3, "{tty}");
    for l in &table {
        assert!(
            l.chars().count() <= 72,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    // Every connection keeps its id, addresses and duration.
    assert!(
        table[0].starts_with(" id  client -> server") || table[0].starts_with("id  client"),
        "{}",
        table[0]
    );
    assert!(table[1..]
        .iter()
        .all(|l| l.contains(" -> ") && l.contains(" ms")));
    // The explanation and fix of a cause are wrapped to the width too.
    let f = lab_fixture("stale-syn-timewait-broken.pcap.gz");
    let tty = on_a_terminal(&format!("analyze {f}"), 60, &[("NO_COLOR", "1")]).unwrap();
    let causes: Vec<&str> = tty.lines().take_while(|l| !l.is_empty()).collect();
    assert!(causes.len() > 5, "{tty}");
    for l in &causes {
        assert!(l.chars().count() <= 60, "{l}");
    }
}

#[test]
fn quiet_silences_warnings_but_not_errors() {
    let f = fixture("truncated-last-record.pcap");
    let loud = tcpwhy(&["analyze", &f]);
    assert!(String::from_utf8_lossy(&loud.stderr).contains("warning"));
    let quiet = tcpwhy(&["analyze", "--quiet", &f]);
    assert_eq!(quiet.status.code(), loud.status.code());
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let bad = tcpwhy(&["analyze", "--quiet", &fixture("bad-magic.pcap")]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bad-magic.pcap"));
}

/// `--color`: `always` colours a pipe and a file, `never` a terminal; in `auto`,
/// CLICOLOR_FORCE colours a pipe unless NO_COLOR is set; `explain` follows the same rule.
#[test]
fn color_option_and_the_environment() {
    let f = lab_fixture("stale-syn-timewait-broken.pcap.gz");
    let red = b"\x1b[1;31msyn-stale-state\x1b[0m";
    let has = |out: &[u8], what: &[u8]| out.windows(what.len()).any(|w| w == what);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcpwhy"));
        cmd.args(args)
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("tcpwhy runs").stdout
    };
    assert!(has(&run(&["analyze", "--color", "always", &f], &[]), red));
    assert!(has(&run(&["--color", "always", "analyze", &f], &[]), red));
    assert!(!has(&run(&["analyze", &f], &[]), b"\x1b["));
    assert!(has(&run(&["analyze", &f], &[("CLICOLOR_FORCE", "1")]), red));
    assert!(!has(
        &run(&["analyze", &f], &[("CLICOLOR_FORCE", "0")]),
        b"\x1b["
    ));
    assert!(!has(
        &run(
            &["analyze", &f],
            &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]
        ),
        b"\x1b["
    ));
    assert!(!has(
        &run(
            &["analyze", "--color", "never", &f],
            &[("CLICOLOR_FORCE", "1")]
        ),
        b"\x1b["
    ));
    // `always` with NO_COLOR set: the option wins.
    assert!(has(
        &run(&["analyze", "--color", "always", &f], &[("NO_COLOR", "1")]),
        red
    ));
    // A report written to a file is coloured only when asked.
    let dir = TempDir::new("color");
    let out = dir.join("report.txt");
    let o = out.to_string_lossy().to_string();
    run(&["analyze", "--color", "always", "-o", &o, &f], &[]);
    assert!(has(&std::fs::read(&out).expect("the report"), red));
    run(&["analyze", "-o", &o, &f], &[("CLICOLOR_FORCE", "1")]);
    assert!(has(&std::fs::read(&out).expect("the report"), red));
    run(&["analyze", "-o", &o, &f], &[]);
    assert!(!has(&std::fs::read(&out).expect("the report"), b"\x1b["));
    // explain: bold labels when asked, plain text otherwise.
    let bold = b"\x1b[1mSignal.\x1b[0m";
    assert!(has(
        &run(&["explain", "zero-window", "--color", "always"], &[]),
        bold
    ));
    assert!(!has(&run(&["explain", "zero-window"], &[]), b"\x1b["));
    if let Some(tty) = on_a_terminal(&format!("--color never analyze {f}"), 120, &[]) {
        assert!(!tty.contains("\x1b["), "{tty}");
    }
}

/// Every line of the report, the summary and the detailed sections included, fits a terminal
/// of 80 columns (colour codes take none), except an evidence filter: one word the user copies
/// into Wireshark whole. What is wrapped keeps every word: the text is the piped text with
/// some spaces turned into line breaks and indents.
#[test]
fn every_line_fits_80_columns_and_loses_no_word() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/lab");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures/lab")
        .flatten()
        .map(|e| e.path().to_string_lossy().into_owned())
        .filter(|p| p.contains(".pcap"))
        .collect();
    files.sort();
    files.push(fixture("veth-mixed.pcap"));
    let mut wrapped = 0;
    for f in &files {
        let Some(tty) = on_a_terminal(&format!("analyze -q --details {f}"), 80, &[]) else {
            eprintln!("skipped: util-linux script is not available");
            return;
        };
        let plain = strip_escapes(&tty);
        for l in plain.lines() {
            let n = l.chars().count();
            assert!(
                n <= 80 || l.trim_start().starts_with('{') && !l.trim().contains(' '),
                "{f}: {n} columns: {l}"
            );
        }
        let piped = String::from_utf8_lossy(&tcpwhy(&["analyze", "-q", "--details", f]).stdout)
            .into_owned();
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let (a, b) = (words(&piped), words(&plain));
        // The table's columns differ at 80 (optional columns go); the prose must not.
        let prose = |w: &[String]| -> Vec<String> {
            w.iter()
                .take_while(|x| !x.starts_with("Slowest"))
                .cloned()
                .collect()
        };
        assert_eq!(
            prose(&a),
            prose(&b),
            "{f}: words lost or changed by wrapping"
        );
        wrapped += usize::from(piped.lines().any(|l| l.chars().count() > 80));
    }
    assert!(wrapped >= 5, "only {wrapped} reports had a line to wrap");
}

fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}
