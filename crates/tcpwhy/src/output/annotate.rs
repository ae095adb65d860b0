//! `--annotate FILE`: the capture written back as pcapng with a packet comment on every
//! evidence frame (finding id, cost, connection, the explanation's first sentence), so the
//! findings open in Wireshark (`frame.comment contains "tcpwhy"`).
//!
//! [`Annotating`] sits in front of the report's printer: it passes everything on and keeps,
//! per evidence frame, the comments of the findings that cite it. After the report,
//! [`write`] reads the capture a second time and writes each packet with its comments.

use super::{LineOf, Printer, Report};
use crate::input::Inputs;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tcpwhy_capture::pcapng_out::PcapngWriter;
use tcpwhy_track::Connection;

/// A comment is cut at this many characters (the explanation's first sentence usually fits).
const MAX_COMMENT: usize = 400;

/// Comments per evidence frame, shared with the caller that writes them.
pub type Notes = Arc<Mutex<BTreeMap<u64, Vec<String>>>>;

pub struct Annotating {
    inner: Box<dyn Printer>,
    notes: Notes,
}

impl Annotating {
    pub fn new(inner: Box<dyn Printer>, notes: Notes) -> Annotating {
        Annotating { inner, notes }
    }

    fn note(
        &mut self,
        id: &str,
        cost_ms: f64,
        connection: Option<u64>,
        explanation: &str,
        frames: &[u64],
    ) {
        let first = match explanation.find(". ") {
            Some(i) => &explanation[..=i],
            None => explanation,
        };
        let on = match connection {
            Some(c) => format!("connection {c}"),
            None => "the capture as a whole".to_string(),
        };
        let mut text = format!("tcpwhy: {id}, {cost_ms:.3} ms lost, {on}: {first}");
        if text.chars().count() > MAX_COMMENT {
            text = text.chars().take(MAX_COMMENT - 1).collect::<String>() + "…";
        }
        if let Ok(mut notes) = self.notes.lock() {
            for f in frames {
                notes.entry(*f).or_default().push(text.clone());
            }
        }
    }
}

impl Printer for Annotating {
    fn finding(&mut self, f: &tcpwhy_detect::Finding) {
        let connection = (!f.capture_wide()).then_some(f.connection);
        let cost = f.cost_ns as f64 / 1e6;
        self.note(f.id, cost, connection, &f.explanation, &f.frames);
        self.inner.finding(f);
    }

    fn exchange(&mut self, x: &tcpwhy_detect::Exchange) {
        self.inner.exchange(x);
    }

    fn stall(&mut self, s: &tcpwhy_detect::Stall) {
        self.inner.stall(s);
    }

    fn connection(&mut self, c: &Connection) {
        self.inner.connection(c);
    }

    fn briefs(&self) -> bool {
        self.inner.briefs()
    }

    fn brief(&mut self, b: &tcpwhy_track::Brief) {
        self.inner.brief(b);
    }

    fn check(&mut self) -> io::Result<()> {
        self.inner.check()
    }

    fn summary(&mut self, r: &Report<'_>) -> io::Result<()> {
        self.inner.summary(r)
    }

    fn json_lines(&self) -> Option<super::JsonLines> {
        self.inner.json_lines()
    }

    fn line(&mut self, bytes: &[u8], what: LineOf) {
        // A finding already written as JSON (the workers' lines): its fields read back.
        if let LineOf::Finding { .. } = what {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
                let frames: Vec<u64> = v["frames"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|f| f.as_u64()).collect())
                    .unwrap_or_default();
                self.note(
                    v["id"].as_str().unwrap_or("?"),
                    v["cost_ms"].as_f64().unwrap_or(0.0),
                    v["connection"].as_u64(),
                    v["explanation"].as_str().unwrap_or(""),
                    &frames,
                );
            }
        }
        self.inner.line(bytes, what);
    }
}

/// Reads the capture again from `inputs` and writes it to `path` as pcapng, each frame with
/// its comments; the number of packets written.
pub fn write(path: &Path, inputs: &Inputs, notes: &BTreeMap<u64, Vec<String>>) -> io::Result<u64> {
    let mut capture = inputs.again(false).map_err(io::Error::other)?;
    let app = format!("tcpwhy {}", crate::VERSION);
    let mut w = PcapngWriter::create(path, &app)?;
    let none: Vec<String> = Vec::new();
    while let Some(p) = capture.next().map_err(io::Error::other)? {
        w.packet(&p, notes.get(&p.frame).unwrap_or(&none))?;
    }
    w.finish()
}
