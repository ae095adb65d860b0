//! `tcpwhy analyze`: captures -> connections -> a report.

use crate::engine::{Engine, Sinks};
use crate::input::Inputs;
use crate::output::{self, Printer, Report, ToPrinter};
use crate::{AnalyzeArgs, Format};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::process::ExitCode;
use tcpwhy_capture::{Capture, ReadOptions};
use tcpwhy_detect::{Detectors, Output};
use tcpwhy_track::{Analyzer, Config, Frontend, Stats, TrackerStats};

/// Move the capture filter given as trailing words (tcpdump's way) from `files` to `filter`:
/// the first word is a capture (without `--interface`); from the first later word that names
/// no existing file on, the words are the filter, joined by spaces. A missing file whose name
/// looks like one (one word with a `/`, a capture extension) is left as a file, to fail as one
/// (libpcap would otherwise look it up as a host name).
pub fn filter_words(args: &mut AnalyzeArgs) -> io::Result<()> {
    let first = usize::from(args.interface.is_none());
    let looks_like_file = |w: &str| {
        w == "-"
            || !w.contains(char::is_whitespace) && w.contains('/')
            || [".pcap", ".pcapng", ".cap", ".gz", ".zst", ".dmp", ".ntar"]
                .iter()
                .any(|ext| w.ends_with(ext))
    };
    let Some(at) = args
        .files
        .iter()
        .enumerate()
        .skip(first)
        .position(|(_, w)| !looks_like_file(w) && std::fs::symlink_metadata(w).is_err())
        .map(|p| p + first)
    else {
        return Ok(());
    };
    let words = args.files.split_off(at).join(" ");
    if args.filter.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a capture filter twice: --filter and the words {:?} (no such files); give one",
                crate::printable(&words)
            ),
        ));
    }
    args.filter = Some(words);
    Ok(())
}

