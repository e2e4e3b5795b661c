//! Bindings of the clients' side: Arrow-columnar record encoding and decoding (the project's
//! producer, consumer and Spark source) and KIP-253's linear-hashing partitioner.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::{contiguous_buffer, new_uninit_bytes, py_bool, to_py_err, RawBytes, DETACH_THRESHOLD};
use crate::columnar::{
    self, ArrowBinary, BinaryColumn, EncodeInput, EncodeOptions, HeadersColumn, Int32Column,
};
use crate::errors::StorageError;
use crate::partitioner::LinearHashing;

/// An optional buffer argument: `None` is an absent buffer, anything else must export a
/// C-contiguous buffer, held in `exports` for as long as the returned pointer is used.
fn optional_buffer(
    obj: Option<Bound<'_, PyAny>>,
    exports: &mut Vec<PyUntypedBuffer>,
) -> PyResult<Option<RawBytes>> {
    match obj {
        None => Ok(None),
        Some(obj) if obj.is_none() => Ok(None),
        Some(obj) => {
            let (buffer, raw) = contiguous_buffer(&obj)?;
            exports.push(buffer);
            Ok(Some(raw))
        }
    }
}

/// An absent buffer reads as empty.
const EMPTY: RawBytes = RawBytes {
    ptr: std::ptr::null_mut(),
    len: 0,
};

fn non_negative(value: i64, what: &str) -> PyResult<usize> {
    usize::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{what} must not be negative, got {value}")))
}

fn to_i32(value: i64, what: &str) -> PyResult<i32> {
    i32::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{what} {value} does not fit an int32")))
}

/// The buffers of an Arrow `binary`/`string` array: `(validity, offsets, data, offset, length)`.
#[derive(Clone, Copy)]
struct BinaryArg {
    validity: Option<RawBytes>,
    offsets: RawBytes,
    data: RawBytes,
    offset: usize,
    len: usize,
}

type BinaryTuple<'py> = (
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    i64,
    i64,
);

impl BinaryArg {
    fn extract(
        obj: &Bound<'_, PyAny>,
        what: &str,
        exports: &mut Vec<PyUntypedBuffer>,
    ) -> PyResult<Self> {
        let (validity, offsets, data, offset, len): BinaryTuple<'_> =
            obj.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{what} must be a tuple (validity, offsets, data, offset, length)"
                ))
            })?;
        Ok(BinaryArg {
            validity: optional_buffer(validity, exports)?,
            offsets: optional_buffer(offsets, exports)?.unwrap_or(EMPTY),
            data: optional_buffer(data, exports)?.unwrap_or(EMPTY),
            offset: non_negative(offset, &format!("{what} offset"))?,
            len: non_negative(len, &format!("{what} length"))?,
        })
    }

    /// # Safety
    /// The exports the pointers came from must still be held.
    unsafe fn view<'a>(self) -> BinaryColumn<'a> {
        BinaryColumn {
            validity: self.validity.map(|v| v.as_slice()),
            offsets: self.offsets.as_slice(),
            data: self.data.as_slice(),
            offset: self.offset,
            len: self.len,
        }
    }
}

/// Record headers: `(list_validity, list_offsets, list_offset, header_keys, header_values)`.
#[derive(Clone, Copy)]
struct HeadersArg {
    list_validity: Option<RawBytes>,
    list_offsets: RawBytes,
    list_offset: usize,
    keys: BinaryArg,
    values: BinaryArg,
}

type HeadersTuple<'py> = (
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    i64,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

impl HeadersArg {
    fn extract(obj: &Bound<'_, PyAny>, exports: &mut Vec<PyUntypedBuffer>) -> PyResult<Self> {
        let (list_validity, list_offsets, list_offset, keys, values): HeadersTuple<'_> =
            obj.extract().map_err(|_| {
                PyTypeError::new_err(
                    "headers must be a tuple (list_validity, list_offsets, list_offset, \
                     header_keys, header_values)",
                )
            })?;
        Ok(HeadersArg {
            list_validity: optional_buffer(list_validity, exports)?,
            list_offsets: optional_buffer(list_offsets, exports)?.unwrap_or(EMPTY),
            list_offset: non_negative(list_offset, "headers list_offset")?,
            keys: BinaryArg::extract(&keys, "header_keys", exports)?,
            values: BinaryArg::extract(&values, "header_values", exports)?,
        })
    }
}

