//! Bindings of the storage hot path: batch validation and building, record reading for the
//! coordinators, segments (with their indexes) and the log regions a fetch sends.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::{contiguous_buffer, py_bool, to_py_err, RawBytes, DETACH_THRESHOLD};
use crate::batch::{self, BatchHeader, RecordsInfo, ReplicatedRecordsInfo, CURRENT_MAGIC};
use crate::builder::{self, KeyValue, ProducerFields};
use crate::crc32c as crc;
use crate::errors::StorageError;
use crate::legacy;
use crate::open_files;
use crate::records::{self, Record};
use crate::region::LogRegion;
use crate::segment::{read_planned_raw, BatchInfo, ReadPlan, Segment};
use crate::txn_index::AbortedTxn;

/// `syncfs(2)` of the filesystem holding `path` (GIL released): every file and directory
/// written there so far is durable when it returns. One call instead of thousands of fsyncs for
/// a burst of new small files (a topic's partitions).
#[pyfunction]
fn sync_filesystem(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.detach(|| {
        let dir = std::fs::File::open(&path)?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open descriptor; syncfs reads nothing else.
            if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            drop(dir);
            // SAFETY: sync(2) takes no arguments.
            unsafe { libc::sync() };
        }
        Ok(())
    })
    .map_err(|e: std::io::Error| {
        PyOSError::new_err((
            e.raw_os_error().unwrap_or(0),
            e.to_string(),
            path.display().to_string(),
        ))
    })
}

/// Sets how many segment `.log` files the process keeps open at most (see `open_files.rs`);
/// the least recently used beyond it are closed now.
#[pyfunction]
fn set_max_open_log_files(n: i64) -> PyResult<()> {
    if n < 1 {
        return Err(PyValueError::new_err(format!(
            "the number of open log files must be at least 1, not {n}"
        )));
    }
    open_files::set_capacity(usize::try_from(n).unwrap_or(usize::MAX));
    Ok(())
}

/// How many segment `.log` files the process keeps open at most.
#[pyfunction]
fn max_open_log_files() -> usize {
    open_files::capacity()
}

/// How many segment `.log` files the cache holds open now.
#[pyfunction]
fn open_log_files() -> usize {
    open_files::open_count()
}

/// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
#[pyfunction]
#[pyo3(signature = (data, crc = 0))]
fn crc32c(py: Python<'_>, data: &Bound<'_, PyAny>, crc: u32) -> PyResult<u32> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let value = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || crc::crc32c_append(crc, unsafe { raw.as_slice() }))
    } else {
        crc::crc32c_append(crc, unsafe { raw.as_slice() })
    };
    drop(buffer);
    Ok(value)
}

/// Summary of a validated record set.
#[pyclass(frozen, get_all, module = "pybroker._native", name = "RecordsInfo")]
struct PyRecordsInfo {
    size: usize,
    batch_count: usize,
    record_count: i64,
    first_timestamp: i64,
    max_timestamp: i64,
    last_offset_delta_of_max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    last_offset_delta: i32,
    is_transactional: bool,
    is_control: bool,
    control_type: i16,
    coordinator_epoch: i32,
    compression: u8,
    base_offset: i64,
    last_offset: i64,
}

impl From<RecordsInfo> for PyRecordsInfo {
    fn from(i: RecordsInfo) -> Self {
        PyRecordsInfo {
            size: i.size,
            batch_count: i.batch_count,
            record_count: i.record_count,
            first_timestamp: i.first_timestamp,
            max_timestamp: i.max_timestamp,
            last_offset_delta_of_max_timestamp: i.last_offset_delta_of_max_timestamp,
            producer_id: i.producer_id,
            producer_epoch: i.producer_epoch,
            base_sequence: i.base_sequence,
            last_offset_delta: i.last_offset_delta,
            is_transactional: i.is_transactional,
            is_control: i.is_control,
            control_type: i.control_type,
            coordinator_epoch: i.coordinator_epoch,
            compression: i.compression,
            base_offset: i.base_offset,
            last_offset: i.last_offset,
        }
    }
}

