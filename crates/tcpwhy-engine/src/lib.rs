//! # tcpwhy-engine: the pipeline, capture -> tracker -> detectors -> an output
//!
//! One driver for every caller that runs captures through tcpwhy on one thread: `tcpwhy
//! analyze --threads 1`, the HTML report's second pass, the lab's checks and the fuzz target.
//! [`track`] feeds every frame of a [`Capture`] to an [`Analyzer`] and a [`Sink`] of
//! connections and segments; [`detect`] puts the detectors between them and an [`Output`] of
//! findings, and ends with the capture-wide findings (floods, scans) after every connection.
//!
//! A capture error does not lose the run: the frames before it are analysed and the error
//! comes back in [`Run::error`], for the caller to report beside the results.
//!
//! Architecture invariant: it knows the order of the stages and nothing of their insides: no
//! byte parsing, no finding by name, no printing. (The sharded driver of `tcpwhy analyze` with
//! several threads lives in the binary for now, beside its printers.)
#![forbid(unsafe_code)]

use std::io;
use tcpwhy_capture::{Capture, CaptureError};
use tcpwhy_detect::{Detectors, Output};
use tcpwhy_track::{Analyzer, Config, Sink, Stats, TrackerStats};

/// Frames between two calls of the caller's `tick` (progress, checks of the output).
pub const TICK_FRAMES: u64 = 65_536;

/// What a run over a capture counted.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Frames read and decoded, by outcome.
    pub stats: Stats,
    /// Connections tracked, evicted, forgotten.
    pub tracker: TrackerStats,
    /// The error that stopped reading, if any: the results cover the frames before it.
    pub error: Option<CaptureError>,
}

/// Every frame of `capture` through an [`Analyzer`] configured by `cfg` into `sink`, then the
/// connections still open at the end. `tick` is called every [`TICK_FRAMES`] frames with the
/// count so far and the capture (for its progress); an error from it stops the run.
pub fn track<S: Sink>(
    capture: &mut Capture,
    cfg: Config,
    sink: &mut S,
    tick: &mut dyn FnMut(u64, &Capture) -> io::Result<()>,
) -> io::Result<Run> {
    let mut analyzer = Analyzer::new(cfg);
    let error = feed(capture, &mut analyzer, sink, &mut |n, c, _| tick(n, c))?;
    analyzer.finish(sink);
    Ok(Run {
        stats: analyzer.stats().clone(),
        tracker: analyzer.tracker().stats().clone(),
        error,
    })
}

/// [`track`] with the detectors (all but `disabled`) between the tracker and `out`: findings
/// and connections go to `out`, the capture-wide findings last. The output's own errors
/// ([`Output::check`]) stop the run at the next tick and at the end.
pub fn detect(
    capture: &mut Capture,
    cfg: Config,
    disabled: &[String],
    out: &mut dyn Output,
    tick: &mut dyn FnMut(u64, &Capture) -> io::Result<()>,
) -> io::Result<Run> {
    let mut analyzer = Analyzer::new(cfg);
    let mut det = Detectors::new(disabled, out);
    let error = feed(capture, &mut analyzer, &mut det, &mut |n, c, det| {
        tick(n, c)?;
        det.check()
    })?;
    analyzer.finish(&mut det);
    det.check()?;
    let half_open = det.take_half_open();
    drop(det);
    for f in half_open.iter().flat_map(|h| h.findings()) {
        out.finding(&f);
    }
    out.check()?;
    Ok(Run {
        stats: analyzer.stats().clone(),
        tracker: analyzer.tracker().stats().clone(),
        error,
    })
}