/// Explicit partitions, an Arrow `int32` array: `(validity, data, offset)`.
#[derive(Clone, Copy)]
struct Int32Arg {
    validity: Option<RawBytes>,
    data: RawBytes,
    offset: usize,
}

impl Int32Arg {
    fn extract(obj: &Bound<'_, PyAny>, exports: &mut Vec<PyUntypedBuffer>) -> PyResult<Self> {
        let (validity, data, offset): (Option<Bound<'_, PyAny>>, Option<Bound<'_, PyAny>>, i64) =
            obj.extract().map_err(|_| {
                PyTypeError::new_err("partitions must be a tuple (validity, data, offset)")
            })?;
        Ok(Int32Arg {
            validity: optional_buffer(validity, exports)?,
            data: optional_buffer(data, exports)?.unwrap_or(EMPTY),
            offset: non_negative(offset, "partitions offset")?,
        })
    }
}

/// Every column of an `encode_partitioned_batches` call, as pointers that may cross into a
/// GIL-released closure.
#[derive(Clone, Copy)]
struct EncodeArgs {
    values: BinaryArg,
    keys: Option<BinaryArg>,
    headers: Option<HeadersArg>,
    partitions: Option<Int32Arg>,
}

impl EncodeArgs {
    /// # Safety
    /// The exports the pointers came from must still be held.
    unsafe fn view<'a>(self) -> EncodeInput<'a> {
        EncodeInput {
            values: self.values.view(),
            keys: self.keys.map(|k| k.view()),
            headers: self.headers.map(|h| HeadersColumn {
                list_validity: h.list_validity.map(|v| v.as_slice()),
                list_offsets: h.list_offsets.as_slice(),
                list_offset: h.list_offset,
                keys: h.keys.view(),
                values: h.values.view(),
            }),
            partitions: self.partitions.map(|p| Int32Column {
                validity: p.validity.map(|v| v.as_slice()),
                data: p.data.as_slice(),
                offset: p.offset,
            }),
        }
    }

    /// Bytes of record data referenced (to decide whether to release the GIL).
    fn data_len(&self) -> usize {
        self.values.data.len + self.keys.map_or(0, |k| k.data.len)
    }
}

/// KIP-253's partition function for a topic's `initial_partition_count` and
/// `undeleted_partition_count` (see `partitioner.rs`).
#[pyclass(frozen, module = "pybroker._native", name = "LinearHashing")]
struct PyLinearHashing(LinearHashing);

#[pymethods]
impl PyLinearHashing {
    #[new]
    fn new(initial_partition_count: i64, undeleted_partition_count: i64) -> PyResult<Self> {
        let count =
            |value: i64| u32::try_from(value).unwrap_or(if value < 0 { 0 } else { u32::MAX });
        LinearHashing::new(
            count(initial_partition_count),
            count(undeleted_partition_count),
        )
        .map(PyLinearHashing)
        .map_err(PyValueError::new_err)
    }

    #[getter]
    fn initial_partition_count(&self) -> u32 {
        self.0.initial()
    }

    #[getter]
    fn undeleted_partition_count(&self) -> u32 {
        self.0.undeleted()
    }

    /// The partition of a non-null key.
    fn partition_for_key(&self, key: &[u8]) -> u32 {
        self.0.partition_for_key(key)
    }

    /// The partition whose keys an added partition (numbered at or above the undeleted count)
    /// takes over when the topic grows past it.
    fn split_source(&self, added: u32) -> u32 {
        self.0.split_source(added)
    }

    /// The deleted partitions (of a shrink from `old_count` to this count) that drain into
    /// `survivor`, ascending.
    fn drained_into(&self, survivor: u32, old_count: u32) -> Vec<u32> {
        self.0.drained_into(survivor, old_count)
    }

    fn __repr__(&self) -> String {
        format!(
            "LinearHashing(initial_partition_count={}, undeleted_partition_count={})",
            self.0.initial(),
            self.0.undeleted()
        )
    }
}

