//! JSON Lines output. The schema is documented in docs/json-schema.md; bump `SCHEMA_VERSION`
//! and note it in CHANGELOG.md whenever a field changes meaning or disappears.

use super::{endpoint, Printer, Report};
use crate::time::{ms, rfc3339};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
#[cfg(test)]
use tcpwhy_track::{Close, Endpoint, RttStats};
use tcpwhy_track::{Connection, Vantage};

pub const SCHEMA_VERSION: u32 = 1;

pub struct JsonPrinter {
    out: Box<dyn Write>,
    err: Option<io::Error>,
    vantage: [u64; 5],
    /// Flush after every record (live capture: records as they happen).
    live: bool,
    /// Write a record per request/response exchange (`--exchanges`).
    exchanges: bool,
    /// One record's bytes (reused).
    buf: Vec<u8>,
    /// Findings per id, for the summary's `causes`.
    causes: BTreeMap<&'static str, CauseTotal>,
}

/// One finding id's totals over the capture.
#[derive(Default)]
struct CauseTotal {
    findings: u64,
    low: u64,
    cost_ns: i64,
    connections: BTreeSet<u64>,
}

impl JsonPrinter {
    fn count(&mut self, id: &'static str, cost_ns: i64, connection: Option<u64>, low: bool) {
        let t = self.causes.entry(id).or_default();
        t.findings += 1;
        t.low += u64::from(low);
        t.cost_ns += cost_ns;
        t.connections.extend(connection);
    }

    /// The causes ranked as the text report ranks them: by time lost, then by id.
    fn causes_json(&self) -> Value {
        let mut v: Vec<(&&str, &CauseTotal)> = self.causes.iter().collect();
        v.sort_by(|a, b| b.1.cost_ns.cmp(&a.1.cost_ns).then(a.0.cmp(b.0)));
        Value::Array(
            v.into_iter()
                .map(|(id, t)| {
                    json!({
                        "id": id,
                        "findings": t.findings,
                        "low_confidence_findings": t.low,
                        "connections": t.connections.len(),
                        "cost_ms": ms(t.cost_ns),
                    })
                })
                .collect(),
        )
    }
}

impl JsonPrinter {
    pub fn new(out: Box<dyn Write>, live: bool, exchanges: bool) -> JsonPrinter {
        JsonPrinter {
            out,
            err: None,
            vantage: [0; 5],
            live,
            exchanges,
            buf: Vec::new(),
            causes: BTreeMap::new(),
        }
    }

    /// One record, written by `write` (one of the `write_*` below), as one line.
    fn record(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        write(&mut buf);
        self.emit(&buf);
        self.buf = buf;
    }

    /// `bytes` (one JSON value) and a newline.
    fn emit(&mut self, bytes: &[u8]) {
        if self.err.is_some() {
            return;
        }
        let r = self
            .out
            .write_all(bytes)
            .and_then(|_| self.out.write_all(b"\n"))
            .and_then(|_| if self.live { self.out.flush() } else { Ok(()) });
        if let Err(e) = r {
            self.err = Some(e);
        }
    }
}

/// A record's JSON line (without its newline), appended to `b`: the one place that decides
/// the bytes, for this printer and for the workers that write lines for it (engine.rs).
pub fn write_connection(b: &mut Vec<u8>, c: &Connection) {
    super::json_fast::connection(b, c, SCHEMA_VERSION);
}

pub fn write_exchange(b: &mut Vec<u8>, x: &tcpwhy_detect::Exchange) {
    super::json_fast::exchange(b, x, SCHEMA_VERSION);
}

pub fn write_finding(b: &mut Vec<u8>, f: &tcpwhy_detect::Finding) {
    write_value(b, &finding_json(f));
}

pub fn write_stall(b: &mut Vec<u8>, s: &tcpwhy_detect::Stall) {
    write_value(b, &stall_json(s));
}

/// (serde_json cannot fail on a `Value` written to memory.)
fn write_value(b: &mut Vec<u8>, v: &Value) {
    let _ = serde_json::to_writer(b, v);
}

