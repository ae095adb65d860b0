//! `tcpwhy analyze`: captures -> connections -> a report.

use crate::output::{self, Printer, Report, ToPrinter};
use crate::{AnalyzeArgs, Format};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use tcpwhy_capture::Capture;
use tcpwhy_detect::Detectors;
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
    if let Some(iface) = &args.interface {
        return run_live(iface, args, cfg);
    }
    // The HTML report reads the capture twice (its graphs need packets the first pass dropped):
    // standard input is kept in a temporary file for that.
    let spooled = if args.format == Format::Html && args.files.iter().any(|f| f == "-") {
        Some(Spool::stdin()?)
    } else {
        None
    };
    let files: Vec<String> = args
        .files
        .iter()
        .map(|f| match (&spooled, f.as_str()) {
            (Some(s), "-") => s.path.display().to_string(),
            _ => f.clone(),
        })
        .collect();
    let mut capture = match Capture::open(&files) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut printer = printer(args, false, &files, &cfg)?;

    let mut analyzer = Analyzer::new(cfg);
    let mut fatal = None;
    let mut to = ToPrinter {
        printer: &mut *printer,
        ids: Default::default(),
    };
    let mut det = Detectors::new(&args.disable, &mut to);
    loop {
        match capture.next() {
            Ok(Some(p)) => {
                analyzer.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, &mut det);
            }
            Ok(None) => break,
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
        det.check()?;
    }
    analyzer.finish(&mut det);
    det.check()?;
    drop(det);
    let found = std::mem::take(&mut to.ids);

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
    Ok(fail_on(args, &found))
}

/// `--fail-on ID[,ID]`: exit 1 when any of them was found (for CI gates).
fn fail_on(args: &AnalyzeArgs, found: &std::collections::BTreeMap<&'static str, u64>) -> ExitCode {
    let hit: Vec<String> = args
        .fail_on
        .iter()
        .filter_map(|id| found.get(id.as_str()).map(|n| format!("{id} ({n})")))
        .collect();
    if hit.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("tcpwhy: --fail-on: found {}", hit.join(", "));
        ExitCode::from(1)
    }
}

/// Standard input copied to a temporary file, removed on drop.
struct Spool {
    path: std::path::PathBuf,
}

impl Spool {
    fn stdin() -> io::Result<Spool> {
        let path = std::env::temp_dir().join(format!("tcpwhy-stdin-{}.cap", std::process::id()));
        let spool = Spool { path };
        let mut f = File::create(&spool.path)?;
        io::copy(&mut io::stdin().lock(), &mut f)?;
        Ok(spool)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn printer(
    args: &AnalyzeArgs,
    live: bool,
    files: &[String],
    cfg: &Config,
) -> io::Result<Box<dyn Printer>> {
    let out: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(BufWriter::new(File::create(path).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot write {path}: {e}"))
            })?))
        }
        None => Box::new(BufWriter::with_capacity(64 * 1024, io::stdout().lock())),
    };
    Ok(match args.format {
        Format::Json => Box::new(output::json::JsonPrinter::new(out, live, args.exchanges)),
        Format::Html if live => {
            return Err(io::Error::other(
                "--format html needs capture files (its graphs read them twice); use text or json with --interface",
            ))
        }
        Format::Html => Box::new(output::html::HtmlPrinter::new(
            out,
            files.to_vec(),
            cfg.clone(),
        )),
        Format::Text => {
            let sel = if !args.connection.is_empty() {
                output::text::DetailSel::Ids(args.connection.iter().copied().collect())
            } else if args.details {
                output::text::DetailSel::WithFindings
            } else {
                output::text::DetailSel::None
            };
            Box::new(output::text::TextPrinter::new(out, args.top, live, sel))
        }
    })
}

/// `--interface`: capture live (AF_PACKET, the lab's capture module) until Ctrl-C.
fn run_live(iface: &str, args: &AnalyzeArgs, cfg: Config) -> io::Result<ExitCode> {
    let mut cap = match tcpwhy_lab::capture::LiveCapture::open(Some(iface)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpwhy: --interface {iface}: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let stop = tcpwhy_lab::os::interrupt_flag()?;
    let mut printer = printer(args, true, &[], &cfg)?;
    let mut analyzer = Analyzer::new(cfg);
    let mut frame = 0u64;
    eprintln!("tcpwhy: capturing on {iface}; Ctrl-C stops and prints the summary");
    let mut to = ToPrinter {
        printer: &mut *printer,
        ids: Default::default(),
    };
    let mut det = Detectors::new(&args.disable, &mut to);
    while !tcpwhy_lab::os::interrupted(&stop) {
        if let Some(p) = cap.next()? {
            frame += 1;
            analyzer.frame(frame, p.ts_ns, p.link, p.data, p.orig_len, &mut det);
        }
        det.check()?;
    }
    analyzer.finish(&mut det);
    drop(det);
    let found = std::mem::take(&mut to.ids);
    let tracker_stats = analyzer.tracker().stats().clone();
    let files = [format!("live:{iface}")];
    let report = Report {
        files: &files,
        stats: analyzer.stats(),
        tracker: &tracker_stats,
        containers: &Default::default(),
        warnings: &[],
        error: None,
    };
    printer.summary(&report)?;
    Ok(fail_on(args, &found))
}
