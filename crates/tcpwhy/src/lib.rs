//! `tcpwhy` as a library: `tcpwhy analyze` (its arguments, the run, the printers), `tcpwhy host`,
//! `tcpwhy lab` and `tcpwhy watch`, for the binary and for bindings (python/) that run the same engine.
//!
//! Architecture invariant: a run is `analyze::run(&AnalyzeArgs, ColorChoice)`: the binary and
//! every binding build the same arguments, so they cannot drift apart.
#![forbid(unsafe_code)]

pub mod analyze;
mod engine;
pub mod hostcmd;
mod input;
pub mod lab;
pub mod metrics;
pub mod output;
mod time;
pub mod watchcmd;

use clap::ValueEnum;

/// The version and the commit it was built from (build.rs; "unknown" outside a git checkout).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TCPWHY_COMMIT"), ")");

/// When to colour output (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour output that goes to a terminal (`tty`) or not: `always` and `never`
    /// as said; `auto` never with NO_COLOR set (non-empty), always with CLICOLOR_FORCE set
    /// (non-empty, not 0), otherwise on a terminal only.
    pub fn enabled(self, tty: bool) -> bool {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty() && v != "0");
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) => {
                false
            }
            ColorChoice::Auto => set("CLICOLOR_FORCE") || tty,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A summary for people: totals, then the slowest connections.
    Text,
    /// JSON Lines: one "connection" object per connection, then one "summary" (docs/json-schema.md).
    Json,
    /// One self-contained HTML file: causes chart, a graph per finding, latency histogram,
    /// sortable connection table (reads the capture twice: the graphs need its packets).
    Html,
    /// Parquet tables in the directory given by -o: connections, findings, exchanges, stalls,
    /// causes, and summary.json (docs/parquet.md).
    Parquet,
    /// The same tables as Arrow IPC files (`.arrow`, Feather v2) in the directory given by -o:
    /// uncompressed, read without decoding (pyarrow, polars).
    Arrow,
}

#[derive(clap::Args)]
#[command(
    override_usage = "tcpwhy analyze [OPTIONS] <CAPTURE>... [FILTER]...\n       tcpwhy analyze [OPTIONS] --interface <IFACE> [FILTER]..."
)]
pub struct AnalyzeArgs {
    /// Capture files, read as one capture merged by timestamp; `-` reads standard input.
    /// The words after the last capture that exists are a capture filter, as tcpdump takes
    /// one: `tcpwhy analyze cap.pcap host 10.0.0.5 and port 443` (or use --filter).
    #[arg(required_unless_present = "interface", value_name = "CAPTURE")]
    pub files: Vec<String>,
    /// Analyze only the packets this capture filter selects, in tcpdump's syntax (pcap-filter(7):
    /// host, net, port, portrange, src/dst, tcp, ip, ip6, vlan, and/or/not, parentheses),
    /// compiled by libpcap. Frame numbers stay those of the whole capture.
    #[arg(long, short = 'f', value_name = "EXPRESSION")]
    pub filter: Option<String>,
    /// Analyze live traffic on this interface (root) until Ctrl-C, printing connections as
    /// they finish and the summary at the end.
    #[arg(long, short = 'i', value_name = "IFACE")]
    pub interface: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
    /// Also write the capture back to FILE as pcapng with a packet comment on every evidence
    /// frame (finding, cost, connection, explanation): open it in Wireshark and filter
    /// `frame.comment contains "tcpwhy"`. Reads the capture twice.
    #[arg(long, value_name = "FILE", conflicts_with = "interface")]
    pub annotate: Option<String>,
    /// Track at most N connections at once; the least recently active beyond it are finished
    /// early and counted as evicted in the summary.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_connections: usize,
    /// Finish a connection after this many seconds without a packet (capture time).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub idle_timeout: f64,
    /// Turn detectors off (repeatable or comma-separated; `tcpwhy explain` lists the ids).
    #[arg(long, value_name = "ID[,ID]", value_delimiter = ',')]
    pub disable: Vec<String>,
    /// Exit 1 when a finding with one of these ids exists (for CI gates).
    #[arg(long, value_name = "ID[,ID]", value_delimiter = ',')]
    pub fail_on: Vec<String>,
    /// JSON: also write a record per request/response exchange (its latency split) and per
    /// stall in a transfer (its class). The text and HTML reports summarise them anyway.
    #[arg(long)]
    pub exchanges: bool,
    /// Text: a detailed section (findings with fixes and evidence, stalls, exchanges) for these
    /// connection ids (repeatable or comma-separated; ids as in the report and the JSON).
    #[arg(long, value_name = "ID[,ID]", value_delimiter = ',')]
    pub connection: Vec<u64>,
    /// No progress bar and no warnings on standard error (errors are still reported).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Text: a detailed section for each of the `--top` connections that lost the most time to
    /// findings.
    #[arg(long)]
    pub details: bool,
    /// Threads: one reads and decodes the capture, the others follow the connections, each a
    /// share of them (by 4-tuple); the report is the same for any number. Default: a worker
    /// per CPU plus the reading thread; 1 does everything on one thread (where a core is spare,
    /// the file is read, and decompressed, ahead of it on another).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// How many of the slowest connections the text report lists.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
}

/// `s` with control characters shown as `\u{1b}`: file names and text from captures must not
/// move the cursor, change colours or clear the terminal of the person reading the error.
pub fn printable(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if ch.is_control() {
            o.push_str(&format!("\\u{{{:x}}}", ch as u32));
        } else {
            o.push(ch);
        }
    }
    o
}

/// What `tcpwhy explain` prints: without an id, every finding id and its title; with one, its
/// documentation rendered for a terminal (`bold`: headings and strong text in bold). `None`
/// for an id no detector has.
pub fn explain_text(id: Option<&str>, bold: bool) -> Option<String> {
    use std::fmt::Write;
    let infos = tcpwhy_detect::infos();
    let mut out = String::new();
    let Some(id) = id else {
        let width = infos.iter().map(|i| i.id.len()).max().unwrap_or(0);
        for i in &infos {
            let _ = writeln!(out, "{:<width$}  {}", i.id, i.title);
        }
        return Some(out);
    };
    let info = infos.iter().find(|i| i.id == id)?;
    // The detector's documentation is its file's opening `//!` comment (Markdown, as rustdoc
    // shows it).
    let doc = info
        .doc
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""));
    for line in doc {
        let _ = writeln!(out, "{}", render_doc_line(line, bold));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{}",
        render_doc_line(&tcpwhy_watch::judge::visibility(id), bold)
    );
    Some(out)
}

/// One line of a detector's Markdown documentation for a terminal: a `# ` heading becomes the
/// title underlined, `**strong**` becomes bold (with `bold`) or plain text.
pub fn render_doc_line(line: &str, bold: bool) -> String {
    let (on, off) = if bold {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    if let Some(title) = line.strip_prefix("# ") {
        let underline = "=".repeat(title.chars().count());
        return format!("{on}{title}{off}\n{underline}");
    }
    let mut out = String::with_capacity(line.len());
    for (n, part) in line.split("**").enumerate() {
        if n % 2 == 1 {
            out.push_str(on);
            out.push_str(part);
            out.push_str(off);
        } else {
            out.push_str(part);
        }
    }
    out
}
