//! `--format parquet` holds what `--format json --exchanges` holds: for every fixture, the lab's
//! captures and the real-world corpus (when beside the repository), each table has one row per
//! JSON record of its type, in the same order, every cell equal to the JSON value its column
//! names (times: the `*_ns` integers; a finding's details: the same JSON), every JSON field
//! covered by a column, and summary.json is the JSON summary record. Read back with the
//! parquet crate's Arrow reader. `--format arrow` writes the same tables, column for column
//! and cell for cell, as Arrow IPC files (read back with arrow-ipc's reader).

use crate::common;
use crate::common::{tcpwhy, TempDir};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A column as the reader gives it back: name, the JSON pointer it says it holds, whether it
/// is a time, and its cells as JSON values (times as their nanoseconds).
struct Column {
    name: String,
    pointer: String,
    time: bool,
    json: bool,
    cells: Vec<Value>,
}

/// Every column of `file`: a `.parquet` file read with the parquet crate's Arrow reader, an
/// `.arrow` file with arrow-ipc's.
fn columns(file: &Path) -> Vec<Column> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, TimestampNanosecondType, UInt16Type, UInt64Type};
    use arrow_array::Array;
    use arrow_array::RecordBatch;
    use arrow_schema::DataType;
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let (schema, batches): (arrow_schema::SchemaRef, Vec<RecordBatch>) =
        if file.extension().is_some_and(|e| e == "arrow") {
            let r = arrow_ipc::reader::FileReader::try_new(f, None).expect("an Arrow IPC file");
            let schema = r.schema();
            (schema, r.map(|b| b.expect("a batch")).collect())
        } else {
            let builder = ParquetRecordBatchReaderBuilder::try_new(f).expect("a Parquet file");
            let schema = builder.schema().clone();
            let batches = builder.build().expect("a reader");
            (schema, batches.map(|b| b.expect("a batch")).collect())
        };
    let mut cols: Vec<Column> = schema
        .fields()
        .iter()
        .map(|f| Column {
            name: f.name().clone(),
            pointer: f
                .metadata()
                .get("json_pointer")
                .cloned()
                .unwrap_or_default(),
            time: matches!(f.data_type(), DataType::Timestamp(..)),
            json: f.name() == "details",
            cells: Vec::new(),
        })
        .collect();
    fn cell(a: &dyn Array, i: usize) -> Value {
        if a.is_null(i) {
            return Value::Null;
        }
        match a.data_type() {
            DataType::UInt64 => Value::from(a.as_primitive::<UInt64Type>().value(i)),
            DataType::UInt16 => Value::from(a.as_primitive::<UInt16Type>().value(i)),
            DataType::Float64 => Value::from(a.as_primitive::<Float64Type>().value(i)),
            DataType::Timestamp(..) => {
                Value::from(a.as_primitive::<TimestampNanosecondType>().value(i))
            }
            DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
            DataType::Boolean => Value::from(a.as_boolean().value(i)),
            DataType::List(_) => {
                let inner = a.as_list::<i32>().value(i);
                Value::Array((0..inner.len()).map(|j| cell(inner.as_ref(), j)).collect())
            }
            other => panic!("unexpected column type {other}"),
        }
    }
    for batch in batches {
        for (c, a) in cols.iter_mut().zip(batch.columns()) {
            c.cells.extend((0..a.len()).map(|i| cell(a.as_ref(), i)));
        }
    }
    cols
}

/// The JSON leaves of `v` as pointers ("/c2s/ack_rtt_ms/min").
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                leaves(x, format!("{at}/{k}"), out);
            }
        }
        _ => out.push(at),
    }
}

