//! Metrics for fleets: OpenMetrics over HTTP (`--serve ADDR`, path /metrics) and
//! node_exporter textfile-collector files (`--textfile DIR`), from a prometheus-client
//! registry. The HTTP server is tiny_http on its own thread; a textfile is written to a
//! temporary name in DIR and renamed, so the collector never reads half a file.

use prometheus_client::registry::Registry;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The registry in OpenMetrics text (what /metrics serves).
pub fn openmetrics(registry: &Registry) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut s, registry);
    s
}

/// The registry in the Prometheus text format 0.0.4, which node_exporter's textfile
/// collector reads (it refuses OpenMetrics' `# EOF` and `_total`-less counter families).
pub fn prometheus_text(registry: &Registry) -> String {
    let mut s = String::new();
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut s, registry);
    s
}

/// Serves GET /metrics on `addr` until `stop` is set; anything else is a 404.
pub fn serve(
    addr: &str,
    registry: Arc<Registry>,
    stop: Arc<AtomicBool>,
) -> io::Result<(JoinHandle<()>, std::net::SocketAddr)> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| io::Error::other(format!("--serve {addr}: {e}")))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| io::Error::other(format!("--serve {addr}: not an IP address")))?;
    let h = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            let path = req.url().split('?').next().unwrap_or("");
            let response = if path == "/metrics" {
                let ct = tiny_http::Header::from_bytes(
                    &b"Content-Type"[..],
                    &b"application/openmetrics-text; version=1.0.0; charset=utf-8"[..],
                )
                .ok();
                let mut r = tiny_http::Response::from_string(openmetrics(&registry));
                if let Some(ct) = ct {
                    r = r.with_header(ct);
                }
                r
            } else {
                tiny_http::Response::from_string("tcpwhy: metrics are at /metrics\n")
                    .with_status_code(404)
            };
            let _ = req.respond(response);
        }
    });
    Ok((h, bound))
}

/// Writes `DIR/NAME` atomically: the text goes to `DIR/.NAME.tmp` first, then is renamed.
pub fn write_textfile(dir: &Path, name: &str, text: &str) -> io::Result<PathBuf> {
    let final_path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &final_path))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", final_path.display())))?;
    Ok(final_path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    fn registry() -> Registry {
        let mut r = Registry::default();
        let f = Family::<Vec<(String, String)>, Counter>::default();
        r.register("tcpwhy_test_findings", "Findings", f.clone());
        f.get_or_create(&vec![("id".into(), "syn-stale-state".into())])
            .inc_by(3);
        r
    }

    #[test]
    fn both_text_formats_carry_the_counter() {
        let r = registry();
        let om = openmetrics(&r);
        assert!(
            om.contains("tcpwhy_test_findings_total{id=\"syn-stale-state\"} 3\n"),
            "{om}"
        );
        assert!(om.ends_with("# EOF\n"));
        let prom = prometheus_text(&r);
        assert!(
            prom.contains("tcpwhy_test_findings_total{id=\"syn-stale-state\"} 3\n"),
            "{prom}"
        );
        assert!(!prom.contains("# EOF"), "{prom}");
    }

    #[test]
    fn textfiles_appear_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = write_textfile(d.path(), "x.prom", "a 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 1\n");
        // Rewritten in place: the old content is replaced, no temporary file is left.
        write_textfile(d.path(), "x.prom", "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(write_textfile(&d.path().join("missing"), "x.prom", "").is_err());
    }

    #[test]
    fn serves_metrics_and_404_elsewhere() {
        let stop = Arc::new(AtomicBool::new(false));
        let (h, addr) = serve("127.0.0.1:0", Arc::new(registry()), stop.clone()).unwrap();
        let get = |path: &str| {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let m = get("/metrics");
        assert!(
            m.starts_with("HTTP/1.0 200") || m.starts_with("HTTP/1.1 200"),
            "{m}"
        );
        assert!(m.contains("application/openmetrics-text"), "{m}");
        assert!(
            m.contains("tcpwhy_test_findings_total{id=\"syn-stale-state\"} 3"),
            "{m}"
        );
        assert!(get("/").contains(" 404 "));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }
}