/// The frames of `capture` into `analyzer` and `sink`, `tick` called every [`TICK_FRAMES`]
/// frames with the sink; a capture error ends the loop and is returned.
fn feed<S: Sink>(
    capture: &mut Capture,
    analyzer: &mut Analyzer,
    sink: &mut S,
    tick: &mut dyn FnMut(u64, &Capture, &mut S) -> io::Result<()>,
) -> io::Result<Option<CaptureError>> {
    let mut n = 0u64;
    loop {
        match capture.next() {
            Ok(Some(p)) => {
                analyzer.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, sink);
                n += 1;
                if n % TICK_FRAMES == 0 {
                    tick(n, capture, sink)?;
                }
            }
            Ok(None) => return Ok(None),
            Err(e) => return Ok(Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_capture::FileReader;
    use tcpwhy_detect::Finding;
    use tcpwhy_track::Connection;

    /// fixtures/captures/null-loopback.pcap: 21 frames, the two conversations of sll.pcap (one
    /// over IPv4, one over IPv6; fixtures/captures/README.md).
    fn fixture() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/captures/null-loopback.pcap"
        );
        std::fs::read(path).expect("the fixture")
    }

    fn capture(bytes: Vec<u8>) -> Capture {
        let reader = FileReader::from_reader("test.pcap", Box::new(std::io::Cursor::new(bytes)))
            .expect("a pcap");
        Capture::from_readers(vec![reader]).expect("a capture")
    }

    #[derive(Default)]
    struct Kept {
        connections: u64,
        findings: Vec<Finding>,
    }

    impl Output for Kept {
        fn finding(&mut self, f: &Finding) {
            self.findings.push(f.clone());
        }
        fn connection(&mut self, _c: &Connection) {
            self.connections += 1;
        }
    }

    #[test]
    fn detect_and_track_see_every_frame_and_connection() {
        let mut out = Kept::default();
        let run = detect(
            &mut capture(fixture()),
            Config::default(),
            &[],
            &mut out,
            &mut |_, _| Ok(()),
        )
        .expect("runs");
        assert_eq!(run.stats.packets, 21);
        assert_eq!(run.tracker.connections, 2);
        assert_eq!(out.connections, 2);
        assert!(run.error.is_none());
        let mut seen = 0;
        let run = track(
            &mut capture(fixture()),
            Config::default(),
            &mut |_c: &Connection| seen += 1,
            &mut |_, _| Ok(()),
        )
        .expect("runs");
        assert_eq!((run.stats.packets, seen), (21, 2));
    }

    /// A reader that gives `bytes` and then fails (a disk error, a dropped connection).
    struct Failing(std::io::Cursor<Vec<u8>>);

    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(io::Error::other("the disk went away")),
                n => Ok(n),
            }
        }
    }

    #[test]
    fn a_read_error_ends_the_run_with_the_frames_before_it() {
        // The first four records end at byte 372 (24-byte header, records of 48, 48, 44 and
        // 144 bytes, each behind a 16-byte record header).
        let bytes = fixture()[..372].to_vec();
        let reader =
            FileReader::from_reader("test.pcap", Box::new(Failing(std::io::Cursor::new(bytes))))
                .expect("a pcap");
        let mut cap = Capture::from_readers(vec![reader]).expect("a capture");
        let mut out = Kept::default();
        let run = detect(&mut cap, Config::default(), &[], &mut out, &mut |_, _| {
            Ok(())
        })
        .expect("the run itself does not fail");
        assert_eq!(run.stats.packets, 4);
        let e = run.error.expect("the error is returned");
        assert!(e.to_string().contains("the disk went away"), "{e}");
        // The connection begun before it is finished and reported.
        assert_eq!(out.connections, 1);
    }

    #[test]
    fn an_error_from_tick_stops_the_run() {
        // 70 000 copies of the first frame: one tick at 65 536.
        let one = fixture();
        let mut bytes = one[..24].to_vec();
        for _ in 0..70_000 {
            bytes.extend_from_slice(&one[24..24 + 16 + 48]);
        }
        let mut ticks = vec![];
        let r = track(
            &mut capture(bytes),
            Config::default(),
            &mut |_c: &Connection| {},
            &mut |n, _| {
                ticks.push(n);
                Err(io::Error::other("stop"))
            },
        );
        assert!(r.is_err());
        assert_eq!(ticks, [TICK_FRAMES]);
    }
}
