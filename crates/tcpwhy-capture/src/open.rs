//! Opening an input: file or stdin, with gzip/zstd detected from the first bytes.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
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

/// What a read-ahead thread may have read and not yet handed over: enough to ride out a pause
/// of either side.
const AHEAD_BYTES: usize = 4 << 20;
/// The most it asks of its stream at once (one block): a file 1 MiB, as the reading thread
/// does; a decompressor 256 KiB, because one that meets corrupt data fails the whole read and
/// the bytes it had already put into that read are lost (up to a block). (256 KiB blocks from
/// a file: 5% slower, more blocks to hand over.)
const FILE_BLOCK: usize = 1 << 20;
const INFLATE_BLOCK: usize = 256 << 10;

/// Reading (and decompressing) on a thread of its own, ahead of the parser: the reading
/// thread then takes the blocks as they are (legacy pcap, `next_block`) or copies bytes out
/// of them (`Read`, for pcapng) instead of waiting for the kernel's copy of the file or
/// inflating the stream. Worth it only with a core to spare (`ReadOptions`): on a busy
/// machine the thread only adds switching.
///
/// The thread ends when the stream ends or fails (after handing over the failure, in its
/// place in the stream), or when this side is dropped (its next send fails). Either way its
/// sender goes with it, so this side sees the end as a closed channel. It is never joined: a
/// stream that blocks (a pipe) must not block the drop.
pub(crate) struct ReadAhead {
    full: Receiver<Filled>,
    empty: Sender<Vec<u8>>,
    /// The block being copied out (`Read`): the stream's bytes are `block[at..end]`.
    block: Vec<u8>,
    at: usize,
    end: usize,
}

/// Room left free at the front of every block, before the stream's bytes: the legacy pcap
/// reader takes each block as its buffer and puts the start of a record cut by the block's
/// edge there, instead of copying the block (`next_block`). Room for the largest record a
/// capture tool writes (a 256 KiB snapshot length and a 24-byte record header): only a
/// record that claims more is gathered by copying.
pub(crate) const AHEAD_HEAD: usize = (256 << 10) + 64;

/// A block and how many of its bytes (after `AHEAD_HEAD`) the stream filled, or the stream's
/// failure.
type Filled = io::Result<(Vec<u8>, usize)>;

impl ReadAhead {
    /// Read `inner` in blocks of `block` bytes. The stream comes back if no thread could be
    /// started.
    fn spawn(inner: DynRead, block: usize) -> Result<ReadAhead, DynRead> {
        let (full_tx, full) = sync_channel::<Filled>(AHEAD_BYTES / block);
        let (empty, empty_rx) = channel::<Vec<u8>>();
        // The stream goes over once the thread runs, so that a failed spawn leaves it here.
        let (give, take) = channel::<DynRead>();
        let spawned = std::thread::Builder::new()
            .name("tcpwhy-read".into())
            .spawn(move || {
                let Ok(mut inner) = take.recv() else {
                    return;
                };
                ahead(&mut inner, block, &full_tx, &empty_rx);
            });
        if spawned.is_err() {
            return Err(inner);
        }
        if let Err(back) = give.send(inner) {
            return Err(back.0);
        }
        Ok(ReadAhead {
            full,
            empty,
            block: Vec::new(),
            at: 0,
            end: 0,
        })
    }

