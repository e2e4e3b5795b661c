//! Unique temporary directories for unit tests, removed on drop, and a look at this process's
//! memory mappings.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub(crate) struct TestDir(PathBuf);

impl TestDir {
    pub(crate) fn new(name: &str) -> TestDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("pybroker-native-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        TestDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `VmFlags` line of this process's mapping of `path` (from /proc/self/smaps), or `None`
/// when `path` is not mapped.
#[cfg(target_os = "linux")]
pub(crate) fn vm_flags_of_mapping(path: &Path) -> Option<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut in_mapping = false;
    for line in smaps.lines() {
        if line.contains(" /") || line.ends_with(']') {
            in_mapping = line.ends_with(name);
        } else if in_mapping && line.starts_with("VmFlags:") {
            return Some(line.to_string());
        }
    }
    None
}
