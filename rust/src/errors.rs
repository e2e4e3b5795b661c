//! Error type of the storage core.
//!
//! The core modules (`batch`, `records`, the indexes, `segment`, `recovery`) are plain Rust and
//! report failures as [`StorageError`]; the Python glue (`python/`) maps each variant onto the
//! exception the broker expects: `CorruptRecordError` (→ CORRUPT_MESSAGE), `RecordTooLargeError`
//! (→ MESSAGE_TOO_LARGE), `OSError` carrying the file path, or `ValueError`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in the storage core.
#[derive(Debug)]
pub enum StorageError {
    /// A record batch (or the record set holding it) is malformed: bad length, magic, CRC, or a
    /// truncated record inside a batch.
    Corrupt(String),
    /// A batch is larger than the allowed maximum (`max.message.bytes`).
    RecordTooLarge(String),
    /// An operating-system error on `path`.
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    /// The caller passed an argument the segment cannot honour (offset out of the segment's
    /// range, a non-monotonic offset, a segment that would exceed 2 GiB, ...).
    InvalidArgument(String),
    /// The segment was closed, deleted or renamed.
    Closed(PathBuf),
}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, StorageError>;

impl StorageError {
    /// A `Corrupt` error with the given message.
    pub fn corrupt(msg: impl Into<String>) -> Self {
        StorageError::Corrupt(msg.into())
    }

    /// An `InvalidArgument` error with the given message.
    pub fn invalid(msg: impl Into<String>) -> Self {
        StorageError::InvalidArgument(msg.into())
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Corrupt(msg) => write!(f, "{msg}"),
            StorageError::RecordTooLarge(msg) => write!(f, "{msg}"),
            StorageError::Io { path, op, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
            StorageError::InvalidArgument(msg) => write!(f, "{msg}"),
            StorageError::Closed(path) => write!(f, "segment {} is closed", path.display()),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Attaches a path and the name of the failed operation to an `io::Result`.
pub trait IoContext<T> {
    /// Converts an `io::Error` into [`StorageError::Io`] naming `path` and `op`.
    fn at(self, path: &Path, op: &'static str) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &Path, op: &'static str) -> Result<T> {
        self.map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            op,
            source,
        })
    }
}