    /// The next block and how many bytes of the stream it holds (from `AHEAD_HEAD` on); `None`
    /// at the end (every block handed over and the thread gone), also after a failure.
    pub(crate) fn next_block(&mut self) -> io::Result<Option<(Vec<u8>, usize)>> {
        match self.full.recv() {
            Ok(got) => got.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// A block done with, to be filled again (dropped if the thread has ended).
    pub(crate) fn give_back(&mut self, block: Vec<u8>) {
        let _ = self.empty.send(block);
    }
}

/// The read-ahead thread's loop: a read into a block, handed over with its length, until the
/// end or a failure. One read per block, not as many as fill it: a pipe's bytes go on as they
/// come (`tcpdump -w - | tcpwhy analyze -` reports as it goes), and a file's read fills the
/// block anyway. (The stream is a `Recording`, which already reads again when interrupted.)
fn ahead(
    inner: &mut DynRead,
    block: usize,
    full_tx: &SyncSender<Filled>,
    empty_rx: &Receiver<Vec<u8>>,
) {
    loop {
        let mut buf = empty_rx.try_recv().unwrap_or_default();
        if buf.len() < AHEAD_HEAD + block {
            buf.resize(AHEAD_HEAD + block, 0);
        }
        match inner.read(&mut buf[AHEAD_HEAD..AHEAD_HEAD + block]) {
            Ok(0) => return,
            Ok(n) => {
                if full_tx.send(Ok((buf, n))).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = full_tx.send(Err(e));
                return;
            }
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.end {
            if buf.is_empty() {
                return Ok(0);
            }
            let Some((next, len)) = self.next_block()? else {
                return Ok(0);
            };
            let old = std::mem::replace(&mut self.block, next);
            self.give_back(old);
            self.at = AHEAD_HEAD;
            self.end = AHEAD_HEAD + len;
        }
        let n = buf.len().min(self.end - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// What follows the prefix: a stream, or blocks a read-ahead thread fills.
pub(crate) enum Rest {
    Stream(DynRead),
    Ahead(ReadAhead),
}

impl Rest {
    pub(crate) fn into_read(self) -> DynRead {
        match self {
            Rest::Stream(r) => r,
            Rest::Ahead(a) => Box::new(a),
        }
    }

    /// Read-ahead over `r` in blocks of `block` bytes if `on`, else `r` itself.
    fn ahead_if(on: bool, r: DynRead, block: usize) -> Rest {
        if !on {
            return Rest::Stream(r);
        }
        match ReadAhead::spawn(r, block) {
            Ok(a) => Rest::Ahead(a),
            // (If no thread can be started, the stream is read here, as without read-ahead.)
            Err(r) => Rest::Stream(r),
        }
    }
}

pub(crate) struct Opened {
    /// The first bytes of the (decompressed) stream.
    pub prefix: Vec<u8>,
    /// The rest of the (decompressed) stream, after `prefix`.
    pub rest: Rest,
    pub compression: Option<&'static str>,
    pub last_error: LastError,
    /// The input's size when it is a regular file (from the open file: `fstat`).
    pub size: Option<u64>,
}

/// Open `path` (`-`: standard input); with `read_ahead`, the input is read (and decompressed)
/// on a thread of its own ([`ReadAhead`]).
pub(crate) fn open(path: &str, read_ahead: bool) -> io::Result<Opened> {
    let (raw, size) = raw_input_sized(path)?;
    let mut opened = from_reader(raw, read_ahead);
    opened.size = size;
    Ok(opened)
}

/// The bytes of input `path` before decompression, as [`crate::Capture::open`] reads them: `-`
/// is standard input. Opened once; a pipe (standard input, a FIFO, a `<(zcat x.gz)` at
/// /dev/fd/N) gives its bytes only once, so whoever needs them twice keeps a copy.
///
/// A pipe holds 64 KiB by default: the producer (tcpdump -w -, zstd -dc) and tcpwhy then take
/// turns every 64 KiB. A pipe is asked for 1 MiB (Linux; the limit is fs.pipe-max-size); if
/// refused, nothing changes. A directory is refused with a message that says so (a read from it
/// fails with "Is a directory", which the parser would report as a corrupt capture).
pub fn raw_input(path: &str) -> io::Result<Box<dyn Read + Send>> {
    raw_input_sized(path).map(|(r, _)| r)
}

/// [`raw_input`], and the input's size if it is a regular file (from the opened file).
fn raw_input_sized(path: &str) -> io::Result<(Box<dyn Read + Send>, Option<u64>)> {
    if path == "-" {
        #[cfg(target_os = "linux")]
        let _ = nix::fcntl::fcntl(io::stdin(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        return Ok((Box::new(io::stdin()), None));
    }
    let file = File::open(path)?;
    let mut size = None;
    if let Ok(meta) = file.metadata() {
        size = meta.is_file().then_some(meta.len());
        if meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a directory, not a capture",
            ));
        }
        #[cfg(target_os = "linux")]
        if std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
            let _ = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        }
    }
    Ok((Box::new(file), size))
}

pub(crate) fn from_reader(raw: DynRead, read_ahead: bool) -> Opened {
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
                    rest: Rest::Stream(Box::new(io::empty())),
                    compression: Some("zstd"),
                    last_error,
                    size: None,
                };
            }
        }
    } else {
        let rest = Rest::ahead_if(read_ahead && head.len() == PREFIX, raw, FILE_BLOCK);
        return Opened {
            prefix: head,
            rest,
            compression: None,
            last_error,
            size: None,
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
    let rest = Rest::ahead_if(read_ahead && prefix.len() == PREFIX, rest, INFLATE_BLOCK);
    Opened {
        prefix,
        rest,
        compression: Some(compression),
        last_error,
        size: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// `len` bytes of a pattern, then `fail` (if any) instead of the end, then the end.
    struct Source {
        len: usize,
        pos: usize,
        fail: Option<io::ErrorKind>,
        dropped: Arc<AtomicBool>,
    }

    impl Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.len {
                return match self.fail.take() {
                    Some(kind) => Err(io::Error::new(kind, "the source failed")),
                    None => Ok(0),
                };
            }
            // Odd-sized reads, so that blocks fill over several of them.
            let n = buf.len().min(self.len - self.pos).min(70_001);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = ((self.pos + i) % 251) as u8;
            }
            self.pos += n;
            Ok(n)
        }
    }

