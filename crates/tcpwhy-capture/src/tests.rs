//! Container tests on files built byte by byte: each builder writes the layout the pcap and
//! pcapng specifications (draft-ietf-opsawg-pcap, draft-ietf-opsawg-pcapng) describe.

use super::*;
use std::io::Write;

/// A legacy pcap: magic written in the chosen byte order, link type `link`.
fn pcap(big_endian: bool, nanos: bool, link: u32, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(&w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    f.extend_from_slice(&w16(2));
    f.extend_from_slice(&w16(4));
    f.extend_from_slice(&w32(0)); // thiszone
    f.extend_from_slice(&w32(0)); // sigfigs
    f.extend_from_slice(&w32(65535)); // snaplen
    f.extend_from_slice(&w32(link));
    for (sec, frac, data) in records {
        f.extend_from_slice(&w32(*sec));
        f.extend_from_slice(&w32(*frac));
        f.extend_from_slice(&w32(data.len() as u32));
        f.extend_from_slice(&w32(data.len() as u32 + 100)); // orig_len: 100 bytes were cut
        f.extend_from_slice(data);
    }
    f
}

fn ng_block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while body.len() % 4 != 0 {
        body.push(0);
    }
    let len = (12 + body.len()) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

fn shb() -> Vec<u8> {
    let mut body = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
    ng_block(0x0A0D_0D0A, &body)
}

fn idb(link: u16, tsresol: Option<u8>) -> Vec<u8> {
    let mut body = link.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes()); // snaplen 0 = unlimited
    if let Some(r) = tsresol {
        body.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&[r, 0, 0, 0]);
        body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    }
    ng_block(1, &body)
}

fn epb(if_id: u32, ts: u64, data: &[u8]) -> Vec<u8> {
    let mut body = if_id.to_le_bytes().to_vec();
    body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ts as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(data);
    ng_block(6, &body)
}

fn reader(name: &str, bytes: Vec<u8>) -> Result<FileReader, CaptureError> {
    FileReader::from_reader(name, Box::new(std::io::Cursor::new(bytes)))
}

/// Every packet as (frame, ts_ns, link, first data byte, orig_len), plus the warnings.
type Row = (u64, i64, u32, u8, u32);
fn collect(files: Vec<Vec<u8>>) -> Result<(Vec<Row>, Vec<Warning>), CaptureError> {
    let readers = files
        .into_iter()
        .enumerate()
        .map(|(i, b)| reader(&format!("f{i}"), b))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cap = Capture::from_readers(readers)?;
    let mut out = Vec::new();
    while let Some(p) = cap.next()? {
        out.push((
            p.frame,
            p.ts_ns,
            p.link.0,
            p.data.first().copied().unwrap_or(0),
            p.orig_len,
        ));
    }
    Ok((out, cap.warnings().to_vec()))
}

#[test]
fn all_four_pcap_variants() {
    for be in [false, true] {
        for nanos in [false, true] {
            let f = pcap(be, nanos, 1, &[(10, 5, &[7; 20]), (11, 999, &[8; 30])]);
            let (rows, w) = collect(vec![f]).unwrap();
            let unit = if nanos { 1 } else { 1000 };
            assert_eq!(
                rows,
                vec![
                    (1, 10 * NANOS_PER_SEC + 5 * unit, 1, 7, 120),
                    (2, 11 * NANOS_PER_SEC + 999 * unit, 1, 8, 130)
                ],
                "big endian {be}, nanos {nanos}"
            );
            assert!(w.is_empty());
        }
    }
}

const NANOS_PER_SEC: i64 = 1_000_000_000;

