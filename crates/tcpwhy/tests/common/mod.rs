//! Shared helpers for the integration tests: run the real binary on real files.
#![allow(dead_code)] // each test file uses a different subset

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/captures")
}

pub fn fixture(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

/// Every capture of fixtures/captures and fixtures/lab, and of the real-world corpus when it
/// is beside the repository (../shared/corpus/real), sorted.
pub fn all_captures() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![
        root.join("../../fixtures/captures"),
        root.join("../../fixtures/lab"),
    ];
    let real = root.join("../../../shared/corpus/real");
    if real.is_dir() {
        dirs.push(real);
    }
    let mut files: Vec<String> = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path().to_string_lossy().into_owned())
        .filter(|p| p.contains(".pcap"))
        .collect();
    files.sort();
    files
}

/// A capture the lab made (fixtures/lab).
pub fn lab_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/lab")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub fn tcpwhy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(args)
        .output()
        .expect("run tcpwhy")
}

/// `tcpwhy analyze --format json FILES...`: (connection records, summary record).
pub fn analyze_json(files: &[&str]) -> (Vec<Value>, Value) {
    let mut args = vec!["analyze", "--format", "json"];
    args.extend_from_slice(files);
    let out = tcpwhy(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tcpwhy {files:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut conns = Vec::new();
    let mut summary = Value::Null;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).expect("every line is JSON");
        check_schema(&v);
        match v["type"].as_str() {
            Some("connection") => conns.push(v),
            Some("summary") => summary = v,
            Some("finding") => {}
            other => panic!("unexpected record type {other:?}"),
        }
    }
    assert!(summary.is_object(), "no summary record");
    (conns, summary)
}

/// The JSON Schema of each record type, from schema/ (compiled once per test binary).
fn schemas() -> &'static std::collections::HashMap<String, jsonschema::Validator> {
    static SCHEMAS: std::sync::OnceLock<std::collections::HashMap<String, jsonschema::Validator>> =
        std::sync::OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
        let mut all = std::collections::HashMap::new();
        for entry in std::fs::read_dir(&dir).expect("schema/") {
            let path = entry.expect("a schema file").path();
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let Some(kind) = name.strip_suffix(".schema.json") else {
                continue;
            };
            let text = std::fs::read_to_string(&path).expect("read a schema");
            let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
            let v = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{name} is not a valid JSON Schema: {e}"));
            all.insert(kind.to_string(), v);
        }
        all
    })
}

/// `record` is valid against the schema of its `type` (schema/TYPE.schema.json): every error
/// listed with where it is.
pub fn check_schema(record: &Value) {
    let kind = record["type"].as_str().unwrap_or("(no type)");
    let v = schemas()
        .get(kind)
        .unwrap_or_else(|| panic!("no schema/{kind}.schema.json for {record}"));
    let errors: Vec<String> = v
        .iter_errors(record)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "a {kind} record breaks schema/{kind}.schema.json:\n{}\n{record}",
        errors.join("\n")
    );
}

/// Is tshark here? Without it the cross-checks cannot run: fail loudly unless the developer
/// opted out with TCPWHY_SKIP_TSHARK=1 (CI installs tshark and never sets it).
pub fn have_tshark() -> bool {
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("TCPWHY_SKIP_TSHARK").as_deref() != Ok("1") {
        panic!("tshark is needed for this test: apt-get install tshark (or TCPWHY_SKIP_TSHARK=1)");
    }
    ok
}

/// A directory of its own under the system's temporary directory, removed with everything in
/// it when dropped (also when the test fails): tests leave nothing behind.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// A new private directory (0700, a random name starting `tcpwhy-{tag}-`), removed with
    /// its contents on drop.
    pub fn new(tag: &str) -> TempDir {
        let d = tempfile::Builder::new()
            .prefix(&format!("tcpwhy-{tag}-"))
            .tempdir()
            .expect("a temporary directory");
        TempDir(d)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join<P: AsRef<Path>>(&self, name: P) -> PathBuf {
        self.0.path().join(name)
    }
}

/// `tcpwhy host --interval SECS --format json --netns NAME...` running in the background
/// (root): returns once each of its reader threads has entered its namespace, so that what
/// the test does next falls within the interval.
pub fn host_over(secs: f64, namespaces: &[&str]) -> std::process::Child {
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, Instant};
    let mut args = vec![
        "host".to_string(),
        "--interval".into(),
        secs.to_string(),
        "--format".into(),
        "json".into(),
    ];
    for n in namespaces {
        args.push("--netns".into());
        args.push(n.to_string());
    }
    let want: Vec<u64> = namespaces
        .iter()
        .map(|n| {
            std::fs::metadata(format!("/run/netns/{n}"))
                .unwrap_or_else(|e| panic!("namespace {n}: {e}"))
                .ino()
        })
        .collect();
    let child = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tcpwhy host");
    let entered = || -> bool {
        let inodes: Vec<u64> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .map(|d| {
                d.flatten()
                    .filter_map(|t| std::fs::metadata(t.path().join("ns/net")).ok())
                    .map(|m| m.ino())
                    .collect()
            })
            .unwrap_or_default();
        want.iter().all(|w| inodes.contains(w))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !entered() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(entered(), "tcpwhy host never entered {namespaces:?}");
    // Entered; then the counters and the TIME-WAIT sockets are read: a moment for that.
    std::thread::sleep(Duration::from_millis(200));
    child
}

/// The records of `tcpwhy host ... --format json`: (findings, namespaces, summary).
pub fn host_records(out: &Output) -> (Vec<Value>, Vec<Value>, Value) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    recs.iter().for_each(check_schema);
    let of = |t: &str| -> Vec<Value> { recs.iter().filter(|r| r["type"] == t).cloned().collect() };
    let summary = of("host-summary").pop().expect("a summary");
    (of("host-finding"), of("namespace"), summary)
}

/// A pcap (little-endian, microseconds, snaplen 65 535) of link type `link` holding `records`:
/// each a time in microseconds since the Unix epoch and a whole frame.
pub fn pcap_bytes(link: u32, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65_535, link] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for (us, f) in records {
        let (secs, frac) = ((us / 1_000_000) as u32, (us % 1_000_000) as u32);
        for v in [secs, frac, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// Sends SIGINT to a process this test started (by its PID), as Ctrl-C would, and checks
/// that it was delivered.
pub fn interrupt(child: &std::process::Child) {
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
}
