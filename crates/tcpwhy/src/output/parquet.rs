//! `--format parquet -o DIR`: the records of the JSON Lines output as Parquet tables, typed
//! columns for the engines a fleet already runs (DuckDB, Spark, Ray, pandas). `--format arrow`
//! writes the same tables as Arrow IPC files (`NAME.arrow`, Feather v2, uncompressed): larger,
//! but read without decoding (the Python package reads them back).
//!
//! `connections.parquet`, `findings.parquet`, `exchanges.parquet` and `stalls.parquet` hold one
//! row per record of that type, `causes.parquet` the summary's per-cause totals, and
//! `summary.json` the summary record itself. Each row is a record view of `record.rs`, the
//! views the JSON printer writes (one `Serialize` makes both, so they cannot disagree),
//! serialized straight into the columns of [`TABLES`] by [`Cells`]: nested objects as
//! `parent_child` columns, times as UTC nanosecond timestamps, frame lists as lists of
//! integers, a finding's cause-specific `details` as a JSON string. Every table has a `source`
//! column: the inputs of the run, as given.
//!
//! Rows are written in row groups of [`ROW_GROUP`] as the analysis streams, handed to each
//! table's writing thread in batches of [`BATCH`], so memory stays bounded by open
//! connections and, per table, two batches and the encoded row group in progress. Exchange
//! and stall records are always written (columnar files keep them cheap), as `--format json
//! --exchanges` writes them.

use super::json::JsonPrinter;
use super::record::{ConnectionRecord, ExchangeRecord, FindingRecord, StallRecord};
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
use parquet::schema::types::ColumnPath;
use serde::ser::{
    Impossible, Serialize, SerializeSeq, SerializeStruct, SerializeTuple, Serializer,
};
use serde_json::Value;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Columns whose values are (nearly) unique per row: written without a dictionary.
const UNIQUE: [&str; 4] = ["client", "explanation", "wireshark_filter", "details"];

/// Rows per row group.
pub const ROW_GROUP: usize = 65_536;
/// Rows per batch handed to the writing thread, which encodes each into the row group in
/// progress: the builders and the queued batch hold an eighth of a row group, not two.
const BATCH: usize = 8_192;

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

    /// A null cell.
    fn null(&mut self) {
        match self {
            Builder::U64(b) => b.append_null(),
            Builder::Port(b) => b.append_null(),
            Builder::F64(b) => b.append_null(),
            Builder::Str(b) => b.append_null(),
            Builder::Bool(b) => b.append_null(),
            Builder::Time(b) => b.append_null(),
            Builder::U64s(b) => b.append(false),
            Builder::Strs(b) => b.append(false),
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
    /// The batches go to a thread of their own that encodes and compresses them (a third of
    /// the reading thread's time otherwise); it returns the first error when the table closes.
    tx: Option<SyncSender<RecordBatch>>,
    writer: Option<JoinHandle<io::Result<()>>>,
}

/// The kind of file a table is written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// Parquet (`NAME.parquet`), zstd-compressed.
    Parquet,
    /// Arrow IPC file format (`NAME.arrow`, Feather v2), uncompressed.
    Arrow,
}

impl Container {
    /// Its `--format` name and file extension.
    pub fn name(self) -> &'static str {
        match self {
            Container::Parquet => "parquet",
            Container::Arrow => "arrow",
        }
    }
}

/// A table's file being written.
enum FileWriter {
    Parquet(ArrowWriter<File>),
    Arrow(arrow_ipc::writer::FileWriter<io::BufWriter<File>>),
}

/// Writes the batches it receives until the channel closes, then closes the file.
fn write_batches(mut w: FileWriter, rx: Receiver<RecordBatch>) -> io::Result<()> {
    for batch in rx {
        match &mut w {
            FileWriter::Parquet(w) => w.write(&batch).map_err(io::Error::other)?,
            FileWriter::Arrow(w) => w.write(&batch).map_err(io::Error::other)?,
        }
    }
    match w {
        FileWriter::Parquet(w) => w.close().map(|_| ()).map_err(io::Error::other),
        FileWriter::Arrow(mut w) => {
            w.finish().map_err(io::Error::other)?;
            w.into_inner().map_err(io::Error::other)?.flush()
        }
    }
}

