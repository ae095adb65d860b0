//! `tcpwhy`: why was this TCP connection slow?
//!
//! A thin binary over the library crates: argument parsing here, the engine in `tcpwhy-track`,
//! the printers in `output` (the `tcpwhy` library). Exit codes: 0 success, 2 error (unreadable or corrupt input, bad
//! arguments). A closed output pipe (`tcpwhy ... | head`) is not an error.
#![forbid(unsafe_code)]

use clap::{CommandFactory, Parser, Subcommand};
use std::io;
use std::process::ExitCode;
use tcpwhy::{analyze, hostcmd, lab, printable, watchcmd, AnalyzeArgs, ColorChoice, VERSION};

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
    /// Name the causes live from kernel tracepoints (BPF, root), with no packet capture:
    /// SYNs meeting stale state (from either end), SYNs and handshake ACKs a server drops,
    /// unanswered or refused SYNs, retransmission timeouts, slow-start restarts, zero windows,
    /// and every connect()'s latency, per process and network namespace.
    Watch(watchcmd::WatchArgs),
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
        /// A subcommand (analyze, explain, host, watch, lab, completions); without one, tcpwhy's page.
        subcommand: Option<String>,
    },
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
        Command::Watch(args) => watchcmd::run(&args),
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
    let bold = color.enabled(io::stdout().is_terminal());
    match tcpwhy::explain_text(id, bold) {
        Some(text) => {
            io::stdout().lock().write_all(text.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!(
                "tcpwhy explain: no finding {:?}; `tcpwhy explain` lists them",
                id.unwrap_or_default()
            );
            Ok(ExitCode::from(2))
        }
    }
}

#[cfg(test)]
mod tests {
    use tcpwhy::render_doc_line;

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