/// Partitions Arrow columns of records and encodes them into magic-2 batches.
#[pyfunction]
#[pyo3(signature = (
    values, keys, headers, partitions, num_partitions, sticky_partition, timestamp, batch_size,
    compression, producer_id = -1, producer_epoch = -1, base_sequences = None,
    initial_partitions = None
))]
#[allow(clippy::too_many_arguments)]
fn encode_partitioned_batches<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    keys: Option<&Bound<'py, PyAny>>,
    headers: Option<&Bound<'py, PyAny>>,
    partitions: Option<&Bound<'py, PyAny>>,
    num_partitions: i64,
    sticky_partition: i64,
    timestamp: i64,
    batch_size: i64,
    compression: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequences: Option<Vec<i32>>,
    initial_partitions: Option<i64>,
) -> PyResult<Bound<'py, PyList>> {
    let mut exports = Vec::new();
    let args = EncodeArgs {
        values: BinaryArg::extract(values, "values", &mut exports)?,
        keys: keys
            .filter(|k| !k.is_none())
            .map(|k| BinaryArg::extract(k, "keys", &mut exports))
            .transpose()?,
        headers: headers
            .filter(|h| !h.is_none())
            .map(|h| HeadersArg::extract(h, &mut exports))
            .transpose()?,
        partitions: partitions
            .filter(|p| !p.is_none())
            .map(|p| Int32Arg::extract(p, &mut exports))
            .transpose()?,
    };
    let opts = EncodeOptions {
        num_partitions: to_i32(num_partitions, "num_partitions")?,
        initial_partitions: to_i32(
            initial_partitions.unwrap_or(num_partitions),
            "initial_partitions",
        )?,
        sticky_partition: to_i32(sticky_partition, "sticky_partition")?,
        timestamp,
        batch_size,
        compression: u8::try_from(compression).map_err(|_| {
            PyValueError::new_err(format!("unknown compression codec id {compression}"))
        })?,
        producer_id,
        producer_epoch,
        base_sequences,
    };
    let compressed = opts.compression != 0;
    let detach = compressed || args.data_len() >= DETACH_THRESHOLD;

    // Plan (and, with a codec, build every batch).
    let opts_ref = &opts;
    let work = move || -> Result<_, StorageError> {
        // SAFETY: `exports` is held until the end of this function.
        let input = unsafe { args.view() };
        let plan = columnar::plan_batches(&input, opts_ref)?;
        let encoded = if compressed {
            columnar::encode_batches(&input, opts_ref, &plan)?
        } else {
            Vec::new()
        };
        Ok((plan, encoded))
    };
    let (plan, encoded) = if detach { py.detach(work) } else { work() }.map_err(to_py_err)?;

    let mut objects = Vec::with_capacity(plan.batches.len());
    if compressed {
        for bytes in &encoded {
            objects.push(PyBytes::new(py, bytes));
        }
    } else {
        // Uncompressed batches are written straight into their `bytes` objects.
        let mut targets = Vec::with_capacity(plan.batches.len());
        for batch in &plan.batches {
            // SAFETY: `write_batch` fills all `batch.size` bytes below, before the objects are
            // returned.
            let (obj, raw) = unsafe { new_uninit_bytes(py, batch.size)? };
            objects.push(obj);
            targets.push(raw);
        }
        let plan_ref = &plan;
        let fill = move || {
            // SAFETY: `exports` and the new objects are held until the end of this function.
            let input = unsafe { args.view() };
            let mut outs: Vec<&mut [u8]> = targets
                .into_iter()
                .map(|target| unsafe { target.as_mut_slice() })
                .collect();
            columnar::write_batches(&input, opts_ref, plan_ref, &mut outs);
        };
        if detach {
            py.detach(fill)
        } else {
            fill()
        }
    }
    drop(exports);

    let result = PyList::empty(py);
    let mut current: Option<(i32, Bound<'py, PyList>, usize)> = None;
    for (batch, obj) in plan.batches.iter().zip(objects) {
        match &mut current {
            Some((partition, list, count)) if *partition == batch.partition => {
                list.append(obj)?;
                *count += batch.record_count;
            }
            _ => {
                if let Some(done) = current.take() {
                    result.append(done)?;
                }
                current = Some((batch.partition, PyList::new(py, [obj])?, batch.record_count));
            }
        }
    }
    if let Some(done) = current {
        result.append(done)?;
    }
    Ok(result)
}