pub fn run(args: &AnalyzeArgs, color: crate::ColorChoice) -> io::Result<ExitCode> {
    if !(args.idle_timeout.is_finite() && args.idle_timeout > 0.0) {
        return Err(io::Error::other(
            "--idle-timeout must be a positive number of seconds",
        ));
    }
    check_ids("--disable", &args.disable)?;
    check_ids("--fail-on", &args.fail_on)?;
    if args.exchanges && matches!(args.format, Format::Text | Format::Html) && !args.quiet {
        eprintln!(
            "tcpwhy: warning: --exchanges adds records to --format json only; the {} report \
             summarises the exchanges without it",
            if args.format == Format::Html {
                "HTML"
            } else {
                "text"
            }
        );
    }
    if args.files.iter().any(|f| f == "-") && io::stdin().is_terminal() {
        eprintln!(
            "tcpwhy: standard input is a terminal, not a capture: pipe one in \
             (tcpdump -w - ... | tcpwhy analyze -) or name a file"
        );
        return Ok(ExitCode::from(2));
    }
    let cfg = Config {
        idle_timeout_ns: (args.idle_timeout * 1e9) as i64,
        max_connections: args.max_connections.max(1),
        ..Config::default()
    };
    if args.interface.is_some() && !args.files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--interface reads live traffic: it takes no capture file",
        ));
    }
    let filter = match args.filter.as_deref().map(tcpwhy_capture::Filter::new) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(why)) => {
            let expr = args.filter.as_deref().unwrap_or_default();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("capture filter {expr:?}: {why}"),
            ));
        }
    };
    if let Some(iface) = &args.interface {
        return run_live(iface, args, cfg, color, filter);
    }
    // The HTML report reads the capture twice (its graphs need packets the first pass dropped):
    // inputs that give their bytes once (stdin, pipes) are copied as they are read (crate::input).
    let threads = args.threads.map_or_else(default_threads, usize::from);
    let again = args.format == Format::Html || args.annotate.is_some();
    let options = read_options(args.files.len(), threads);
    // An input that cannot be opened or read as a capture is the run's error (the binary
    // prints it, a binding raises it).
    let (mut capture, inputs) = Inputs::open(&args.files, again, options, filter)
        .map_err(|e| io::Error::new(capture_error_kind(e.kind), e.to_string()))?;
    let keep = args.annotate.as_ref().map(|_| inputs.clone());
    let notes = output::annotate::Notes::default();
    let mut printer = printer(args, Some(inputs), &cfg, color)?;
    if args.annotate.is_some() {
        printer = Box::new(output::annotate::Annotating::new(printer, notes.clone()));
    }
    let history_secs = cfg.history_ns / 1_000_000_000;

    let mut progress = Progress::new(capture.size(), capture.compressed(), args.quiet);
    let run = if threads <= 1 {
        one_thread(&mut capture, &mut *printer, args, cfg, &mut progress)?
    } else {
        sharded(
            &mut capture,
            &mut *printer,
            args,
            &cfg,
            threads - 1,
            &mut progress,
        )?
    };
    progress.done();
    let Run {
        stats,
        tracker_stats,
        found,
        fatal,
    } = run;

    let mut warnings: Vec<String> = capture.warnings().iter().map(|w| w.to_string()).collect();
    let out_of_range = capture.stats().timestamps_out_of_range;
    if out_of_range > 0 {
        warnings.push(format!(
            "{out_of_range} packets were stamped before 1970 or after 2116 (a pcapng timestamp \
             or interface offset out of range): each was taken as stamped at the packet before it"
        ));
    }
    let malformed: u64 = stats.malformed.values().sum();
    if malformed > 0 {
        let kinds: Vec<String> = stats
            .malformed
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        // Every kind a header cut short: the capture's snapshot length.
        let cut = stats.malformed.keys().all(|k| k.ends_with("-truncated"));
        warnings.push(format!(
            "{malformed} packet{} could not be decoded and {} skipped ({}){}",
            if malformed == 1 { "" } else { "s" },
            if malformed == 1 { "was" } else { "were" },
            kinds.join(", "),
            match (cut, stats.tcp_packets) {
                (true, 0) =>
                    ": the capture's snapshot length cut every TCP packet before its \
                              header ended, so nothing could be analysed; capture whole packets \
                              (tcpdump -s 0)",
                (true, _) =>
                    ": the capture's snapshot length cut their headers (tcpdump -s 0 \
                              keeps whole packets)",
                _ => "",
            }
        ));
    }
    let containers = capture.stats();
    let inputs = args.files.len().max(1);
    if containers.timestamps_invalid > 0 {
        let n = containers.timestamps_invalid;
        warnings.push(format!(
            "{n} packet{} a timestamp whose fraction of a second is out of range (a second or \
             more): {} taken as stamped at its whole second, or at the packet \
             before it when that is later, so times measured from {} are known only to the \
             second",
            if n == 1 { " had" } else { "s had" },
            if n == 1 { "it was" } else { "each was" },
            if n == 1 { "it" } else { "them" },
        ));
    }
    // Steps back under a millisecond are a capture on several CPUs interleaving its
    // timestamps (microseconds, even nanoseconds, in the lab's veth captures): counted in the
    // summary, shortening no interval that matters.
    if containers.backwards_max_ns >= 1_000_000 {
        let n = containers.timestamps_backwards;
        let them = if n == 1 { "it" } else { "them" };
        // Every input sorted (one file, or several each sorted): nothing stepped back.
        let what = if containers.sorted_inputs as usize >= inputs {
            format!(
                "{} read whole and analysed in time order, as `reordercap` would write {} \
                 (frame numbers are still {})",
                if inputs == 1 { "it was" } else { "they were" },
                if inputs == 1 { "it" } else { "them" },
                if inputs == 1 {
                    "the file's"
                } else {
                    "those of the merged order"
                },
            )
        } else {
            format!(
                "{}capture time is taken as never stepping back, so the intervals around {them} \
                 are shortened, down to 0; `reordercap` sorts a file by time",
                if containers.sorted_inputs > 0 {
                    format!(
                        "{} of the {inputs} inputs were read whole and analysed in time order; \
                         in the others ",
                        containers.sorted_inputs
                    )
                } else {
                    format!(
                        "a file over {} MiB, or a pipe, is not sorted: ",
                        tcpwhy_capture::SORT_MAX_BYTES >> 20
                    )
                }
            )
        };
        warnings.push(format!(
            "{n} packet{} stamped earlier than the packet before {them} in the same file (by up to \
             {}): the file is not in time order (merged without sorting, shuffled, copies \
             appended, or the clock stepped back); {what}",
            if n == 1 { " was" } else { "s were" },
            step(containers.backwards_max_ns),
        ));
    }
    for (lt, n) in &stats.skipped_link_types {
        let name = tcpwhy_wire::LinkType(*lt).name().unwrap_or("unknown");
        let s = if *n == 1 { "" } else { "s" };
        warnings.push(format!(
            "{n} packet{s} of link type {name} ({lt}) skipped: not supported"
        ));
    }
    if tracker_stats.evicted > 0 {
        warnings.push(format!(
            "{} connections were finished early to stay under --max-connections {}",
            tracker_stats.evicted, args.max_connections
        ));
    }
    if tracker_stats.history_forgotten > 0 {
        warnings.push(format!(
            "{} finished connections were forgotten before their {} s to keep the history of \
             4-tuples under --max-connections {}: a later SYN on one of their 4-tuples finds no \
             predecessor to compare with (a stale-state collision there would go unnamed)",
            tracker_stats.history_forgotten, history_secs, args.max_connections
        ));
    }
    let report = Report {
        files: &args.files,
        stats: &stats,
        tracker: &tracker_stats,
        containers: &capture.stats(),
        warnings: &warnings,
        filter: args.filter.as_deref(),
        filtered_out: capture.filtered_out(),
        error: fatal.as_ref().map(|e| e.to_string()),
    };
    printer.summary(&report)?;
    for w in warnings.iter().filter(|_| !args.quiet) {
        eprintln!("tcpwhy: warning: {}", crate::printable(w));
    }
    if let (Some(path), Some(inputs)) = (&args.annotate, &keep) {
        let notes = notes.lock().map(|n| n.clone()).unwrap_or_default();
        let written = output::annotate::write(std::path::Path::new(path), inputs, &notes);
        match written {
            Ok(n) if !args.quiet => eprintln!(
                "tcpwhy: wrote {n} packets to {} with comments on {} evidence frames \
                 (Wireshark: frame.comment contains \"tcpwhy\")",
                crate::printable(path),
                notes.len()
            ),
            Ok(_) => {}
            Err(e) => {
                eprintln!(
                    "tcpwhy: --annotate {}: {}",
                    crate::printable(path),
                    crate::printable(&e.to_string())
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    if let Some(e) = fatal {
        eprintln!("tcpwhy: {}", crate::printable(&e.to_string()));
        return Ok(ExitCode::from(2));
    }
    Ok(fail_on(args, &found))
}

/// What a run over the capture produced, whichever way the work was shared.
struct Run {
    stats: Stats,
    tracker_stats: TrackerStats,
    found: BTreeMap<&'static str, u64>,
    fatal: Option<tcpwhy_capture::CaptureError>,
}

/// Threads by default: a tracking worker per CPU, and the reading thread beside them (it
/// waits for the workers part of the time: on 2 cores, 2 workers beat 1 by 30% on short
/// connections with a finding each, and match it on the real-traffic benchmark). One CPU:
/// everything on one thread.
fn default_threads() -> usize {
    match std::thread::available_parallelism().map_or(1, |n| n.get()) {
        1 => 1,
        n => n + 1,
    }
}

/// Inputs are read (and decompressed) each on a thread of its own when there are cores to
/// spare for them: beyond the reading thread and one worker (only the reading thread with
/// `--threads 1`). On 2 cores that is `--threads 1` with one input; with the default threads
/// both cores are already busy, and a fourth thread only adds switching (measured: README,
/// compressed input).
fn read_options(inputs: usize, threads: usize) -> ReadOptions {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = if threads <= 1 { 1 } else { 2 };
    ReadOptions {
        read_ahead: inputs <= cores.saturating_sub(busy),
        ..ReadOptions::default()
    }
}

/// Everything on this thread: read, decode, track, detect, print (tcpwhy_engine).
fn one_thread(
    capture: &mut Capture,
    printer: &mut dyn Printer,
    args: &AnalyzeArgs,
    cfg: Config,
    progress: &mut Progress,
) -> io::Result<Run> {
    let mut to = ToPrinter {
        printer,
        ids: Default::default(),
    };
    let run = tcpwhy_engine::detect(capture, cfg, &args.disable, &mut to, &mut |n, c| {
        progress.tick(n, c.bytes_read());
        Ok(())
    })?;
    Ok(Run {
        stats: run.stats,
        tracker_stats: run.tracker,
        found: std::mem::take(&mut to.ids),
        fatal: run.error,
    })
}

/// This thread reads and decodes; `workers` threads track and detect (crate::engine).
fn sharded(
    capture: &mut Capture,
    printer: &mut dyn Printer,
    args: &AnalyzeArgs,
    cfg: &Config,
    workers: usize,
    progress: &mut Progress,
) -> io::Result<Run> {
    let mut front = Frontend::new();
    let mut seg = tcpwhy_wire::TcpSegment::EMPTY;
    let mut engine = Engine::start(
        workers,
        cfg,
        &args.disable,
        printer.json_lines(),
        printer.briefs(),
    )?;
    let mut sinks = Sinks::new(printer);
    let mut fatal = None;
    let mut n = 0u64;
    loop {
        match capture.next() {
            Ok(Some(p)) => {
                if let Some(wire_len) = front.frame(p.ts_ns, p.link, p.data, p.orig_len, &mut seg) {
                    engine.segment(&seg, p.frame, p.ts_ns, wire_len, &mut sinks)?;
                }
                n += 1;
                if n % 65_536 == 0 {
                    progress.tick(n, capture.bytes_read());
                }
            }
            Ok(None) => break,
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
    }
    let tracker_stats = engine.finish(&mut sinks)?;
    Ok(Run {
        stats: front.stats().clone(),
        tracker_stats,
        found: std::mem::take(&mut sinks.ids),
        fatal,
    })
}

/// A finding id the user typed must exist: a misspelt `--disable` or `--fail-on` would
/// otherwise do nothing and say nothing.
fn check_ids(flag: &str, ids: &[String]) -> io::Result<()> {
    let known: Vec<&str> = tcpwhy_detect::infos().iter().map(|i| i.id).collect();
    match ids.iter().find(|id| !known.contains(&id.as_str())) {
        None => Ok(()),
        Some(bad) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{flag}: no finding {:?}; the ids are: {}",
                crate::printable(bad),
                known.join(", ")
            ),
        )),
    }
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

/// A progress bar on standard error for inputs that take more than a second, only when standard
/// error is a terminal and not `--quiet`. Percentages only for uncompressed files (a gzip or
/// zstd file's decompressed size is unknown).
struct Progress {
    on: bool,
    total: Option<u64>,
    start: std::time::Instant,
    last: std::time::Instant,
    drawn: bool,
}

impl Progress {
    /// `size`: the inputs' size together (`Capture::size`, from the files the reader opened;
    /// None for a pipe), `compressed`: some input is (its size on disk then says nothing of
    /// the bytes to read).
    fn new(size: Option<u64>, compressed: bool, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let on = !quiet && io::stderr().is_terminal();
        let total = size.filter(|_| !compressed);
        let now = std::time::Instant::now();
        Progress {
            on,
            total,
            start: now,
            last: now,
            drawn: false,
        }
    }

    fn tick(&mut self, packets: u64, bytes: u64) {
        if !self.on {
            return;
        }
        let now = std::time::Instant::now();
        let elapsed = now.duration_since(self.start).as_secs_f64();
        if elapsed < 1.0 || now.duration_since(self.last).as_millis() < 200 {
            return;
        }
        self.last = now;
        let rate = packets as f64 / elapsed;
        let mb = bytes as f64 / 1e6;
        let line = match self.total {
            Some(t) if t > 0 => {
                let frac = (bytes as f64 / t as f64).clamp(0.0, 1.0);
                let filled = (frac * 30.0) as usize;
                format!(
                    "[{}{}] {:>3.0}%  {mb:.0}/{:.0} MB  {:.2} M packets/s",
                    "#".repeat(filled),
                    " ".repeat(30 - filled),
                    frac * 100.0,
                    t as f64 / 1e6,
                    rate / 1e6
                )
            }
            _ => format!("{mb:.0} MB read  {:.2} M packets/s", rate / 1e6),
        };
        eprint!("\r\x1b[2K{line}");
        self.drawn = true;
    }

    fn done(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            self.drawn = false;
        }
    }
}

/// The printer `args` ask for; `inputs`: the capture's, for a second pass (`None`: live).
fn printer(
    args: &AnalyzeArgs,
    inputs: Option<Inputs>,
    cfg: &Config,
    color: crate::ColorChoice,
) -> io::Result<Box<dyn Printer>> {
    let live = inputs.is_none();
    // Standard output, or the file -o names (for Parquet, -o names a directory).
    let out = || -> io::Result<Box<dyn Write>> {
        Ok(match &args.output {
            Some(path) => {
                Box::new(BufWriter::new(File::create(path).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot write {path}: {e}"))
                })?))
            }
            None => Box::new(BufWriter::with_capacity(64 * 1024, io::stdout().lock())),
        })
    };
    Ok(match args.format {
        Format::Json => Box::new(output::json::JsonPrinter::new(out()?, live, args.exchanges)),
        Format::Parquet | Format::Arrow => {
            let container = match args.format {
                Format::Arrow => output::parquet::Container::Arrow,
                _ => output::parquet::Container::Parquet,
            };
            let Some(dir) = &args.output else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "--format {} writes a directory of tables: name it with -o DIR",
                        container.name()
                    ),
                ));
            };
            let files: Vec<String> = match &args.interface {
                Some(i) => vec![format!("live:{i}")],
                None => args.files.clone(),
            };
            Box::new(output::parquet::ParquetPrinter::create(
                std::path::Path::new(dir),
                &files,
                container,
            )?)
        }
        Format::Html => match inputs {
            None => {
                return Err(io::Error::other(
                    "--format html needs capture files (its graphs read them twice); use text or json with --interface",
                ))
            }
            Some(inputs) => Box::new(output::html::HtmlPrinter::new(out()?, inputs, cfg.clone())),
        },
        Format::Text => {
            let sel = if !args.connection.is_empty() {
                output::text::DetailSel::Ids(args.connection.iter().copied().collect())
            } else if args.details {
                output::text::DetailSel::WithFindings
            } else {
                output::text::DetailSel::None
            };
            let style = if args.output.is_some() {
                output::text::Style {
                    color: color.enabled(false),
                    width: None,
                }
            } else {
                output::text::Style::for_stdout(color)
            };
            Box::new(output::text::TextPrinter::new(
                out()?,
                args.top,
                live,
                sel,
                style,
            ))
        }
    })
}