#[pymethods]
impl PyRecordsInfo {
    fn __repr__(&self) -> String {
        format!(
            "RecordsInfo(size={}, batch_count={}, record_count={}, first_timestamp={}, max_timestamp={}, \
             last_offset_delta_of_max_timestamp={}, producer_id={}, producer_epoch={}, base_sequence={}, \
             last_offset_delta={}, is_transactional={}, is_control={}, control_type={}, coordinator_epoch={}, \
             compression={}, base_offset={}, last_offset={})",
            self.size,
            self.batch_count,
            self.record_count,
            self.first_timestamp,
            self.max_timestamp,
            self.last_offset_delta_of_max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.last_offset_delta,
            py_bool(self.is_transactional),
            py_bool(self.is_control),
            self.control_type,
            self.coordinator_epoch,
            self.compression,
            self.base_offset,
            self.last_offset,
        )
    }
}

/// Walks a produced record set once and summarises it; raises on malformed or oversize batches.
#[pyfunction]
fn validate_batches(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    max_message_bytes: i64,
) -> PyResult<PyRecordsInfo> {
    let (buffer, raw) = contiguous_buffer(records)?;
    // SAFETY: `buffer` is held until the end of this function.
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || batch::validate_batches(unsafe { raw.as_slice() }, max_message_bytes))
    } else {
        batch::validate_batches(unsafe { raw.as_slice() }, max_message_bytes)
    };
    drop(buffer);
    result.map(PyRecordsInfo::from).map_err(to_py_err)
}

/// Summary of a record set fetched from a partition leader.
#[pyclass(
    frozen,
    get_all,
    module = "pybroker._native",
    name = "ReplicatedRecordsInfo"
)]
struct PyReplicatedRecordsInfo {
    valid_bytes: usize,
    batch_count: usize,
    record_count: i64,
    first_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    last_leader_epoch: i32,
    offsets_monotonic: bool,
    epoch_starts: Vec<(i32, i64)>,
    producer_batches: Vec<ProducerBatchTuple>,
}

/// `(producer_id, producer_epoch, first_sequence, last_sequence, first_offset, last_offset,
/// max_timestamp, is_transactional, control_type, coordinator_epoch)`.
type ProducerBatchTuple = (i64, i16, i32, i32, i64, i64, i64, bool, i16, i32);

impl From<ReplicatedRecordsInfo> for PyReplicatedRecordsInfo {
    fn from(i: ReplicatedRecordsInfo) -> Self {
        PyReplicatedRecordsInfo {
            valid_bytes: i.valid_bytes,
            batch_count: i.batch_count,
            record_count: i.record_count,
            first_offset: i.first_offset,
            last_offset: i.last_offset,
            max_timestamp: i.max_timestamp,
            offset_of_max_timestamp: i.offset_of_max_timestamp,
            last_leader_epoch: i.last_leader_epoch,
            offsets_monotonic: i.offsets_monotonic,
            epoch_starts: i.epoch_starts,
            producer_batches: i
                .producer_batches
                .iter()
                .map(|b| {
                    (
                        b.producer_id,
                        b.producer_epoch,
                        b.first_sequence,
                        b.last_sequence,
                        b.first_offset,
                        b.last_offset,
                        b.max_timestamp,
                        b.is_transactional,
                        b.control_type,
                        b.coordinator_epoch,
                    )
                })
                .collect(),
        }
    }
}

#[pymethods]
impl PyReplicatedRecordsInfo {
    fn __repr__(&self) -> String {
        format!(
            "ReplicatedRecordsInfo(valid_bytes={}, batch_count={}, record_count={}, first_offset={}, \
             last_offset={}, max_timestamp={}, offset_of_max_timestamp={}, last_leader_epoch={}, \
             offsets_monotonic={}, epoch_starts={:?}, producer_batches={})",
            self.valid_bytes,
            self.batch_count,
            self.record_count,
            self.first_offset,
            self.last_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.last_leader_epoch,
            py_bool(self.offsets_monotonic),
            self.epoch_starts,
            self.producer_batches.len(),
        )
    }
}

/// Walks a record set fetched from a partition leader once and summarises it (follower append).
#[pyfunction]
fn validate_replicated_batches(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    latest_epoch: i32,
) -> PyResult<PyReplicatedRecordsInfo> {
    let (buffer, raw) = contiguous_buffer(records)?;
    // SAFETY: `buffer` is held until the end of this function.
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || {
            batch::validate_replicated_batches(unsafe { raw.as_slice() }, latest_epoch)
        })
    } else {
        batch::validate_replicated_batches(unsafe { raw.as_slice() }, latest_epoch)
    };
    drop(buffer);
    result.map(PyReplicatedRecordsInfo::from).map_err(to_py_err)
}

