//! Any bytes as a capture file (pcap, pcapng, gzip or zstd by content): read every packet.
//! The reader must end with packets, a warning or an error, never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tcpwhy_capture::{Capture, FileReader};

fuzz_target!(|data: &[u8]| {
    let reader = Box::new(std::io::Cursor::new(data.to_vec()));
    let Ok(f) = FileReader::from_reader("fuzz", reader) else {
        return;
    };
    let Ok(mut cap) = Capture::from_readers(vec![f]) else {
        return;
    };
    let mut last_frame = 0;
    // Bounded: a frame needs at least 16 bytes of record header (pcap) or more (pcapng),
    // decompression aside; 1 M frames is far beyond any input the fuzzer makes.
    for _ in 0..1_000_000 {
        match cap.next() {
            Ok(Some(p)) => {
                assert_eq!(p.frame, last_frame + 1, "frames are numbered 1, 2, 3 ...");
                last_frame = p.frame;
                assert!(p.data.len() <= 16 << 20);
            }
            Ok(None) | Err(_) => break,
        }
    }
});
