//! Inputs that are not regular files: FIFOs, process substitution (`<(cat x)`: a pipe at
//! /dev/fd/N), standard input, character devices. Each gives its bytes once, so tcpwhy opens
//! and reads each once; the HTML report's second pass reads a copy kept on the way. Every
//! report from a pipe must equal the report from the file (but for the name of the input).
//!
//! Every tcpwhy and every writer runs as a child process with a deadline: killed by its PID
//! and the test failed, never a hung test.

use crate::common::{fixture, lab_fixture, TempDir};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any child may run (the longest run here takes well under a second).
const DEADLINE: Duration = Duration::from_secs(60);

/// A child whose output is read on threads of their own (so that a full pipe never stalls it).
struct Running {
    what: String,
    child: Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut v);
        }
        v
    })
}

/// Start `cmd` (standard input closed unless set).
fn start(mut cmd: Command) -> Running {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    Running {
        what,
        child,
        stdout,
        stderr,
    }
}

/// Wait for `child` until `deadline`; past it, kill it by its PID. `None` if it was killed.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Running {
    /// Its output once it ends; fails the test if it runs past the deadline.
    fn wait(mut self) -> Output {
        let status = wait_until(&mut self.child, Instant::now() + DEADLINE);
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr = self.stderr.join().unwrap_or_default();
        let Some(status) = status else {
            panic!(
                "{} ran past {DEADLINE:?}: killed. stderr: {}",
                self.what,
                String::from_utf8_lossy(&stderr)
            );
        };
        Output {
            status,
            stdout,
            stderr,
        }
    }
}

fn tcpwhy_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcpwhy"));
    c.args(args).stdin(Stdio::null());
    c
}

fn run(args: &[&str]) -> Output {
    start(tcpwhy_cmd(args)).wait()
}

/// A process writing into a FIFO (the shell opens it: that waits for tcpwhy to open it).
struct Writer(Child);