/// A key or value passed to `build_batch`: `bytes` are borrowed, other bytes-like objects copied.
enum FieldArg<'py> {
    Null,
    Bytes(Bound<'py, PyBytes>),
    Copied(Vec<u8>),
}

impl<'py> FieldArg<'py> {
    fn extract(obj: Bound<'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(FieldArg::Null);
        }
        match obj.cast_into::<PyBytes>() {
            Ok(bytes) => Ok(FieldArg::Bytes(bytes)),
            Err(e) => {
                let (buffer, raw) = contiguous_buffer(&e.into_inner())?;
                // SAFETY: `buffer` is held while the slice is copied.
                let copied = unsafe { raw.as_slice() }.to_vec();
                drop(buffer);
                Ok(FieldArg::Copied(copied))
            }
        }
    }

    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            FieldArg::Null => None,
            FieldArg::Bytes(b) => Some(b.as_bytes()),
            FieldArg::Copied(v) => Some(v),
        }
    }
}

/// One uncompressed batch of `(key, value)` records sharing `timestamp`.
#[pyfunction]
#[pyo3(signature = (records, timestamp, *, base_offset = 0, producer_id = -1, producer_epoch = -1, base_sequence = -1, transactional = false))]
#[allow(clippy::too_many_arguments)]
fn build_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    timestamp: i64,
    base_offset: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut fields = Vec::new();
    for item in records.try_iter()? {
        let (key, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
        fields.push((FieldArg::extract(key)?, FieldArg::extract(value)?));
    }
    let pairs: Vec<KeyValue<'_>> = fields
        .iter()
        .map(|(key, value)| (key.as_slice(), value.as_slice()))
        .collect();
    let producer = ProducerFields {
        producer_id,
        producer_epoch,
        base_sequence,
    };
    let attributes = if transactional {
        batch::TRANSACTIONAL_FLAG_MASK
    } else {
        0
    };
    let batch =
        builder::build_batch_with_attributes(&pairs, base_offset, timestamp, producer, attributes)
            .map_err(to_py_err)?;
    Ok(PyBytes::new(py, &batch))
}

/// Kafka's end-transaction marker batch (COMMIT when `commit`, else ABORT).
#[pyfunction]
fn build_control_batch<'py>(
    py: Python<'py>,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    timestamp: i64,
) -> Bound<'py, PyBytes> {
    let batch = builder::build_control_batch(
        producer_id,
        producer_epoch,
        coordinator_epoch,
        commit,
        timestamp,
    );
    PyBytes::new(py, &batch)
}

/// One batch of `read_record_batches`: `(base_offset, producer_id, producer_epoch,
/// is_transactional, control_type, records)`.
type BatchRecordsTuple<'py> = (i64, i64, i16, bool, i16, Vec<RecordTuple<'py>>);

/// `(offset, timestamp, key, value)` of one record.
type RecordTuple<'py> = (
    i64,
    i64,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
);

fn record_tuple(py: Python<'_>, r: Record) -> RecordTuple<'_> {
    let optional_bytes = |data: Option<Vec<u8>>| data.map(|d| PyBytes::new(py, &d));
    (
        r.offset,
        r.timestamp,
        optional_bytes(r.key),
        optional_bytes(r.value),
    )
}

/// Every batch of `data` with its producer fields, control type and records.
#[pyfunction]
fn read_record_batches<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Vec<BatchRecordsTuple<'py>>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || records::read_record_batches(unsafe { raw.as_slice() }))
    } else {
        records::read_record_batches(unsafe { raw.as_slice() })
    };
    drop(buffer);
    Ok(result
        .map_err(to_py_err)?
        .into_iter()
        .map(|b| {
            (
                b.base_offset,
                b.producer_id,
                b.producer_epoch,
                b.is_transactional,
                b.control_type,
                b.records.into_iter().map(|r| record_tuple(py, r)).collect(),
            )
        })
        .collect())
}

