//! `pybroker._native`: the Rust storage hot path of pybroker.
//!
//! Everything that touches record bytes lives here: batch validation (`batch`), building the
//! broker's own batches (`builder`), CRC-32C (`crc32c`), record decoding for timestamp lookups
//! and the group coordinator's reads (`records`), the sparse indexes
//! (`offset_index`, `time_index`, over `index_file`), the aborted-transaction index (`txn_index`),
//! segments (`segment`) and their recovery (`recovery`), the bounded cache of open `.log`
//! descriptors the segments share (`open_files`), the log regions a fetch sends with
//! `sendfile(2)` (`region`), the clients' Arrow-columnar record encoding and decoding
//! (`columnar`), where a keyed record goes (`partitioner`: Kafka's murmur2 and KIP-253's
//! linear hashing), and the conversions to and from message formats v0 and v1 for old clients
//! (`legacy`).
//! These modules are plain Rust with no Python types; `python` holds the PyO3 bindings, and this
//! file only declares the modules and the `#[pymodule]` entry point.

pub mod batch;
pub mod builder;
pub mod cleaner;
pub mod columnar;
pub mod crc32c;
pub mod errors;
mod index_file;
pub mod legacy;
pub mod offset_index;
pub mod open_files;
pub mod partitioner;
mod python;
pub mod records;
pub mod recovery;
pub mod region;
pub mod segment;
pub mod time_index;
pub mod txn_index;

#[cfg(test)]
mod cleaner_tests;
#[cfg(test)]
mod open_files_tests;
#[cfg(test)]
mod segment_tests;
#[cfg(test)]
mod test_dir;

use pyo3::prelude::*;

/// The extension module `pybroker._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    python::register(m)
}
