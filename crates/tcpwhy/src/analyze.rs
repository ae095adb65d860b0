//! `tcpwhy analyze`: captures -> connections -> a report.

use crate::output::{self, Printer, Report};
use crate::{AnalyzeArgs, Format};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use tcpwhy_capture::Capture;
use tcpwhy_track::{Analyzer, Config};

pub fn run(args: &AnalyzeArgs) -> io::Result<ExitCode> {
    if !(args.idle_timeout.is_finite() && args.idle_timeout > 0.0) {
        return Err(io::Error::other(
            "--idle-timeout must be a positive number of seconds",
        ));
    }
    let cfg = Config {
        idle_timeout_ns: (args.idle_timeout * 1e9) as i64,
        max_connections: args.max_connections.max(1),
        ..Config::default()
    };
    let mut capture = match Capture::open(&args.files) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let out: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(BufWriter::new(File::create(path).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot write {path}: {e}"))
            })?))
        }
        None => Box::new(BufWriter::with_capacity(64 * 1024, io::stdout().lock())),
    };
    let mut printer: Box<dyn Printer> = match args.format {
        Format::Json => Box::new(output::json::JsonPrinter::new(out)),
        Format::Text => Box::new(output::text::TextPrinter::new(out, args.top)),
    };

    let mut analyzer = Analyzer::new(cfg);
    let mut fatal = None;
    loop {
        match capture.next() {
            Ok(Some(p)) => {
                let mut sink = |c: &tcpwhy_track::Connection| printer.connection(c);
                analyzer.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, &mut sink);
            }
            Ok(None) => break,
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
        printer.check()?;
    }
    let mut sink = |c: &tcpwhy_track::Connection| printer.connection(c);
    analyzer.finish(&mut sink);
    printer.check()?;

    let mut warnings: Vec<String> = capture.warnings().iter().map(|w| w.to_string()).collect();
    let tracker_stats = analyzer.tracker().stats().clone();
    if tracker_stats.evicted > 0 {
        warnings.push(format!(
            "{} connections were finished early to stay under --max-connections {}",
            tracker_stats.evicted, args.max_connections
        ));
    }
    let report = Report {
        files: &args.files,
        stats: analyzer.stats(),
        tracker: &tracker_stats,
        containers: &capture.stats(),
        warnings: &warnings,
        error: fatal.as_ref().map(|e| e.to_string()),
    };
    printer.summary(&report)?;
    for w in &warnings {
        eprintln!("tcpwhy: warning: {w}");
    }
    if let Some(e) = fatal {
        eprintln!("tcpwhy: {e}");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
