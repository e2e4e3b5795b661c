//! Log regions: a byte range of a segment's `.log` that a fetch sends as it is.
//!
//! Kafka answers a fetch by handing the socket a slice of the log file (`FileRecords.writeTo`,
//! i.e. `sendfile(2)`), so record bytes never pass through the broker's memory. A [`LogRegion`]
//! is that slice. It holds no descriptor while it waits (a response may hold one region per
//! partition, thousands): it holds a [`LogFileRef`] and takes the file for the length of each send
//! or read, from the cache of open `.log` files or opened by path and checked to be the same file
//! (`open_files.rs`). A region taken before its segment is closed, renamed to `.deleted` or
//! unlinked keeps the file the segment had open, so it stays readable. Only a truncation of the
//! file below the region's end (recovery, or a follower truncating to its leader) can take bytes
//! away; a send or read that then comes up short is an error, as is a file that is gone (closed
//! by the cache, then deleted), and the caller closes the connection, as Kafka does when a file
//! shrinks while it is being written to a socket.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::errors::{IoContext, Result, StorageError};
use crate::open_files::LogFileRef;

/// `length` bytes of a `.log` file from `position`: whole batches, the last of which ends
/// before `next_offset`.
#[derive(Clone)]
pub struct LogRegion {
    file: LogFileRef,
    position: u64,
    length: usize,
    next_offset: i64,
}

impl LogRegion {
    pub fn new(file: LogFileRef, position: u64, length: usize, next_offset: i64) -> Self {
        LogRegion {
            file,
            position,
            length,
            next_offset,
        }
    }

    /// Last offset of the region's last batch + 1 (the upper bound a read_committed fetch
    /// collects aborted transactions up to).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Sends the region's bytes from `from` on to the socket `socket_fd` with `sendfile(2)`,
    /// until all are sent or the (non-blocking) socket is full. Returns how far it got.
    pub fn send_to(&self, socket_fd: i32, from: usize) -> Result<usize> {
        let mut done = from.min(self.length);
        if done == self.length {
            return Ok(done);
        }
        let file = self.file.file().at(self.path(), "open")?;
        while done < self.length {
            let mut offset = (self.position + done as u64) as libc::off_t;
            // SAFETY: both descriptors are open for the duration of the call (`file` is held
            // until this returns; the caller owns the socket), and `offset` is a valid
            // out-pointer.
            let n = unsafe {
                libc::sendfile(socket_fd, file.as_raw_fd(), &mut offset, self.length - done)
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => return Err(err).at(self.path(), "sendfile"),
                }
            }
            if n == 0 {
                return Err(self.truncated());
            }
            done += n as usize;
        }
        Ok(done)
    }

    /// The region's bytes from `from` on, read from the file.
    pub fn read(&self, from: usize) -> Result<Vec<u8>> {
        let from = from.min(self.length);
        let mut buf = vec![0u8; self.length - from];
        self.file
            .file()
            .at(self.path(), "open")?
            .read_exact_at(&mut buf, self.position + from as u64)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => self.truncated(),
                _ => StorageError::Io {
                    path: self.path().to_path_buf(),
                    op: "read",
                    source: e,
                },
            })?;
        Ok(buf)
    }

    fn truncated(&self) -> StorageError {
        StorageError::Io {
            path: self.path().to_path_buf(),
            op: "send",
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the log was truncated below {} while bytes {}..{} were being sent",
                    self.position + self.length as u64,
                    self.position,
                    self.position + self.length as u64
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open_files::LogFile;
    use crate::test_dir::TestDir;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    /// `content` in a file, as a segment's `.log` in the cache of open files.
    fn log_file(dir: &TestDir, content: &[u8]) -> (LogFile, std::path::PathBuf) {
        let path = dir.path().join("0.log");
        File::create(&path).unwrap().write_all(content).unwrap();
        let file = File::open(&path).unwrap();
        let metadata = file.metadata().unwrap();
        (LogFile::opened(file, &metadata, &path), path)
    }

    /// A region of `content` whose segment is closed meanwhile (the region keeps the file).
    fn region_over(dir: &TestDir, content: &[u8], position: u64, length: usize) -> LogRegion {
        let (log, path) = log_file(dir, content);
        LogRegion::new(log.reference(&path), position, length, 0)
    }

    #[test]
    fn sends_and_reads_its_bytes_only() {
        let dir = TestDir::new("region_send");
        let content: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
        let region = region_over(&dir, &content, 1000, 50_000);
        assert_eq!(region.read(0).unwrap(), &content[1000..51_000]);
        assert_eq!(region.read(49_990).unwrap(), &content[50_990..51_000]);

        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let mut done = 0;
        while done < region.len() {
            done = region.send_to(a.as_raw_fd(), done).unwrap();
            std::thread::yield_now();
        }
        drop(a);
        assert_eq!(reader.join().unwrap(), &content[1000..51_000]);
    }

    #[test]
    fn a_truncated_file_is_an_error_not_short_data() {
        let dir = TestDir::new("region_truncated");
        let region = region_over(&dir, &[7u8; 4096], 1024, 2048);
        std::fs::OpenOptions::new()
            .write(true)
            .open(region.path())
            .unwrap()
            .set_len(2000)
            .unwrap();
        assert!(region.read(0).is_err());
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let err = region.send_to(a.as_raw_fd(), 0).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn outlives_the_unlinked_file() {
        let dir = TestDir::new("region_unlinked");
        let region = region_over(&dir, b"0123456789", 2, 5);
        std::fs::remove_file(region.path()).unwrap();
        assert_eq!(region.read(0).unwrap(), b"23456");
    }

    #[test]
    fn holds_no_descriptor_and_opens_the_same_file_only() {
        let dir = TestDir::new("region_reopen");
        let (log, path) = log_file(&dir, b"0123456789");
        let region = LogRegion::new(log.reference(&path), 2, 5, 0);
        log.close(); // the cache closes the file: the region has none of its own
        let open_on_it = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                .filter(|target| target == &path)
                .count()
        };
        assert_eq!(open_on_it(), 0);
        assert_eq!(region.read(0).unwrap(), b"23456"); // opened by path for the read
        assert_eq!(open_on_it(), 0);
        // Another file at the same path is not the region's.
        std::fs::remove_file(&path).unwrap();
        File::create(&path)
            .unwrap()
            .write_all(b"abcdefghij")
            .unwrap();
        let err = region.read(0).unwrap_err().to_string();
        assert!(err.contains("replaced"), "{err}");
        std::fs::remove_file(&path).unwrap();
        assert!(region.read(0).is_err());
    }
}
