//! The inputs of `tcpwhy analyze`, each read once, and a second pass over them.
//!
//! A regular file can be opened again: the HTML report's second pass (its graphs need packets
//! the first pass dropped) reads it anew by name. Anything else (standard input, a FIFO, a
//! `<(zcat x.gz)` pipe at /dev/fd/N, a character device) gives its bytes once: opening it again
//! steals bytes from the first reader, finds nothing, or waits for a writer that is gone. So
//! when a second pass is wanted, the first pass copies every byte it takes from such an input
//! into a temporary file as it reads (the analysis does not wait for the whole input first),
//! and the second pass reads the copy. The copy is unlinked as soon as it is created: nothing
//! is left in the temporary directory, even when tcpwhy is killed.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tcpwhy_capture::{Capture, CaptureError, ErrorKind, FileReader, Filter, ReadOptions};

/// What a second pass over the inputs of a run needs.
#[derive(Clone)]
pub struct Inputs {
    list: Vec<Input>,
    /// The capture filter of the first pass, applied again by [`Inputs::again`] so that the
    /// second pass meets the same connections in the same order (their ids agree).
    filter: Option<String>,
}

#[derive(Clone)]
struct Input {
    name: String,
    /// `None`: a regular file, opened again by name.
    copy: Option<Copy>,
}

/// The bytes the first pass took from an input that gives them once.
#[derive(Clone)]
struct Copy {
    file: Arc<File>,
    /// Set when writing the copy failed: the bytes copied before the failure, and why.
    failed: Arc<Mutex<Option<(u64, String)>>>,
}

impl Inputs {
    /// Open `names` (`-`: standard input) for a first pass, read the way `options` say; with
    /// `again`, keep what [`Inputs::again`] needs.
    pub fn open(
        names: &[String],
        again: bool,
        options: ReadOptions,
        filter: Option<Filter>,
    ) -> Result<(Capture, Inputs), CaptureError> {
        once(names)?;
        let mut readers = Vec::with_capacity(names.len());
        let mut list = Vec::with_capacity(names.len());
        for name in names {
            let copy = if again && !regular(name) {
                let dir = std::env::temp_dir();
                let file = create_copy(&dir).map_err(|e| {
                    error(
                        ErrorKind::Copy,
                        name,
                        format!(
                            "cannot keep a copy for the second pass (the graphs) in {}: {e} \
                             (TMPDIR chooses the directory)",
                            dir.display()
                        ),
                    )
                })?;
                Some(Copy {
                    file: Arc::new(file),
                    failed: Arc::default(),
                })
            } else {
                None
            };
            let reader = match &copy {
                None => FileReader::open_with(name, options)?,
                Some(copy) => {
                    let raw = tcpwhy_capture::raw_input(name)
                        .map_err(|e| error(ErrorKind::Open, name, format!("cannot open: {e}")))?;
                    let tee = Tee {
                        inner: raw,
                        copy: copy.clone(),
                        copied: 0,
                        on: true,
                    };
                    FileReader::from_reader_with(name, Box::new(tee), options)?
                }
            };
            readers.push(reader);
            list.push(Input {
                name: name.clone(),
                copy,
            });
        }
        let mut capture = Capture::from_readers(readers)?;
        let expression = filter.as_ref().map(|f| f.expression().to_string());
        if let Some(f) = filter {
            capture.set_filter(f);
        }
        Ok((
            capture,
            Inputs {
                list,
                filter: expression,
            },
        ))
    }

    /// The inputs read again from their start: regular files opened anew, the others from the
    /// copies the first pass kept (no read-ahead: the second pass keeps few packets); with
    /// `filtered`, through the first pass's capture filter.
    pub fn again(&self, filtered: bool) -> Result<Capture, CaptureError> {
        let mut readers = Vec::with_capacity(self.list.len());
        for input in &self.list {
            readers.push(match &input.copy {
                None => FileReader::open(&input.name)?,
                Some(copy) => {
                    let copied = Copied {
                        copy: copy.clone(),
                        at: 0,
                    };
                    FileReader::from_reader(&input.name, Box::new(copied))?
                }
            });
        }
        let mut capture = Capture::from_readers(readers)?;
        if let (true, Some(expr)) = (filtered, &self.filter) {
            // It compiled for the first pass: it compiles again.
            let f = Filter::new(expr).map_err(|why| {
                error(
                    ErrorKind::Filter,
                    &self.list[0].name,
                    format!("filter: {why}"),
                )
            })?;
            capture.set_filter(f);
        }
        Ok(capture)
    }
}

/// An input that gives its bytes once must be named once: two readers of one pipe would each
/// take part of its bytes (and a FIFO's second open would wait for a writer that is gone).
/// Checked before anything is opened.
fn once(names: &[String]) -> Result<(), CaptureError> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for name in names {
        // Standard input is /dev/stdin's file (Linux), and also `-` named twice.
        let path = if name == "-" { "/dev/stdin" } else { name };
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if meta.is_file() && name != "-" {
            continue;
        }
        let id = (meta.dev(), meta.ino());
        if seen.contains(&id) {
            return Err(error(
                ErrorKind::Open,
                name,
                "named twice: standard input, a pipe or a device gives its bytes only once"
                    .to_string(),
            ));
        }
        seen.push(id);
    }
    Ok(())
}

