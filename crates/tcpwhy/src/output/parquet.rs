//! `--format parquet -o DIR`: the records of the JSON Lines output as Parquet tables, typed
//! columns for the engines a fleet already runs (DuckDB, Spark, Ray, pandas).
//!
//! `connections.parquet`, `findings.parquet`, `exchanges.parquet` and `stalls.parquet` hold one
//! row per record of that type, `causes.parquet` the summary's per-cause totals, and
//! `summary.json` the summary record itself. Each row is the record the JSON printer writes
//! (the same code makes both, so they cannot disagree), flattened into the columns of
//! [`TABLES`]: nested objects as `parent_child` columns, times as UTC nanosecond timestamps,
//! frame lists as lists of integers, a finding's cause-specific `details` as a JSON string.
//! Every table has a `source` column: the inputs of the run, as given.
//!
//! Rows are written in row groups of [`ROW_GROUP`] as the analysis streams, so memory stays
//! bounded by open connections and one row group per table. Exchange and stall records are
//! always written (columnar files keep them cheap), as `--format json --exchanges` writes
//! them.

use super::json::JsonPrinter;
use super::{Printer, Report};
use arrow_array::builder::{
    BooleanBuilder, Float64Builder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
    UInt16Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::Value;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// Rows per row group (and per batch handed to the writer).
pub const ROW_GROUP: usize = 65_536;

/// The type of a column and how a JSON value becomes one of its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned integer (counts, ids, frame numbers, sequence numbers).
    U64,
    /// A TCP port.
    Port,
    /// A float (milliseconds).
    F64,
    Str,
    Bool,
    /// A time: the JSON's integer nanoseconds since the Unix epoch, as a UTC timestamp.
    Time,
    /// A list of unsigned integers (frame numbers).
    U64s,
    /// A list of strings (confidence reasons).
    Strs,
    /// Any JSON value, serialized (a finding's details).
    Json,
}

/// A column: its name, the JSON pointer of its value in the record, its kind.
pub type Col = (&'static str, &'static str, Kind);

use Kind::*;

/// The columns of a connection's side (`c2s` or `s2c`), after the side's prefix.
const SIDE: [(&str, &str, Kind); 27] = [
    ("packets", "packets", U64),
    ("bytes", "bytes", U64),
    ("payload_bytes", "payload_bytes", U64),
    ("unique_bytes", "unique_bytes", U64),
    ("data_segments", "data_segments", U64),
    ("retrans_segments", "retrans_segments", U64),
    ("retrans_bytes", "retrans_bytes", U64),
    ("duplicates", "duplicates", U64),
    ("out_of_order", "out_of_order", U64),
    ("keepalives", "keepalives", U64),
    ("zero_windows", "zero_windows", U64),
    ("syn_retransmits", "syn_retransmits", U64),
    ("sack_blocks", "sack_blocks", U64),
    ("unseen_acked_bytes", "unseen_acked_bytes", U64),
    ("isn", "isn", U64),
    ("mss", "mss", U64),
    ("window_scale", "window_scale", U64),
    ("window", "window", U64),
    ("window_raw", "window_raw", U64),
    ("sack_permitted", "sack_permitted", Bool),
    ("timestamps", "timestamps", Bool),
    ("fin_frame", "fin_frame", U64),
    ("rst_frame", "rst_frame", U64),
    ("ack_rtt_min_ms", "ack_rtt_ms/min", F64),
    ("ack_rtt_median_ms", "ack_rtt_ms/median", F64),
    ("ack_rtt_max_ms", "ack_rtt_ms/max", F64),
    ("ack_rtt_samples", "ack_rtt_ms/samples", U64),
];

