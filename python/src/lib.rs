//! The native half of the `tcpwhy` Python package: the engine of `tcpwhy analyze`, run with
//! the same arguments the command line builds, writing its tables (as Arrow IPC files) for the
//! Python half (tcpwhy/__init__.py) to read as pyarrow Tables. No second implementation: a run here is
//! `tcpwhy::analyze::run`, as for the binary.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use std::io;
use std::process::ExitCode;
use tcpwhy::{AnalyzeArgs, ColorChoice, Format};

/// Analyse the captures `paths` (read as one capture, merged by time) into Arrow IPC tables in
/// `out_dir`, as `tcpwhy analyze --format arrow -o OUT_DIR PATHS --filter FILTER ...` does
/// (the tables of `--format parquet`, read back without decoding).
/// Releases the GIL while it runs. Errors are raised with the command line's message:
/// ValueError for a bad argument, filter or capture, OSError for the rest.
#[pyfunction]
#[pyo3(signature = (paths, out_dir, filter=None, disable=Vec::new(), idle_timeout=300.0, max_connections=1_000_000, threads=None))]
#[allow(clippy::too_many_arguments)]
fn analyze_to_arrow(
    py: Python<'_>,
    paths: Vec<String>,
    out_dir: String,
    filter: Option<String>,
    disable: Vec<String>,
    idle_timeout: f64,
    max_connections: usize,
    threads: Option<u16>,
) -> PyResult<bool> {
    if paths.is_empty() {
        return Err(PyValueError::new_err("no capture given"));
    }
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be 1 or more"));
    }
    let args = AnalyzeArgs {
        files: paths,
        filter,
        interface: None,
        format: Format::Arrow,
        output: Some(out_dir),
        annotate: None,
        max_connections,
        idle_timeout,
        disable,
        fail_on: Vec::new(),
        exchanges: true,
        connection: Vec::new(),
        quiet: true,
        details: false,
        threads,
        top: 10,
    };
    match py.detach(|| tcpwhy::analyze::run(&args, ColorChoice::Never)) {
        // Exit code 2 with tables written: reading stopped at an error, whose message the
        // summary carries (the Python half raises it with the results so far).
        Ok(code) => Ok(code == ExitCode::SUCCESS),
        Err(e) => Err(match e.kind() {
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => {
                PyValueError::new_err(e.to_string())
            }
            _ => PyOSError::new_err(e.to_string()),
        }),
    }
}

/// `tcpwhy explain [ID]`'s text: every finding id with its title, or one id's documentation.
#[pyfunction]
#[pyo3(signature = (id=None))]
fn explain(id: Option<&str>) -> PyResult<String> {
    tcpwhy::explain_text(id, false).ok_or_else(|| {
        PyValueError::new_err(format!(
            "no finding {:?}; tcpwhy.explain() lists them",
            id.unwrap_or_default()
        ))
    })
}

#[pymodule]
fn _tcpwhy(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze_to_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add("VERSION", tcpwhy::VERSION)?;
    Ok(())
}