/// `tcpwhy analyze --format FORMAT -o OUT FILE` into an emptied `out`, which it returns;
/// the exit code must be `want` (the JSON run's).
fn tables(out: &Path, format: &str, file: &str, want: Option<i32>) -> std::path::PathBuf {
    let _ = std::fs::remove_dir_all(out);
    let o = tcpwhy(&[
        "analyze",
        "--format",
        format,
        "-q",
        "-o",
        &out.to_string_lossy(),
        file,
    ]);
    assert_eq!(
        o.status.code(),
        want,
        "{file}: --format {format}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_path_buf()
}

#[test]
fn parquet_tables_hold_what_json_lines_hold() {
    let dir = TempDir::new("parquet");
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for file in common::all_captures() {
        let json = tcpwhy(&["analyze", "--format", "json", "--exchanges", "-q", &file]);
        if json.status.code() == Some(2) && json.stdout.is_empty() {
            continue; // a fixture of a bad file
        }
        let out = tables(&dir.join("t"), "parquet", &file, json.status.code());
        let records: Vec<Value> = String::from_utf8_lossy(&json.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        let summary = records.last().cloned().unwrap_or_default();
        let written: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
        )
        .expect("JSON");
        assert_eq!(written, summary, "{file}: summary.json");
        for (table, kind) in [
            ("connections", "connection"),
            ("findings", "finding"),
            ("exchanges", "exchange"),
            ("stalls", "stall"),
            ("causes", "cause"),
        ] {
            let want: Vec<&Value> = if kind == "cause" {
                summary["causes"]
                    .as_array()
                    .map(|a| a.iter().collect())
                    .unwrap_or_default()
            } else {
                records.iter().filter(|r| r["type"] == kind).collect()
            };
            let cols = columns(&out.join(format!("{table}.parquet")));
            let n = cols.first().map_or(0, |c| c.cells.len());
            assert_eq!(n, want.len(), "{file}: {table} rows");
            assert_eq!(cols[0].name, "source");
            for (r, rec) in want.iter().enumerate() {
                // Every field of the JSON record has its column (times once, as *_ns).
                let mut all = Vec::new();
                leaves(rec, String::new(), &mut all);
                for leaf in all {
                    let twin = matches!(leaf.as_str(), "/type" | "/version" | "/start" | "/end");
                    // A null object (no handshake) is its columns, all null.
                    let covered = cols.iter().any(|c| {
                        !c.pointer.is_empty()
                            && (leaf == c.pointer
                                || leaf.starts_with(&format!("{}/", c.pointer))
                                || c.pointer.starts_with(&format!("{leaf}/")))
                    });
                    assert!(twin || covered, "{file}: {table}: no column for {leaf}");
                }
                for c in &cols {
                    let cell = &c.cells[r];
                    if c.pointer.is_empty() {
                        assert_eq!(*cell, Value::from(file.as_str()), "{table}.source");
                        continue;
                    }
                    let v = rec.pointer(&c.pointer).cloned().unwrap_or(Value::Null);
                    let same = match cell {
                        Value::String(s) if c.json => {
                            serde_json::from_str::<Value>(s).ok().as_ref() == Some(&v)
                        }
                        Value::Number(_) if c.time => cell.as_i64() == v.as_i64(),
                        _ => *cell == v || cell.as_f64().is_some() && cell.as_f64() == v.as_f64(),
                    };
                    assert!(same, "{file}: {table}.{}: parquet {cell}, JSON {v}", c.name);
                }
            }
            *checked.entry(table.to_string()).or_default() += n;
        }
        // The same tables as Arrow IPC files.
        let arrow = tables(&dir.join("a"), "arrow", &file, json.status.code());
        for table in ["connections", "findings", "exchanges", "stalls", "causes"] {
            let p = columns(&out.join(format!("{table}.parquet")));
            let a = columns(&arrow.join(format!("{table}.arrow")));
            assert_eq!(a.len(), p.len(), "{file}: {table}: arrow columns");
            for (a, p) in a.iter().zip(&p) {
                assert_eq!(
                    (&a.name, &a.pointer),
                    (&p.name, &p.pointer),
                    "{file}: {table}"
                );
                assert_eq!(
                    a.cells, p.cells,
                    "{file}: {table}.{}: arrow and parquet",
                    a.name
                );
            }
        }
        let summary_arrow = std::fs::read(arrow.join("summary.json")).expect("summary.json");
        assert_eq!(
            summary_arrow,
            std::fs::read(out.join("summary.json")).expect("summary")
        );
    }
    eprintln!("rows checked: {checked:?}");
    for t in ["connections", "findings", "exchanges", "stalls", "causes"] {
        assert!(checked.get(t).is_some_and(|n| *n > 0), "no {t} row checked");
    }
}

#[test]
fn parquet_and_arrow_need_a_directory() {
    let f = common::fixture("sample.pcap");
    for format in ["parquet", "arrow"] {
        let o = tcpwhy(&["analyze", "--format", format, &f]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--format {format} writes a directory")),
            "{err}"
        );
        assert!(err.contains("name it with -o DIR"), "{err}");
    }
}

/// docs/parquet.md lists every column of every table, in its table's paragraph.
#[test]
fn the_parquet_doc_names_every_column() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/parquet.md")).expect("docs/parquet.md");
    let dir = TempDir::new("parquet-doc");
    let out = dir.join("t");
    let f = root.join("fixtures/lab/tail-loss-broken.pcap");
    let o = tcpwhy(&[
        "analyze",
        "-q",
        "--format",
        "parquet",
        "-o",
        &out.to_string_lossy(),
        &f.to_string_lossy(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    for table in ["connections", "findings", "exchanges", "stalls", "causes"] {
        let start = doc
            .find(&format!("`{table}`: "))
            .unwrap_or_else(|| panic!("no paragraph for {table}"));
        let para = &doc[start..start + doc[start..].find("\n\n").unwrap_or(doc.len() - start)];
        for c in columns(&out.join(format!("{table}.parquet"))) {
            let name = c
                .name
                .strip_prefix("c2s_")
                .or_else(|| c.name.strip_prefix("s2c_"))
                .unwrap_or(&c.name);
            assert!(
                para.contains(&format!("`{name}`")),
                "{table}.{} undocumented",
                c.name
            );
        }
    }
}