impl Table {
    fn create(dir: &Path, name: &str, container: Container) -> io::Result<Table> {
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
        let path = dir.join(format!("{name}.{}", container.name()));
        let file = File::create(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
        })?;
        if container == Container::Arrow {
            let w = arrow_ipc::writer::FileWriter::try_new_buffered(file, &schema)
                .map_err(io::Error::other)?;
            return Table::start(cols, schema, name, FileWriter::Arrow(w));
        }
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by(format!("tcpwhy {}", crate::VERSION));
        // A dictionary costs a hash of every value. Numbers, times and flags go without one
        // (zstd finds their repeats), and so do strings that are (nearly) unique per row;
        // the other strings (roles, addresses, ids, causes) repeat and keep theirs.
        props = props.set_dictionary_enabled(false);
        for (n, _, _) in cols
            .iter()
            .filter(|(n, _, k)| *k == Str && !UNIQUE.contains(&n.as_str()))
        {
            props = props.set_column_dictionary_enabled(ColumnPath::from(n.as_str()), true);
        }
        let props = props.build();
        let w =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(io::Error::other)?;
        Table::start(cols, schema, name, FileWriter::Parquet(w))
    }

    /// The table's builders, and the thread that writes its batches with `w`.
    fn start(
        cols: Vec<(String, String, Kind)>,
        schema: Arc<Schema>,
        name: &str,
        w: FileWriter,
    ) -> io::Result<Table> {
        // One batch queued while the thread writes another.
        let (tx, rx) = sync_channel(1);
        let writer = std::thread::Builder::new()
            .name(format!("tcpwhy-parquet-{name}"))
            .spawn(move || write_batches(w, rx))?;
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
            tx: Some(tx),
            writer: Some(writer),
        })
    }

    /// One record, serialized straight into the builders.
    fn push(&mut self, source: &str, record: &impl Serialize) -> io::Result<()> {
        self.set.iter_mut().for_each(|s| *s = false);
        let cells = Cells {
            node: &mut self.trie,
            cols: &self.cols,
            builders: &mut self.builders,
            set: &mut self.set,
        };
        record.serialize(cells).map_err(io::Error::other)?;
        for (i, ((_, ptr, _), b)) in self.cols.iter().zip(&mut self.builders).enumerate() {
            match b {
                Builder::Str(b) if ptr.is_empty() => b.append_value(source),
                b if !self.set[i] => b.null(),
                _ => {}
            }
        }
        self.rows += 1;
        if self.rows == BATCH {
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
        let sent = self.tx.as_ref().map(|tx| tx.send(batch));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped at an error: `close` returns it.
            _ => self.close_writer(),
        }
    }

    fn close(mut self) -> io::Result<()> {
        self.flush()?;
        self.close_writer()
    }

    /// Closes the channel and waits for the writing thread: its result.
    fn close_writer(&mut self) -> io::Result<()> {
        self.tx = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the Parquet writing thread panicked")),
            None => Err(io::Error::other("the Parquet file is already closed")),
        }
    }
}

/// A tree of the keys of a table's JSON pointers: a key leads to a column or to more keys.
#[derive(Default)]
struct Node {
    /// Each key, the address of the `&'static str` it was last found under (a field's key is
    /// the same literal every time: equal addresses are equal keys, no comparison of bytes),
    /// and the node under it.
    keys: Vec<(String, usize, Node)>,
    col: Option<usize>,
    /// Where the next key is expected: just after the last one found.
    hint: usize,
}