const CONNECTION: &[Col] = &[
    ("id", "/id", U64),
    ("client", "/client", Str),
    ("client_ip", "/client_ip", Str),
    ("client_port", "/client_port", Port),
    ("server", "/server", Str),
    ("server_ip", "/server_ip", Str),
    ("server_port", "/server_port", Port),
    ("role", "/role", Str),
    ("role_inferred", "/role_inferred", Bool),
    ("start", "/start_ns", Time),
    ("end", "/end_ns", Time),
    ("duration_ms", "/duration_ms", F64),
    ("first_frame", "/first_frame", U64),
    ("last_frame", "/last_frame", U64),
    ("packets", "/packets", U64),
    ("retransmissions", "/retransmissions", U64),
    ("close_kind", "/close/kind", Str),
    ("close_by", "/close/by", Str),
    ("end_reason", "/end_reason", Str),
    ("vantage", "/vantage", Str),
    ("window_scaling", "/window_scaling", Bool),
    ("handshake_syn_frame", "/handshake/syn_frame", U64),
    ("handshake_syn_ack_frame", "/handshake/syn_ack_frame", U64),
    ("handshake_ack_frame", "/handshake/ack_frame", U64),
    ("handshake_rtt_ms", "/handshake/rtt_ms", F64),
    (
        "handshake_syn_to_syn_ack_ms",
        "/handshake/syn_to_syn_ack_ms",
        F64,
    ),
    (
        "handshake_syn_ack_to_ack_ms",
        "/handshake/syn_ack_to_ack_ms",
        F64,
    ),
    ("handshake_invalid_acks", "/handshake/invalid_acks", U64),
    ("handshake_client_rsts", "/handshake/client_rsts", U64),
    ("rtt_min_ms", "/rtt_ms/min", F64),
    ("rtt_median_ms", "/rtt_ms/median", F64),
    ("rtt_max_ms", "/rtt_ms/max", F64),
    ("rtt_samples", "/rtt_ms/samples", U64),
    ("prev_id", "/prev/id", U64),
    ("prev_close_kind", "/prev/close/kind", Str),
    ("prev_close_by", "/prev/close/by", Str),
    ("prev_gap_ms", "/prev/gap_ms", F64),
    ("prev_same_client", "/prev/same_client", Bool),
    ("prev_client_next_seq", "/prev/client_next_seq", U64),
    ("prev_server_next_seq", "/prev/server_next_seq", U64),
    ("prev_timestamps", "/prev/timestamps", Bool),
];

const FINDING: &[Col] = &[
    ("connection", "/connection", U64),
    ("id", "/id", Str),
    ("client", "/client", Str),
    ("client_ip", "/client_ip", Str),
    ("client_port", "/client_port", Port),
    ("server", "/server", Str),
    ("server_ip", "/server_ip", Str),
    ("server_port", "/server_port", Port),
    ("start", "/start_ns", Time),
    ("end", "/end_ns", Time),
    ("cost_ms", "/cost_ms", F64),
    ("frames", "/frames", U64s),
    ("wireshark_filter", "/wireshark_filter", Str),
    ("explanation", "/explanation", Str),
    ("fix", "/fix", Str),
    ("confidence", "/confidence/level", Str),
    ("confidence_reasons", "/confidence/reasons", Strs),
    ("details", "/details", Json),
];

const EXCHANGE: &[Col] = &[
    ("connection", "/connection", U64),
    ("index", "/index", U64),
    ("start", "/start_ns", Time),
    ("end", "/end_ns", Time),
    ("latency_ms", "/latency_ms", F64),
    ("request_bytes", "/request_bytes", U64),
    ("response_bytes", "/response_bytes", U64),
    ("network_ms", "/split_ms/network", F64),
    ("server_ms", "/split_ms/server", F64),
    ("client_ms", "/split_ms/client", F64),
    ("transfer_ms", "/split_ms/transfer", F64),
    ("window_ms", "/split_ms/window", F64),
    ("retransmission_ms", "/split_ms/retransmission", F64),
    ("held_ms", "/split_ms/held", F64),
    ("frames", "/frames", U64s),
];

const STALL: &[Col] = &[
    ("connection", "/connection", U64),
    ("sender", "/sender", Str),
    ("class", "/class", Str),
    ("start", "/start_ns", Time),
    ("end", "/end_ns", Time),
    ("gap_ms", "/gap_ms", F64),
    ("cost_ms", "/cost_ms", F64),
    ("in_flight_bytes", "/in_flight_bytes", U64),
    ("receive_window", "/receive_window", U64),
    ("run_bytes", "/run_bytes", U64),
    ("frames", "/frames", U64s),
];

const CAUSE: &[Col] = &[
    ("id", "/id", Str),
    ("findings", "/findings", U64),
    ("low_confidence_findings", "/low_confidence_findings", U64),
    ("connections", "/connections", U64),
    ("cost_ms", "/cost_ms", F64),
];