    impl Drop for Source {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn source(len: usize, fail: Option<io::ErrorKind>) -> (DynRead, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let s = Source {
            len,
            pos: 0,
            fail,
            dropped: dropped.clone(),
        };
        (Box::new(s), dropped)
    }

    fn ahead(r: DynRead) -> ReadAhead {
        match ReadAhead::spawn(r, FILE_BLOCK) {
            Ok(a) => a,
            Err(_) => panic!("no thread"),
        }
    }

    /// Everything the reader gives in reads of `step` bytes, and how it ended.
    fn drain(r: &mut ReadAhead, step: usize) -> (Vec<u8>, Option<io::ErrorKind>) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; step];
        loop {
            match r.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(e.kind())),
            }
        }
    }

    #[test]
    fn hands_over_the_stream_unchanged_in_any_read_size() {
        // 2.5 blocks, a block exactly, and less than one.
        for len in [FILE_BLOCK * 5 / 2, FILE_BLOCK, 1000] {
            for step in [1 << 20, 4096, 999_983] {
                let (s, _) = source(len, None);
                let (got, end) = drain(&mut ahead(s), step);
                assert_eq!(end, None);
                assert_eq!(got.len(), len);
                assert!(got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
            }
        }
    }

    #[test]
    fn a_failure_comes_after_the_bytes_before_it_then_the_end() {
        let len = FILE_BLOCK * 3 + 12_345;
        let (s, _) = source(len, Some(io::ErrorKind::InvalidData));
        let mut r = ahead(s);
        let (got, end) = drain(&mut r, 65_536);
        assert_eq!(got.len(), len);
        assert_eq!(end, Some(io::ErrorKind::InvalidData));
        let mut buf = [0u8; 16];
        assert_eq!(r.read(&mut buf).ok(), Some(0));
    }

    #[test]
    fn dropping_the_reader_ends_the_thread() {
        // An endless source: the thread fills the channel and waits; dropping this side must
        // end it (it drops the source as it returns).
        let (s, dropped) = source(usize::MAX, None);
        let mut r = ahead(s);
        let mut buf = vec![0u8; 10_000];
        assert_eq!(r.read(&mut buf).ok(), Some(10_000));
        drop(r);
        let start = Instant::now();
        while !dropped.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(dropped.load(Ordering::SeqCst), "the thread still runs");
    }
}
