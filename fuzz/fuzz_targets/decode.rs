//! Any bytes as a frame of any link type (the first two bytes choose it): decode or a
//! `Malformed` kind, never a panic; what is decoded stays inside the frame.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tcpwhy_wire::{decode, Decoded, LinkType};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    const LINKS: [u32; 12] = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276, 147, 9999];
    let link = LinkType(LINKS[usize::from(data[0]) % LINKS.len()]);
    let frame = &data[2..];
    let orig_len = frame.len() as u32 + u32::from(data[1]);
    if let Ok(Decoded::Tcp(seg)) = decode(link, frame, orig_len) {
        // The payload length comes from the IP header but never beyond the frame's wire length.
        assert!(
            seg.payload_len <= orig_len,
            "{} > {orig_len}",
            seg.payload_len
        );
        assert!(usize::from(seg.options.sack_count) <= seg.options.sack.len());
    }
});