#[cfg(test)] // the reference json_fast is tested against
fn close_json(c: Close) -> Value {
    json!({"kind": c.kind(), "by": c.by().map(|s| s.name())})
}

#[cfg(test)] // the reference json_fast is tested against
fn rtt_json(r: &RttStats) -> Value {
    if r.count() == 0 {
        return Value::Null;
    }
    json!({
        "min": ms(r.min_ns),
        "median": r.median_ns().map(ms),
        "max": ms(r.max_ns),
        "samples": r.count(),
    })
}

#[cfg(test)] // the reference json_fast is tested against
fn endpoint_json(e: &Endpoint) -> Value {
    json!({
        "packets": e.packets,
        "bytes": e.frame_bytes,
        "data_segments": e.data_segments,
        "payload_bytes": e.payload_bytes(),
        "unique_bytes": e.unique_bytes,
        "retrans_bytes": e.retrans_bytes(),
        "retrans_segments": e.retrans_segments(),
        "out_of_order": e.out_of_order(),
        "keepalives": e.keepalives(),
        "duplicates": e.duplicates(),
        "unseen_acked_bytes": e.unseen_acked_bytes(),
        "isn": e.isn().map(|s| s.0),
        "syn_retransmits": e.syn_retransmits(),
        "mss": e.mss(),
        "window_scale": e.window_scale(),
        "window": e.window_scaled(),
        "window_raw": e.window_raw,
        "zero_windows": e.zero_windows(),
        "sack_permitted": e.sack_permitted(),
        "sack_blocks": e.sack_blocks(),
        "timestamps": e.timestamps(),
        "fin_frame": e.fin.map(|a| a.frame()),
        "rst_frame": e.rst().map(|a| a.frame()),
        "ack_rtt_ms": rtt_json(&e.ack_rtt),
    })
}

#[cfg(test)] // the reference json_fast is tested against
pub fn connection_json(c: &Connection) -> Value {
    let hs = &c.handshake;
    let handshake = if c.syn().is_some() || hs.syn_ack.is_some() {
        json!({
            "syn_frame": c.syn().map(|a| a.frame()),
            "syn_ack_frame": hs.syn_ack.map(|a| a.frame()),
            "ack_frame": hs.ack.map(|a| a.frame()),
            "rtt_ms": c.handshake_rtt_ns().map(ms),
            "syn_to_syn_ack_ms": c.syn_to_syn_ack_ns().map(ms),
            "syn_ack_to_ack_ms": c.syn_ack_to_ack_ns().map(ms),
            "invalid_acks": hs.invalid_acks(),
            "client_rsts": hs.client_rsts(),
        })
    } else {
        Value::Null
    };
    let rtt = match c.rtt_summary() {
        Some((min, med, max, n)) => {
            json!({"min": ms(min), "median": ms(med), "max": ms(max), "samples": n})
        }
        None => Value::Null,
    };
    let prev = c.prev().map(|p| {
        json!({
            "id": p.id,
            "close": close_json(p.close),
            "gap_ms": ms(c.first.ts_ns - p.last_ts),
            "same_client": p.same_client,
            "client_next_seq": p.client_next_seq.map(|s| s.0),
            "server_next_seq": p.server_next_seq.map(|s| s.0),
            "timestamps": p.timestamps,
        })
    });
    let mut m = Map::new();
    m.insert("type".into(), json!("connection"));
    m.insert("version".into(), json!(SCHEMA_VERSION));
    m.insert("id".into(), json!(c.id()));
    m.insert(
        "client".into(),
        json!(endpoint(c.client.addr, c.client.port)),
    );
    m.insert(
        "server".into(),
        json!(endpoint(c.server.addr, c.server.port)),
    );
    m.insert("client_ip".into(), json!(c.client.addr.to_string()));
    m.insert("client_port".into(), json!(c.client.port));
    m.insert("server_ip".into(), json!(c.server.addr.to_string()));
    m.insert("server_port".into(), json!(c.server.port));
    m.insert("role".into(), json!(c.role.name()));
    m.insert("role_inferred".into(), json!(c.role.inferred()));
    m.insert("first_frame".into(), json!(c.first.frame()));
    m.insert("last_frame".into(), json!(c.last.frame()));
    m.insert("start".into(), json!(rfc3339(c.first.ts_ns)));
    m.insert("end".into(), json!(rfc3339(c.last.ts_ns)));
    m.insert("start_ns".into(), json!(c.first.ts_ns));
    m.insert("end_ns".into(), json!(c.last.ts_ns));
    m.insert("duration_ms".into(), json!(ms(c.duration_ns())));
    m.insert("close".into(), close_json(c.close()));
    m.insert("end_reason".into(), json!(c.end_reason.name()));
    m.insert("prev".into(), prev.unwrap_or(Value::Null));
    m.insert("packets".into(), json!(c.packets()));
    m.insert(
        "retransmissions".into(),
        json!(c
            .client
            .retrans_segments()
            .saturating_add(c.server.retrans_segments())),
    );
    m.insert("handshake".into(), handshake);
    m.insert("rtt_ms".into(), rtt);
    m.insert("vantage".into(), json!(c.vantage().name()));
    m.insert("window_scaling".into(), json!(c.window_scaling()));
    m.insert("c2s".into(), endpoint_json(&c.client));
    m.insert("s2c".into(), endpoint_json(&c.server));
    Value::Object(m)
}