/// The tables: file name, the JSON record type that fills it, its columns (before `source`).
pub const TABLES: [(&str, &str, &[Col]); 5] = [
    ("connections", "connection", CONNECTION),
    ("findings", "finding", FINDING),
    ("exchanges", "exchange", EXCHANGE),
    ("stalls", "stall", STALL),
    ("causes", "cause", CAUSE),
];

/// A connection's columns: [`CONNECTION`] then each side's, prefixed `c2s_` and `s2c_`.
pub fn connection_columns() -> Vec<(String, String, Kind)> {
    let mut cols: Vec<(String, String, Kind)> = CONNECTION
        .iter()
        .map(|(n, p, k)| (n.to_string(), p.to_string(), *k))
        .collect();
    for side in ["c2s", "s2c"] {
        for (n, p, k) in &SIDE {
            cols.push((format!("{side}_{n}"), format!("/{side}/{p}"), *k));
        }
    }
    cols
}

/// The columns of table `name` (as in [`TABLES`]), `source` first.
pub fn columns(name: &str) -> Vec<(String, String, Kind)> {
    let mut cols = vec![("source".to_string(), String::new(), Str)];
    if name == "connections" {
        cols.extend(connection_columns());
    } else if let Some((_, _, c)) = TABLES.iter().find(|t| t.0 == name) {
        cols.extend(c.iter().map(|(n, p, k)| (n.to_string(), p.to_string(), *k)));
    }
    cols
}

enum Builder {
    U64(UInt64Builder),
    Port(UInt16Builder),
    F64(Float64Builder),
    Str(StringBuilder),
    Bool(BooleanBuilder),
    Time(TimestampNanosecondBuilder),
    U64s(ListBuilder<UInt64Builder>),
    Strs(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        match kind {
            U64 => Builder::U64(UInt64Builder::new()),
            Port => Builder::Port(UInt16Builder::new()),
            F64 => Builder::F64(Float64Builder::new()),
            Str | Json => Builder::Str(StringBuilder::new()),
            Bool => Builder::Bool(BooleanBuilder::new()),
            Time => Builder::Time(TimestampNanosecondBuilder::new().with_timezone("UTC")),
            U64s => Builder::U64s(ListBuilder::new(UInt64Builder::new())),
            Strs => Builder::Strs(ListBuilder::new(StringBuilder::new())),
        }
    }

    /// One cell from `v` (absent or null: a null cell; a JSON value of the wrong type too).
    fn push(&mut self, kind: Kind, v: Option<&Value>) {
        let v = v.filter(|v| !v.is_null());
        match self {
            Builder::U64(b) => b.append_option(v.and_then(Value::as_u64)),
            Builder::Port(b) => b.append_option(
                v.and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok()),
            ),
            Builder::F64(b) => b.append_option(v.and_then(Value::as_f64)),
            Builder::Str(b) if kind == Json => b.append_option(v.map(|v| v.to_string())),
            Builder::Str(b) => b.append_option(v.and_then(Value::as_str)),
            Builder::Bool(b) => b.append_option(v.and_then(Value::as_bool)),
            Builder::Time(b) => b.append_option(v.and_then(Value::as_i64)),
            Builder::U64s(b) => match v.and_then(Value::as_array) {
                Some(a) => {
                    for x in a {
                        b.values().append_option(x.as_u64());
                    }
                    b.append(true);
                }
                None => b.append(false),
            },
            Builder::Strs(b) => match v.and_then(Value::as_array) {
                Some(a) => {
                    for x in a {
                        b.values().append_option(x.as_str());
                    }
                    b.append(true);
                }
                None => b.append(false),
            },
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::U64(b) => Arc::new(b.finish()),
            Builder::Port(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::U64s(b) => Arc::new(b.finish()),
            Builder::Strs(b) => Arc::new(b.finish()),
        }
    }
}

fn data_type(kind: Kind) -> DataType {
    match kind {
        U64 => DataType::UInt64,
        Port => DataType::UInt16,
        F64 => DataType::Float64,
        Str | Json => DataType::Utf8,
        Bool => DataType::Boolean,
        Time => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        U64s => DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
        Strs => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
    }
}

/// One Parquet file being written: its columns' builders and the rows not yet written.
struct Table {
    cols: Vec<(String, String, Kind)>,
    /// The columns' JSON pointers as a tree of keys, for reading a record's bytes straight
    /// into the builders (no `Value` in between, and no `Value::pointer`, which unescapes
    /// every token of every lookup: together most of a run's time, measured).
    trie: Node,
    /// The columns the record being read has filled.
    set: Vec<bool>,
    builders: Vec<Builder>,
    rows: usize,
    schema: Arc<Schema>,
    writer: ArrowWriter<File>,
}

