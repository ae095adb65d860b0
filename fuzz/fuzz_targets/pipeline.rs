//! Bytes to findings: any capture through the tracker and every detector, checking what must
//! hold for every input, not just "no panic": every evidence frame exists in the input; costs
//! are non-negative and within the capture's time span; findings start before they end and
//! inside the span; every exchange's parts are non-negative and add up to its latency; stall
//! gaps are positive; finding details serialize to JSON that parses back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tcpwhy_capture::{Capture, FileReader};
use tcpwhy_detect::{Exchange, Finding, Output, Stall};
use tcpwhy_track::{Config, Connection};

#[derive(Default)]
struct Check {
    findings: Vec<Finding>,
    exchanges: Vec<Exchange>,
    stalls: Vec<Stall>,
    connections: u64,
}

impl Output for Check {
    fn finding(&mut self, f: &Finding) {
        self.findings.push(f.clone());
    }
    fn connection(&mut self, c: &Connection) {
        self.connections += 1;
        assert!(c.first.ts_ns <= c.last.ts_ns || c.first.frame() <= c.last.frame());
    }
    fn exchange(&mut self, x: &Exchange) {
        self.exchanges.push(x.clone());
    }
    fn stall(&mut self, s: &Stall) {
        self.stalls.push(s.clone());
    }
}

fuzz_target!(|data: &[u8]| {
    let reader = Box::new(std::io::Cursor::new(data.to_vec()));
    let Ok(f) = FileReader::from_reader("fuzz", reader) else {
        return;
    };
    let Ok(mut cap) = Capture::from_readers(vec![f]) else {
        return;
    };
    let cfg = Config {
        max_connections: 64,
        ..Config::default()
    };
    let mut out = Check::default();
    // The pipeline every caller runs (tcpwhy_engine): capture errors end it like the end of
    // the input, with what came before analysed.
    let Ok(run) = tcpwhy_engine::detect(&mut cap, cfg, &[], &mut out, &mut |_, _| Ok(())) else {
        return;
    };
    let frames = run.stats.packets;
    let (first, last) = (
        run.stats.first_ts.unwrap_or(i64::MAX),
        run.stats.last_ts.unwrap_or(i64::MIN),
    );
    let span = if frames > 0 { last - first } else { 0 };
    for f in &out.findings {
        for fr in &f.frames {
            assert!(
                *fr >= 1 && *fr <= frames,
                "{}: frame {fr} of {frames}",
                f.id
            );
        }
        assert!(f.cost_ns >= 0, "{}: cost {}", f.id, f.cost_ns);
        assert!(
            f.cost_ns <= span,
            "{}: cost {} beyond the span {span}",
            f.id,
            f.cost_ns
        );
        assert!(
            f.start_ns <= f.end_ns,
            "{}: {} > {}",
            f.id,
            f.start_ns,
            f.end_ns
        );
        assert!(
            f.start_ns >= first && f.end_ns <= last,
            "{}: outside the capture",
            f.id
        );
        let text = serde_json::to_string(&f.details).expect("details serialize");
        let _: serde_json::Value = serde_json::from_str(&text).expect("and parse back");
        assert!(!f.explanation.is_empty() && !f.fix.is_empty(), "{}", f.id);
    }
    for x in &out.exchanges {
        let s = &x.split;
        let parts = [
            s.client_ns,
            s.network_ns,
            s.server_ns,
            s.retransmission_ns,
            s.window_ns,
            s.held_ns,
            s.transfer_ns,
        ];
        assert!(parts.iter().all(|p| *p >= 0), "{x:?}");
        assert_eq!(parts.iter().sum::<i64>(), x.latency_ns, "{x:?}");
    }
    for s in &out.stalls {
        assert!(s.gap_ns > 0 && s.cost_ns >= 0, "{s:?}");
    }
});
