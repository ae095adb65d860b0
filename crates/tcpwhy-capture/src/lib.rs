//! # tcpwhy-capture: capture files to packets
//!
//! Reads pcap (all four variants, plus the "modified" Kuznetzov format) and pcapng (several
//! sections, several interfaces with their own link types and timestamp resolutions), gzip- or
//! zstd-compressed (detected by content), from files, pipes (FIFOs, `<(zcat x.gz)`) or standard
//! input, and merges several files into one capture ordered by timestamp. Each input is opened
//! and read once: a pipe cannot give its bytes twice ([`raw_input`] for a caller that needs a
//! second pass and keeps its own copy).
//!
//! Frame numbers are 1-based in the merged order, as Wireshark numbers them (for several files:
//! as in the output of `mergecap`). Timestamps are nanoseconds since the Unix epoch.
//!
//! Errors name the file and the byte offset. A file that ends in the middle of a record is not
//! an error: the packets before it are delivered and a [`Warning`] says where it stopped.
//!
//! Architecture invariant: it knows inputs and outputs of frames (files, pipes, AF_PACKET,
//! the pcap writer), not TCP: frames go out with their link type, time and number, undecoded
//! above the link layer; each input is read once.
#![forbid(unsafe_code)]

mod file;
mod filter;
pub mod live;
mod open;
mod pcap;
pub mod pcapng_out;

pub use file::FileReader;
pub use filter::Filter;
pub use open::raw_input;
use std::fmt;
use tcpwhy_wire::LinkType;

/// One captured frame. `data` is valid until the next call to [`Capture::next`].
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// 1-based frame number in the merged capture.
    pub frame: u64,
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    pub link: LinkType,
    /// The captured bytes (possibly cut by the snaplen).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
    /// Index of the input file this frame came from.
    pub source: usize,
}

/// What kind of problem a [`CaptureError`] is, for a caller that treats them apart (the
/// message says the same in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input could not be opened (missing, a directory, no permission), or was named
    /// twice where it gives its bytes once.
    Open,
    /// The input is not a capture this crate reads (by its first bytes), or its header is
    /// malformed.
    Format,
    /// A record or block lies about itself (a length beyond any frame, broken framing).
    Corrupt,
    /// The input ends inside a record: a [`Warning`], with the packets before it delivered.
    Truncated,
    /// Reading or decompressing failed.
    Read,
    /// A copy the caller keeps of an input for a second pass could not be made or written.
    Copy,
    /// The capture filter does not compile for a link type this input carries.
    Filter,
}

/// A problem that stops reading a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureError {
    pub kind: ErrorKind,
    pub file: String,
    /// Byte offset in the file (in the decompressed stream for compressed input).
    pub offset: u64,
    pub compressed: bool,
    pub message: String,
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let z = if self.compressed {
            " (decompressed)"
        } else {
            ""
        };
        write!(
            f,
            "{}: at byte {}{}: {}",
            self.file, self.offset, z, self.message
        )
    }
}

impl std::error::Error for CaptureError {}

/// Something the user should know that did not stop the run (a truncated file).
pub type Warning = CaptureError;

/// The latest packet time tcpwhy takes, 2^62 ns after 1970 (2116-02-20T23:53:38Z): so that
/// every sum and difference of two packet times fits in an `i64`. A pcap file cannot go past
/// it (32-bit seconds end in 2106); pcapng's 64-bit counts can.
pub const MAX_TS_NS: i64 = 1 << 62;

/// Counters about the containers themselves (not the packets in them).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ContainerStats {
    /// pcapng blocks that carry no packet (statistics, name resolution, unknown types ...).
    pub blocks_skipped: u64,
    /// Packet blocks naming an interface that no Interface Description Block defined.
    pub packets_without_interface: u64,
    /// Records whose timestamp is earlier than the previous record of the same file, and the
    /// largest such step back (ns).
    pub timestamps_backwards: u64,
    pub backwards_max_ns: i64,
    /// pcapng packets stamped before 1970 or after `MAX_TS_NS`: taken as stamped at the
    /// previous packet's time.
    pub timestamps_out_of_range: u64,
    /// pcap records whose fraction of a second is out of range (a million microseconds or
    /// more): taken as stamped at their whole second, or at the previous record's time when
    /// that is later.
    pub timestamps_invalid: u64,
    /// pcapng packet blocks whose framing was sound but whose contents lied (a captured length
    /// beyond the block, say): skipped, the blocks after them read.
    pub corrupt_blocks: u64,
    /// Inputs read whole and handed out in time order (`ReadOptions::sort_max_bytes`): their
    /// steps back (`timestamps_backwards`) were undone.
    pub sorted_inputs: u64,
}

