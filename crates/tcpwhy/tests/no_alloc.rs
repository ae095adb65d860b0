//! The hot path allocates nothing per packet: reading a pcap record, decoding it and updating
//! its connection. Counted with dhat's allocator (this test binary only).

use std::io::Cursor;
use tcpwhy_capture::{Capture, FileReader};
use tcpwhy_track::{Analyzer, Config, Connection, Sink};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// dhat allows one profiler at a time: the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Packets read before counting (the capture reader's buffer grows once, from 64 KiB to 1 MiB,
/// at its second read; the table and the detectors' buffers have their size by then).
const WARM: u64 = 1_000;

/// A pcap (Ethernet) of one connection: SYN, SYN-ACK, ACK, then `n` data segments of 1000
/// bytes from the client, each followed by the server's ACK.
fn one_long_connection(n: u32) -> Vec<u8> {
    let mut f = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    let mut t = 0u32;
    let mut rec = |f: &mut Vec<u8>, from_client: bool, seq: u32, ack: u32, flags: u8, len: u16| {
        let (src, dst, sp, dp) = if from_client {
            ([10, 0, 0, 1], [10, 0, 0, 2], 40000u16, 80u16)
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1], 80, 40000)
        };
        let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&(40 + len).to_be_bytes());
        p.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sp.to_be_bytes());
        p.extend_from_slice(&dp.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&ack.to_be_bytes());
        p.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        t += 1;
        // Headers only (snaplen 54); the IP length says how much payload there was.
        for v in [1_700_000_000 + t / 1000, (t % 1000) * 1000, p.len() as u32] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&(p.len() as u32 + u32::from(len)).to_le_bytes());
        f.extend_from_slice(&p);
    };
    rec(&mut f, true, 1000, 0, 0x02, 0);
    rec(&mut f, false, 5000, 1001, 0x12, 0);
    rec(&mut f, true, 1001, 5001, 0x10, 0);
    for i in 0..n {
        let seq = 1001 + i * 1000;
        rec(&mut f, true, seq, 5001, 0x18, 1000);
        rec(&mut f, false, 5001, seq + 1000, 0x10, 0);
    }
    f
}

/// Read, decode and track the 20 003 packets of `one_long_connection(10_000)` into `sink`;
/// returns (packets, heap allocations after the first `warm` packets). The caller holds the
/// dhat profiler.
fn allocations_after(warm: u64, an: &mut Analyzer, sink: &mut dyn Sink) -> (u64, u64) {
    let bytes = one_long_connection(10_000);
    let reader = FileReader::from_reader("mem", Box::new(Cursor::new(bytes))).unwrap();
    let mut cap = Capture::from_readers(vec![reader]).unwrap();
    let mut before = None;
    let mut packets = 0u64;
    while let Some(p) = cap.next().unwrap() {
        an.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, sink);
        packets += 1;
        if packets == warm {
            before = Some(dhat::HeapStats::get().total_blocks);
        }
    }
    (
        packets,
        dhat::HeapStats::get().total_blocks - before.unwrap(),
    )
}

/// One test for both checks: the allocation counter is global, and a second test running
/// beside it (or the harness printing that test's result) would count in this one's window.
#[test]
fn no_allocation_per_packet() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _profiler = dhat::Profiler::builder().testing().build();
    // The tracker alone.
    let mut an = Analyzer::new(Config::default());
    let mut finished = 0;
    let mut sink = |_: &Connection| finished += 1;
    let (packets, allocs) = allocations_after(WARM, &mut an, &mut sink);
    assert_eq!(packets, 20_003);
    assert_eq!(
        allocs,
        0,
        "tracker: {allocs} allocations over {} packets",
        packets - WARM
    );
    an.finish(&mut sink);
    assert_eq!(finished, 1);

    // With every detector (warm once their per-connection rings are full: 128 segments).
    struct Count(u64);
    impl tcpwhy_detect::Output for Count {
        fn finding(&mut self, _f: &tcpwhy_detect::Finding) {
            self.0 += 1;
        }
        fn connection(&mut self, _c: &Connection) {}
    }
    let mut an = Analyzer::new(Config::default());
    let mut out = Count(0);
    let mut det = tcpwhy_detect::Detectors::new(&[], &mut out);
    let (packets, allocs) = allocations_after(WARM, &mut an, &mut det);
    assert_eq!(packets, 20_003);
    assert_eq!(
        allocs,
        0,
        "every detector: {allocs} allocations over {} packets",
        packets - WARM
    );
    an.finish(&mut det);
}
