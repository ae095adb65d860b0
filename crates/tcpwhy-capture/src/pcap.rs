//! Legacy pcap, read in place: the stream is read in large blocks into one reused buffer and
//! each record is handed out as a slice of it (no copy per packet, no allocation once the
//! buffer has its size). Four variants (little/big endian, micro/nanoseconds) and the
//! "modified" (Kuznetzov) format with its 24-byte record headers.
//!
//! File format: draft-ietf-opsawg-pcap section 4 (file header) and section 5 (record header).

use crate::open::{DynRead, ReadAhead, AHEAD_HEAD};
use std::io::{self, Read};
use tcpwhy_wire::LinkType;

/// The file header (draft-ietf-opsawg-pcap section 4).
pub(crate) const FILE_HEADER: usize = 24;
/// Bytes asked of the stream per read: large enough that system calls are rare, small enough
/// that a block the kernel just copied is still in the CPU's cache when its records are parsed.
/// The first read asks for `FIRST_BLOCK` only, so that a small file (or a fuzzer's input)
/// does not pay for a megabyte of buffer; a file that needs a second read gets `BLOCK`.
const BLOCK: usize = 1 << 20;
const FIRST_BLOCK: usize = 64 << 10;

/// The magic numbers as they read in little-endian order.
const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub big_endian: bool,
    pub nanos: bool,
    /// 24-byte record headers (ifindex, protocol, packet type after the usual 16 bytes).
    pub modified: bool,
    pub link: LinkType,
}

impl Header {
    /// The file header, if `b` starts with one of the legacy pcap magics.
    pub(crate) fn parse(b: &[u8]) -> Option<Header> {
        let h = b.get(..FILE_HEADER)?;
        let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let be = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let (magic, big_endian) = match (le, be) {
            (m, _) if [MAGIC_US, MAGIC_NS, MAGIC_MODIFIED].contains(&m) => (m, false),
            (_, m) if [MAGIC_US, MAGIC_NS, MAGIC_MODIFIED].contains(&m) => (m, true),
            _ => return None,
        };
        let word = |i: usize| {
            let w = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if big_endian {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            }
        };
        Some(Header {
            big_endian,
            nanos: magic == MAGIC_NS,
            modified: magic == MAGIC_MODIFIED,
            // Bits 16-31 of the link type field carry FCS information (section 4, LinkType).
            link: LinkType(word(20) & 0xFFFF),
        })
    }

    fn record_header(&self) -> usize {
        if self.modified {
            24
        } else {
            16
        }
    }
}

/// One record: where its bytes are in the buffer, and its header fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// The capture time; only the whole second when `frac_invalid`.
    pub ts_ns: i64,
    /// The fraction of a second is out of range (a million microseconds or more, a billion
    /// nanoseconds or more): the record says only its second.
    pub frac_invalid: bool,
    pub orig_len: u32,
    pub data_start: usize,
    pub data_len: usize,
}

/// What stopped the reader.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The stream ended between records.
    End,
    /// The stream ended inside a record (a file cut short); the offset is the record's.
    Truncated,
    /// A record claims more than `max_record` bytes and the stream goes on past that.
    Oversized { caplen: u32 },
    /// The stream failed.
    Io(io::Error),
}

/// Where the bytes come from: a stream read into the reader's buffer, or blocks a read-ahead
/// thread filled, each taken as the buffer in turn.
enum Src {
    Stream(DynRead),
    Blocks(ReadAhead),
}

pub(crate) struct PcapReader {
    src: Src,
    header: Header,
    buf: Vec<u8>,
    /// Unparsed bytes are `buf[start..end]`; `buf[start]` is at `offset` in the stream.
    start: usize,
    end: usize,
    offset: u64,
    eof: bool,
    max_record: usize,
    /// The next read's size (`FIRST_BLOCK`, then `BLOCK`).
    block: usize,
}

impl PcapReader {
    /// `src` must deliver the stream from its first byte (the file header included).
    pub(crate) fn new(src: DynRead, header: Header, max_record: usize) -> PcapReader {
        PcapReader {
            src: Src::Stream(src),
            header,
            buf: Vec::new(),
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
            max_record,
            block: FIRST_BLOCK,
        }
    }

    /// The stream as `prefix` (its first bytes, the file header included), then the blocks of
    /// `ahead`.
    pub(crate) fn with_blocks(
        prefix: Vec<u8>,
        ahead: ReadAhead,
        header: Header,
        max_record: usize,
    ) -> PcapReader {
        let end = prefix.len();
        PcapReader {
            src: Src::Blocks(ahead),
            header,
            buf: prefix,
            start: 0,
            end,
            offset: 0,
            eof: false,
            max_record,
            block: BLOCK,
        }
    }

    pub(crate) fn header(&self) -> Header {
        self.header
    }