impl Node {
    /// The node under `key`; a key without a column gets an empty node (skipped). The keys
    /// are moved into the order the fields come in, which is the same for every record of a
    /// view: after the first record each field is found at the first comparison.
    fn child(&mut self, key: &'static str) -> &mut Node {
        let n = self.keys.len();
        let h = self.hint.min(n);
        let addr = key.as_ptr() as usize;
        let at_addr = |k: &(String, usize, Node)| k.1 == addr && k.0.len() == key.len();
        if self.keys.get(h).is_some_and(at_addr) {
            self.hint = h + 1;
            return &mut self.keys[h].2;
        }
        // A field absent from this record (skipped when empty) moves the hint: the key is
        // found by its address, and compared as text only the first time it comes.
        let order = || (h..n).chain(0..h);
        let found = order()
            .find(|&i| at_addr(&self.keys[i]))
            .or_else(|| order().find(|&i| self.keys[i].0 == key));
        let i = match found {
            Some(i) if i > h => {
                self.keys[h..=i].rotate_right(1);
                h
            }
            Some(i) => i,
            None => {
                self.keys.insert(h, (key.to_string(), 0, Node::default()));
                h
            }
        };
        self.keys[i].1 = addr;
        self.hint = i + 1;
        &mut self.keys[i].2
    }

    fn insert(&mut self, path: &[String], col: usize) {
        match path.split_first() {
            None => self.col = Some(col),
            Some((key, rest)) => {
                let i = match self.keys.iter().position(|(k, _, _)| k == key) {
                    Some(i) => i,
                    None => {
                        self.keys.push((key.clone(), 0, Node::default()));
                        self.keys.len() - 1
                    }
                };
                self.keys[i].2.insert(rest, col);
            }
        }
    }
}

/// Serializes one record view (`record.rs`) into the builders of the columns under `node`,
/// marking each column it fills in `set`; fields without a column are not serialized at all.
struct Cells<'a> {
    node: &'a mut Node,
    cols: &'a [(String, String, Kind)],
    builders: &'a mut [Builder],
    set: &'a mut [bool],
}

/// A record whose shape the columns do not expect (a bug: tests/it/parquet_tables.rs would show it).
#[derive(Debug)]
pub struct ShapeError(String);

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "parquet: {}", self.0)
    }
}

impl std::error::Error for ShapeError {}

impl serde::ser::Error for ShapeError {
    fn custom<T: std::fmt::Display>(msg: T) -> ShapeError {
        ShapeError(msg.to_string())
    }
}

fn shape<T>(what: &str) -> Result<T, ShapeError> {
    Err(ShapeError(format!(
        "a record field of an unexpected shape ({what})"
    )))
}

/// The `Serializer` methods a serializer below does not take: each is a shape error.
macro_rules! no_serialize {
    ($($f:ident($t:ty)),* $(,)?) => {
        $(fn $f(self, _v: $t) -> Result<Self::Ok, ShapeError> {
            shape(stringify!($f))
        })*
    };
}