impl Writer {
    /// `script` runs in `sh -c` with $1 the source and $2 the FIFO.
    fn spawn(script: &str, source: &str, fifo: &Path) -> Writer {
        let child = Command::new("sh")
            .args(["-c", script, "sh", source])
            .arg(fifo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh");
        Writer(child)
    }

    /// `cat SOURCE > FIFO`.
    fn cat(source: &str, fifo: &Path) -> Writer {
        Writer::spawn(r#"exec cat "$1" > "$2""#, source, fifo)
    }

    /// Ended by now, or killed by its PID (a writer still waiting for a reader that never
    /// came, after a failed test).
    fn finish(mut self) {
        wait_until(&mut self.0, Instant::now() + Duration::from_secs(10));
    }

    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mkfifo(dir: &TempDir, name: &str) -> PathBuf {
    let p = dir.join(name);
    nix::unistd::mkfifo(
        &p,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .expect("mkfifo");
    p
}

/// `tcpwhy analyze ARGS... FIFO` with `source` written into the FIFO by `cat`.
fn through_fifo(dir: &TempDir, args: &[&str], source: &str) -> (Output, String) {
    let fifo = mkfifo(dir, "in");
    let name = fifo.to_string_lossy().into_owned();
    let writer = Writer::cat(source, &fifo);
    let mut all = args.to_vec();
    all.push(&name);
    let out = run(&all);
    writer.finish();
    std::fs::remove_file(&fifo).expect("remove the FIFO");
    (out, name)
}

/// `bash -c 'exec tcpwhy analyze ARGS... <(cat $1) ...'` for each source; `files` lists the
/// command's inputs, `<` standing for the next source's process substitution.
fn through_bash(args: &[&str], files: &[&str], sources: &[&str]) -> Output {
    let mut script = String::from(r#"exec "$0" analyze"#);
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    let mut n = 0;
    for f in files {
        if *f == "<" {
            n += 1;
            script.push_str(&format!(r#" <(cat "${n}")"#));
        } else {
            script.push_str(&format!(" '{f}'"));
        }
    }
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(sources)
        .stdin(Stdio::null());
    start(c).wait()
}

/// `text` with each of `names`, then each `/dev/fd/N` in order of first appearance, replaced by
/// the next of `as_`: the names of the inputs are all that may differ between a pipe and its
/// file.
fn renamed(text: &str, names: &[&str], as_: &[&str]) -> String {
    let mut t = text.to_string();
    for (n, a) in names.iter().zip(as_) {
        t = t.replace(n, a);
    }
    let mut fds: Vec<String> = Vec::new();
    let mut rest = t.as_str();
    while let Some(at) = rest.find("/dev/fd/") {
        let after = &rest[at + 8..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let fd = format!("/dev/fd/{}", &after[..digits]);
        if !fds.contains(&fd) {
            fds.push(fd);
        }
        rest = &after[digits..];
    }
    for (fd, a) in fds.iter().zip(&as_[names.len().min(as_.len())..]) {
        t = t.replace(fd.as_str(), a);
    }
    t
}

fn ok(o: &Output, what: &str) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Captures larger than the 64 KiB tcpwhy reads before it looks at them (pcap, pcapng), one
/// smaller, and compressed ones (decompressed, larger than 64 KiB): the report through a pipe
/// must be the report of the file.
const SOURCES: [&str; 5] = [
    "veth-mixed.pcap",
    "sample.pcap",
    "loopback-http.pcap",
    "loopback-ipv6.pcapng",
    "veth-mixed.zst",
];

#[test]
fn a_fifo_gives_the_report_of_its_file() {
    let dir = TempDir::new("pipes-fifo");
    for src in SOURCES {
        let file = fixture(src);
        for args in [
            &["analyze", "--format", "json"][..],
            &["analyze"],
            // One thread: the input is read ahead on a thread of its own.
            &["analyze", "--format", "json", "--threads", "1"],
        ] {
            let want = ok(&run(&[args, &[&file]].concat()), &file);
            let (out, name) = through_fifo(&dir, args, &file);
            let got = ok(&out, &format!("{src} through a FIFO {args:?}"));
            assert!(
                renamed(&got, &[&name], &[&file]) == want,
                "{src} through a FIFO {args:?}:\n{got}\nthe file:\n{want}"
            );
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn process_substitution_gives_the_report_of_its_file() {
    for src in SOURCES {
        let file = fixture(src);
        for args in [&["--format", "json"][..], &[]] {
            let want = ok(&run(&[&["analyze"], args, &[&file]].concat()), &file);
            let out = through_bash(args, &["<"], &[&file]);
            let got = ok(&out, &format!("<(cat {src}) {args:?}"));
            assert!(
                renamed(&got, &[], &[&file]) == want,
                "<(cat {src}) {args:?}:\n{got}\nthe file:\n{want}"
            );
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The HTML report of `inputs` (tcpwhy's arguments) written to `out`, with TMPDIR set to
/// `tmp` (which must still be empty after: the copies of pipes are never left behind).
fn html(args: &[&str], out: &Path, tmp: &Path, how: Option<&[&str]>) -> String {
    let o = match how {
        // Through bash: `args` are its inputs, `<` for each process substitution of `sources`.
        Some(sources) => {
            let mut c = Command::new("bash");
            let mut script = format!(r#"exec "$0" analyze --format html -o '{}'"#, out.display());
            let mut n = 0;
            for a in args {
                if *a == "<" {
                    n += 1;
                    script.push_str(&format!(r#" <(cat "${n}")"#));
                } else {
                    script.push_str(&format!(" '{a}'"));
                }
            }
            c.arg("-c")
                .arg(script)
                .arg(env!("CARGO_BIN_EXE_tcpwhy"))
                .args(sources)
                .env("TMPDIR", tmp)
                .stdin(Stdio::null());
            start(c).wait()
        }
        None => {
            let mut all = vec!["analyze", "--format", "html", "-o", out.to_str().unwrap()];
            all.extend_from_slice(args);
            let mut c = tcpwhy_cmd(&all);
            c.env("TMPDIR", tmp);
            start(c).wait()
        }
    };
    ok(&o, &format!("html {args:?}"));
    let left: Vec<_> = std::fs::read_dir(tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    std::fs::read_to_string(out).unwrap()
}

fn graphs(html: &str) -> usize {
    html.matches("<svg class=\"graph ").count()
}

#[test]
fn html_from_a_pipe_has_every_graph_of_its_file() {
    let dir = TempDir::new("pipes-html");
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = dir.join("r.html");
    for src in [
        "slow-start-after-idle-broken.pcap.gz",
        "nagle-delayed-ack-broken.pcap",
        "stale-syn-timewait-broken.pcap.gz",
    ] {
        let file = lab_fixture(src);
        let want = html(&[&file], &out, &tmp, None);
        assert!(graphs(&want) > 0, "{src}: no graph from the file");
        // A FIFO, with and without reading ahead on a thread of its own.
        for threads in ["1", "3"] {
            let fifo = mkfifo(&dir, "in");
            let name = fifo.to_string_lossy().into_owned();
            let writer = Writer::cat(&file, &fifo);
            let got = html(&["--threads", threads, &name], &out, &tmp, None);
            writer.finish();
            std::fs::remove_file(&fifo).unwrap();
            assert!(
                renamed(&got, &[&name], &[&file]) == want,
                "{src} through a FIFO, --threads {threads}: {} graphs, the file {}",
                graphs(&got),
                graphs(&want)
            );
        }
        let got = html(&["<"], &out, &tmp, Some(&[&file]));
        assert!(
            renamed(&got, &[], &[&file]) == want,
            "<(cat {src}): {} graphs, the file {}",
            graphs(&got),
            graphs(&want)
        );
        // Standard input.
        let mut c = tcpwhy_cmd(&[
            "analyze",
            "--format",
            "html",
            "-o",
            out.to_str().unwrap(),
            "-",
        ]);
        c.env("TMPDIR", &tmp)
            .stdin(std::fs::File::open(&file).unwrap());
        ok(&start(c).wait(), "html from stdin");
        let got = std::fs::read_to_string(&out).unwrap();
        assert!(
            renamed(
                &got,
                &["tcpwhy: -</title>", "&middot; -</div>"],
                &[
                    &format!("tcpwhy: {file}</title>"),
                    &format!("&middot; {file}</div>")
                ]
            ) == want,
            "{src} on stdin: {} graphs, the file {}",
            graphs(&got),
            graphs(&want)
        );
        assert!(std::fs::read_dir(&tmp).unwrap().next().is_none());
    }
}

#[test]
fn a_file_and_a_pipe_merge_by_time() {
    let dir = TempDir::new("pipes-merge");
    // Rotated files: one capture in two.
    let (a, b) = (fixture("rotated-1.pcap"), fixture("rotated-2.pcap"));
    let want = ok(&run(&["analyze", "--format", "json", &a, &b]), "the files");
    let got = ok(
        &through_bash(&["--format", "json"], &[&a, "<"], &[&b]),
        "file + pipe",
    );
    assert!(renamed(&got, &[], &[&b]) == want, "a.pcap <(cat b.pcap)");
    let got = ok(
        &through_bash(&["--format", "json"], &["<", &b], &[&a]),
        "pipe + file",
    );
    assert!(renamed(&got, &[], &[&a]) == want, "<(cat a.pcap) b.pcap");
    let got = ok(
        &through_bash(&["--format", "json"], &["<", "<"], &[&a, &b]),
        "two pipes",
    );
    assert!(
        renamed(&got, &[], &[&a, &b]) == want,
        "<(cat a.pcap) <(cat b.pcap)"
    );
    // Two captures with findings, their times interleaved: the HTML graphs of both, one read
    // from its file again, one from the copy of its pipe.
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = dir.join("r.html");
    let (a, b) = (
        lab_fixture("nagle-delayed-ack-broken.pcap"),
        lab_fixture("stale-syn-lost-rst-broken.pcap"),
    );
    let want = html(&[&a, &b], &out, &tmp, None);
    let got = html(&[&a, "<"], &out, &tmp, Some(&[&b]));
    assert!(graphs(&want) >= 2, "{} graphs", graphs(&want));
    assert!(
        renamed(&got, &[], &[&b]) == want,
        "file + pipe: {} graphs, the files {}",
        graphs(&got),
        graphs(&want)
    );
}

#[test]
fn compressed_data_through_a_fifo_is_detected_by_content() {
    let dir = TempDir::new("pipes-z");
    for (compressed, plain) in [
        ("veth-mixed.zst", "veth-mixed.pcap"),
        ("compressed-no-extension", "loopback-http.pcap"),
        ("loopback-http.pcap.gz", "loopback-http.pcap"),
    ] {
        let args = ["analyze", "--format", "json"];
        let want = ok(&run(&[&args[..], &[&fixture(plain)]].concat()), plain);
        let (out, name) = through_fifo(&dir, &args, &fixture(compressed));
        let got = ok(&out, compressed);
        assert!(
            renamed(&got, &[&name], &[&fixture(plain)]) == want,
            "{compressed} through a FIFO"
        );
    }
    // gzip writing into the FIFO as it compresses, 224 kB of capture.
    let plain = fixture("veth-mixed.pcap");
    let want = ok(&run(&["analyze", "--format", "json", &plain]), "plain");
    let fifo = mkfifo(&dir, "gz");
    let writer = Writer::spawn(r#"exec gzip -c "$1" > "$2""#, &plain, &fifo);
    let name = fifo.to_string_lossy().into_owned();
    let got = ok(
        &run(&["analyze", "--format", "json", &name]),
        "gzip -c into a FIFO",
    );
    writer.finish();
    assert!(
        renamed(&got, &[&name], &[&plain]) == want,
        "gzip -c into a FIFO"
    );
}

#[test]
fn a_fifo_whose_writer_dies_gives_the_results_so_far_and_a_warning() {
    let dir = TempDir::new("pipes-dies");
    let src = fixture("veth-mixed.pcap");
    // 150 000 of its 224 459 bytes: the end of a record cut off.
    let cut = dir.join("cut.pcap");
    let bytes = std::fs::read(&src).unwrap();
    std::fs::write(&cut, &bytes[..150_000]).unwrap();
    let cut = cut.to_string_lossy().into_owned();
    let file = run(&["analyze", "--format", "json", &cut]);
    let want = ok(&file, "the cut file");
    let fifo = mkfifo(&dir, "in");
    let name = fifo.to_string_lossy().into_owned();
    // The writer writes 150 000 bytes and waits; killing it (by its PID) closes the FIFO.
    let writer = Writer::spawn(
        r#"exec > "$2"; head -c 150000 "$1"; exec sleep 60"#,
        &src,
        &fifo,
    );
    let reading = start(tcpwhy_cmd(&["analyze", "--format", "json", &name]));
    std::thread::sleep(Duration::from_millis(300));
    writer.kill();
    let out = reading.wait();
    let got = ok(&out, "the FIFO");
    let (err, file_err) = (
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&file.stderr),
    );
    assert!(
        err.contains("warning") && err.contains("truncated") && err.contains(&name),
        "{err}"
    );
    assert_eq!(err.replace(&name, &cut), file_err);
    assert!(renamed(&got, &[&name], &[&cut]) == want, "{got}\n{want}");
    assert!(want.contains("\"type\":\"connection\""));
}

#[test]
fn a_character_device_is_a_clear_error_not_a_hang() {
    for args in [
        &["analyze"][..],
        &["analyze", "--format", "html", "-o", "/dev/null"],
    ] {
        for (dev, says) in [
            ("/dev/null", "at byte 0: empty file: not a capture"),
            (
                "/dev/zero",
                "at byte 0: not a pcap or pcapng capture (first bytes 00 00 00 00)",
            ),
        ] {
            let out = run(&[args, &[dev]].concat());
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{dev} {args:?}: {err}");
            assert_eq!(err.trim_end(), format!("tcpwhy: {dev}: {says}"), "{args:?}");
        }
    }
}

#[test]
fn a_directory_is_named_as_one() {
    let dir = TempDir::new("pipes-dir");
    let name = dir.path().to_string_lossy().into_owned();
    let out = run(&["analyze", &name]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!("tcpwhy: {name}: at byte 0: cannot open: a directory, not a capture")
    );
}

#[test]
fn an_input_read_once_cannot_be_named_twice() {
    let dir = TempDir::new("pipes-twice");
    let fifo = mkfifo(&dir, "in");
    let name = fifo.to_string_lossy().into_owned();
    let writer = Writer::cat(&fixture("veth-mixed.pcap"), &fifo);
    let out = run(&["analyze", &name, &name]);
    // tcpwhy never opened it: the writer waits for a reader, and is killed.
    writer.kill();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "tcpwhy: {name}: at byte 0: named twice: standard input, a pipe or a device gives \
             its bytes only once"
        )
    );
    let mut c = tcpwhy_cmd(&["analyze", "-", "-"]);
    c.stdin(Stdio::piped());
    let out = start(c).wait();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-: at byte 0: named twice"));
    // A regular file twice is read twice, as before (each packet then seen twice).
    let f = fixture("loopback-http.pcap");
    ok(&run(&["analyze", &f, &f]), "a file twice");
}

#[test]
fn html_from_a_pipe_without_room_for_its_copy_is_a_clear_error() {
    let dir = TempDir::new("pipes-notmp");
    let missing = dir.join("missing");
    let out = dir.join("r.html");
    let mut c = tcpwhy_cmd(&[
        "analyze",
        "--format",
        "html",
        "-o",
        out.to_str().unwrap(),
        "-",
    ]);
    c.env("TMPDIR", &missing)
        .stdin(std::fs::File::open(lab_fixture("nagle-delayed-ack-broken.pcap")).unwrap());
    let o = start(c).wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "tcpwhy: -: at byte 0: cannot keep a copy for the second pass (the graphs) in {}:",
            missing.display()
        )) && err.contains("TMPDIR"),
        "{err}"
    );
}
