//! Any bytes as a frame of any link type (the first two bytes choose it): decode or a
//! `Malformed` kind, never a panic; what is decoded stays inside the frame; and decoding into
//! a segment left over from a different frame (as the readers do) gives the same result.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tcpwhy_wire::{decode, decode_into, Decoded, LinkType, Seq, TcpSegment};

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
        assert!(usize::from(seg.options.sack_count) <= tcpwhy_wire::MAX_SACK_BLOCKS);
    }
    // A segment full of another frame's facts (IPv6 addresses, options, SACK blocks).
    let mut used = TcpSegment::EMPTY;
    used.src = "fd00::1".parse().unwrap_or(used.src);
    used.dst = "fd00::2".parse().unwrap_or(used.dst);
    used.seq = Seq(7);
    used.options.mss = Some(1460);
    used.options.window_scale = Some(7);
    used.options.sack_permitted = true;
    used.options.timestamp = Some((1, 2));
    used.options.sack_count = 4;
    used.ip_id = 9;
    used.first_fragment = true;
    let into = decode_into(link, frame, orig_len, &mut used);
    match decode(link, frame, orig_len) {
        Ok(Decoded::Tcp(seg)) => assert!(into == Ok(None) && used == seg),
        Ok(Decoded::Skipped(skip)) => assert_eq!(into, Ok(Some(skip))),
        Err(e) => assert_eq!(into, Err(e)),
    }
});