    /// Stream offset of the next unparsed byte (the start of the next record).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn data(&self, r: &Record) -> &[u8] {
        &self.buf[r.data_start..r.data_start + r.data_len]
    }

    /// Make at least `need` unparsed bytes available, unless the stream ends first (then
    /// returns false with whatever is there).
    fn fill(&mut self, need: usize) -> io::Result<bool> {
        if self.end - self.start >= need {
            return Ok(true);
        }
        let src = match &mut self.src {
            Src::Stream(src) => src,
            Src::Blocks(_) => return self.fill_blocks(need),
        };
        if self.start > 0 {
            // Only the start of one record moves: a few bytes, or one record's data.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let want = need.max(self.block);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        self.block = BLOCK;
        while self.end < need && !self.eof {
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start >= need)
    }

    /// `fill` from a read-ahead thread's blocks: the next block becomes the buffer, with the
    /// unparsed bytes (the start of a record the block's edge cut) copied into its headroom
    /// just before its own; a record longer than the headroom is gathered in the buffer
    /// instead, block after block. No copy of the stream but those cut records.
    fn fill_blocks(&mut self, need: usize) -> io::Result<bool> {
        let Src::Blocks(ahead) = &mut self.src else {
            // (`fill` calls this for blocks only.)
            return Ok(self.end - self.start >= need);
        };
        while self.end - self.start < need && !self.eof {
            let Some((mut block, len)) = ahead.next_block()? else {
                self.eof = true;
                break;
            };
            let tail = self.end - self.start;
            if tail <= AHEAD_HEAD {
                let at = AHEAD_HEAD - tail;
                block[at..AHEAD_HEAD].copy_from_slice(&self.buf[self.start..self.end]);
                let old = std::mem::replace(&mut self.buf, block);
                ahead.give_back(old);
                self.start = at;
                self.end = AHEAD_HEAD + len;
            } else {
                self.buf.copy_within(self.start..self.end, 0);
                self.buf.truncate(tail);
                self.buf
                    .extend_from_slice(&block[AHEAD_HEAD..AHEAD_HEAD + len]);
                self.start = 0;
                self.end = self.buf.len();
                ahead.give_back(block);
            }
        }
        Ok(self.end - self.start >= need)
    }

    /// The four words of the record header at `at` (16 bytes there): one load and one byte
    /// order test instead of four of each.
    #[inline]
    fn record_words(&self, at: usize) -> [u32; 4] {
        let mut h = [0u8; 16];
        h.copy_from_slice(&self.buf[at..at + 16]);
        let w = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let le = [w(0), w(4), w(8), w(12)];
        if self.header.big_endian {
            le.map(u32::swap_bytes)
        } else {
            le
        }
    }

    /// Skip the file header (call once, first).
    pub(crate) fn skip_file_header(&mut self) -> Result<(), Stop> {
        match self.fill(FILE_HEADER) {
            Ok(true) => {
                self.start += FILE_HEADER;
                self.offset += FILE_HEADER as u64;
                Ok(())
            }
            Ok(false) => Err(Stop::Truncated),
            Err(e) => Err(Stop::Io(e)),
        }
    }

    /// The next record. Its data stays valid until the next call.
    #[inline]
    pub(crate) fn next_record(&mut self) -> Result<Record, Stop> {
        let hdr = self.header.record_header();
        if self.end - self.start < hdr {
            self.need(hdr, true)?;
        }
        let s = self.start;
        let [ts_sec, ts_frac, caplen, orig_len] = self.record_words(s);
        let len = caplen as usize;
        if len > self.max_record {
            // A lie, or a file cut short inside a record that really is this large: if the
            // stream ends within the largest record we accept, it is a truncated file.
            self.need(hdr + self.max_record + 1, false)?;
            return Err(Stop::Oversized { caplen });
        }
        if self.end - self.start < hdr + len {
            self.need(hdr + len, false)?;
        }
        // `need` may have moved the record to the front of the buffer.
        let s = self.start;
        let frac = i64::from(ts_frac) * if self.header.nanos { 1 } else { 1000 };
        let frac_invalid = frac >= 1_000_000_000;
        let rec = Record {
            ts_ns: i64::from(ts_sec) * 1_000_000_000 + if frac_invalid { 0 } else { frac },
            frac_invalid,
            orig_len,
            data_start: s + hdr,
            data_len: len,
        };
        self.start += hdr + len;
        self.offset += (hdr + len) as u64;
        Ok(rec)
    }

    /// Read until `n` unparsed bytes are there. If the stream ends first: the end of the
    /// capture when nothing is left and `at_boundary`, else a truncated record.
    #[cold]
    #[inline(never)]
    fn need(&mut self, n: usize, at_boundary: bool) -> Result<(), Stop> {
        match self.fill(n) {
            Ok(true) => Ok(()),
            Ok(false) if at_boundary && self.end == self.start => Err(Stop::End),
            Ok(false) => Err(Stop::Truncated),
            Err(e) => Err(Stop::Io(e)),
        }
    }
}
