//! PyO3 bindings: the Python surface of `pybroker._native` (see `pybroker/_native.pyi`).
//!
//! This layer only converts arguments and results, maps [`StorageError`] onto Python
//! exceptions, and manages the GIL and the segment lock:
//!
//! * a `Segment` is a frozen pyclass around `Mutex<Option<Segment>>` (`None` once closed), so the
//!   event loop and a worker thread (running `flush()`) can use it at the same time without
//!   PyO3 borrow errors;
//! * file I/O runs with the GIL released (`Python::detach`), and the mutex is never held while
//!   (re)acquiring the GIL, so taking the mutex with the GIL held cannot deadlock;
//! * `flush()` only takes the mutex to clone the file handles and fsyncs without it, so appends
//!   are not blocked by a concurrent fsync;
//! * `read()` plans under the mutex, reads into a freshly allocated `bytes` without it, and
//!   re-plans if the segment was truncated or recovered in between;
//! * `read_region()` plans under the mutex and returns a `LogRegion` holding a descriptor-free
//!   reference to the file (`open_files::LogFileRef`), which the network layer sends with
//!   `sendfile(2)` (GIL released), taking the file for the length of each send.
//!
//! Buffers passed in (`records`, the Arrow buffers of `encode_partitioned_batches`) are accessed
//! through the buffer protocol; the export keeps them alive and unresizable while the GIL is
//! released. Callers must not mutate them concurrently. Uncompressed batches built by
//! `encode_partitioned_batches` are written straight into new, not yet shared `bytes` objects
//! with the GIL released.
//!
//! One file per domain, each with its own `register()`: `storage` (record batches, segments,
//! the log regions a fetch sends), `columnar` (the clients' Arrow-columnar encoding and KIP-253's
//! partitioner) and `cleaner` (log compaction). This file holds what they share: the error
//! mapping, buffer access and the module's `register()`.

mod cleaner;
mod columnar;
mod storage;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyOSError, PyValueError};
use pyo3::ffi;
use pyo3::import_exception;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::StorageError;

// The two record errors are Python classes of the one `KafkaError` hierarchy, each carrying its
// Kafka error code (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE); both are also `ValueError`s.
import_exception!(pybroker.common.errors, CorruptRecordError);
import_exception!(pybroker.common.errors, RecordTooLargeError);

/// Buffers at least this large are processed with the GIL released.
pub(crate) const DETACH_THRESHOLD: usize = 64 * 1024;

/// Converts a core error into the matching Python exception.
pub(crate) fn to_py_err(e: StorageError) -> PyErr {
    match e {
        StorageError::Corrupt(msg) => CorruptRecordError::new_err(msg),
        StorageError::RecordTooLarge(msg) => RecordTooLargeError::new_err(msg),
        StorageError::InvalidArgument(msg) => PyValueError::new_err(msg),
        StorageError::Closed(path) => PyValueError::new_err(format!(
            "I/O operation on closed segment {}",
            path.display()
        )),
        StorageError::Io { path, op, source } => {
            let filename = path.display().to_string();
            match source.raw_os_error() {
                Some(errno) => {
                    let text = source.to_string();
                    let detail = text.split(" (os error").next().unwrap_or(&text);
                    // OSError(errno, strerror, filename) picks the subclass (FileNotFoundError, ...).
                    PyOSError::new_err((errno, format!("{op}: {detail}"), filename))
                }
                None => PyOSError::new_err(format!("{op} {filename}: {source}")),
            }
        }
    }
}

/// A raw pointer + length that may cross into a GIL-released closure.
#[derive(Clone, Copy)]
pub(crate) struct RawBytes {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the memory behind the pointer is owned by a buffer export (or a `bytes` under
// construction) that outlives the closure; see the module docs for the aliasing contract.
unsafe impl Send for RawBytes {}

/// A C-contiguous buffer export of `obj`.
pub(crate) fn contiguous_buffer(obj: &Bound<'_, PyAny>) -> PyResult<(PyUntypedBuffer, RawBytes)> {
    let buffer = PyUntypedBuffer::get(obj)?;
    if !buffer.is_c_contiguous() {
        return Err(PyBufferError::new_err("buffer must be C-contiguous"));
    }
    let raw = RawBytes {
        ptr: buffer.buf_ptr().cast(),
        len: buffer.len_bytes(),
    };
    Ok((buffer, raw))
}

impl RawBytes {
    /// # Safety
    /// The export this came from must still be held.
    pub(crate) unsafe fn as_slice<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(self.ptr, self.len)
        }
    }

    /// # Safety
    /// The export this came from must still be held and be writable.
    pub(crate) unsafe fn as_mut_slice<'a>(self) -> &'a mut [u8] {
        if self.len == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(self.ptr, self.len)
        }
    }
}

/// A new `bytes` object of `len` uninitialized bytes and a pointer to them.
///
/// # Safety
/// Every byte must be written before the object is exposed to Python code; until then the
/// caller holds the only reference, so it may fill it with the GIL released.
pub(crate) unsafe fn new_uninit_bytes(
    py: Python<'_>,
    len: usize,
) -> PyResult<(Bound<'_, PyBytes>, RawBytes)> {
    let obj = ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as ffi::Py_ssize_t);
    let obj = Bound::from_owned_ptr_or_err(py, obj)?.cast_into_unchecked::<PyBytes>();
    let ptr = ffi::PyBytes_AsString(obj.as_ptr()).cast::<u8>();
    Ok((obj, RawBytes { ptr, len }))
}

/// Python's spelling of a bool, for `__repr__`s.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Adds the module's functions, classes and exceptions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    storage::register(m)?;
    columnar::register(m)?;
    cleaner::register(m)?;
    Ok(())
}