/// Only a regular file can be read twice (`-` may be one, redirected, but is taken as a pipe).
fn regular(name: &str) -> bool {
    name != "-" && std::fs::metadata(name).is_ok_and(|m| m.is_file())
}

fn error(kind: ErrorKind, name: &str, message: String) -> CaptureError {
    CaptureError {
        kind,
        file: name.to_string(),
        offset: 0,
        compressed: false,
        message,
    }
}

/// A new file in `dir` that has no name there (O_TMPFILE; where the file system lacks it, a
/// random name created exclusively and unlinked at once): readable and writable by this user
/// only, never a file another user could have planted or can open.
fn create_copy(dir: &Path) -> io::Result<File> {
    tempfile::tempfile_in(dir)
}

/// Reads `inner` and appends what it gives to the copy. A copy that cannot be written (the
/// disk full) stops being written and says so to the second pass; the first pass goes on.
struct Tee {
    inner: Box<dyn Read + Send>,
    copy: Copy,
    copied: u64,
    on: bool,
}

impl Read for Tee {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.on && n > 0 {
            match (&*self.copy.file).write_all(&buf[..n]) {
                Ok(()) => self.copied += n as u64,
                Err(e) => {
                    self.on = false;
                    if let Ok(mut failed) = self.copy.failed.lock() {
                        *failed = Some((
                            self.copied,
                            format!(
                                "the copy kept for the second pass (the graphs) ends here: {e} \
                                 (writing in {}; TMPDIR chooses the directory)",
                                std::env::temp_dir().display()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(n)
    }
}

/// Reads a copy from its start, at positions of its own (the first pass may still be
/// appending to it: its read-ahead thread runs on after an error until it is dropped). Where a
/// failed copy ends, the failure comes instead of the end.
struct Copied {
    copy: Copy,
    at: u64,
}

impl Read for Copied {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let failed = self.copy.failed.lock().ok().and_then(|f| f.clone());
        let buf = match failed {
            Some((end, why)) if self.at >= end => return Err(io::Error::other(why)),
            Some((end, _)) => {
                let left = usize::try_from(end - self.at).unwrap_or(usize::MAX);
                let n = buf.len().min(left);
                &mut buf[..n]
            }
            None => buf,
        };
        let n = self.copy.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn copy_in(file: File) -> Copy {
        Copy {
            file: Arc::new(file),
            failed: Arc::default(),
        }
    }

    /// `bytes` through a tee into `copy` in reads of 7 bytes, then the copy read back.
    fn through(bytes: &[u8], copy: &Copy) -> (Vec<u8>, io::Result<Vec<u8>>) {
        let mut tee = Tee {
            inner: Box::new(io::Cursor::new(bytes.to_vec())),
            copy: copy.clone(),
            copied: 0,
            on: true,
        };
        let mut first = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            match tee.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => first.extend_from_slice(&buf[..n]),
                Err(e) => panic!("the tee failed: {e}"),
            }
        }
        let mut again = Vec::new();
        let read = Copied {
            copy: copy.clone(),
            at: 0,
        }
        .read_to_end(&mut again)
        .map(|_| again);
        (first, read)
    }

    #[test]
    fn the_copy_has_no_name_another_user_could_plant_or_open() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // The names an earlier version used, planted as links to a file of the victim's.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").expect("write the victim");
        for n in 0..3 {
            let name = format!(".tcpwhy-{}-{n}.copy", std::process::id());
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).expect("plant");
        }
        let before: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.map(|e| e.file_name()).ok())
            .collect();
        let copy = copy_in(create_copy(dir.path()).expect("a copy"));
        let after: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.map(|e| e.file_name()).ok())
            .collect();
        assert_eq!(
            before.len(),
            after.len(),
            "the copy shows no name in the directory"
        );
        let bytes = vec![5u8; 10_000];
        let (first, again) = through(&bytes, &copy);
        assert_eq!(first, bytes);
        assert_eq!(again.ok(), Some(bytes));
        assert_eq!(std::fs::read(&victim).ok(), Some(b"precious".to_vec()));
    }

    #[test]
    fn the_second_pass_reads_what_the_first_took() {
        let dir = std::env::temp_dir();
        let copy = copy_in(create_copy(&dir).expect("a copy in the temporary directory"));
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let (first, again) = through(&bytes, &copy);
        assert_eq!(first, bytes);
        assert_eq!(again.ok(), Some(bytes));
    }

    #[test]
    fn a_copy_that_cannot_be_written_fails_the_second_pass_not_the_first() {
        // /dev/full: every write fails with "No space left on device".
        let Ok(full) = OpenOptions::new().read(true).write(true).open("/dev/full") else {
            return;
        };
        let copy = copy_in(full);
        let bytes = vec![7u8; 1000];
        let (first, again) = through(&bytes, &copy);
        assert_eq!(first, bytes);
        let e = again.expect_err("the second pass must fail");
        assert!(e.to_string().contains("No space left"), "{e}");
        assert!(e.to_string().contains("TMPDIR"), "{e}");
    }
}