#[test]
fn pcapng_interfaces_with_own_link_types_and_resolutions() {
    let mut f = shb();
    f.extend(idb(1, None)); // interface 0: Ethernet, microseconds
    f.extend(idb(101, Some(9))); // interface 1: raw IP, nanoseconds
    f.extend(epb(0, 1_000_000, &[1; 14])); // 1 s in microseconds
    f.extend(ng_block(0x0BAD_B10C, &[1, 2, 3, 4, 5])); // unknown block: skipped
    f.extend(epb(1, 1_500_000_001, &[2; 20])); // 1.5 s + 1 ns in nanoseconds
    f.extend(epb(7, 5, &[3; 20])); // no interface 7: counted, skipped
                                   // A second section redefines interface 0 as SLL2 with 2^-10 s units.
    f.extend(shb());
    f.extend(idb(276, Some(0x80 | 10)));
    f.extend(epb(0, 3 * 1024 + 512, &[4; 20])); // 3.5 s
    let cap_stats;
    let rows = {
        let mut cap = Capture::from_readers(vec![reader("ng", f).unwrap()]).unwrap();
        let mut rows = Vec::new();
        while let Some(p) = cap.next().unwrap() {
            rows.push((p.frame, p.ts_ns, p.link.0, p.data[0]));
        }
        cap_stats = cap.stats();
        rows
    };
    assert_eq!(
        rows,
        vec![
            (1, NANOS_PER_SEC, 1, 1),
            (2, 1_500_000_001, 101, 2),
            (3, 3_500_000_000, 276, 4)
        ]
    );
    assert_eq!(cap_stats.blocks_skipped, 1);
    assert_eq!(cap_stats.packets_without_interface, 1);
}

#[test]
fn truncated_last_record_keeps_earlier_packets_and_warns() {
    let mut f = pcap(false, false, 1, &[(1, 0, &[1; 40]), (2, 0, &[2; 40])]);
    f.truncate(f.len() - 10);
    let (rows, w) = collect(vec![f]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(w.len(), 1);
    let msg = w[0].to_string();
    assert!(
        msg.starts_with("f0: at byte 80: file is truncated"),
        "{msg}"
    );
    assert_eq!(w[0].kind, ErrorKind::Truncated);
}

#[test]
fn not_a_capture_names_the_file_and_bytes() {
    let e = reader("notes.txt", b"hello, this is text".to_vec())
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "notes.txt: at byte 0: not a pcap or pcapng capture (first bytes 68 65 6c 6c)"
    );
    assert_eq!(e.kind, ErrorKind::Format);
    let e = reader("empty", Vec::new()).err().unwrap();
    assert!(e.to_string().contains("empty file"), "{e}");
    let e = reader("short", vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0])
        .err()
        .unwrap();
    assert!(e.to_string().contains("too short"), "{e}");
}

#[test]
fn absurd_record_length_is_an_error_with_offset() {
    let mut f = pcap(false, false, 1, &[(1, 0, &[1; 40])]);
    // A second record header claiming 1 GiB, followed by a little data.
    for v in [2u32, 0, 1 << 30, 1 << 30] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&[0; 100]);
    // Claimed 1 GiB, but only 100 bytes follow: the file ends first, which is truncation.
    let (rows, w) = collect(vec![f.clone()]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(w.len(), 1);
    // With more than the parser's largest buffer behind it, the length is a lie: an error.
    f.extend(std::iter::repeat_n(0u8, 17 << 20));
    let e = collect(vec![f]).err().unwrap();
    assert!(
        e.to_string()
            .starts_with("f0: at byte 80: corrupt record: claims more than 16 MiB"),
        "{e}"
    );
    assert_eq!(e.kind, ErrorKind::Corrupt);
}

#[test]
fn pcapng_block_with_lying_length() {
    let mut f = shb();
    f.extend(idb(1, None));
    let mut bad = epb(0, 1, &[1; 20]);
    bad[4..8].copy_from_slice(&7u32.to_le_bytes()); // shorter than any block can be
    f.extend(bad);
    let e = collect(vec![f]).err().unwrap();
    assert!(
        e.to_string()
            .starts_with("f0: at byte 48: corrupt pcapng block (type 0x00000006, length 7)"),
        "{e}"
    );
}