/// The compound `Serializer` methods (and their types) a serializer below does not take.
macro_rules! no_compounds {
    (seq) => {
        type SerializeTupleStruct = Impossible<(), ShapeError>;
        type SerializeTupleVariant = Impossible<(), ShapeError>;
        type SerializeMap = Impossible<(), ShapeError>;
        type SerializeStructVariant = Impossible<(), ShapeError>;
        fn serialize_tuple_struct(
            self,
            _n: &'static str,
            _l: usize,
        ) -> Result<Self::SerializeTupleStruct, ShapeError> {
            shape("tuple struct")
        }
        fn serialize_tuple_variant(
            self,
            _n: &'static str,
            _i: u32,
            _v: &'static str,
            _l: usize,
        ) -> Result<Self::SerializeTupleVariant, ShapeError> {
            shape("tuple variant")
        }
        fn serialize_map(self, _l: Option<usize>) -> Result<Self::SerializeMap, ShapeError> {
            shape("map")
        }
        fn serialize_struct_variant(
            self,
            _n: &'static str,
            _i: u32,
            _v: &'static str,
            _l: usize,
        ) -> Result<Self::SerializeStructVariant, ShapeError> {
            shape("struct variant")
        }
        fn serialize_unit_struct(self, _n: &'static str) -> Result<Self::Ok, ShapeError> {
            shape("unit struct")
        }
        fn serialize_unit_variant(
            self,
            _n: &'static str,
            _i: u32,
            _v: &'static str,
        ) -> Result<Self::Ok, ShapeError> {
            shape("unit variant")
        }
        fn serialize_newtype_struct<T: ?Sized + Serialize>(
            self,
            _n: &'static str,
            _v: &T,
        ) -> Result<Self::Ok, ShapeError> {
            shape("newtype struct")
        }
        fn serialize_newtype_variant<T: ?Sized + Serialize>(
            self,
            _n: &'static str,
            _i: u32,
            _v: &'static str,
            _t: &T,
        ) -> Result<Self::Ok, ShapeError> {
            shape("newtype variant")
        }
    };
    (all) => {
        no_compounds!(seq);
        type SerializeSeq = Impossible<(), ShapeError>;
        type SerializeTuple = Impossible<(), ShapeError>;
        fn serialize_seq(self, _l: Option<usize>) -> Result<Self::SerializeSeq, ShapeError> {
            shape("sequence")
        }
        fn serialize_tuple(self, _l: usize) -> Result<Self::SerializeTuple, ShapeError> {
            shape("tuple")
        }
    };
}

impl<'a> Serializer for Cells<'a> {
    type Ok = ();
    type Error = ShapeError;
    type SerializeStruct = Cells<'a>;
    no_compounds!(all);
    no_serialize!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );
    /// A null object: its columns stay unset (null).
    fn serialize_none(self) -> Result<(), ShapeError> {
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), ShapeError> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), ShapeError> {
        v.serialize(self)
    }
    fn serialize_struct(self, _n: &'static str, _l: usize) -> Result<Cells<'a>, ShapeError> {
        Ok(self)
    }
}

impl SerializeStruct for Cells<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), ShapeError> {
        let node = self.node.child(key);
        if node.col.is_none() && node.keys.is_empty() {
            return Ok(()); // no column under this key
        }
        match node.col {
            Some(c) if !self.set[c] => {
                let (b, kind) = (&mut self.builders[c], self.cols[c].2);
                if kind == Json {
                    // A finding's details: the JSON text (null stays a null cell).
                    let text = serde_json::to_string(v)
                        .map_err(<ShapeError as serde::ser::Error>::custom)?;
                    if let Builder::Str(b) = b {
                        b.append_option((text != "null").then_some(text));
                    }
                } else {
                    v.serialize(Cell(b))?;
                }
                self.set[c] = true;
                Ok(())
            }
            Some(_) => Ok(()),
            None => v.serialize(Cells {
                node,
                cols: self.cols,
                builders: &mut *self.builders,
                set: &mut *self.set,
            }),
        }
    }
    fn end(self) -> Result<(), ShapeError> {
        Ok(())
    }
}

/// A number as serialized, converted to a column's type as `serde_json::Value`'s `as_u64`,
/// `as_i64` and `as_f64` convert a JSON number (the columns' documented meaning).
#[derive(Clone, Copy)]
enum Num {
    U(u64),
    I(i64),
    F(f64),
}

impl Num {
    fn as_u64(self) -> Option<u64> {
        match self {
            Num::U(v) => Some(v),
            Num::I(v) => u64::try_from(v).ok(),
            Num::F(_) => None,
        }
    }
    fn as_i64(self) -> Option<i64> {
        match self {
            Num::U(v) => i64::try_from(v).ok(),
            Num::I(v) => Some(v),
            Num::F(_) => None,
        }
    }
    fn as_f64(self) -> f64 {
        match self {
            Num::U(v) => v as f64,
            Num::I(v) => v as f64,
            Num::F(v) => v,
        }
    }
}

