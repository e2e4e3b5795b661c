//! Bindings of log compaction (`cleaner.rs`): one `LogCleaning` per clean of a log, called once
//! per segment from a cleaner thread with the GIL released, and the `Throttler` all cleaner
//! threads share.
//!
//! A call holds a segment's lock only to take its own handle on the `.log` (and, for the map,
//! an index lookup); the old segment is then read without it, so the event loop's fetches of
//! that segment never wait for the cleaner. The segment being written (`.cleaned`) belongs to
//! the cleaner thread until it is swapped in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use super::storage::PySegment;
use super::to_py_err;
use crate::cleaner::{
    CleanerStats, Cleaning, LastRecord, OffsetMap, RetentionRules, SegmentSource, Throttler,
};
use crate::txn_index::AbortedTxn;

/// `(producer id, first offset, last offset, last stable offset)`, as `Segment.aborted_txns`
/// and `Segment.collect_aborted_txns` give them.
type AbortedTxnTuple = (i64, i64, i64, i64);

fn aborted(txns: Vec<AbortedTxnTuple>) -> impl Iterator<Item = AbortedTxn> {
    txns.into_iter().map(
        |(producer_id, first_offset, last_offset, last_stable_offset)| AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset,
        },
    )
}

/// The I/O rate limit of every cleaner thread together (`log.cleaner.io.max.bytes.per.second`).
#[pyclass(frozen, module = "pybroker._native", name = "Throttler")]
struct PyThrottler(Arc<Throttler>);

#[pymethods]
impl PyThrottler {
    #[new]
    fn new(bytes_per_second: f64) -> Self {
        PyThrottler(Arc::new(Throttler::new(bytes_per_second)))
    }
}

/// One clean of one log: its offset map, transaction tracking and statistics.
#[pyclass(frozen, module = "pybroker._native", name = "LogCleaning")]
struct PyLogCleaning(Mutex<Cleaning>);

impl PyLogCleaning {
    fn cleaning(&self) -> std::sync::MutexGuard<'_, Cleaning> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyLogCleaning {
    /// A clean whose offset map may use `memory_bytes` and is full at `load_factor` of it;
    /// `expected_keys` (the offsets in the dirty section) sizes a smaller table when it can.
    #[new]
    fn new(memory_bytes: usize, load_factor: f64, expected_keys: usize) -> Self {
        let map = OffsetMap::new(memory_bytes, load_factor, expected_keys);
        PyLogCleaning(Mutex::new(Cleaning::new(map)))
    }

    /// Aborted transactions of the dirty section, before mapping it.
    fn add_aborted_for_map(&self, txns: Vec<AbortedTxnTuple>) {
        self.cleaning().add_aborted_for_map(aborted(txns));
    }

    /// Aborted transactions of a segment's range, before cleaning it.
    fn add_aborted_for_clean(&self, txns: Vec<AbortedTxnTuple>) {
        self.cleaning().add_aborted_for_clean(aborted(txns));
    }

    /// Maps the keys of `segment` from `start_offset` on; true when the map filled up.
    #[pyo3(signature = (segment, start_offset, next_segment_start, throttler = None))]
    fn map_segment(
        &self,
        py: Python<'_>,
        segment: &PySegment,
        start_offset: i64,
        next_segment_start: i64,
        throttler: Option<&PyThrottler>,
    ) -> PyResult<bool> {
        let source = segment.with_detached(py, |s| SegmentSource::of(s, start_offset))?;
        let throttler = throttler.map(|t| Arc::clone(&t.0));
        py.detach(|| {
            self.cleaning().map_segment(
                &source,
                start_offset,
                next_segment_start,
                throttler.as_deref(),
            )
        })
        .map_err(to_py_err)
    }

    /// Appends what the retention rules keep of `segment` to `dest`. `active_producers` maps a
    /// producer id to `(last data offset or None, producer epoch)`.
    #[pyo3(signature = (segment, dest, now_ms, delete_retention_ms, active_producers, throttler = None))]
    #[allow(clippy::too_many_arguments)]
    fn clean_segment(
        &self,
        py: Python<'_>,
        segment: &PySegment,
        dest: &PySegment,
        now_ms: i64,
        delete_retention_ms: i64,
        active_producers: HashMap<i64, (Option<i64>, i16)>,
        throttler: Option<&PyThrottler>,
    ) -> PyResult<()> {
        let source = segment.with_detached(py, |s| SegmentSource::of(s, i64::MIN))?;
        let rules = RetentionRules {
            now_ms,
            delete_retention_ms,
            active_producers: active_producers
                .into_iter()
                .map(|(id, (last_data_offset, producer_epoch))| {
                    (
                        id,
                        LastRecord {
                            last_data_offset,
                            producer_epoch,
                        },
                    )
                })
                .collect(),
        };
        let throttler = throttler.map(|t| Arc::clone(&t.0));
        dest.with_detached(py, |d| {
            self.cleaning()
                .clean_segment(&source, d, &rules, throttler.as_deref())
        })
    }

    /// Frees the offset map and buffers without the GIL, so that the event loop never pays for
    /// unmapping them when the last reference goes; `stats` stay readable.
    fn release(&self, py: Python<'_>) {
        py.detach(|| self.cleaning().release());
    }

    /// The last offset of the mapped range (-1 before anything was mapped).
    #[getter]
    fn latest_offset(&self) -> i64 {
        self.cleaning().map().latest_offset()
    }

    /// Share of the offset map's table in use.
    #[getter]
    fn map_utilization(&self) -> f64 {
        self.cleaning().map().utilization()
    }

    /// Kafka's cleaner statistics, as a dict.
    #[getter]
    fn stats(&self) -> HashMap<&'static str, u64> {
        let CleanerStats {
            map_bytes_read,
            map_messages_read,
            bytes_read,
            messages_read,
            bytes_written,
            messages_written,
            invalid_messages,
        } = self.cleaning().stats();
        HashMap::from([
            ("map_bytes_read", map_bytes_read),
            ("map_messages_read", map_messages_read),
            ("bytes_read", bytes_read),
            ("messages_read", messages_read),
            ("bytes_written", bytes_written),
            ("messages_written", messages_written),
            ("invalid_messages", invalid_messages),
        ])
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyThrottler>()?;
    m.add_class::<PyLogCleaning>()?;
    Ok(())
}
