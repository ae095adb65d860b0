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