impl Table {
    fn create(dir: &Path, name: &str) -> io::Result<Table> {
        let cols = columns(name);
        // Each field names the JSON field it holds (`json_pointer` in its Arrow metadata), so
        // that a reader can map columns back to docs/json-schema.md.
        let schema = Arc::new(Schema::new(
            cols.iter()
                .map(|(n, p, k)| {
                    Field::new(n, data_type(*k), n != "source").with_metadata(
                        [("json_pointer".to_string(), p.clone())]
                            .into_iter()
                            .collect(),
                    )
                })
                .collect::<Vec<_>>(),
        ));
        let path = dir.join(format!("{name}.parquet"));
        let file = File::create(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
        })?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by(format!("tcpwhy {}", crate::VERSION))
            .build();
        let writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(io::Error::other)?;
        let builders = cols.iter().map(|(_, _, k)| Builder::new(*k)).collect();
        let mut trie = Node::default();
        for (i, (_, ptr, _)) in cols.iter().enumerate() {
            // `source` has no pointer: it is the run's, not the record's.
            if !ptr.is_empty() {
                let keys: Vec<String> = ptr.split('/').skip(1).map(str::to_string).collect();
                trie.insert(&keys, i);
            }
        }
        let set = vec![false; cols.len()];
        Ok(Table {
            cols,
            trie,
            set,
            builders,
            rows: 0,
            schema,
            writer,
        })
    }

    /// One record from its JSON bytes (one object, as the JSON printer wrote it).
    fn push_json(&mut self, source: &str, bytes: &[u8]) -> io::Result<()> {
        self.set.iter_mut().for_each(|s| *s = false);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let seed = Fill {
            node: &self.trie,
            cols: &self.cols,
            builders: &mut self.builders,
            set: &mut self.set,
        };
        serde::de::DeserializeSeed::deserialize(seed, &mut de).map_err(io::Error::other)?;
        for (i, ((_, ptr, kind), b)) in self.cols.iter().zip(&mut self.builders).enumerate() {
            match b {
                Builder::Str(b) if ptr.is_empty() => b.append_value(source),
                b if !self.set[i] => b.push(*kind, None),
                _ => {}
            }
        }
        self.rows += 1;
        if self.rows == ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(io::Error::other)?;
        self.rows = 0;
        self.writer.write(&batch).map_err(io::Error::other)
    }

    fn close(mut self) -> io::Result<()> {
        self.flush()?;
        self.writer.close().map(|_| ()).map_err(io::Error::other)
    }
}

/// A tree of the keys of a table's JSON pointers: a key leads to a column or to more keys.
#[derive(Default)]
struct Node {
    keys: Vec<(String, Node)>,
    col: Option<usize>,
}

impl Node {
    fn insert(&mut self, path: &[String], col: usize) {
        match path.split_first() {
            None => self.col = Some(col),
            Some((key, rest)) => {
                let i = match self.keys.iter().position(|(k, _)| k == key) {
                    Some(i) => i,
                    None => {
                        self.keys.push((key.clone(), Node::default()));
                        self.keys.len() - 1
                    }
                };
                self.keys[i].1.insert(rest, col);
            }
        }
    }
}

/// Reads one JSON object into the builders of the columns under `node`, marking each column
/// it fills in `set`; keys without a column are skipped.
struct Fill<'a> {
    node: &'a Node,
    cols: &'a [(String, String, Kind)],
    builders: &'a mut [Builder],
    set: &'a mut [bool],
}

impl<'de> serde::de::DeserializeSeed<'de> for Fill<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Fill<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or null")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(()) // a null object: its columns stay unset (null)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(child) = map.next_key_seed(Key(self.node))? {
            let Some(node) = child else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            match node.col {
                Some(c) if !self.set[c] => {
                    let kind = self.cols[c].2;
                    let v: Value = map.next_value()?;
                    self.builders[c].push(kind, Some(&v));
                    self.set[c] = true;
                }
                Some(_) => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                None => map.next_value_seed(Fill {
                    node,
                    cols: self.cols,
                    builders: &mut *self.builders,
                    set: &mut *self.set,
                })?,
            }
        }
        Ok(())
    }
}

