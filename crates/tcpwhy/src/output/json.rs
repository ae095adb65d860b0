//! JSON Lines output. The schema is documented in docs/json-schema.md; bump `SCHEMA_VERSION`
//! and note it in CHANGELOG.md whenever a field changes meaning or disappears.

use super::record::{CauseRecord, ConnectionRecord, ExchangeRecord, FindingRecord, StallRecord};
use super::{Printer, Report};
use crate::time::{ms, rfc3339};
use serde_json::{json, Map, Value};
use std::io::{self, Write};
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
    /// The summary's `causes`.
    causes: super::CauseTotals,
}

impl JsonPrinter {
    /// The causes ranked as the text report ranks them: by time lost, then by id.
    pub fn causes(&self) -> Vec<CauseRecord> {
        self.causes
            .ranked()
            .into_iter()
            .map(|(id, t)| CauseRecord {
                connections: self.causes.connections(id),
                cost_ms: ms(t.cost_ns),
                findings: t.findings,
                id,
                low_confidence_findings: t.low,
            })
            .collect()
    }

    /// Counts a finding for the summary, without writing it.
    pub fn tally_finding(&mut self, f: &tcpwhy_detect::Finding) {
        self.causes.add(f);
    }

    /// Counts a connection for the summary, without writing it.
    pub fn tally_connection(&mut self, c: &Connection) {
        self.causes.connection(c.id());
        self.vantage[vantage_index(c.vantage())] += 1;
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
            causes: Default::default(),
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
/// the bytes, for this printer and for the workers that write lines for it (engine.rs). The
/// fields are those of the record views (`record.rs`).
pub fn write_connection(b: &mut Vec<u8>, c: &Connection) {
    write_value(b, &ConnectionRecord(c));
}

pub fn write_exchange(b: &mut Vec<u8>, x: &tcpwhy_detect::Exchange) {
    write_value(b, &ExchangeRecord(x));
}

pub fn write_finding(b: &mut Vec<u8>, f: &tcpwhy_detect::Finding) {
    write_value(b, &FindingRecord(f));
}

pub fn write_stall(b: &mut Vec<u8>, s: &tcpwhy_detect::Stall) {
    write_value(b, &StallRecord(s));
}

/// `v` as compact JSON, as `serde_json` writes it (`json_writer`).
fn write_value(b: &mut Vec<u8>, v: &impl serde::Serialize) {
    super::json_writer::write(b, v);
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
            "sorted_inputs": r.containers.sorted_inputs,
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
        self.tally_finding(f);
        self.record(|b| write_finding(b, f));
    }

    fn connection(&mut self, c: &Connection) {
        self.tally_connection(c);
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
            super::LineOf::Connection { id, vantage } => {
                self.causes.connection(id);
                if let Some(n) = self.vantage.get_mut(usize::from(vantage)) {
                    *n += 1;
                }
            }
            super::LineOf::Finding {
                id,
                cost_ns,
                connection,
                low,
            } => self.causes.finding(id, cost_ns, connection, low),
            super::LineOf::Exchange | super::LineOf::Stall if !self.exchanges => return,
            _ => {}
        }
        self.emit(bytes);
    }

    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        let mut v = summary_json(r, &self.vantage);
        if let Some(m) = v.as_object_mut() {
            let causes = serde_json::to_value(self.causes()).unwrap_or_default();
            m.insert("causes".into(), causes);
        }
        self.record(|b| write_value(b, &v));
        self.check()?;
        self.out.flush()
    }
}