/// `(offset, timestamp, key, value)` of every record of every non-control batch in `data`.
#[pyfunction]
fn read_records<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || records::read_records(unsafe { raw.as_slice() }))
    } else {
        records::read_records(unsafe { raw.as_slice() })
    };
    drop(buffer);
    let tuples = result
        .map_err(to_py_err)?
        .into_iter()
        .map(|r| record_tuple(py, r));
    PyList::new(py, tuples)
}

/// The batch indexes of the null-key records of the first data batch of `data` that has any
/// (Kafka's compacted-topic rule); empty when every record has a key.
#[pyfunction]
fn null_key_indexes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Vec<i32>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(move || records::null_key_indexes(unsafe { raw.as_slice() }))
    } else {
        records::null_key_indexes(unsafe { raw.as_slice() })
    };
    drop(buffer);
    result.map_err(to_py_err)
}

/// `(producer id, producer epoch)` of the first batch of `data` when its whole header is there,
/// its magic is 2 and it is transactional (KIP-890: the producer whose transaction a leader
/// verifies); `None` otherwise. Reads the header only: no CRC, no records.
#[pyfunction]
fn transactional_producer(data: &Bound<'_, PyAny>) -> PyResult<Option<(i64, i16)>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let header = BatchHeader::parse(unsafe { raw.as_slice() });
    drop(buffer);
    Ok(header
        .filter(|h| h.magic == CURRENT_MAGIC && h.is_transactional())
        .map(|h| (h.producer_id, h.producer_epoch)))
}

/// The message set `data` (message format v0 or v1, as Produce v0–2 carries it) as one v2
/// batch; `None` when `data` starts with a v2 batch, which any Produce version may carry.
#[pyfunction]
fn up_convert<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let data = unsafe { raw.as_slice() };
    if !legacy::is_legacy(data) {
        return Ok(None);
    }
    let batch = legacy::up_convert(data).map_err(to_py_err)?;
    drop(buffer);
    Ok(Some(PyBytes::new(py, &batch)))
}

/// The v2 batches `data` as a message set of `to_magic` (0 or 1) for a Fetch of version 0–3,
/// sized as Kafka's lazy down-conversion sends it; `None` if a zstd batch is among them.
#[pyfunction]
fn down_convert<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    to_magic: u8,
    fetch_offset: i64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let (buffer, raw) = contiguous_buffer(data)?;
    // SAFETY: `buffer` is held until the end of this function.
    let data = unsafe { raw.as_slice() };
    let converted = if data.len() >= DETACH_THRESHOLD {
        py.detach(move || legacy::down_convert(data, to_magic, fetch_offset))
    } else {
        legacy::down_convert(data, to_magic, fetch_offset)
    };
    drop(buffer);
    Ok(match converted.map_err(to_py_err)? {
        legacy::DownConverted::Messages(messages) => Some(PyBytes::new(py, &messages)),
        legacy::DownConverted::Zstd => None,
    })
}

/// Header information of one stored batch.
#[pyclass(frozen, get_all, module = "pybroker._native", name = "BatchHeader")]
struct PyBatchHeader {
    base_offset: i64,
    last_offset: i64,
    position: u64,
    size: u64,
    partition_leader_epoch: i32,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    is_control: bool,
    control_type: i16,
    coordinator_epoch: i32,
}

impl From<BatchInfo> for PyBatchHeader {
    fn from(b: BatchInfo) -> Self {
        PyBatchHeader {
            base_offset: b.base_offset,
            last_offset: b.last_offset,
            position: b.position,
            size: b.size,
            partition_leader_epoch: b.partition_leader_epoch,
            max_timestamp: b.max_timestamp,
            producer_id: b.producer_id,
            producer_epoch: b.producer_epoch,
            base_sequence: b.base_sequence,
            is_transactional: b.is_transactional,
            is_control: b.is_control,
            control_type: b.control_type,
            coordinator_epoch: b.coordinator_epoch,
        }
    }
}

#[pymethods]
impl PyBatchHeader {
    fn __repr__(&self) -> String {
        format!(
            "BatchHeader(base_offset={}, last_offset={}, position={}, size={}, partition_leader_epoch={}, \
             max_timestamp={}, producer_id={}, producer_epoch={}, base_sequence={}, is_transactional={}, is_control={}, \
             control_type={}, coordinator_epoch={})",
            self.base_offset,
            self.last_offset,
            self.position,
            self.size,
            self.partition_leader_epoch,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            py_bool(self.is_transactional),
            py_bool(self.is_control),
            self.control_type,
            self.coordinator_epoch,
        )
    }
}

