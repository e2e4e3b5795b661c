//! Log regions: a byte range of a segment's `.log` that a fetch sends as it is.
//!
//! Kafka answers a fetch by handing the socket a slice of the log file (`FileRecords.writeTo`,
//! i.e. `sendfile(2)`), so record bytes never pass through the broker's memory. A [`LogRegion`]
//! is that slice: it holds its own handle on the file, so it stays readable after the segment is
//! rolled, closed, renamed to `.deleted` or unlinked. Only a truncation of the file below the
//! region's end (recovery, or a follower truncating to its leader) can take bytes away; a send or
//! read that then comes up short is an error, and the caller closes the connection, as Kafka does
//! when a file shrinks while it is being written to a socket.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::errors::{IoContext, Result, StorageError};

/// `length` bytes of a `.log` file from `position`: whole batches, the last of which ends
/// before `next_offset`.
#[derive(Clone)]
pub struct LogRegion {
    file: Arc<File>,
    path: PathBuf,
    position: u64,
    length: usize,
    next_offset: i64,
}

impl LogRegion {
    pub fn new(
        file: Arc<File>,
        path: PathBuf,
        position: u64,
        length: usize,
        next_offset: i64,
    ) -> Self {
        LogRegion {
            file,
            path,
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
        &self.path
    }

    /// The file descriptor the region reads from (valid while the region lives).
    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Sends the region's bytes from `from` on to the socket `socket_fd` with `sendfile(2)`,
    /// until all are sent or the (non-blocking) socket is full. Returns how far it got.
    pub fn send_to(&self, socket_fd: i32, from: usize) -> Result<usize> {
        let mut done = from.min(self.length);
        while done < self.length {
            let mut offset = (self.position + done as u64) as libc::off_t;
            // SAFETY: both descriptors are open for the duration of the call (the region holds
            // its file; the caller owns the socket), and `offset` is a valid out-pointer.
            let n = unsafe {
                libc::sendfile(
                    socket_fd,
                    self.file.as_raw_fd(),
                    &mut offset,
                    self.length - done,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => return Err(err).at(&self.path, "sendfile"),
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
            .read_exact_at(&mut buf, self.position + from as u64)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => self.truncated(),
                _ => StorageError::Io {
                    path: self.path.clone(),
                    op: "read",
                    source: e,
                },
            })?;
        Ok(buf)
    }

    fn truncated(&self) -> StorageError {
        StorageError::Io {
            path: self.path.clone(),
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
    use crate::test_dir::TestDir;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    fn region_over(dir: &TestDir, content: &[u8], position: u64, length: usize) -> LogRegion {
        let path = dir.path().join("0.log");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(content)
            .unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        LogRegion::new(file, path, position, length, 0)
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
}
