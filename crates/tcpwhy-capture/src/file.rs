//! One capture file, read block by block with pcap-parser's streaming reader.

use crate::open::{self, DynRead, LastError, Opened, Rest};
use crate::pcap::{self, PcapReader, Record, Stop};
use crate::{CaptureError, ContainerStats, ErrorKind as Kind, Packet, ReadOptions, Warning};
use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{create_reader, PcapBlockOwned, PcapError};
use std::io::{Cursor, ErrorKind, Read};
use tcpwhy_wire::LinkType;

/// The parser's buffer starts here and doubles, up to `MAX_CAPACITY`, when a block needs more.
const INITIAL_CAPACITY: usize = 64 << 10;
/// A record or block larger than this is a lie about its length (pcap's largest snaplen is
/// 256 KiB; pcapng tools write blocks far below this).
const MAX_CAPACITY: usize = 16 << 20;
const NANOS: i64 = 1_000_000_000;
/// pcapng section header magic, also the first four bytes of every pcapng file.
const PCAPNG_SHB: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

#[derive(Clone, Copy, Debug)]
struct Interface {
    link: LinkType,
    /// Timestamp units per second (pcapng `if_tsresol`; default 10^6).
    units_per_sec: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    offset_sec: i64,
    snaplen: u32,
}

enum Format {
    /// Legacy pcap: one link type, micro- or nanosecond timestamps.
    Pcap { link: LinkType, nanos: bool },
    /// pcapng: the interfaces of the current section, and its byte order.
    PcapNg {
        interfaces: Vec<Interface>,
        big_endian: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Head {
    ts_ns: i64,
    link: LinkType,
    orig_len: u32,
}

/// One packet of a file read whole to be put in time order (`Sorted`).
#[derive(Clone, Copy, Debug)]
struct Spooled {
    ts_ns: i64,
    /// Its frame number in the file (1-based).
    frame: u64,
    link: LinkType,
    orig_len: u32,
    /// Its bytes: `Sorted::bytes[start..start + len]`.
    start: usize,
    len: u32,
}

/// A file whose records step back in time, read whole and sorted by time (stably: packets
/// stamped alike keep the file's order).
struct Sorted {
    packets: Vec<Spooled>,
    bytes: Vec<u8>,
    /// The index of the packet handed out (`usize::MAX` before the first).
    at: usize,
}

/// How the file is parsed.
enum Inner {
    /// Legacy pcap, records handed out in place (crate::pcap).
    Pcap(PcapReader),
    /// pcapng (and error reporting for what is neither): pcap-parser's streaming reader; the
    /// current packet is copied into `FileReader::buf`.
    Parser(Box<dyn PcapReaderIterator + Send>),
}

/// Reads one capture file. No allocation happens per packet once the buffers have grown to
/// the largest frame.
pub struct FileReader {
    name: String,
    inner: Inner,
    /// The current record of a legacy pcap (its bytes are in the reader's buffer).
    record: Option<Record>,
    compressed: bool,
    last_error: LastError,
    format: Format,
    capacity: usize,
    buf: Vec<u8>,
    head: Option<Head>,
    last_ts: i64,
    done: bool,
    warning: Option<Warning>,
    stats: ContainerStats,
    /// The input's size when it is a regular file (`size`).
    size: Option<u64>,
    /// The file's packets in time order, when it was read whole to sort them.
    sorted: Option<Box<Sorted>>,
    /// Hand out a sorted packet with its frame number in the file (the only input), not the
    /// number its caller gives (several inputs, numbered in the merged order).
    pub(crate) keep_numbers: bool,
}

/// What to do with a block the parser rejected.
enum BadBlock {
    Skip(usize),
    Truncated,
    Corrupt,
    /// Nothing left: the end of the file between blocks.
    End,
}

fn word(b: &[u8], i: usize, big_endian: bool) -> u32 {
    let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
    if big_endian {
        u32::from_be_bytes(w)
    } else {
        u32::from_le_bytes(w)
    }
}

/// Why a pcapng block's framing is wrong, for the error message.
fn block_problem(format: &Format, inner: &Inner) -> String {
    let (Format::PcapNg { big_endian, .. }, Inner::Parser(r)) = (format, inner) else {
        return String::new();
    };
    let d = r.data();
    let Some(head) = d.get(..8) else {
        return String::new();
    };
    let len = word(head, 4, *big_endian) as usize;
    if len < 12 {
        ": shorter than any block (12 bytes)".to_string()
    } else if len % 4 != 0 {
        ": not a multiple of 4".to_string()
    } else if let Some(block) = d.get(..len) {
        let trailer = word(block, len - 4, *big_endian);
        if trailer as usize != len {
            format!(": its trailing length says {trailer}")
        } else {
            String::new()
        }
    } else {
        String::new()
    }
}

/// `if_tsresol` (pcapng section 4.2): high bit clear = 10^-n seconds, set = 2^-n seconds.
fn units_per_sec(tsresol: u8) -> u64 {
    let n = u32::from(tsresol & 0x7F);
    let units = if tsresol & 0x80 == 0 {
        10u64.checked_pow(n)
    } else {
        1u64.checked_shl(n)
    };
    match units {
        Some(u) if u > 0 => u,
        _ => 1_000_000,
    }
}

/// A pcapng timestamp in ns since 1970, or `None` outside `0..=MAX_TS_NS` (a 64-bit count of
/// ticks reaches the year 2554 at ns resolution, and a negative offset goes before 1970).
fn ng_timestamp(high: u32, low: u32, iface: &Interface) -> Option<i64> {
    let t = (u128::from(high) << 32) | u128::from(low);
    let u = u128::from(iface.units_per_sec);
    let ns = (t / u) * 1_000_000_000 + (t % u) * 1_000_000_000 / u;
    let ns = i64::try_from(ns).ok()?;
    let ns = ns.checked_add(iface.offset_sec.checked_mul(NANOS)?)?;
    (0..=crate::MAX_TS_NS).contains(&ns).then_some(ns)
}

impl FileReader {
    /// Open a file (`-` for standard input).
    pub fn open(path: &str) -> Result<FileReader, CaptureError> {
        Self::open_with(path, ReadOptions::default())
    }

    /// Open a file (`-` for standard input) the way `options` say.
    pub fn open_with(path: &str, options: ReadOptions) -> Result<FileReader, CaptureError> {
        let opened = open::open(path, options.read_ahead).map_err(|e| CaptureError {
            kind: Kind::Open,
            file: path.to_string(),
            offset: 0,
            compressed: false,
            message: format!("cannot open: {e}"),
        })?;
        let mut r = Self::from_opened(path, opened)?;
        if r.size.is_some() && options.sort_max_bytes > 0 && !r.in_time_order(path, options) {
            r.sort_in_time()?;
        }
        Ok(r)
    }

    /// Whether the regular file at `path` (which `self` opened) is in time order or too large
    /// to be sorted: a second reader walks it to its first record stamped before the one
    /// before it, or to its end, or past `options.sort_max_bytes`. A file that cannot be read
    /// through (a corrupt block, a read error) is left in its own order, to fail or warn as
    /// it does.
    fn in_time_order(&self, path: &str, options: ReadOptions) -> bool {
        if !self.compressed && self.size.is_some_and(|n| n > options.sort_max_bytes) {
            return true;
        }
        let Ok(mut scan) = FileReader::open_with(
            path,
            ReadOptions {
                read_ahead: false,
                sort_max_bytes: 0,
            },
        ) else {
            return true;
        };
        let mut last = i64::MIN;
        let mut stepped_back = false;
        loop {
            if scan.advance().is_err() || scan.offset() > options.sort_max_bytes {
                return true;
            }
            match scan.head_ts() {
                // An uncompressed file's size is known: its first step back decides.
                Some(ts) if ts < last && !self.compressed => return false,
                Some(ts) => {
                    stepped_back |= ts < last;
                    last = last.max(ts);
                }
                None => return !stepped_back,
            }
        }
    }

    /// Read the whole file and hand its packets out in time order from now on.
    fn sort_in_time(&mut self) -> Result<(), CaptureError> {
        let mut packets = Vec::new();
        let mut bytes = Vec::new();
        loop {
            self.advance()?;
            let Some(p) = self.head(packets.len() as u64 + 1, 0) else {
                break;
            };
            let spooled = Spooled {
                ts_ns: p.ts_ns,
                frame: p.frame,
                link: p.link,
                orig_len: p.orig_len,
                start: bytes.len(),
                len: p.data.len() as u32,
            };
            bytes.extend_from_slice(p.data);
            packets.push(spooled);
        }
        packets.sort_by_key(|p| p.ts_ns);
        self.stats.sorted_inputs = 1;
        self.sorted = Some(Box::new(Sorted {
            packets,
            bytes,
            at: usize::MAX,
        }));
        Ok(())
    }

    /// Read a capture from any byte stream; `name` is used in messages.
    pub fn from_reader(
        name: &str,
        reader: Box<dyn Read + Send>,
    ) -> Result<FileReader, CaptureError> {
        Self::from_reader_with(name, reader, ReadOptions::default())
    }

    /// [`FileReader::from_reader`] the way `options` say.
    pub fn from_reader_with(
        name: &str,
        reader: Box<dyn Read + Send>,
        options: ReadOptions,
    ) -> Result<FileReader, CaptureError> {
        Self::from_opened(name, open::from_reader(reader, options.read_ahead))
    }

    fn from_opened(name: &str, o: Opened) -> Result<FileReader, CaptureError> {
        let size = o.size;
        let mut r = Self::from_opened_stream(name, o)?;
        r.size = size;
        Ok(r)
    }

    fn from_opened_stream(name: &str, o: Opened) -> Result<FileReader, CaptureError> {
        let compressed = o.compression.is_some();
        let first: Vec<u8> = o.prefix.iter().take(4).copied().collect();
        let prefix_len = o.prefix.len();
        let legacy = pcap::Header::parse(&o.prefix);
        if let Some(header) = legacy {
            let reader = match o.rest {
                Rest::Ahead(ahead) => {
                    PcapReader::with_blocks(o.prefix, ahead, header, MAX_CAPACITY)
                }
                Rest::Stream(rest) => {
                    let stream: DynRead = Box::new(Cursor::new(o.prefix).chain(rest));
                    PcapReader::new(stream, header, MAX_CAPACITY)
                }
            };
            let mut r = FileReader::with(name, Inner::Pcap(reader), compressed, o.last_error);
            r.format = Format::Pcap {
                link: header.link,
                nanos: header.nanos,
            };
            if let Inner::Pcap(p) = &mut r.inner {
                if let Err(stop) = p.skip_file_header() {
                    // The prefix held the whole header: only a failing stream gets here.
                    return Err(CaptureError {
                        kind: Kind::Read,
                        file: name.to_string(),
                        offset: 0,
                        compressed,
                        message: format!("cannot read the capture header: {stop:?}"),
                    });
                }
            }
            return Ok(r);
        }
        let err = |message: String| CaptureError {
            kind: Kind::Format,
            file: name.to_string(),
            offset: 0,
            compressed,
            message,
        };
        let stream: DynRead = Box::new(Cursor::new(o.prefix).chain(o.rest.into_read()));
        let reader = match create_reader(INITIAL_CAPACITY, stream) {
            Ok(r) => r,
            Err(e) => {
                let io = o
                    .last_error
                    .take()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                let what = match o.compression {
                    Some(z) => format!("{z}-compressed data"),
                    None => "file".to_string(),
                };
                let message = match e {
                    _ if prefix_len == 0 && !io.is_empty() => {
                        format!("{what} is corrupt or cut short before the capture header{io}")
                    }
                    PcapError::Eof => format!("empty {what}: not a capture{io}"),
                    PcapError::Incomplete(_) | PcapError::UnexpectedEof => {
                        format!("{what} too short for a capture header ({prefix_len} bytes){io}")
                    }
                    _ if first == PCAPNG_SHB => {
                        "pcapng section header block is malformed".to_string()
                    }
                    _ => format!(
                        "not a pcap or pcapng capture (first bytes {}){io}",
                        first
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                };
                return Err(err(message));
            }
        };
        Ok(FileReader::with(
            name,
            Inner::Parser(reader),
            compressed,
            o.last_error,
        ))
    }

    fn with(name: &str, inner: Inner, compressed: bool, last_error: LastError) -> FileReader {
        FileReader {
            name: name.to_string(),
            inner,
            record: None,
            compressed,
            last_error,
            format: Format::PcapNg {
                interfaces: Vec::new(),
                big_endian: false,
            },
            capacity: INITIAL_CAPACITY,
            buf: Vec::new(),
            head: None,
            last_ts: i64::MIN,
            done: false,
            warning: None,
            stats: ContainerStats::default(),
            size: None,
            sorted: None,
            keep_numbers: false,
        }
    }

    /// The input's size when it is a regular file, from the file this reader opened (never a
    /// second look at its path): what a progress bar can count up to.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    fn error(&self, kind: Kind, message: String) -> CaptureError {
        CaptureError {
            kind,
            file: self.name.clone(),
            offset: self.offset(),
            compressed: self.compressed,
            message,
        }
    }

    fn stop_truncated(&mut self, detail: &str) {
        let message = format!("file is truncated ({detail}); results cover the packets before it");
        self.warning = Some(self.error(Kind::Truncated, message));
        self.done = true;
    }

    /// Describe the block or record the parser choked on, from its first bytes.
    fn describe_bad_block(&self) -> String {
        let Inner::Parser(reader) = &self.inner else {
            return "corrupt record".to_string();
        };
        let d = reader.data();
        match (&self.format, d.get(..8)) {
            (Format::PcapNg { big_endian, .. }, Some(b)) => {
                let w = |i: usize| word(b, i, *big_endian);
                format!(
                    "corrupt pcapng block (type 0x{:08x}, length {})",
                    w(0),
                    w(4)
                )
            }
            _ => "corrupt record".to_string(),
        }
    }

    /// A pcapng block the parser rejected: a packet block whose framing is sound (its length
    /// a multiple of 4, its trailing length equal to the leading one, all of it in the file) but
    /// whose contents lie is skipped and counted (`Skip(length)`); one that runs past the end of
    /// the file is a truncated file; anything else is corrupt.
    fn classify_bad_block(&self) -> BadBlock {
        let Inner::Parser(reader) = &self.inner else {
            return BadBlock::Corrupt;
        };
        let Format::PcapNg { big_endian, .. } = &self.format else {
            return BadBlock::Truncated;
        };
        let d = reader.data();
        if d.is_empty() {
            return BadBlock::End;
        }
        let Some(head) = d.get(..8) else {
            return BadBlock::Truncated;
        };
        let kind = word(head, 0, *big_endian);
        let len = word(head, 4, *big_endian) as usize;
        if len < 12 || len % 4 != 0 {
            return BadBlock::Corrupt;
        }
        let Some(block) = d.get(..len) else {
            // The parser asked for more and the file ended: the block is cut short.
            return BadBlock::Truncated;
        };
        let trailer = word(block, len - 4, *big_endian) as usize;
        let packet = matches!(kind, 3 | 6); // Simple and Enhanced Packet Blocks
        if trailer == len && packet && kind != 0x0A0D_0D0A {
            BadBlock::Skip(len)
        } else {
            BadBlock::Corrupt
        }
    }

    /// Move to the next packet. At the end, `head_ts()` returns `None`.
    pub(crate) fn advance(&mut self) -> Result<(), CaptureError> {
        if let Some(s) = &mut self.sorted {
            s.at = s.at.wrapping_add(1);
            return Ok(());
        }
        self.head = None;
        self.record = None;
        if self.done {
            return Ok(());
        }
        match &self.inner {
            Inner::Pcap(_) => self.advance_pcap(),
            Inner::Parser(_) => self.advance_parser(),
        }
    }

    fn advance_pcap(&mut self) -> Result<(), CaptureError> {
        let Inner::Pcap(r) = &mut self.inner else {
            return Ok(());
        };
        let link = r.header().link;
        match r.next_record() {
            Ok(rec) => {
                // A fraction of a second out of range leaves the second: the packet was
                // captured within it and, in a file in time order, not before the packet
                // before it; the earliest such time is taken.
                let ts_ns = if rec.frac_invalid {
                    self.stats.timestamps_invalid += 1;
                    rec.ts_ns.max(self.last_ts)
                } else {
                    rec.ts_ns
                };
                if ts_ns < self.last_ts {
                    self.stats.backwards(self.last_ts - ts_ns);
                }
                self.last_ts = ts_ns;
                self.head = Some(Head {
                    ts_ns,
                    link,
                    orig_len: rec.orig_len,
                });
                self.record = Some(rec);
                Ok(())
            }
            Err(Stop::End) => {
                self.done = true;
                Ok(())
            }
            Err(Stop::Truncated) => {
                let detail = match self.last_error.take() {
                    Some(e) => format!("the last record is cut short: {e}"),
                    None => "the last record is cut short".to_string(),
                };
                self.stop_truncated(&detail);
                Ok(())
            }
            Err(Stop::Oversized { caplen }) => {
                self.done = true;
                Err(self.error(
                    Kind::Corrupt,
                    format!(
                    "corrupt record: claims more than {} MiB ({caplen} bytes), larger than any real frame",
                    MAX_CAPACITY >> 20
                )))
            }
            Err(Stop::Io(e)) if e.kind() == ErrorKind::UnexpectedEof => {
                self.stop_truncated(&format!("compressed stream ends early: {e}"));
                Ok(())
            }
            Err(Stop::Io(e)) => {
                self.done = true;
                Err(self.error(Kind::Read, format!("read error: {e}")))
            }
        }
    }

    fn advance_parser(&mut self) -> Result<(), CaptureError> {
        while !self.done {
            let Inner::Parser(reader) = &mut self.inner else {
                return Ok(());
            };
            match reader.next() {
                Ok((consumed, block)) => {
                    if consumed == 0 {
                        // The parser made no progress: never loop on it.
                        self.done = true;
                        return Err(
                            self.error(Kind::Corrupt, "corrupt block of length 0".to_string())
                        );
                    }
                    let head = Self::take_block(
                        block,
                        &mut self.format,
                        &mut self.buf,
                        &mut self.stats,
                        self.last_ts,
                    );
                    reader.consume(consumed);
                    if let Some(h) = head {
                        if h.ts_ns < self.last_ts {
                            self.stats.backwards(self.last_ts - h.ts_ns);
                        }
                        self.last_ts = h.ts_ns;
                        self.head = Some(h);
                        return Ok(());
                    }
                }
                Err(PcapError::Eof) => self.done = true,
                Err(PcapError::Incomplete(_)) => {
                    if reader.refill().is_err() {
                        return self.read_failed();
                    }
                }
                Err(PcapError::BufferTooSmall) => {
                    if self.capacity >= MAX_CAPACITY {
                        self.done = true;
                        let what = self.describe_bad_block();
                        // A framing error makes the parser ask for ever more; say which.
                        let why = match block_problem(&self.format, &self.inner) {
                            p if !p.is_empty() => p,
                            _ => format!(
                                ": claims more than {} MiB, larger than any real frame",
                                MAX_CAPACITY >> 20
                            ),
                        };
                        return Err(self.error(Kind::Corrupt, format!("{what}{why}")));
                    }
                    self.capacity *= 2;
                    reader.grow(self.capacity);
                    if reader.refill().is_err() {
                        return self.read_failed();
                    }
                }
                Err(PcapError::ReadError) => return self.read_failed(),
                Err(e) => match (
                    matches!(e, PcapError::UnexpectedEof),
                    self.classify_bad_block(),
                ) {
                    (_, BadBlock::Skip(len)) => {
                        self.stats.corrupt_blocks += 1;
                        if let Inner::Parser(reader) = &mut self.inner {
                            reader.consume(len);
                        }
                    }
                    (true, BadBlock::End) => self.done = true,
                    (true, BadBlock::Truncated) => {
                        let detail = match self.last_error.take() {
                            Some(e) => format!("the last record is cut short: {e}"),
                            None => "the last record is cut short".to_string(),
                        };
                        self.stop_truncated(&detail);
                    }
                    _ => {
                        self.done = true;
                        let what = self.describe_bad_block();
                        let why = match self.classify_bad_block() {
                            BadBlock::Corrupt => block_problem(&self.format, &self.inner),
                            _ => String::new(),
                        };
                        return Err(self.error(Kind::Corrupt, format!("{what}{why}")));
                    }
                },
            }
        }
        Ok(())
    }

    fn read_failed(&mut self) -> Result<(), CaptureError> {
        match self.last_error.take() {
            Some(e) if e.kind() == ErrorKind::UnexpectedEof => {
                self.stop_truncated(&format!("compressed stream ends early: {e}"));
                Ok(())
            }
            Some(e) => {
                self.done = true;
                Err(self.error(Kind::Read, format!("read error: {e}")))
            }
            None => {
                self.done = true;
                Err(self.error(Kind::Read, "read error".to_string()))
            }
        }
    }

    /// Interpret one block; copy the packet (if any) into `buf`.
    fn take_block(
        block: PcapBlockOwned<'_>,
        format: &mut Format,
        buf: &mut Vec<u8>,
        stats: &mut ContainerStats,
        last_ts: i64,
    ) -> Option<Head> {
        let mut copy = |data: &[u8]| {
            buf.clear();
            buf.extend_from_slice(data);
        };
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                *format = Format::Pcap {
                    // Bits 16-31 of the field carry FCS information (pcap spec, LinkType).
                    link: LinkType(h.network.0 as u32 & 0xFFFF),
                    nanos: h.is_nanosecond_precision(),
                };
                None
            }
            PcapBlockOwned::Legacy(b) => {
                let Format::Pcap { link, nanos } = *format else {
                    return None;
                };
                let frac = i64::from(b.ts_usec) * if nanos { 1 } else { 1000 };
                copy(b.data);
                Some(Head {
                    ts_ns: i64::from(b.ts_sec) * NANOS + frac,
                    link,
                    orig_len: b.origlen,
                })
            }
            PcapBlockOwned::NG(block) => {
                let Format::PcapNg {
                    interfaces,
                    big_endian,
                } = format
                else {
                    return None;
                };
                match block {
                    Block::SectionHeader(shb) => {
                        interfaces.clear();
                        *big_endian = shb.big_endian();
                        None
                    }
                    Block::InterfaceDescription(idb) => {
                        interfaces.push(Interface {
                            link: LinkType(idb.linktype.0 as u32),
                            units_per_sec: units_per_sec(idb.if_tsresol),
                            offset_sec: idb.if_tsoffset,
                            snaplen: idb.snaplen,
                        });
                        None
                    }
                    Block::EnhancedPacket(epb) => {
                        let Some(iface) = interfaces.get(epb.if_id as usize) else {
                            stats.packets_without_interface += 1;
                            return None;
                        };
                        let len = (epb.caplen as usize).min(epb.data.len());
                        copy(&epb.data[..len]);
                        let ts_ns =
                            ng_timestamp(epb.ts_high, epb.ts_low, iface).unwrap_or_else(|| {
                                stats.timestamps_out_of_range += 1;
                                last_ts.max(0)
                            });
                        Some(Head {
                            ts_ns,
                            link: iface.link,
                            orig_len: epb.origlen,
                        })
                    }
                    Block::SimplePacket(spb) => {
                        // Simple Packet Blocks belong to interface 0 and carry no timestamp.
                        let Some(iface) = interfaces.first() else {
                            stats.packets_without_interface += 1;
                            return None;
                        };
                        let mut len = (spb.origlen as usize).min(spb.data.len());
                        if iface.snaplen > 0 {
                            len = len.min(iface.snaplen as usize);
                        }
                        copy(&spb.data[..len]);
                        Some(Head {
                            ts_ns: last_ts.max(0),
                            link: iface.link,
                            orig_len: spb.origlen,
                        })
                    }
                    _ => {
                        stats.blocks_skipped += 1;
                        None
                    }
                }
            }
        }
    }