/// Number `Serializer` methods that hand the value to `self.num` as a [`Num`] of kind `$k`.
macro_rules! numbers {
    ($($f:ident($t:ty) => $k:ident),* $(,)?) => {
        $(fn $f(self, v: $t) -> Result<(), ShapeError> {
            self.num(Num::$k(v.into()))
        })*
    };
}

/// Serializes one value into one column's builder.
struct Cell<'a>(&'a mut Builder);

impl Cell<'_> {
    fn num(self, n: Num) -> Result<(), ShapeError> {
        match self.0 {
            Builder::U64(b) => b.append_option(n.as_u64()),
            Builder::Port(b) => b.append_option(n.as_u64().and_then(|p| u16::try_from(p).ok())),
            Builder::F64(b) => b.append_value(n.as_f64()),
            Builder::Time(b) => b.append_option(n.as_i64()),
            _ => return shape("a number"),
        }
        Ok(())
    }
}

impl<'a> Serializer for Cell<'a> {
    type Ok = ();
    type Error = ShapeError;
    type SerializeSeq = List<'a>;
    type SerializeTuple = List<'a>;
    type SerializeStruct = Impossible<(), ShapeError>;
    no_compounds!(seq);
    no_serialize!(serialize_char(char), serialize_bytes(&[u8]));
    fn serialize_struct(
        self,
        _n: &'static str,
        _l: usize,
    ) -> Result<Self::SerializeStruct, ShapeError> {
        shape("an object in a column")
    }
    numbers!(
        serialize_u8(u8) => U,
        serialize_u16(u16) => U,
        serialize_u32(u32) => U,
        serialize_u64(u64) => U,
        serialize_i8(i8) => I,
        serialize_i16(i16) => I,
        serialize_i32(i32) => I,
        serialize_i64(i64) => I,
        serialize_f32(f32) => F,
        serialize_f64(f64) => F,
    );
    fn serialize_bool(self, v: bool) -> Result<(), ShapeError> {
        match self.0 {
            Builder::Bool(b) => b.append_value(v),
            _ => return shape("a boolean"),
        }
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), ShapeError> {
        match self.0 {
            Builder::Str(b) => b.append_value(v),
            _ => return shape("a string"),
        }
        Ok(())
    }
    fn serialize_none(self) -> Result<(), ShapeError> {
        self.0.null();
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), ShapeError> {
        self.0.null();
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), ShapeError> {
        v.serialize(self)
    }
    fn serialize_seq(self, _l: Option<usize>) -> Result<List<'a>, ShapeError> {
        match self.0 {
            Builder::U64s(b) => Ok(List::U64s(b)),
            Builder::Strs(b) => Ok(List::Strs(b)),
            _ => shape("a list"),
        }
    }
    fn serialize_tuple(self, l: usize) -> Result<List<'a>, ShapeError> {
        self.serialize_seq(Some(l))
    }
}

/// A list column's cell being filled, element by element.
enum List<'a> {
    U64s(&'a mut ListBuilder<UInt64Builder>),
    Strs(&'a mut ListBuilder<StringBuilder>),
}

impl SerializeSeq for List<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), ShapeError> {
        let item = match self {
            List::U64s(b) => Item::U64(b.values()),
            List::Strs(b) => Item::Str(b.values()),
        };
        v.serialize(item)
    }
    fn end(self) -> Result<(), ShapeError> {
        match self {
            List::U64s(b) => b.append(true),
            List::Strs(b) => b.append(true),
        }
        Ok(())
    }
}

impl SerializeTuple for List<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), ShapeError> {
        SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), ShapeError> {
        SerializeSeq::end(self)
    }
}

/// One element of a list column.
enum Item<'a> {
    U64(&'a mut UInt64Builder),
    Str(&'a mut StringBuilder),
}

impl Item<'_> {
    fn num(self, n: Num) -> Result<(), ShapeError> {
        match (self, n.as_u64()) {
            (Item::U64(b), Some(v)) => b.append_value(v),
            _ => return shape("a number that is not an element of a list of numbers"),
        }
        Ok(())
    }
}

