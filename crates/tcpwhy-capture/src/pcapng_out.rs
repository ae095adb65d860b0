//! A pcapng writer: a section, an interface per (input, link type), and enhanced packet
//! blocks with nanosecond timestamps and packet comments (`opt_comment`), which Wireshark
//! shows as `frame.comment` and in its Expert Info. `tcpwhy analyze --annotate` writes the
//! capture back through it with a comment on every evidence frame.

use crate::Packet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_TSRESOL: u16 = 9;
/// The snapshot length written for every interface: larger than any frame the readers take.
const SNAPLEN: u32 = 262_144;

pub struct PcapngWriter {
    out: BufWriter<File>,
    /// The interfaces written so far: (input file index, link type).
    interfaces: Vec<(usize, u32)>,
    pub packets: u64,
    block: Vec<u8>,
}

/// `len` rounded up to 4 bytes.
fn pad4(len: usize) -> usize {
    len.div_ceil(4) * 4
}

/// An option: code, length, value padded to 4 bytes.
fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    // Option values are at most 65 535 bytes; a longer comment is cut (at a char boundary by
    // the caller's text, here at the byte).
    let value = &value[..value.len().min(u16::MAX as usize - 3)];
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&(value.len() as u16).to_le_bytes());
    b.extend_from_slice(value);
    b.resize(b.len() + pad4(value.len()) - value.len(), 0);
}

impl PcapngWriter {
    /// Creates `path` (never through a symbolic link) and writes the section header;
    /// `application` names the writer (`shb_userappl`).
    pub fn create(path: &Path, application: &str) -> io::Result<PcapngWriter> {
        let mut w = PcapngWriter {
            out: BufWriter::new(crate::live::create_no_follow(path)?),
            interfaces: Vec::new(),
            packets: 0,
            block: Vec::new(),
        };
        let mut body = Vec::new();
        body.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&(-1i64).to_le_bytes());
        option(&mut body, SHB_USERAPPL, application.as_bytes());
        option(&mut body, OPT_END, &[]);
        w.write_block(SHB, &body)?;
        Ok(w)
    }

    fn write_block(&mut self, kind: u32, body: &[u8]) -> io::Result<()> {
        let total = (12 + body.len()) as u32;
        self.out.write_all(&kind.to_le_bytes())?;
        self.out.write_all(&total.to_le_bytes())?;
        self.out.write_all(body)?;
        self.out.write_all(&total.to_le_bytes())
    }

    /// The interface of `p`'s input and link type, written first if it is new.
    fn interface(&mut self, p: &Packet<'_>) -> io::Result<u32> {
        let key = (p.source, p.link.0);
        if let Some(i) = self.interfaces.iter().position(|k| *k == key) {
            return Ok(i as u32);
        }
        let mut body = Vec::new();
        // The IDB's link type is 16 bits; every LINKTYPE is below 2^16.
        let link = u16::try_from(p.link.0).unwrap_or(u16::MAX);
        body.extend_from_slice(&link.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&SNAPLEN.to_le_bytes());
        option(&mut body, IF_TSRESOL, &[9]);
        option(&mut body, OPT_END, &[]);
        self.write_block(IDB, &body)?;
        self.interfaces.push(key);
        Ok(self.interfaces.len() as u32 - 1)
    }

    /// Writes `p` with `comments` (one `opt_comment` each).
    pub fn packet(&mut self, p: &Packet<'_>, comments: &[String]) -> io::Result<()> {
        let iface = self.interface(p)?;
        let ts = p.ts_ns.max(0) as u64;
        let mut b = std::mem::take(&mut self.block);
        b.clear();
        b.extend_from_slice(&iface.to_le_bytes());
        b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ts as u32).to_le_bytes());
        b.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
        b.extend_from_slice(&p.orig_len.max(p.data.len() as u32).to_le_bytes());
        b.extend_from_slice(p.data);
        b.resize(b.len() + pad4(p.data.len()) - p.data.len(), 0);
        if !comments.is_empty() {
            for c in comments {
                option(&mut b, OPT_COMMENT, c.as_bytes());
            }
            option(&mut b, OPT_END, &[]);
        }
        let r = self.write_block(EPB, &b);
        self.block = b;
        self.packets += 1;
        r
    }

    /// Flushes the file; the packets written.
    pub fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.packets)
    }
}