pub fn vantage_index(v: Vantage) -> usize {
    match v {
        Vantage::NearClient => 0,
        Vantage::NearServer => 1,
        Vantage::Middle => 2,
        Vantage::Local => 3,
        Vantage::Unknown => 4,
    }
}

pub const VANTAGES: [Vantage; 5] = [
    Vantage::NearClient,
    Vantage::NearServer,
    Vantage::Middle,
    Vantage::Local,
    Vantage::Unknown,
];

pub fn summary_json(r: &Report<'_>, vantage: &[u64; 5]) -> Value {
    let s = r.stats;
    let link_types: Map<String, Value> = s
        .skipped_link_types
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let vant: Map<String, Value> = VANTAGES
        .iter()
        .zip(vantage)
        .filter(|(_, n)| **n > 0)
        .map(|(v, n)| (v.name().to_string(), json!(n)))
        .collect();
    json!({
        "type": "summary",
        "version": SCHEMA_VERSION,
        "files": r.files,
        "filter": r.filter,
        "filtered_out": r.filtered_out,
        "packets": s.packets,
        "tcp_packets": s.tcp_packets,
        "bytes": s.bytes,
        "skipped": s.skipped,
        "skipped_link_types": link_types,
        "malformed": s.malformed,
        "first_fragments": s.first_fragments,
        "containers": {
            "blocks_skipped": r.containers.blocks_skipped,
            "packets_without_interface": r.containers.packets_without_interface,
            "corrupt_blocks": r.containers.corrupt_blocks,
            "timestamps_backwards": r.containers.timestamps_backwards,
        },
        "start": s.first_ts.map(rfc3339),
        "end": s.last_ts.map(rfc3339),
        "span_ms": match (s.first_ts, s.last_ts) {
            (Some(a), Some(b)) => json!(ms(b - a)),
            _ => Value::Null,
        },
        "connections": r.tracker.connections,
        "evicted": r.tracker.evicted,
        "history_forgotten": r.tracker.history_forgotten,
        "peak_open_connections": r.tracker.peak_open,
        "vantage": vant,
        "warnings": r.warnings,
        "error": r.error,
    })
}