#[test]
fn compression_is_detected_by_content() {
    let plain = pcap(
        false,
        true,
        101,
        &[(5, 1, &[0x45; 40]), (6, 2, &[0x45; 40])],
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::encode_all(&plain[..], 3).unwrap();
    let expect = collect(vec![plain.clone()]).unwrap().0;
    assert_eq!(expect.len(), 2);
    assert_eq!(collect(vec![gz.clone()]).unwrap().0, expect);
    assert_eq!(collect(vec![zst]).unwrap().0, expect);
    // A cut gzip stream is a truncated file: the packets before the cut survive, with a warning.
    let recs: Vec<(u32, u32, Vec<u8>)> = (0..2000u32)
        .map(|i| (i, 0, i.to_le_bytes().repeat(50)))
        .collect();
    let recs: Vec<(u32, u32, &[u8])> = recs.iter().map(|(s, f, d)| (*s, *f, &d[..])).collect();
    let big = pcap(false, false, 1, &recs);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&big).unwrap();
    let gz = gz.finish().unwrap();
    let (rows, w) = collect(vec![gz[..gz.len() / 2].to_vec()]).unwrap();
    assert!(rows.len() > 10 && rows.len() < 2000, "{}", rows.len());
    assert_eq!(w.len(), 1);
    assert!(
        w[0].to_string()
            .contains("(decompressed): file is truncated"),
        "{}",
        w[0]
    );
    // Cut before anything decompresses: an error, not an empty result.
    let e = collect(vec![gz[..12].to_vec()]).err().unwrap();
    assert!(
        e.to_string()
            .contains("cut short before the capture header"),
        "{e}"
    );
}

#[test]
fn several_files_merge_by_time_and_number_frames_globally() {
    let a = pcap(
        false,
        false,
        1,
        &[(1, 0, &[1; 20]), (3, 0, &[3; 20]), (5, 0, &[5; 20])],
    );
    let b = pcap(
        true,
        true,
        101,
        &[(2, 0, &[2; 20]), (3, 0, &[33; 20]), (4, 0, &[4; 20])],
    );
    let (rows, _) = collect(vec![a, b]).unwrap();
    let order: Vec<(u64, u8)> = rows.iter().map(|r| (r.0, r.3)).collect();
    // At equal timestamps the earlier file goes first.
    assert_eq!(order, vec![(1, 1), (2, 2), (3, 3), (4, 33), (5, 4), (6, 5)]);
}

#[test]
fn backwards_timestamps_in_a_stream_are_counted_not_reordered() {
    let f = pcap(
        false,
        false,
        1,
        &[(5, 0, &[1; 20]), (4, 0, &[2; 20]), (6, 0, &[3; 20])],
    );
    let mut cap = Capture::from_readers(vec![reader("f", f).unwrap()]).unwrap();
    let mut n = 0;
    while cap.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    assert_eq!(cap.stats().timestamps_backwards, 1);
    assert_eq!(cap.stats().backwards_max_ns, 1_000_000_000);
}

/// Every packet of `paths` read as one capture with `options`: (frame, seconds, first data
/// byte), and the capture's counters.
fn read_files(paths: &[String], options: ReadOptions) -> (Vec<(u64, i64, u8)>, ContainerStats) {
    let mut cap = Capture::open_with(paths, options).unwrap();
    let mut out = Vec::new();
    while let Some(p) = cap.next().unwrap() {
        out.push((p.frame, p.ts_ns / 1_000_000_000, p.data[0]));
    }
    (out, cap.stats())
}

