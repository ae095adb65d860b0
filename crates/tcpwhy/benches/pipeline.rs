//! Criterion micro-benchmarks on committed fixtures (issue 7): decoding every frame, tracking
//! connections, and tracking with every detector, on the frames of a lab capture held in
//! memory (no file I/O in the loop). `cargo bench -p tcpwhy --bench pipeline`; throughput is
//! reported in frames/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tcpwhy_capture::{Capture, FileReader};
use tcpwhy_detect::{Detectors, Finding, Output};
use tcpwhy_track::{Analyzer, Config, Connection};
use tcpwhy_wire::{decode, LinkType};

struct Frame {
    ts_ns: i64,
    link: LinkType,
    data: Vec<u8>,
    orig_len: u32,
}

fn frames(name: &str) -> Vec<Frame> {
    let path = format!("{}/../../fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let f = FileReader::open(&path).expect("fixture");
    let mut cap = Capture::from_readers(vec![f]).expect("capture");
    let mut out = Vec::new();
    while let Ok(Some(p)) = cap.next() {
        out.push(Frame {
            ts_ns: p.ts_ns,
            link: p.link,
            data: p.data.to_vec(),
            orig_len: p.orig_len,
        });
    }
    out
}

#[derive(Default)]
struct Count(u64);
impl Output for Count {
    fn finding(&mut self, _f: &Finding) {
        self.0 += 1;
    }
    fn connection(&mut self, _c: &Connection) {
        self.0 += 1;
    }
}

fn benches(c: &mut Criterion) {
    // Many short connections (stale-state reconnects) and one bulk transfer.
    for name in [
        "lab/stale-syn-timewait-broken.pcap.gz",
        "lab/slow-start-after-idle-broken.pcap.gz",
    ] {
        let fr = frames(name);
        let mut g = c.benchmark_group(name.trim_start_matches("lab/"));
        g.throughput(Throughput::Elements(fr.len() as u64));
        g.bench_function("decode", |b| {
            b.iter(|| {
                for f in &fr {
                    let _ = black_box(decode(f.link, &f.data, f.orig_len));
                }
            })
        });
        g.bench_function("track", |b| {
            b.iter(|| {
                let mut a = Analyzer::new(Config::default());
                let mut n = 0u64;
                let mut sink = |_c: &Connection| n += 1;
                for (i, f) in fr.iter().enumerate() {
                    a.frame(
                        i as u64 + 1,
                        f.ts_ns,
                        f.link,
                        &f.data,
                        f.orig_len,
                        &mut sink,
                    );
                }
                a.finish(&mut sink);
                black_box(n)
            })
        });
        g.bench_function("track+detectors", |b| {
            b.iter(|| {
                let mut a = Analyzer::new(Config::default());
                let mut out = Count::default();
                let mut det = Detectors::new(&[], &mut out);
                for (i, f) in fr.iter().enumerate() {
                    a.frame(i as u64 + 1, f.ts_ns, f.link, &f.data, f.orig_len, &mut det);
                }
                a.finish(&mut det);
                drop(det);
                black_box(out.0)
            })
        });
        g.finish();
    }
}

criterion_group!(pipeline, benches);
criterion_main!(pipeline);