impl ContainerStats {
    /// A record stamped `step_ns` before the record before it in its file.
    pub(crate) fn backwards(&mut self, step_ns: i64) {
        self.timestamps_backwards += 1;
        self.backwards_max_ns = self.backwards_max_ns.max(step_ns);
    }

    fn add(&mut self, o: &ContainerStats) {
        self.blocks_skipped += o.blocks_skipped;
        self.packets_without_interface += o.packets_without_interface;
        self.timestamps_backwards += o.timestamps_backwards;
        self.timestamps_out_of_range += o.timestamps_out_of_range;
        self.timestamps_invalid += o.timestamps_invalid;
        self.backwards_max_ns = self.backwards_max_ns.max(o.backwards_max_ns);
        self.corrupt_blocks += o.corrupt_blocks;
        self.sorted_inputs += o.sorted_inputs;
    }
}

/// A regular file up to this many bytes (decompressed) whose records step back in time is read
/// whole and handed out in time order (`ReadOptions::sort_max_bytes`).
pub const SORT_MAX_BYTES: u64 = 64 << 20;

/// How inputs are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read (and decompress) each input on a thread of its own, up to 4 MiB ahead of the
    /// parser, which then parses the blocks as they come (pcap) or copies them out (pcapng)
    /// instead of waiting for the kernel's copy of the file or inflating it: worth it only
    /// with a core to spare. Inputs whose first 64 KiB hold all of them are read at once,
    /// without a thread.
    pub read_ahead: bool,
    /// A regular file of at most this many bytes (decompressed; 0: none) whose records are not
    /// in time order (merged without sorting, shuffled, copies appended with their old times)
    /// is read whole into memory and its packets handed out in time order, keeping their
    /// frame numbers (a stable sort: packets stamped alike keep the file's order), as
    /// `reordercap` would write the file. Finding that out reads the file once more, up to
    /// its first step back; a larger file, or a pipe, is read in its own order.
    pub sort_max_bytes: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            read_ahead: false,
            sort_max_bytes: SORT_MAX_BYTES,
        }
    }
}

/// Several capture files read as one, merged by timestamp.
pub struct Capture {
    files: Vec<FileReader>,
    /// The file whose head was handed out last and must advance before the next pick.
    advance: Option<usize>,
    frame: u64,
    warnings: Vec<Warning>,
    filter: Option<Filter>,
    /// Frames the filter did not select.
    filtered_out: u64,
}

impl Capture {
    /// Open every input (`-` is standard input). Fails on the first input that cannot be opened
    /// or is not a capture.
    pub fn open<S: AsRef<str>>(paths: &[S]) -> Result<Capture, CaptureError> {
        Self::open_with(paths, ReadOptions::default())
    }