/// Small cases of what tcpflow's test5-lines-randomized.pcap (records shuffled) and
/// packetbeat's wsgi_drum.pcap (copies of earlier records appended with their old times)
/// are: a regular file whose records step back is read whole and handed out in time order,
/// each packet with its frame number in the file (as Wireshark shows it); packets stamped
/// alike keep the file's order.
#[test]
fn a_regular_file_out_of_time_order_is_read_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let recs: [(u32, u32, &[u8]); 5] = [
        (5, 0, &[1; 20]),
        (4, 0, &[2; 20]),
        (6, 0, &[3; 20]),
        (4, 0, &[4; 20]),
        (5, 0, &[5; 20]),
    ];
    let bytes = pcap(false, false, 1, &recs);
    let plain = dir.path().join("shuffled.pcap");
    std::fs::write(&plain, &bytes).unwrap();
    let zipped = dir.path().join("shuffled.pcap.gz");
    std::fs::write(&zipped, gzip(&bytes)).unwrap();
    let sorted = vec![(2, 4, 2), (4, 4, 4), (1, 5, 1), (5, 5, 5), (3, 6, 3)];
    for path in [&plain, &zipped] {
        let name = path.to_string_lossy().into_owned();
        let (rows, stats) = read_files(std::slice::from_ref(&name), ReadOptions::default());
        assert_eq!(rows, sorted, "{name}");
        assert_eq!(stats.sorted_inputs, 1);
        assert_eq!(stats.timestamps_backwards, 2);
    }
    // Larger than the limit: read in the file's order, the steps back counted.
    let name = plain.to_string_lossy().into_owned();
    let small = ReadOptions {
        sort_max_bytes: bytes.len() as u64 - 1,
        ..ReadOptions::default()
    };
    let (rows, stats) = read_files(std::slice::from_ref(&name), small);
    let file_order: Vec<u64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(file_order, [1, 2, 3, 4, 5]);
    assert_eq!((stats.sorted_inputs, stats.timestamps_backwards), (0, 2));
    // Beside a second input (times 4 and 7), numbered in the merged order: the sorted
    // file's packets, then at equal times the earlier input first.
    let other = dir.path().join("other.pcap");
    std::fs::write(
        &other,
        pcap(false, false, 1, &[(4, 0, &[9; 20]), (7, 0, &[8; 20])]),
    )
    .unwrap();
    let names = [name, other.to_string_lossy().into_owned()];
    let (rows, stats) = read_files(&names, ReadOptions::default());
    let order: Vec<(u64, u8)> = rows.iter().map(|r| (r.0, r.2)).collect();
    assert_eq!(
        order,
        [(1, 2), (2, 4), (3, 9), (4, 1), (5, 5), (6, 3), (7, 8)]
    );
    assert_eq!(stats.sorted_inputs, 1);
    // In time order already: nothing sorted.
    let ordered = dir.path().join("ordered.pcap");
    std::fs::write(
        &ordered,
        pcap(false, false, 1, &[(4, 0, &[1; 20]), (5, 0, &[2; 20])]),
    )
    .unwrap();
    let (rows, stats) = read_files(
        &[ordered.to_string_lossy().into_owned()],
        ReadOptions::default(),
    );
    assert_eq!(rows, [(1, 4, 1), (2, 5, 2)]);
    assert_eq!((stats.sorted_inputs, stats.timestamps_backwards), (0, 0));
}

/// tcpflow's bug8.pcap: its first record's microseconds field is 8 915 240. Read as it is,
/// the packet was 8.9 s later than its second, after every other packet of the file; the
/// time that never steps back then held every later packet at it and every interval was 0.
/// Its second is what the record says: the packet is taken at the whole second, or at the
/// packet before it when that is later; nanosecond files likewise from 10^9.
#[test]
fn a_fraction_of_a_second_out_of_range_leaves_the_second() {
    let f = pcap(
        false,
        false,
        1,
        &[
            (5, 8_915_240, &[1; 20]),
            (5, 558_494, &[2; 20]),
            (5, 1_000_000, &[3; 20]),
            (6, 999_999, &[4; 20]),
        ],
    );
    let mut cap = Capture::from_readers(vec![reader("f", f).unwrap()]).unwrap();
    let mut times = Vec::new();
    while let Some(p) = cap.next().unwrap() {
        times.push((p.data[0], p.ts_ns));
    }
    let s = 1_000_000_000;
    assert_eq!(
        times,
        [
            (1, 5 * s),
            (2, 5 * s + 558_494_000),
            (3, 5 * s + 558_494_000),
            (4, 6 * s + 999_999_000)
        ]
    );
    assert_eq!(cap.stats().timestamps_invalid, 2);
    assert_eq!(cap.stats().timestamps_backwards, 0);
    let f = pcap(
        false,
        true,
        1,
        &[(5, 999_999_999, &[1; 20]), (6, 1_000_000_000, &[2; 20])],
    );
    let mut cap = Capture::from_readers(vec![reader("f", f).unwrap()]).unwrap();
    let mut times = Vec::new();
    while let Some(p) = cap.next().unwrap() {
        times.push(p.ts_ns);
    }
    assert_eq!(times, [5 * s + 999_999_999, 6 * s]);
    assert_eq!(cap.stats().timestamps_invalid, 1);
}