    pub(crate) fn head_ts(&self) -> Option<i64> {
        if let Some(s) = &self.sorted {
            return s.packets.get(s.at).map(|p| p.ts_ns);
        }
        self.head.map(|h| h.ts_ns)
    }

    pub(crate) fn head(&self, frame: u64, source: usize) -> Option<Packet<'_>> {
        if let Some(s) = &self.sorted {
            let p = s.packets.get(s.at)?;
            return Some(Packet {
                frame: if self.keep_numbers { p.frame } else { frame },
                ts_ns: p.ts_ns,
                link: p.link,
                data: s.bytes.get(p.start..p.start + p.len as usize)?,
                orig_len: p.orig_len,
                source,
            });
        }
        let data = match (&self.inner, &self.record) {
            (Inner::Pcap(r), Some(rec)) => r.data(rec),
            _ => &self.buf,
        };
        self.head.map(|h| Packet {
            frame,
            ts_ns: h.ts_ns,
            link: h.link,
            data,
            orig_len: h.orig_len,
            source,
        })
    }

    pub(crate) fn take_warning(&mut self) -> Option<Warning> {
        self.warning.take()
    }

    pub(crate) fn stats(&self) -> &ContainerStats {
        &self.stats
    }

    pub(crate) fn offset(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(r) => r.offset(),
            Inner::Parser(r) => r.consumed() as u64,
        }
    }

    /// Whether the input is gzip- or zstd-compressed (detected from its first bytes).
    pub fn compressed(&self) -> bool {
        self.compressed
    }

    /// The name given at opening (the path, or `-`).
    pub fn name(&self) -> &str {
        &self.name
    }
}