    /// [`Capture::open`] the way `options` say.
    pub fn open_with<S: AsRef<str>>(
        paths: &[S],
        options: ReadOptions,
    ) -> Result<Capture, CaptureError> {
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            files.push(FileReader::open_with(p.as_ref(), options)?);
        }
        Self::from_readers(files)
    }

    /// Build a capture from readers already opened (for example over in-memory bytes).
    pub fn from_readers(mut files: Vec<FileReader>) -> Result<Capture, CaptureError> {
        let mut warnings = Vec::new();
        // One input sorted in time keeps the file's frame numbers (as Wireshark numbers the
        // file); several are numbered in the merged order.
        let one = files.len() == 1;
        for f in files.iter_mut() {
            f.keep_numbers = one;
            f.advance()?;
            warnings.extend(f.take_warning());
        }
        Ok(Capture {
            files,
            advance: None,
            frame: 0,
            warnings,
            filter: None,
            filtered_out: 0,
        })
    }

    /// Deliver only the frames `filter` selects. Frame numbers stay those of the whole
    /// capture, as Wireshark numbers the file.
    pub fn set_filter(&mut self, filter: Filter) {
        self.filter = Some(filter);
    }

    /// Frames read and not selected by the filter.
    pub fn filtered_out(&self) -> u64 {
        self.filtered_out
    }

    /// The next frame in timestamp order that the filter (if any) selects, `None` at the end
    /// of every input.
    #[allow(clippy::should_implement_trait)] // a lending iterator: `Iterator` cannot express it
    pub fn next(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        if self.filter.is_none() {
            return self.step();
        }
        loop {
            // The packet is looked at through a borrow that ends before it is handed out (a
            // borrow returned from inside the loop would hold `self` for every iteration).
            let Some(i) = self.step()?.map(|p| p.source) else {
                return Ok(None);
            };
            let (Some(filter), Some(p)) = (&mut self.filter, self.files[i].head(self.frame, i))
            else {
                return Ok(None);
            };
            match filter.matches(p.link, p.data) {
                Ok(true) => return Ok(self.files[i].head(self.frame, i)),
                Ok(false) => self.filtered_out += 1,
                Err(why) => {
                    let link = p.link.name().unwrap_or("unknown");
                    let f = &self.files[i];
                    return Err(CaptureError {
                        kind: ErrorKind::Filter,
                        file: f.name().to_string(),
                        offset: f.offset(),
                        compressed: f.compressed(),
                        message: format!(
                            "frame {}: the filter {:?} cannot apply to link type {link} ({}): {why}",
                            self.frame,
                            filter.expression(),
                            p.link.0
                        ),
                    });
                }
            }
        }
    }

    /// The next frame in timestamp order, `None` at the end of every input.
    fn step(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        if self.files.len() == 1 {
            // One input: nothing to merge.
            if self.advance.take().is_some() {
                let f = &mut self.files[0];
                let r = f.advance();
                if let Some(w) = f.take_warning() {
                    self.warnings.push(w);
                }
                r?;
            }
            self.advance = Some(0);
            let f = &self.files[0];
            if f.head_ts().is_none() {
                self.advance = None;
                return Ok(None);
            }
            self.frame += 1;
            return Ok(f.head(self.frame, 0));
        }
        if let Some(i) = self.advance.take() {
            let f = &mut self.files[i];
            let r = f.advance();
            self.warnings.extend(f.take_warning());
            r?;
        }
        // Several files: the earliest head wins, ties go to the earlier file.
        let mut best: Option<(usize, i64)> = None;
        for (i, f) in self.files.iter().enumerate() {
            if let Some(ts) = f.head_ts() {
                if best.is_none_or(|(_, b)| ts < b) {
                    best = Some((i, ts));
                }
            }
        }
        let Some((i, _)) = best else { return Ok(None) };
        self.advance = Some(i);
        self.frame += 1;
        Ok(self.files[i].head(self.frame, i))
    }

    /// Warnings so far (truncated files).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Container counters summed over the inputs.
    pub fn stats(&self) -> ContainerStats {
        let mut s = ContainerStats::default();
        for f in &self.files {
            s.add(f.stats());
        }
        s
    }

    /// Whether any input is gzip- or zstd-compressed (its size on disk then says nothing of
    /// how far reading has come).
    pub fn compressed(&self) -> bool {
        self.files.iter().any(|f| f.compressed())
    }

    /// The inputs' size together, when every one is a regular file (from the files opened,
    /// not their paths): None for a pipe, standard input or a device.
    pub fn size(&self) -> Option<u64> {
        self.files.iter().map(FileReader::size).sum()
    }

    /// Bytes consumed so far over all inputs (decompressed bytes for compressed input).
    pub fn bytes_read(&self) -> u64 {
        self.files.iter().map(|f| f.offset()).sum()
    }
}

#[cfg(test)]
mod tests;