/// A stream that hands out at most `step` bytes per read (a pipe, a slow decompressor).
struct Dribble {
    data: Vec<u8>,
    pos: usize,
    step: usize,
}

impl std::io::Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.step).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Every packet's (ts, orig_len, data), read from `r`.
fn packets(r: FileReader) -> Vec<(i64, u32, Vec<u8>)> {
    let mut cap = Capture::from_readers(vec![r]).unwrap();
    let mut out = Vec::new();
    while let Some(p) = cap.next().unwrap() {
        out.push((p.ts_ns, p.orig_len, p.data.to_vec()));
    }
    assert!(cap.warnings().is_empty(), "{:?}", cap.warnings());
    out
}

/// 6 000 records of 1..2 999 bytes (about 9 MB: records straddle the reader's 1 MiB blocks
/// at every alignment), one of 3 MiB (larger than a block), each filled with a pattern of
/// its index: the file and its packets as `packets` gives them.
#[allow(clippy::type_complexity)]
fn straddling() -> (Vec<u8>, Vec<(i64, u32, Vec<u8>)>) {
    let mut datas: Vec<Vec<u8>> = (0..6000u32)
        .map(|i| {
            let len = (i * 7919 % 2999 + 1) as usize;
            (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
        })
        .collect();
    datas[4321] = vec![0xab; 3 << 20];
    let recs: Vec<(u32, u32, &[u8])> = datas
        .iter()
        .enumerate()
        .map(|(i, d)| (1000 + i as u32, i as u32, &d[..]))
        .collect();
    let file = pcap(false, false, 1, &recs);
    let expect: Vec<(i64, u32, Vec<u8>)> = datas
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let ts = (1000 + i as i64) * NANOS_PER_SEC + i as i64 * 1000;
            (ts, d.len() as u32 + 100, d.clone())
        })
        .collect();
    (file, expect)
}

#[test]
fn records_across_read_blocks_and_short_reads() {
    // Read in one go and through a stream that gives 7 bytes per read.
    let (file, expect) = straddling();
    assert_eq!(packets(reader("whole", file.clone()).unwrap()), expect);
    let dribble = Dribble {
        data: file,
        pos: 0,
        step: 7,
    };
    let r = FileReader::from_reader("dribble", Box::new(dribble)).unwrap();
    assert_eq!(packets(r), expect);
}