/// Records of a fetched buffer as Arrow buffers (see `_native.pyi`).
#[pyclass(frozen, get_all, module = "pybroker._native", name = "DecodedRecords")]
struct PyDecodedRecords {
    count: usize,
    next_offset: i64,
    offsets: Py<PyBytes>,
    timestamps: Py<PyBytes>,
    timestamp_types: Py<PyBytes>,
    key_validity: Option<Py<PyBytes>>,
    key_offsets: Py<PyBytes>,
    key_data: Py<PyBytes>,
    value_validity: Option<Py<PyBytes>>,
    value_offsets: Py<PyBytes>,
    value_data: Py<PyBytes>,
    header_list_offsets: Option<Py<PyBytes>>,
    header_key_offsets: Option<Py<PyBytes>>,
    header_key_data: Option<Py<PyBytes>>,
    header_value_validity: Option<Py<PyBytes>>,
    header_value_offsets: Option<Py<PyBytes>>,
    header_value_data: Option<Py<PyBytes>>,
}

#[pymethods]
impl PyDecodedRecords {
    fn __repr__(&self) -> String {
        format!(
            "DecodedRecords(count={}, next_offset={}, headers={})",
            self.count,
            self.next_offset,
            py_bool(self.header_list_offsets.is_some())
        )
    }
}

/// Decodes a Fetch response's records for one partition into Arrow buffers; with
/// `aborted_transactions` (`(producer_id, first_offset)` pairs), at read_committed.
#[pyfunction]
#[pyo3(signature = (data, start_offset, end_offset, include_headers, aborted_transactions = None))]
fn decode_record_batches(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    aborted_transactions: Option<Vec<(i64, i64)>>,
) -> PyResult<PyDecodedRecords> {
    let (buffer, raw) = contiguous_buffer(data)?;
    let aborted = aborted_transactions.as_deref();
    let work = move || {
        // SAFETY: `buffer` is held until after this closure has run.
        columnar::decode_record_batches(
            unsafe { raw.as_slice() },
            start_offset,
            end_offset,
            include_headers,
            aborted,
        )
    };
    let result = if raw.len >= DETACH_THRESHOLD {
        py.detach(work)
    } else {
        work()
    };
    drop(buffer);
    let d = result.map_err(to_py_err)?;
    let bytes = |v: &[u8]| PyBytes::new(py, v).unbind();
    let optional = |v: &Option<Vec<u8>>| v.as_deref().map(bytes);
    let (keys, values): (&ArrowBinary, &ArrowBinary) = (&d.keys, &d.values);
    let headers = d.headers.as_ref();
    Ok(PyDecodedRecords {
        count: d.count,
        next_offset: d.next_offset,
        offsets: bytes(&d.offsets),
        timestamps: bytes(&d.timestamps),
        timestamp_types: bytes(&d.timestamp_types),
        key_validity: optional(&keys.validity),
        key_offsets: bytes(&keys.offsets),
        key_data: bytes(&keys.data),
        value_validity: optional(&values.validity),
        value_offsets: bytes(&values.offsets),
        value_data: bytes(&values.data),
        header_list_offsets: headers.map(|h| bytes(&h.list_offsets)),
        header_key_offsets: headers.map(|h| bytes(&h.keys.offsets)),
        header_key_data: headers.map(|h| bytes(&h.keys.data)),
        header_value_validity: headers.and_then(|h| optional(&h.values.validity)),
        header_value_offsets: headers.map(|h| bytes(&h.values.offsets)),
        header_value_data: headers.map(|h| bytes(&h.values.data)),
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_partitioned_batches, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record_batches, m)?)?;
    m.add_class::<PyDecodedRecords>()?;
    m.add_class::<PyLinearHashing>()?;
    Ok(())
}