/// Bytes of a `.log` file that a fetch response carries as they are (see `region.rs`).
#[pyclass(frozen, module = "pybroker._native", name = "LogRegion")]
struct PyLogRegion {
    region: LogRegion,
}

#[pymethods]
impl PyLogRegion {
    /// Position of the first byte in the `.log` file.
    #[getter]
    fn position(&self) -> u64 {
        self.region.position()
    }

    /// Last offset of the region's last batch + 1.
    #[getter]
    fn next_offset(&self) -> i64 {
        self.region.next_offset()
    }

    fn __len__(&self) -> usize {
        self.region.len()
    }

    /// Sends bytes `[start, len)` to the non-blocking socket `fd` with `sendfile(2)` until they
    /// are all sent or the socket is full; returns the index of the first byte not sent.
    fn send_to(&self, py: Python<'_>, fd: i32, start: usize) -> PyResult<usize> {
        py.detach(|| self.region.send_to(fd, start))
            .map_err(to_py_err)
    }

    /// Bytes `[start, len)`, read from the file.
    #[pyo3(signature = (start = 0))]
    fn read<'py>(&self, py: Python<'py>, start: usize) -> PyResult<Bound<'py, PyBytes>> {
        let data = py.detach(|| self.region.read(start)).map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, 0)
    }

    fn __repr__(&self) -> String {
        format!(
            "LogRegion({}, position={}, length={}, next_offset={})",
            self.region.path().display(),
            self.region.position(),
            self.region.len(),
            self.region.next_offset()
        )
    }
}

/// `(producer_id, first_offset, last_offset, last_stable_offset)`.
type AbortedTxnTuple = (i64, i64, i64, i64);

fn aborted_txn_tuple(t: AbortedTxn) -> AbortedTxnTuple {
    (
        t.producer_id,
        t.first_offset,
        t.last_offset,
        t.last_stable_offset,
    )
}

/// One log segment (`.log`, `.index`, `.timeindex`, `.txnindex`).
#[pyclass(frozen, module = "pybroker._native", name = "Segment")]
pub(crate) struct PySegment {
    inner: Mutex<Option<Segment>>,
    base_offset: i64,
    /// The `.log`'s path (it changes when the cleaner renames a segment's files).
    path: Mutex<PathBuf>,
}

impl PySegment {
    fn log_path(&self) -> PathBuf {
        self.path.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Segment>> {
        // A panic cannot leave a segment half-updated in a way that matters more than refusing
        // every later call would, so recover from poisoning.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn closed_error(&self) -> StorageError {
        StorageError::Closed(self.log_path())
    }

    /// Runs `f` on the open segment, GIL held (for cheap, I/O-free calls).
    fn with<T>(&self, f: impl FnOnce(&mut Segment) -> Result<T, StorageError>) -> PyResult<T> {
        let mut guard = self.lock();
        match guard.as_mut() {
            Some(segment) => f(segment).map_err(to_py_err),
            None => Err(to_py_err(self.closed_error())),
        }
    }

    /// Runs `f` on the open segment with the GIL released.
    pub(crate) fn with_detached<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&mut Segment) -> Result<T, StorageError> + Send,
    {
        py.detach(|| {
            let mut guard = self.lock();
            match guard.as_mut() {
                Some(segment) => f(segment),
                None => Err(self.closed_error()),
            }
        })
        .map_err(to_py_err)
    }

    /// Takes the segment out (closing this object); `None` if already closed.
    fn take(&self, py: Python<'_>) -> Option<Segment> {
        py.detach(|| self.lock().take())
    }

