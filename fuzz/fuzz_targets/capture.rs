//! Any bytes as a capture file (pcap, pcapng, gzip or zstd by content): read every packet.
//! The reader must end with packets, a warning or an error, never a panic or a hang; and a
//! large or compressed input read (and decompressed) on a thread of its own (`read_ahead`)
//! must give what it gives without (up to the bytes a failing decompressor drops).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tcpwhy_capture::{Capture, FileReader, ReadOptions};

/// Each packet's (frame, time, length on the wire, captured bytes), then the warnings and the
/// error (if any) as the user would read them.
type Outcome = (Vec<(u64, i64, u32, Vec<u8>)>, Vec<String>, Option<String>);

fn read_all(data: &[u8], read_ahead: bool) -> Outcome {
    let reader = Box::new(std::io::Cursor::new(data.to_vec()));
    let f = match FileReader::from_reader_with(
        "fuzz",
        reader,
        ReadOptions {
            read_ahead,
            ..ReadOptions::default()
        },
    ) {
        Ok(f) => f,
        Err(e) => return (Vec::new(), Vec::new(), Some(e.to_string())),
    };
    let mut cap = match Capture::from_readers(vec![f]) {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Vec::new(), Some(e.to_string())),
    };
    let mut packets = Vec::new();
    let mut last_frame = 0;
    let mut error = None;
    // Bounded: a frame needs at least 16 bytes of record header (pcap) or more (pcapng),
    // decompression aside; 1 M frames is far beyond any input the fuzzer makes.
    for _ in 0..1_000_000 {
        match cap.next() {
            Ok(Some(p)) => {
                assert_eq!(p.frame, last_frame + 1, "frames are numbered 1, 2, 3 ...");
                last_frame = p.frame;
                assert!(p.data.len() <= 16 << 20);
                packets.push((p.frame, p.ts_ns, p.orig_len, p.data.to_vec()));
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let warnings = cap.warnings().iter().map(|w| w.to_string()).collect();
    (packets, warnings, error)
}

fuzz_target!(|data: &[u8]| {
    let plain = read_all(data, false);
    // Read-ahead starts only past the first 64 KiB (decompressed).
    let compressed = data.starts_with(&[0x1f, 0x8b]) || data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    if compressed || data.len() > 64 << 10 {
        let ahead = read_all(data, true);
        if plain.2.is_none() && ahead.2.is_none() {
            assert!(ahead == plain, "read-ahead read something else");
        } else {
            // A decompressor that fails a read loses what it had put into it, and reads of
            // other sizes lose other bytes: the same packets up to the shorter list.
            let n = plain.0.len().min(ahead.0.len());
            assert!(
                plain.0[..n] == ahead.0[..n],
                "read-ahead read other packets"
            );
        }
    }
});