/// The "modified" pcap format (magic 0xa1b2cd34): 24-byte record headers (ifindex, protocol,
/// packet type and padding after the usual four fields), microsecond timestamps.
#[test]
fn modified_pcap_in_both_byte_orders() {
    for be in [false, true] {
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut f = Vec::new();
        f.extend_from_slice(&w32(0xa1b2_cd34));
        f.extend_from_slice(&w16(2));
        f.extend_from_slice(&w16(4));
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&w32(65535));
        f.extend_from_slice(&w32(1));
        for (sec, usec, byte) in [(7u32, 250u32, 0x11u8), (8, 500, 0x22)] {
            f.extend_from_slice(&w32(sec));
            f.extend_from_slice(&w32(usec));
            f.extend_from_slice(&w32(30));
            f.extend_from_slice(&w32(60));
            f.extend_from_slice(&w32(2)); // ifindex
            f.extend_from_slice(&w16(0x0800)); // protocol
            f.extend_from_slice(&[0, 0]); // packet type, padding
            f.extend_from_slice(&[byte; 30]);
        }
        let (rows, w) = collect(vec![f]).unwrap();
        assert_eq!(
            rows,
            vec![
                (1, 7 * NANOS_PER_SEC + 250_000, 1, 0x11, 60),
                (2, 8 * NANOS_PER_SEC + 500_000, 1, 0x22, 60)
            ],
            "big endian {be}"
        );
        assert!(w.is_empty());
    }
}

/// An Interface Description Block with ns resolution and an `if_tsoffset` (seconds).
fn idb_offset(link: u16, offset_sec: i64) -> Vec<u8> {
    let mut body = link.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol: 10^-9
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&[9, 0, 0, 0]);
    body.extend_from_slice(&14u16.to_le_bytes()); // if_tsoffset
    body.extend_from_slice(&8u16.to_le_bytes());
    body.extend_from_slice(&offset_sec.to_le_bytes());
    body.extend_from_slice(&[0, 0, 0, 0]);
    ng_block(1, &body)
}

#[test]
fn pcapng_times_before_1970_or_after_2116_take_the_time_before_them() {
    // Interface 0 is ordinary; interface 1's offset puts its packets 2^62 s before 1970;
    // one packet of interface 0 is stamped in 2262 (a 64-bit count of ns reaches 2554).
    // Read as they were, the two ends of the range 146 000 years apart overflowed every
    // difference of times (a debug build panicked in the reports, a release build wrapped).
    let t = 1_700_000_000_000_000_000u64;
    let late = i64::MAX as u64 - 5;
    let mut f = shb();
    f.extend(idb_offset(1, 0));
    f.extend(idb_offset(1, -(1 << 62)));
    f.extend(epb(0, t, &[1; 20]));
    f.extend(epb(1, 5, &[2; 20]));
    f.extend(epb(0, t + 1000, &[3; 20]));
    f.extend(epb(0, late, &[4; 20]));
    f.extend(epb(0, t + 2000, &[5; 20]));
    let mut cap = Capture::from_readers(vec![reader("f", f).unwrap()]).unwrap();
    let mut times = Vec::new();
    while let Some(p) = cap.next().unwrap() {
        times.push((p.data[0], p.ts_ns));
    }
    let t = t as i64;
    assert_eq!(
        times,
        vec![(1, t), (2, t), (3, t + 1000), (4, t + 1000), (5, t + 2000)]
    );
    assert_eq!(cap.stats().timestamps_out_of_range, 2);
    assert_eq!(cap.stats().timestamps_backwards, 0);
    // The last time inside the range is taken as it is.
    let mut f = shb();
    f.extend(idb(1, Some(9)));
    f.extend(epb(0, crate::MAX_TS_NS as u64, &[1; 20]));
    let mut cap = Capture::from_readers(vec![reader("f", f).unwrap()]).unwrap();
    assert_eq!(cap.next().unwrap().map(|p| p.ts_ns), Some(crate::MAX_TS_NS));
    assert_eq!(cap.stats().timestamps_out_of_range, 0);
}

fn ahead(name: &str, bytes: Vec<u8>, read_ahead: bool) -> Result<FileReader, CaptureError> {
    FileReader::from_reader_with(
        name,
        Box::new(std::io::Cursor::new(bytes)),
        ReadOptions {
            read_ahead,
            ..ReadOptions::default()
        },
    )
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b).unwrap();
    gz.finish().unwrap()
}