    /// Reads a plan into a new `bytes` object sized to the planned capacity, then shrinks it to
    /// the whole batches actually taken.
    fn read_into_bytes<'py>(
        &self,
        py: Python<'py>,
        file: &std::fs::File,
        plan: &ReadPlan,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let capacity = plan.capacity as ffi::Py_ssize_t;
        // SAFETY: the writer is created, filled and finished (or discarded) here, and its data
        // pointer is only used before finishing, by this thread.
        unsafe {
            let writer = ffi::compat::PyBytesWriter_Create(capacity);
            if writer.is_null() {
                return Err(PyErr::fetch(py));
            }
            let dst = RawBytes {
                ptr: ffi::compat::PyBytesWriter_GetData(writer).cast(),
                len: plan.capacity,
            };
            let path = self.log_path();
            let path = &path;
            let result = py.detach(move || {
                let dst = dst;
                read_planned_raw(file, path, plan, dst.ptr)
            });
            match result {
                Ok(n) => {
                    let obj =
                        ffi::compat::PyBytesWriter_FinishWithSize(writer, n as ffi::Py_ssize_t);
                    Ok(Bound::from_owned_ptr_or_err(py, obj)?.cast_into_unchecked())
                }
                Err(e) => {
                    ffi::compat::PyBytesWriter_Discard(writer);
                    Err(to_py_err(e))
                }
            }
        }
    }
}

#[pymethods]
impl PySegment {
    #[new]
    #[pyo3(signature = (dir, base_offset, index_interval_bytes = 4096, max_index_size = 10485760, suffix = ""))]
    fn new(
        py: Python<'_>,
        dir: PathBuf,
        base_offset: i64,
        index_interval_bytes: i64,
        max_index_size: i64,
        suffix: &str,
    ) -> PyResult<Self> {
        let segment = py
            .detach(|| {
                Segment::open_with_suffix(
                    &dir,
                    base_offset,
                    suffix,
                    index_interval_bytes,
                    max_index_size,
                )
            })
            .map_err(to_py_err)?;
        let path = segment.path().to_path_buf();
        Ok(PySegment {
            inner: Mutex::new(Some(segment)),
            base_offset,
            path: Mutex::new(path),
        })
    }

    #[getter]
    fn base_offset(&self) -> i64 {
        self.base_offset
    }

    #[getter]
    fn path(&self) -> String {
        self.log_path().display().to_string()
    }

    /// Renames the files from `<name><old_suffix>` to `<name><new_suffix>`, the `.log` first
    /// (Kafka's `changeFileSuffixes`).
    fn change_file_suffixes(
        &self,
        py: Python<'_>,
        old_suffix: &str,
        new_suffix: &str,
    ) -> PyResult<()> {
        let path = self.with_detached(py, |s| {
            s.change_file_suffixes(old_suffix, new_suffix)?;
            Ok(s.path().to_path_buf())
        })?;
        *self.path.lock().unwrap_or_else(|e| e.into_inner()) = path;
        Ok(())
    }

    /// Sets the `.log`'s modification time, in milliseconds since the epoch.
    fn set_last_modified_ms(&self, py: Python<'_>, ms: i64) -> PyResult<()> {
        self.with_detached(py, |s| s.set_last_modified_ms(ms))
    }

    #[getter]
    fn size(&self) -> PyResult<u64> {
        self.with(|s| Ok(s.size()))
    }

