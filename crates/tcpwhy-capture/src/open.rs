//! Opening an input: file or stdin, with gzip/zstd detected from the first bytes.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::sync::{Arc, Mutex};

/// gzip member header (RFC 1952 section 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// zstd frame magic (RFC 8878 section 3.1.1), little endian 0xFD2FB528.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Bytes read ahead before handing the stream to the capture parser, so that the file header
/// (and a pcapng section header) is complete even when a pipe delivers a few bytes at a time.
pub(crate) const PREFIX: usize = 64 * 1024;

pub(crate) type DynRead = Box<dyn Read + Send>;

/// The last I/O error the stream hit, kept because the capture parser only reports "read error".
#[derive(Clone, Default)]
pub(crate) struct LastError(Arc<Mutex<Option<io::Error>>>);

impl LastError {
    pub(crate) fn take(&self) -> Option<io::Error> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

/// Records the error of the wrapped reader before passing it on.
struct Recording<R> {
    inner: R,
    last: LastError,
}

impl<R: Read> Read for Recording<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let copy = io::Error::new(e.kind(), e.to_string());
                    if let Ok(mut g) = self.last.0.lock() {
                        *g = Some(copy);
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
    }
}

/// Read until `n` bytes are buffered, the stream ends, or it fails. A failure is recorded in
/// `last` and ends the prefix early: the parser then sees a short stream and reports it.
fn read_prefix<R: Read>(r: &mut R, n: usize, last: &LastError) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if let Ok(mut g) = last.0.lock() {
                    *g = Some(e);
                }
                break;
            }
        }
    }
    buf.truncate(filled);
    buf
}

pub(crate) struct Opened {
    /// The first bytes of the (decompressed) stream.
    pub prefix: Vec<u8>,
    /// The rest of the (decompressed) stream, after `prefix`.
    pub rest: DynRead,
    pub compression: Option<&'static str>,
    pub last_error: LastError,
}

pub(crate) fn open(path: &str) -> io::Result<Opened> {
    let raw: DynRead = if path == "-" {
        // A pipe holds 64 KiB by default: the producer (tcpdump -w -, zstd -dc) and tcpwhy then
        // take turns every 64 KiB. Ask for 1 MiB (Linux; the limit is fs.pipe-max-size); on
        // anything but a pipe, or if refused, nothing changes.
        #[cfg(target_os = "linux")]
        let _ = nix::fcntl::fcntl(io::stdin(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path)?)
    };
    Ok(from_reader(raw))
}

pub(crate) fn from_reader(raw: DynRead) -> Opened {
    let last_error = LastError::default();
    let mut raw: DynRead = Box::new(Recording {
        inner: raw,
        last: last_error.clone(),
    });
    let head = read_prefix(&mut raw, PREFIX, &last_error);
    let decoder: DynRead = if head.starts_with(&GZIP_MAGIC) {
        Box::new(flate2::read::MultiGzDecoder::new(
            Cursor::new(head.clone()).chain(raw),
        ))
    } else if head.starts_with(&ZSTD_MAGIC) {
        match zstd::stream::read::Decoder::new(Cursor::new(head.clone()).chain(raw)) {
            Ok(d) => Box::new(d),
            Err(e) => {
                // zstd could not even start; the parser will see an empty stream.
                if let Ok(mut g) = last_error.0.lock() {
                    *g = Some(e);
                }
                return Opened {
                    prefix: Vec::new(),
                    rest: Box::new(io::empty()),
                    compression: Some("zstd"),
                    last_error,
                };
            }
        }
    } else {
        return Opened {
            prefix: head,
            rest: raw,
            compression: None,
            last_error,
        };
    };
    let compression = if head.starts_with(&GZIP_MAGIC) {
        "gzip"
    } else {
        "zstd"
    };
    let mut rest: DynRead = Box::new(Recording {
        inner: decoder,
        last: last_error.clone(),
    });
    let prefix = read_prefix(&mut rest, PREFIX, &last_error);
    Opened {
        prefix,
        rest,
        compression: Some(compression),
        last_error,
    }
}