impl Serializer for Item<'_> {
    type Ok = ();
    type Error = ShapeError;
    type SerializeStruct = Impossible<(), ShapeError>;
    no_compounds!(all);
    no_serialize!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
    );
    fn serialize_struct(
        self,
        _n: &'static str,
        _l: usize,
    ) -> Result<Self::SerializeStruct, ShapeError> {
        shape("an object in a list")
    }
    numbers!(
        serialize_u8(u8) => U,
        serialize_u16(u16) => U,
        serialize_u32(u32) => U,
        serialize_u64(u64) => U,
    );
    fn serialize_str(self, v: &str) -> Result<(), ShapeError> {
        match self {
            Item::Str(b) => b.append_value(v),
            Item::U64(_) => return shape("a string in a list of numbers"),
        }
        Ok(())
    }
    fn serialize_none(self) -> Result<(), ShapeError> {
        match self {
            Item::U64(b) => b.append_null(),
            Item::Str(b) => b.append_null(),
        }
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), ShapeError> {
        self.serialize_none()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), ShapeError> {
        v.serialize(self)
    }
}

pub struct ParquetPrinter {
    dir: PathBuf,
    /// The JSON printer that counts the summary's totals and writes the summary record.
    json: JsonPrinter,
    summary: Rc<RefCell<Vec<u8>>>,
    source: String,
    tables: Vec<Table>,
    container: Container,
    err: Option<io::Error>,
}

/// The bytes the inner JSON printer writes (only the summary record).
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ParquetPrinter {
    /// Tables in `dir` (created if missing) for a run over `files`, as `container` files.
    pub fn create(
        dir: &Path,
        files: &[String],
        container: Container,
    ) -> io::Result<ParquetPrinter> {
        std::fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let summary = Rc::new(RefCell::new(Vec::new()));
        let mut tables = Vec::new();
        for (name, _, _) in TABLES.iter().filter(|t| t.0 != "causes") {
            tables.push(Table::create(dir, name, container)?);
        }
        Ok(ParquetPrinter {
            dir: dir.to_path_buf(),
            json: JsonPrinter::new(Box::new(Shared(summary.clone())), false, true),
            container,
            summary,
            source: files.join(","),
            tables,
            err: None,
        })
    }

    /// One record into table `table` (the first error is kept for `check`).
    fn push(&mut self, table: usize, record: &impl Serialize) {
        if let (Err(e), None) = (self.tables[table].push(&self.source, record), &self.err) {
            self.err = Some(e);
        }
    }
}

/// The tables records go to, by their place in [`TABLES`].
const CONNECTIONS: usize = 0;
const FINDINGS: usize = 1;
const EXCHANGES: usize = 2;
const STALLS: usize = 3;

/// The records come from the tracking workers as values (no `json_lines`) and are serialized
/// from the views of `record.rs` straight into the columns: no JSON in between.
impl Printer for ParquetPrinter {
    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        self.json.tally_finding(f);
        self.push(FINDINGS, &FindingRecord(f));
    }
    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        self.push(EXCHANGES, &ExchangeRecord(x));
    }
    fn stall(&mut self, s: &tcpwhy_detect::Stall) {
        self.push(STALLS, &StallRecord(s));
    }
    fn connection(&mut self, c: &tcpwhy_track::Connection) {
        self.json.tally_connection(c);
        self.push(CONNECTIONS, &ConnectionRecord(c));
    }
    fn check(&mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => self.json.check(),
        }
    }
    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        self.json.summary(r)?;
        let bytes = std::mem::take(&mut *self.summary.borrow_mut());
        let summary: Value =
            serde_json::from_slice(bytes.trim_ascii()).map_err(io::Error::other)?;
        let mut causes = Table::create(&self.dir, "causes", self.container)?;
        for c in self.json.causes() {
            causes.push(&self.source, &c)?;
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