/// A key of the object being read: the node it leads to, if any column is under it.
struct Key<'a>(&'a Node);

impl<'de, 'a> serde::de::DeserializeSeed<'de> for Key<'a> {
    type Value = Option<&'a Node>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'a> serde::de::Visitor<'_> for Key<'a> {
    type Value = Option<&'a Node>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Self::Value, E> {
        Ok(self.0.keys.iter().find(|(key, _)| key == k).map(|(_, n)| n))
    }
}

/// Bytes the inner JSON printer writes, taken line by line.
#[derive(Clone, Default)]
struct Lines(Rc<RefCell<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct ParquetPrinter {
    dir: PathBuf,
    /// The JSON printer that makes every record (and counts the summary's totals).
    json: JsonPrinter,
    lines: Lines,
    source: String,
    tables: Vec<Table>,
    err: Option<io::Error>,
}

impl ParquetPrinter {
    /// Tables in `dir` (created if missing) for a run over `files`.
    pub fn create(dir: &Path, files: &[String]) -> io::Result<ParquetPrinter> {
        std::fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let lines = Lines::default();
        let mut tables = Vec::new();
        for (name, _, _) in TABLES.iter().filter(|t| t.0 != "causes") {
            tables.push(Table::create(dir, name)?);
        }
        Ok(ParquetPrinter {
            dir: dir.to_path_buf(),
            json: JsonPrinter::new(Box::new(lines.clone()), false, true),
            lines,
            source: files.join(","),
            tables,
            err: None,
        })
    }

    /// The lines the JSON printer wrote since the last call, each into table `table`.
    fn take(&mut self, table: usize) {
        let bytes = std::mem::take(&mut *self.lines.0.borrow_mut());
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let (Err(e), None) = (self.tables[table].push_json(&self.source, line), &self.err) {
                self.err = Some(e);
            }
        }
        // The buffer keeps its capacity for the next record.
        let mut buf = self.lines.0.borrow_mut();
        if buf.is_empty() {
            *buf = bytes;
            buf.clear();
        }
    }
}

/// The tables records go to, by their place in [`TABLES`].
const CONNECTIONS: usize = 0;
const FINDINGS: usize = 1;
const EXCHANGES: usize = 2;
const STALLS: usize = 3;

impl Printer for ParquetPrinter {
    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        self.json.finding(f);
        self.take(FINDINGS);
    }
    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        self.json.exchange(x);
        self.take(EXCHANGES);
    }
    fn stall(&mut self, s: &tcpwhy_detect::Stall) {
        self.json.stall(s);
        self.take(STALLS);
    }
    fn connection(&mut self, c: &tcpwhy_track::Connection) {
        self.json.connection(c);
        self.take(CONNECTIONS);
    }
    /// The tracking workers write the JSON lines (in parallel), this thread only fills the
    /// columns.
    fn json_lines(&self) -> Option<super::JsonLines> {
        Some(super::JsonLines { exchanges: true })
    }
    fn line(&mut self, bytes: &[u8], what: super::LineOf) {
        let table = match what {
            super::LineOf::Connection(_) => CONNECTIONS,
            super::LineOf::Finding { .. } => FINDINGS,
            super::LineOf::Exchange => EXCHANGES,
            super::LineOf::Stall => STALLS,
        };
        self.json.line(bytes, what);
        self.take(table);
    }
    fn check(&mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => self.json.check(),
        }
    }
    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        self.json.summary(r)?;
        let bytes = std::mem::take(&mut *self.lines.0.borrow_mut());
        let summary: Value =
            serde_json::from_slice(bytes.trim_ascii()).map_err(io::Error::other)?;
        let mut causes = Table::create(&self.dir, "causes")?;
        for c in summary["causes"].as_array().into_iter().flatten() {
            causes.push_json(
                &self.source,
                &serde_json::to_vec(c).map_err(io::Error::other)?,
            )?;
        }
        causes.close()?;
        for t in std::mem::take(&mut self.tables) {
            t.close()?;
        }
        let mut text = serde_json::to_vec_pretty(&summary).map_err(io::Error::other)?;
        text.push(b'\n');
        let path = self.dir.join("summary.json");
        std::fs::write(&path, text).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
        })?;
        self.check()
    }
}
