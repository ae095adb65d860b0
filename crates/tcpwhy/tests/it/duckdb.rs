//! The README's DuckDB queries (examples/duckdb/queries.sql) over a fleet of Parquet outputs,
//! one per lab capture, give the numbers the CLI gives file by file: the causes ranked with
//! their findings, connections and time lost (the sum of every capture's JSON summary), the
//! worst services and the time per minute (from the JSON findings), the connections per
//! service (from the JSON connections). Needs python3 with the duckdb package (`.ci/run`
//! installs it; TCPWHY_SKIP_DUCKDB=1 skips the test where it cannot be installed).

use crate::common::{tcpwhy, TempDir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A service: (server address, port).
type Service = (String, u64);

fn have_duckdb() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("TCPWHY_SKIP_DUCKDB").as_deref() != Ok("1") {
        panic!("python3 -m pip install duckdb is needed for this test (or TCPWHY_SKIP_DUCKDB=1)");
    }
    ok
}

fn close(a: f64, b: f64, n: f64) -> bool {
    // Each finding's cost is rounded to the microsecond in the tables; the summary rounds the
    // sum: they differ by at most half a microsecond per finding.
    (a - b).abs() <= 0.0005 * n + 0.001
}

#[test]
fn duckdb_over_a_fleet_agrees_with_the_cli_file_by_file() {
    if !have_duckdb() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fleet = TempDir::new("fleet");
    let mut files: Vec<_> = std::fs::read_dir(root.join("fixtures/lab"))
        .expect("fixtures/lab")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".pcap"))
        .collect();
    files.sort();
    // id -> (findings, connections, cost_ms) summed over the captures' summaries.
    let mut causes: BTreeMap<String, (u64, u64, f64)> = BTreeMap::new();
    // (server ip, port) -> (findings, cost) and -> connections, from the JSON records.
    let mut servers: BTreeMap<Service, (u64, f64)> = BTreeMap::new();
    let mut services: BTreeMap<Service, u64> = BTreeMap::new();
    let mut total_cost = 0.0;
    for (i, f) in files.iter().enumerate() {
        let f = f.to_string_lossy().into_owned();
        let out = fleet.join(format!("capture-{i}"));
        let o = tcpwhy(&[
            "analyze",
            "-q",
            "--format",
            "parquet",
            "-o",
            &out.to_string_lossy(),
            &f,
        ]);
        assert_eq!(o.status.code(), Some(0), "{f}");
        let j = tcpwhy(&["analyze", "-q", "--format", "json", &f]);
        for line in String::from_utf8_lossy(&j.stdout).lines() {
            let v: Value = serde_json::from_str(line).expect("JSON");
            match v["type"].as_str() {
                Some("summary") => {
                    for c in v["causes"].as_array().into_iter().flatten() {
                        let e = causes
                            .entry(c["id"].as_str().unwrap_or("").into())
                            .or_default();
                        e.0 += c["findings"].as_u64().unwrap_or(0);
                        e.1 += c["connections"].as_u64().unwrap_or(0);
                        e.2 += c["cost_ms"].as_f64().unwrap_or(0.0);
                    }
                }
                Some("finding") => {
                    total_cost += v["cost_ms"].as_f64().unwrap_or(0.0);
                    if v["connection"].is_u64() {
                        let key = (
                            v["server_ip"].as_str().unwrap_or("").to_string(),
                            v["server_port"].as_u64().unwrap_or(0),
                        );
                        let e = servers.entry(key).or_default();
                        e.0 += 1;
                        e.1 += v["cost_ms"].as_f64().unwrap_or(0.0);
                    }
                }
                Some("connection") => {
                    let key = (
                        v["server_ip"].as_str().unwrap_or("").to_string(),
                        v["server_port"].as_u64().unwrap_or(0),
                    );
                    *services.entry(key).or_default() += 1;
                }
                _ => {}
            }
        }
    }
    let run = Command::new("python3")
        .arg(root.join("examples/duckdb/run.py"))
        .arg(fleet.path())
        .output()
        .expect("python3 runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let got: Value = serde_json::from_slice(&run.stdout).expect("run.py prints JSON");

    let top = got["top-causes"].as_array().expect("top-causes");
    assert_eq!(top.len(), causes.len(), "{top:?} vs {causes:?}");
    for row in top {
        let id = row["id"].as_str().unwrap_or("");
        let (n, conns, cost) = causes[id];
        assert_eq!(row["findings"], n, "{id}");
        assert_eq!(row["connections"], conns, "{id}");
        let c = row["cost_ms"].as_f64().unwrap_or(-1.0);
        assert!(close(c, cost, n as f64), "{id}: DuckDB {c}, CLI {cost}");
    }
    // Ranked by time lost, as the text report ranks them.
    let costs: Vec<f64> = top.iter().filter_map(|r| r["cost_ms"].as_f64()).collect();
    assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{costs:?}");

    assert!(!top.is_empty() && !servers.is_empty() && !services.is_empty());
    let mut worst: Vec<_> = servers.iter().collect();
    worst.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let rows = got["worst-servers"].as_array().expect("worst-servers");
    assert_eq!(rows.len(), worst.len().min(10));
    for (row, (key, (n, cost))) in rows.iter().zip(&worst) {
        assert_eq!(row["server_ip"], key.0.as_str());
        assert_eq!(row["server_port"], key.1);
        assert_eq!(row["findings"], *n);
        assert!(close(
            row["cost_ms"].as_f64().unwrap_or(-1.0),
            *cost,
            *n as f64
        ));
    }

    let per_minute: f64 = got["cost-over-time"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["cost_ms"].as_f64())
        .sum();
    let n: u64 = causes.values().map(|c| c.0).sum();
    assert!(
        close(per_minute, total_cost, n as f64),
        "{per_minute} vs {total_cost}"
    );

    let slowest = got["slowest-services"]
        .as_array()
        .expect("slowest-services");
    assert_eq!(slowest.len(), services.len().min(10));
    for row in slowest {
        let key = (
            row["server_ip"].as_str().unwrap_or("").to_string(),
            row["server_port"].as_u64().unwrap_or(0),
        );
        assert_eq!(row["connections"], services[&key], "{key:?}");
    }
}