/// Every packet (ts, orig_len, data), the warnings and the error, as a capture reads them.
type Outcome = (Vec<(i64, u32, Vec<u8>)>, Vec<String>, Option<String>);
fn outcome(r: Result<FileReader, CaptureError>) -> Outcome {
    let mut cap = match r.and_then(|r| Capture::from_readers(vec![r])) {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Vec::new(), Some(e.to_string())),
    };
    let mut out = Vec::new();
    let error = loop {
        match cap.next() {
            Ok(Some(p)) => out.push((p.ts_ns, p.orig_len, p.data.to_vec())),
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let warnings = cap.warnings().iter().map(|w| w.to_string()).collect();
    (out, warnings, error)
}

#[test]
fn read_ahead_reads_what_the_reading_thread_reads() {
    // The read-ahead thread hands the parser 1 MiB blocks: the records straddle them at
    // every alignment, and one record is larger than a block.
    let (file, expect) = straddling();
    let zst = zstd::encode_all(&file[..], 3).unwrap();
    let gz = gzip(&file);
    for (what, z) in [("zstd", &zst), ("gzip", &gz), ("plain", &file)] {
        let got = outcome(ahead(what, z.clone(), true));
        assert!(
            got.1.is_empty() && got.2.is_none(),
            "{what}: {:?}",
            (&got.1, &got.2)
        );
        assert!(got.0 == expect, "{what}: {} packets", got.0.len());
    }
    // pcapng (read by pcap-parser, not the reader of legacy pcap), 2 000 blocks of 1 KB.
    let mut ng = shb();
    ng.extend(idb(1, None));
    for i in 0..2000u32 {
        ng.extend(epb(0, u64::from(i) * 1000, &i.to_le_bytes().repeat(256)));
    }
    let plain = outcome(reader("ng", ng.clone()));
    assert_eq!(plain.0.len(), 2000);
    assert_eq!(outcome(ahead("ng", gzip(&ng), true)), plain);
    // Cut in the middle: the same packets, warning and offset as when the reading thread
    // reads. Two bytes changed in the middle: a decompressor that meets them fails the read
    // it was in, and what it had already put into that read is lost; reads of other sizes
    // lose other bytes. So the packets of one are the first packets of the other, and the
    // error is the same but for its offset.
    let cut = [
        file[..file.len() / 2].to_vec(),
        zst[..zst.len() / 2].to_vec(),
        gz[..gz.len() / 2].to_vec(),
    ];
    for (i, b) in cut.into_iter().enumerate() {
        let without = outcome(ahead("cut", b.clone(), false));
        assert_eq!(without.1.len(), 1, "cut {i} warns");
        assert!(without.0.len() > 1000 && without.0.len() < 5000, "cut {i}");
        assert!(outcome(ahead("cut", b, true)) == without, "cut {i}");
    }
    let after_offset = |e: &Option<String>| {
        e.as_ref()
            .and_then(|e| e.split_once("): ").map(|x| x.1.to_string()))
    };
    for (what, z) in [("zstd", &zst), ("gzip", &gz)] {
        let mut flipped = z.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x5a;
        flipped[mid + 1] ^= 0xa5;
        let without = outcome(ahead("bad", flipped.clone(), false));
        let with = outcome(ahead("bad", flipped, true));
        for o in [&with, &without] {
            assert!(o.1.is_empty() && o.2.is_some(), "{what}: {:?}", o.2);
            assert!(
                o.0.len() > 1000 && o.0.len() < 5000,
                "{what}: {}",
                o.0.len()
            );
        }
        let n = with.0.len().min(without.0.len());
        assert!(with.0[..n] == without.0[..n], "{what}");
        assert_eq!(after_offset(&with.2), after_offset(&without.2), "{what}");
    }
}

/// Writes `bytes` into the FIFO `path` on a thread of its own, and sends a second handle on
/// its write end once open. The open does not block (it fails while no reader is there, and
/// is tried again for at most 10 s), so the thread ends even if the reader never comes.
fn fifo_writer(
    path: &std::path::Path,
    bytes: Vec<u8>,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Receiver<std::fs::File>,
) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::os::unix::fs::OpenOptionsExt;
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    let t = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut f = loop {
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(OFlag::O_NONBLOCK.bits())
                .open(&path);
            match opened {
                Ok(f) => break f,
                Err(_) if start.elapsed() < std::time::Duration::from_secs(10) => {
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                Err(_) => return,
            }
        };
        // Blocking writes from here on: the reader takes the bytes at its pace.
        let _ = fcntl(&f, FcntlArg::F_SETFL(OFlag::empty()));
        if let Ok(second) = f.try_clone() {
            let _ = tx.send(second);
        }
        let _ = f.write_all(&bytes);
    });
    (t, rx)
}

