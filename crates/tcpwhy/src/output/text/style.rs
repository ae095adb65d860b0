//! Colours and widths: what the terminal allows.

use super::*;

/// How the terminal report looks: colours (only on a terminal, never with NO_COLOR) and the
/// width tables and long lines must fit (None: a file or pipe, no limit).
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    pub color: bool,
    pub width: Option<usize>,
}

impl Style {
    /// For standard output: the width only when it is a terminal; colour as `--color` says
    /// (by default only on a terminal).
    pub fn for_stdout(color: crate::ColorChoice) -> Style {
        use std::io::IsTerminal;
        let tty = io::stdout().is_terminal();
        let width = if tty {
            terminal_size::terminal_size()
                .map(|(w, _)| usize::from(w.0))
                .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
                .filter(|w| *w >= 40)
                .or(Some(80))
        } else {
            None
        };
        Style {
            color: color.enabled(tty),
            width,
        }
    }

    pub(super) fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub(super) fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    pub(super) fn red(&self, s: &str) -> String {
        self.paint("1;31", s)
    }
    pub(super) fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    pub(super) fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }

    /// `text` after `first` (already written), wrapped to the width with `indent` on the
    /// following lines.
    pub(super) fn wrap(&self, first: usize, text: &str, indent: usize) -> String {
        let Some(width) = self.width else {
            return text.to_string();
        };
        let mut out = String::new();
        let mut col = first;
        for word in text.split(' ') {
            let w = word.chars().count();
            if col > indent && col + 1 + w > width {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                col = indent;
            } else if !out.is_empty() {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += w;
        }
        out
    }
}

/// Shorten `s` to `n` characters with an ellipsis in the middle (addresses keep their port).
pub(super) fn fit(s: &str, n: usize) -> String {
    let len = s.chars().count();
    if len <= n || n < 5 {
        return s.to_string();
    }
    let head = (n - 1) / 2;
    let tail = n - 1 - head;
    let chars: Vec<char> = s.chars().collect();
    let mut o: String = chars[..head].iter().collect();
    o.push('…');
    o.extend(&chars[len - tail..]);
    o
}

/// A writer that wraps every line longer than `width` visible columns at its spaces, the
/// continuation lines indented two columns past the line's own indent. Colour escapes take no
/// column. A word longer than the width stays whole. Lines are held until their newline (a
/// flush passes through without them); the last unfinished line is written when dropped.
pub(super) struct FitWriter {
    inner: Box<dyn Write>,
    width: usize,
    line: Vec<u8>,
}

impl FitWriter {
    pub(super) fn new(inner: Box<dyn Write>, width: usize) -> FitWriter {
        FitWriter {
            inner,
            width,
            line: Vec::new(),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        let out = fit_line(&text, self.width);
        self.inner.write_all(out.as_bytes())
    }
}

/// Columns `s` takes on a terminal: characters outside `ESC [ ... m` sequences.
pub(super) fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// `line` (without its newline) wrapped to `width` columns, as [`FitWriter`] writes it.
pub(super) fn fit_line(line: &str, width: usize) -> String {
    if visible_width(line) <= width {
        return line.to_string();
    }
    let body = line.trim_start_matches(' ');
    let lead = line.len() - body.len();
    let indent = (lead + 2).min(width / 2);
    let mut out = String::with_capacity(line.len() + 16);
    out.push_str(&line[..lead]);
    let mut col = lead;
    // A number and its unit ("302 ms", "14.5 kB") are one word for wrapping.
    let mut words: Vec<String> = Vec::new();
    for word in body.split(' ') {
        let unit = matches!(
            word.trim_end_matches([',', ';', ':', ')', '.']),
            "ms" | "s" | "µs" | "B" | "kB" | "MB" | "GB" | "%"
        );
        match words.last_mut() {
            Some(prev) if unit && prev.ends_with(|c: char| c.is_ascii_digit()) => {
                prev.push(' ');
                prev.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    let mut first = true;
    for word in &words {
        let w = visible_width(word);
        if !first && col + 1 + w > width && col > indent {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            if word.is_empty() {
                continue; // a run of spaces at the break is dropped
            }
        } else if !first {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
        first = false;
    }
    out
}

impl Write for FitWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&rest[..nl]);
            self.emit()?;
            self.inner.write_all(b"\n")?;
            rest = &rest[nl + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Drop for FitWriter {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            let _ = self.emit();
            let _ = self.inner.flush();
        }
    }
}

#[cfg(test)]
mod fit_tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_spaces_under_their_indent() {
        let line = "  fix: set net.ipv4.tcp_slow_start_after_idle=0 in the sending host's sysctls";
        let out = fit_line(line, 40);
        assert_eq!(
            out,
            "  fix: set\n    net.ipv4.tcp_slow_start_after_idle=0\n    in the sending host's sysctls"
        );
        assert!(out.lines().all(|l| l.len() <= 40), "{out}");
        // Fits already: untouched (also its double spaces).
        assert_eq!(
            fit_line("#3  833 ms  107 packets", 40),
            "#3  833 ms  107 packets"
        );
        // Colour codes take no column: 30 visible characters fit in 30.
        let red = format!("\x1b[1;31m{}\x1b[0m", "x".repeat(30));
        assert_eq!(fit_line(&red, 30), red);
        // A word longer than the width stays whole on its own line.
        let out = fit_line(&format!("abc {}", "y".repeat(50)), 20);
        assert_eq!(out, format!("abc\n  {}", "y".repeat(50)));
        // A number keeps its unit.
        assert_eq!(
            fit_line("the window had reached 1063.1 kB: the burst", 28),
            "the window had reached\n  1063.1 kB: the burst"
        );
    }
}