pub fn finding_json(f: &tcpwhy_detect::Finding) -> Value {
    // A capture-wide finding concerns many connections (named in its details): no
    // connection, client or server.
    let one = !f.capture_wide();
    json!({
        "type": "finding",
        "version": SCHEMA_VERSION,
        "id": f.id,
        "connection": one.then_some(f.connection),
        "client": one.then(|| endpoint(f.client.0, f.client.1)),
        "client_ip": one.then(|| f.client.0.to_string()),
        "client_port": one.then_some(f.client.1),
        "server": one.then(|| endpoint(f.server.0, f.server.1)),
        "server_ip": one.then(|| f.server.0.to_string()),
        "server_port": one.then_some(f.server.1),
        "start": rfc3339(f.start_ns),
        "end": rfc3339(f.end_ns),
        "start_ns": f.start_ns,
        "end_ns": f.end_ns,
        "cost_ms": ms(f.cost_ns.max(0)),
        "frames": f.frames,
        "wireshark_filter": f.wireshark_filter(),
        "explanation": f.explanation,
        "fix": f.fix,
        "details": f.details,
        "confidence": {
            "level": f.confidence.level.name(),
            "reasons": f.confidence.reasons,
        },
    })
}

#[cfg(test)] // the reference json_fast is tested against
pub fn exchange_json(x: &tcpwhy_detect::Exchange) -> Value {
    let s = &x.split;
    json!({
        "type": "exchange",
        "version": SCHEMA_VERSION,
        "connection": x.connection,
        "index": x.index,
        "start": rfc3339(x.start.ts_ns),
        "start_ns": x.start.ts_ns,
        "end_ns": x.end.ts_ns,
        "frames": [x.start.frame(), x.response_first.frame(), x.end.frame()],
        "latency_ms": ms(x.latency_ns),
        "request_bytes": x.request_bytes,
        "response_bytes": x.response_bytes,
        "split_ms": {
            "client": ms(s.client_ns),
            "network": ms(s.network_ns),
            "server": ms(s.server_ns),
            "retransmission": ms(s.retransmission_ns),
            "window": ms(s.window_ns),
            "held": ms(s.held_ns),
            "transfer": ms(s.transfer_ns),
        },
    })
}

pub fn stall_json(s: &tcpwhy_detect::Stall) -> Value {
    json!({
        "type": "stall",
        "version": SCHEMA_VERSION,
        "connection": s.connection,
        "sender": s.sender.name(),
        "class": s.class.name(),
        "start": rfc3339(s.start.ts_ns),
        "start_ns": s.start.ts_ns,
        "end_ns": s.end.ts_ns,
        "frames": [s.start.frame(), s.end.frame()],
        "gap_ms": ms(s.gap_ns),
        "cost_ms": ms(s.cost_ns),
        "in_flight_bytes": s.in_flight,
        "receive_window": s.window,
        "run_bytes": s.run_bytes,
    })
}

impl Printer for JsonPrinter {
    fn stall(&mut self, s: &tcpwhy_detect::Stall) {
        if self.exchanges {
            self.record(|b| write_stall(b, s));
        }
    }

    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        if self.exchanges {
            self.record(|b| write_exchange(b, x));
        }
    }

    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        let low = f.confidence.level == tcpwhy_detect::Level::Low;
        let conn = (!f.capture_wide()).then_some(f.connection);
        self.count(f.id, f.cost_ns, conn, low);
        self.record(|b| write_finding(b, f));
    }

    fn connection(&mut self, c: &Connection) {
        self.vantage[vantage_index(c.vantage())] += 1;
        self.record(|b| write_connection(b, c));
    }

    fn check(&mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn json_lines(&self) -> Option<super::JsonLines> {
        Some(super::JsonLines {
            exchanges: self.exchanges,
        })
    }

    fn line(&mut self, bytes: &[u8], what: super::LineOf) {
        match what {
            super::LineOf::Connection(v) => {
                if let Some(n) = self.vantage.get_mut(usize::from(v)) {
                    *n += 1;
                }
            }
            super::LineOf::Finding {
                id,
                cost_ns,
                connection,
                low,
            } => self.count(id, cost_ns, connection, low),
            super::LineOf::Exchange | super::LineOf::Stall if !self.exchanges => return,
            _ => {}
        }
        self.emit(bytes);
    }

    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        let mut v = summary_json(r, &self.vantage);
        if let Some(m) = v.as_object_mut() {
            m.insert("causes".into(), self.causes_json());
        }
        self.record(|b| write_value(b, &v));
        self.check()?;
        self.out.flush()
    }
}