#[test]
fn a_fifo_is_read_once_through_a_wide_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in");
    let recs: Vec<(u32, u32, Vec<u8>)> = (0..3000u32)
        .map(|i| (i, 0, i.to_le_bytes().repeat(50)))
        .collect();
    let recs: Vec<(u32, u32, &[u8])> = recs.iter().map(|(s, f, d)| (*s, *f, &d[..])).collect();
    let file = pcap(false, false, 101, &recs);
    assert!(file.len() > 4 * open::PREFIX);
    let expect = outcome(reader("in", file.clone()));
    assert_eq!(expect.0.len(), 3000);
    let name = path.to_string_lossy().into_owned();
    for read_ahead in [false, true] {
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (writer, opened) = fifo_writer(&path, file.clone());
        let r = FileReader::open_with(
            &name,
            ReadOptions {
                read_ahead,
                ..ReadOptions::default()
            },
        );
        // Asked for 1 MiB (the default fs.pipe-max-size): the writer goes 16 times further
        // before it waits for the reader.
        let second = opened.recv_timeout(std::time::Duration::from_secs(10));
        let size = second.map(|f| nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GETPIPE_SZ));
        let max: Option<i32> = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        if max.is_some_and(|m| m >= 1 << 20) {
            assert_eq!(size.ok().and_then(|s| s.ok()), Some(1 << 20));
        }
        let got = outcome(r);
        writer.join().unwrap();
        std::fs::remove_file(&path).unwrap();
        let (packets, warnings, error) = (&got.0, &got.1, &got.2);
        assert!(warnings.is_empty() && error.is_none(), "{got:?}");
        assert!(
            *packets == expect.0,
            "read ahead {read_ahead}: {} packets",
            packets.len()
        );
    }
}

#[test]
fn a_directory_is_refused_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = FileReader::open(&dir.path().to_string_lossy())
        .err()
        .expect("a directory is not a capture");
    assert!(
        e.to_string()
            .ends_with("at byte 0: cannot open: a directory, not a capture"),
        "{e}"
    );
    assert_eq!(e.kind, ErrorKind::Open);
}

/// The size a progress bar counts up to comes from the files opened: a regular file's length
/// (two of them summed), nothing for a pipe or any stream.
#[test]
fn a_regular_file_has_a_size_and_a_stream_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<(u32, u32, &[u8])> = vec![(1, 0, &[0u8; 60][..]), (2, 0, &[1u8; 40][..])];
    let bytes = pcap(false, false, 101, &recs);
    let a = dir.path().join("a.pcap");
    let b = dir.path().join("b.pcap");
    std::fs::write(&a, &bytes).unwrap();
    std::fs::write(&b, &bytes[..bytes.len() - 40]).unwrap();
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let one = FileReader::open(&a).unwrap();
    assert_eq!(one.size(), Some(bytes.len() as u64));
    let both = Capture::open(&[&*a, &*b]).unwrap();
    assert_eq!(both.size(), Some(2 * bytes.len() as u64 - 40));
    let stream = FileReader::from_reader("in", Box::new(std::io::Cursor::new(bytes))).unwrap();
    assert_eq!(stream.size(), None);
    let mixed = Capture::from_readers(vec![FileReader::open(&a).unwrap(), stream]).unwrap();
    assert_eq!(mixed.size(), None);
}