    #[getter]
    fn next_offset(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.next_offset()))
    }

    #[getter]
    fn max_timestamp(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.max_timestamp()))
    }

    #[getter]
    fn offset_of_max_timestamp(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.offset_of_max_timestamp()))
    }

    #[getter]
    fn first_batch_timestamp(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.first_batch_timestamp()))
    }

    #[getter]
    fn index_is_full(&self) -> PyResult<bool> {
        self.with(|s| Ok(s.index_is_full()))
    }

    /// Bytes of entries in the offset index and in the time index (Kafka's index
    /// `sizeInBytes`).
    #[getter]
    fn index_sizes(&self) -> PyResult<(usize, usize)> {
        self.with(|s| {
            Ok((
                s.offset_index().entries() * 8,
                s.time_index().entries() * 12,
            ))
        })
    }

    #[getter]
    fn last_modified_ms(&self) -> PyResult<i64> {
        self.with(|s| s.last_modified_ms())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Patches and appends a record set; returns (last_offset, max_timestamp,
    /// offset_of_max_timestamp).
    fn append(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        first_offset: i64,
        leader_epoch: i32,
        log_append_time_ms: i64,
    ) -> PyResult<(i64, i64, i64)> {
        let (buffer, raw) = contiguous_buffer(records)?;
        let readonly = buffer.readonly();
        let result = self.with_detached(py, move |s| {
            // SAFETY: `buffer` is held until after this closure returns; it is only written
            // when the exporter declared it writable.
            if readonly {
                s.append_copy(
                    unsafe { raw.as_slice() },
                    first_offset,
                    leader_epoch,
                    log_append_time_ms,
                )
            } else {
                s.append(
                    unsafe { raw.as_mut_slice() },
                    first_offset,
                    leader_epoch,
                    log_append_time_ms,
                )
            }
        });
        drop(buffer);
        let r = result?;
        Ok((r.last_offset, r.max_timestamp, r.offset_of_max_timestamp))
    }

    /// Whole batches starting with the one holding `offset`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        max_bytes: i64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        for _ in 0..8 {
            let (plan, file, generation) = self.with_detached(py, |s| {
                Ok((
                    s.read_plan(offset, max_bytes, max_offset, min_one_batch)?,
                    s.log_file()?,
                    s.generation(),
                ))
            })?;
            let Some(plan) = plan else {
                return Ok(PyBytes::new(py, b""));
            };
            let bytes = self.read_into_bytes(py, &file, &plan);
            if self.with_detached(py, |s| Ok(s.generation() == generation))? {
                return bytes;
            }
        }
        Err(PyValueError::new_err(
            "segment changed repeatedly during read",
        ))
    }

    /// The whole batches `read` would return, as a region of the `.log` to send as it is
    /// (only batch headers are read); `None` when there are none.
    fn read_region(
        &self,
        py: Python<'_>,
        offset: i64,
        max_bytes: i64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> PyResult<Option<PyLogRegion>> {
        self.with_detached(py, |s| {
            let Some((position, length, next_offset)) =
                s.read_region(offset, max_bytes, max_offset, min_one_batch)?
            else {
                return Ok(None);
            };
            let region = LogRegion::new(s.log_file_ref(), position, length, next_offset);
            Ok(Some(PyLogRegion { region }))
        })
    }

    /// First record with timestamp >= `timestamp` and offset >= `start_offset`.
    fn find_offset_by_timestamp(
        &self,
        py: Python<'_>,
        timestamp: i64,
        start_offset: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        self.with_detached(py, |s| s.find_offset_by_timestamp(timestamp, start_offset))
    }

    /// (offset, timestamp) of the first record holding the segment's max timestamp.
    fn max_timestamp_record(&self, py: Python<'_>) -> PyResult<Option<(i64, i64)>> {
        self.with_detached(py, |s| s.max_timestamp_record())
    }

    /// Removes batches with last offset >= `offset`; returns bytes removed.
    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<u64> {
        self.with_detached(py, |s| s.truncate_to(offset))
    }

    /// Validates the whole log, rebuilds the indexes (emptying the txn index), truncates at the
    /// first invalid batch.
    fn recover(&self, py: Python<'_>, max_message_bytes: i64) -> PyResult<u64> {
        self.with_detached(py, |s| s.recover(max_message_bytes))
    }

    /// Whether the cache of open `.log` files holds this segment's open now.
    #[getter]
    fn log_is_open(&self) -> PyResult<bool> {
        self.with(|s| Ok(s.log_is_open()))
    }

    /// Whether the `.txnindex` file exists.
    #[getter]
    fn has_txn_index(&self) -> PyResult<bool> {
        self.with(|s| Ok(s.has_txn_index()))
    }

    /// Whether opening found the `.txnindex` damaged (cleared by `recover`).
    #[getter]
    fn txn_index_damaged(&self) -> PyResult<bool> {
        self.with(|s| Ok(s.txn_index_damaged()))
    }

    /// Appends an aborted transaction to the `.txnindex` (no fsync).
    fn append_aborted_txn(
        &self,
        py: Python<'_>,
        producer_id: i64,
        first_offset: i64,
        last_offset: i64,
        last_stable_offset: i64,
    ) -> PyResult<()> {
        self.with_detached(py, |s| {
            s.append_aborted_txn(AbortedTxn {
                producer_id,
                first_offset,
                last_offset,
                last_stable_offset,
            })
        })
    }

    /// Kafka's `collectAbortedTxns`: `(entries, is_complete)`.
    fn collect_aborted_txns(
        &self,
        py: Python<'_>,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> PyResult<(Vec<AbortedTxnTuple>, bool)> {
        let (found, complete) = self.with_detached(py, |s| {
            s.collect_aborted_txns(fetch_offset, upper_bound_offset)
        })?;
        Ok((found.into_iter().map(aborted_txn_tuple).collect(), complete))
    }

    /// Every entry of the `.txnindex`.
    fn aborted_txns(&self, py: Python<'_>) -> PyResult<Vec<AbortedTxnTuple>> {
        let all = self.with_detached(py, |s| s.aborted_txns())?;
        Ok(all.into_iter().map(aborted_txn_tuple).collect())
    }

    /// Header info of every batch from `start_position`.
    #[pyo3(signature = (start_position = 0))]
    fn batches(&self, py: Python<'_>, start_position: u64) -> PyResult<Vec<PyBatchHeader>> {
        let list = self.with_detached(py, |s| s.batches(start_position))?;
        Ok(list.into_iter().map(PyBatchHeader::from).collect())
    }

    /// `(epoch, base offset)` of each batch starting a leader epoch above `latest_epoch`.
    fn leader_epoch_starts(&self, py: Python<'_>, latest_epoch: i32) -> PyResult<Vec<(i32, i64)>> {
        self.with_detached(py, |s| s.leader_epoch_starts(latest_epoch))
    }

    /// fsync the log and the indexes (GIL released; the segment stays usable meanwhile).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let handles = self.with_detached(py, |s| s.flush_handles())?;
        py.detach(|| handles.sync()).map_err(to_py_err)
    }

    /// Final time-index entry and index trimming when the segment stops being active.
    fn on_become_inactive(&self, py: Python<'_>) -> PyResult<()> {
        self.with_detached(py, |s| s.on_become_inactive())
    }

    /// Final time-index entry, trim, fsync (unless `sync` is false), close. Closing twice is a
    /// no-op.
    #[pyo3(signature = (sync = true))]
    fn close(&self, py: Python<'_>, sync: bool) -> PyResult<()> {
        match self.take(py) {
            Some(segment) => py.detach(|| segment.close(sync)).map_err(to_py_err),
            None => Ok(()),
        }
    }

    /// Closes the segment and removes its files.
    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        match self.take(py) {
            Some(segment) => py.detach(|| segment.delete()).map_err(to_py_err),
            None => Err(to_py_err(self.closed_error())),
        }
    }

    /// Closes the segment and renames its files to `<name><suffix>`.
    fn rename_suffix(&self, py: Python<'_>, suffix: &str) -> PyResult<()> {
        if suffix.is_empty() || suffix.contains('/') {
            return Err(PyValueError::new_err(format!("invalid suffix {suffix:?}")));
        }
        match self.take(py) {
            Some(segment) => py
                .detach(|| segment.rename_suffix(suffix))
                .map(|_| ())
                .map_err(to_py_err),
            None => Err(to_py_err(self.closed_error())),
        }
    }

    fn __repr__(&self) -> String {
        match self.lock().as_ref() {
            Some(s) => format!(
                "Segment(path={:?}, base_offset={}, size={}, next_offset={})",
                s.path().display().to_string(),
                self.base_offset,
                s.size(),
                s.next_offset()
            ),
            None => format!(
                "Segment(path={:?}, closed)",
                self.log_path().display().to_string()
            ),
        }
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(sync_filesystem, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_open_log_files, m)?)?;
    m.add_function(wrap_pyfunction!(max_open_log_files, m)?)?;
    m.add_function(wrap_pyfunction!(open_log_files, m)?)?;
    m.add_function(wrap_pyfunction!(validate_batches, m)?)?;
    m.add_function(wrap_pyfunction!(validate_replicated_batches, m)?)?;
    m.add_function(wrap_pyfunction!(build_batch, m)?)?;
    m.add_function(wrap_pyfunction!(build_control_batch, m)?)?;
    m.add_function(wrap_pyfunction!(read_records, m)?)?;
    m.add_function(wrap_pyfunction!(read_record_batches, m)?)?;
    m.add_function(wrap_pyfunction!(null_key_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(transactional_producer, m)?)?;
    m.add_function(wrap_pyfunction!(up_convert, m)?)?;
    m.add_function(wrap_pyfunction!(down_convert, m)?)?;
    m.add_class::<PyRecordsInfo>()?;
    m.add_class::<PyReplicatedRecordsInfo>()?;
    m.add_class::<PyBatchHeader>()?;
    m.add_class::<PySegment>()?;
    m.add_class::<PyLogRegion>()?;
    Ok(())
}