/// `--interface`: capture live (AF_PACKET, the lab's capture module) until Ctrl-C.
fn run_live(
    iface: &str,
    args: &AnalyzeArgs,
    cfg: Config,
    color: crate::ColorChoice,
    mut filter: Option<tcpwhy_capture::Filter>,
) -> io::Result<ExitCode> {
    let mut cap = match tcpwhy_capture::live::LiveCapture::open(Some(iface)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpwhy: --interface {iface}: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let stop = interrupt_flag()?;
    let mut printer = printer(args, None, &cfg, color)?;
    let mut analyzer = Analyzer::new(cfg);
    let mut frame = 0u64;
    let mut filtered_out = 0u64;
    eprintln!("tcpwhy: capturing on {iface}; Ctrl-C stops and prints the summary");
    let mut to = ToPrinter {
        printer: &mut *printer,
        ids: Default::default(),
    };
    let mut det = Detectors::new(&args.disable, &mut to);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let Some(p) = cap.next()? else {
            // Nothing arrived for 50 ms: the socket's queue was empty, so every frame still
            // to come is stamped after now (less the few microseconds between the kernel's
            // stamp and the queue, hence the margin). Capture time moves to the wall clock
            // and connections whose linger ended are printed now, not at the next packet.
            analyzer.advance_to(wall_clock_ns() - QUIET_MARGIN_NS, &mut det);
            det.check()?;
            continue;
        };
        {
            frame += 1;
            let selected = match &mut filter {
                None => true,
                Some(f) => f.matches(p.link, p.data).map_err(io::Error::other)?,
            };
            filtered_out += u64::from(!selected);
            // Every frame tells the time, also those the filter drops and those without TCP:
            // on a wire busy with other traffic the connections still finish on time.
            analyzer.advance_to(p.ts_ns, &mut det);
            if selected {
                analyzer.frame(frame, p.ts_ns, p.link, p.data, p.orig_len, &mut det);
            }
        }
        det.check()?;
    }
    analyzer.finish(&mut det);
    let half_open = det.take_half_open();
    drop(det);
    for f in half_open.iter().flat_map(|h| h.findings()) {
        to.finding(&f);
    }
    let found = std::mem::take(&mut to.ids);
    let tracker_stats = analyzer.tracker().stats().clone();
    let files = [format!("live:{iface}")];
    let report = Report {
        files: &files,
        stats: analyzer.stats(),
        tracker: &tracker_stats,
        containers: &Default::default(),
        warnings: &[],
        filter: args.filter.as_deref(),
        filtered_out,
        error: None,
    };
    printer.summary(&report)?;
    Ok(fail_on(args, &found))
}

/// How far behind the wall clock a quiet live capture sets capture time.
const QUIET_MARGIN_NS: i64 = 10_000_000;

/// Nanoseconds since the Unix epoch: the clock the kernel stamps live frames with.
fn wall_clock_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The I/O error kind a capture error is reported as.
fn capture_error_kind(kind: tcpwhy_capture::ErrorKind) -> io::ErrorKind {
    use tcpwhy_capture::ErrorKind as K;
    match kind {
        K::Open => io::ErrorKind::Other,
        K::Format | K::Corrupt | K::Filter => io::ErrorKind::InvalidData,
        K::Truncated => io::ErrorKind::UnexpectedEof,
        K::Read | K::Copy => io::ErrorKind::Other,
    }
}

/// A flag set by SIGINT or SIGTERM: live analysis ends at the next packet or timeout and
/// prints its summary.
fn interrupt_flag() -> io::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// A step in capture time for a warning: microseconds below a millisecond, then
/// milliseconds, then seconds.
fn step(ns: i64) -> String {
    if ns < 1_000_000 {
        format!("{} us", ns / 1000)
    } else if ns < 10_000_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} s", ns as f64 / 1e9)
    }
}
