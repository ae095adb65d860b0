//! `tcpwhy`: why was this TCP connection slow?
//!
//! A thin binary over the library crates: argument parsing here, the engine in `tcpwhy-track`,
//! the printers in `output`. Exit codes: 0 success, 2 error (unreadable or corrupt input, bad
//! arguments). A closed output pipe (`tcpwhy ... | head`) is not an error.
#![forbid(unsafe_code)]

mod analyze;
mod engine;
mod hostcmd;
mod input;
mod lab;
mod output;
mod time;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::io;
use std::process::ExitCode;

/// The version and the commit it was built from (build.rs; "unknown" outside a git checkout).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TCPWHY_COMMIT"), ")");

#[derive(Parser)]
#[command(name = "tcpwhy", version = VERSION, about = "Why was this TCP connection slow?")]
struct Cli {
    /// Colours in the terminal report and in `explain`: auto (on a terminal, unless NO_COLOR
    /// is set; CLICOLOR_FORCE=1 forces them), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    #[command(subcommand)]
    command: Command,
}

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

#[derive(Subcommand)]
enum Command {
    /// Read captures (pcap/pcapng, optionally gzip or zstd) and report every TCP connection.
    Analyze(AnalyzeArgs),
    /// What a finding id means: its signal, evidence, false positives and references.
    Explain {
        /// A finding id; without one, list them all.
        id: Option<String>,
    },
    /// Find the TCP pathologies a live Linux host shows or is set up for: sysctls, sockets
    /// (sock_diag), counters and hash-table load, per network namespace.
    Host(hostcmd::HostArgs),
    /// Reproduce each latency pathology on this kernel in network namespaces (root).
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Print a completion script for a shell (bash: `tcpwhy completions bash >
    /// ~/.local/share/bash-completion/completions/tcpwhy`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page in roff (`tcpwhy man | man -l -`; install:
    /// `tcpwhy man > ~/.local/share/man/man1/tcpwhy.1`); with a subcommand, its own page.
    Man {
        /// A subcommand (analyze, explain, host, lab, completions); without one, tcpwhy's page.
        subcommand: Option<String>,
    },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = cli.color;
    let result = match cli.command {
        Command::Analyze(mut args) => match analyze::filter_words(&mut args) {
            Ok(()) => analyze::run(&args, color),
            Err(e) => Err(e),
        },
        Command::Lab(cmd) => lab::run(&cmd),
        Command::Host(args) => hostcmd::run(&args),
        Command::Explain { id } => explain(id.as_deref(), color),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "tcpwhy", &mut io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { subcommand } => man(subcommand.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tcpwhy: {}", printable(&e.to_string()));
            ExitCode::from(2)
        }
    }
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

/// The manual page of tcpwhy or of one of its subcommands, in roff, on standard output.
fn man(sub: Option<&str>) -> io::Result<ExitCode> {
    let top = Cli::command().version(VERSION);
    let page = match sub {
        None => top,
        Some(name) => match top.find_subcommand(name) {
            Some(c) => c.clone().name(format!("tcpwhy-{name}")).version(VERSION),
            None => {
                eprintln!("tcpwhy man: no subcommand {name:?} (tcpwhy --help lists them)");
                return Ok(ExitCode::from(2));
            }
        },
    };
    clap_mangen::Man::new(page).render(&mut io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}

fn explain(id: Option<&str>, color: ColorChoice) -> io::Result<ExitCode> {
    use std::io::{IsTerminal, Write};
    let mut out = io::stdout().lock();
    let infos = tcpwhy_detect::infos();
    let Some(id) = id else {
        let width = infos.iter().map(|i| i.id.len()).max().unwrap_or(0);
        for i in &infos {
            writeln!(out, "{:<width$}  {}", i.id, i.title)?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(info) = infos.iter().find(|i| i.id == id) else {
        eprintln!("tcpwhy explain: no finding {id:?}; `tcpwhy explain` lists them");
        return Ok(ExitCode::from(2));
    };
    let bold = color.enabled(io::stdout().is_terminal());
    // The detector's documentation is its file's opening `//!` comment (Markdown, as rustdoc
    // shows it); rendered for a terminal.
    let doc = info
        .doc
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""));
    for line in doc {
        writeln!(out, "{}", render_doc_line(line, bold))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of a detector's Markdown documentation for a terminal: a `# ` heading becomes the
/// title underlined, `**strong**` becomes bold (with `bold`) or plain text.
fn render_doc_line(line: &str, bold: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::render_doc_line;

    #[test]
    fn explain_renders_markdown_for_a_terminal() {
        assert_eq!(
            render_doc_line("# zero-window: the receiver stopped", false),
            "zero-window: the receiver stopped\n================================="
        );
        assert_eq!(
            render_doc_line("**Signal.** A window of 0, then **three** probes.", false),
            "Signal. A window of 0, then three probes."
        );
        assert_eq!(
            render_doc_line("**Cost.** the wait", true),
            "\x1b[1mCost.\x1b[0m the wait"
        );
        // Every detector's documentation: strong text opens and closes on one line, so no
        // `**` is left for the terminal.
        for info in tcpwhy_detect::infos() {
            for line in info.doc.lines().take_while(|l| l.starts_with("//!")) {
                let r = render_doc_line(line.trim_start_matches("//!"), false);
                assert!(!r.contains("**"), "{}: {line}", info.id);
                assert_eq!(line.matches("**").count() % 2, 0, "{}: {line}", info.id);
            }
        }
    }
}
