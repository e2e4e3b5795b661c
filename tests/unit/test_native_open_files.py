"""The process-wide cache of open segment ``.log`` files (``rust/src/open_files.rs``), through
``pybroker._native``: a small capacity keeps many segments correct with at most that many files
open, a file removed under a closed segment is an error (never created again), segments loaded
with data hold no descriptor, and a process out of descriptors closes cached files to go on — or,
with none to close, fails the operation with ``OSError(EMFILE)`` and works again afterwards.

Tests that run with another capacity restore it (`capacity` fixture); the ones that exhaust
descriptors do it in a child process with a small ``RLIMIT_NOFILE``.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker import _native
from pybroker._native import Segment

MB = 1 << 20


@pytest.fixture
def capacity() -> Iterator[None]:
    previous = _native.max_open_log_files()
    yield
    _native.set_max_open_log_files(previous)


def open_log_files_under(directory: Path) -> int:
    """Descriptors this process has open on ``.log`` files under ``directory``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(directory)) and ".log" in target
    return count


def batch(i: int) -> bytearray:
    return bytearray(_native.build_batch([(None, f"record {i}".encode())], 1_700_000_000_000 + i))


def test_the_capacity_is_settable_and_bounds_the_open_files(tmp_path, capacity):
    _native.set_max_open_log_files(3)
    assert _native.max_open_log_files() == 3
    segments = []
    for i in range(20):
        (tmp_path / str(i)).mkdir()
        segments.append(Segment(tmp_path / str(i), 0))
    for rnd in range(3):
        for i, segment in enumerate(segments):
            segment.append(batch(100 * i + rnd), rnd, 0, -1)
            assert _native.open_log_files() <= 3
            assert open_log_files_under(tmp_path) <= 3
    for i, segment in enumerate(segments):
        values = [v for _o, _t, _k, v in _native.read_records(segment.read(0, MB, 1 << 62, True))]
        assert values == [f"record {100 * i + r}".encode() for r in range(3)]
        region = segment.read_region(1, MB, 1 << 62, True)
        assert region is not None and bytes(region) == segment.read(1, MB, 1 << 62, True)
        assert open_log_files_under(tmp_path) <= 3 + 1  # the region holds its own until dropped
        del region
    _native.set_max_open_log_files(1)
    assert _native.open_log_files() <= 1
    assert open_log_files_under(tmp_path) <= 1
    for segment in segments:
        segment.close()
    assert open_log_files_under(tmp_path) == 0
    with pytest.raises(ValueError, match="at least 1"):
        _native.set_max_open_log_files(0)


def test_a_segment_loaded_with_data_opens_its_log_when_used(tmp_path, capacity):
    _native.set_max_open_log_files(1000)
    segment = Segment(tmp_path, 0)
    assert segment.log_is_open  # a new segment: appended to next
    segment.append(batch(0), 0, 0, -1)
    segment.close()
    loaded = Segment(tmp_path, 0)
    assert not loaded.log_is_open and open_log_files_under(tmp_path) == 0
    assert loaded.next_offset == 1 and loaded.last_modified_ms > 0  # no descriptor needed
    assert loaded.read(0, MB, 1 << 62, True)
    assert loaded.log_is_open
    loaded.close()


def test_a_log_removed_under_a_closed_segment_is_an_error_not_a_new_file(tmp_path, capacity):
    _native.set_max_open_log_files(1000)
    segment = Segment(tmp_path, 0)
    segment.append(batch(0), 0, 0, -1)
    segment.close()
    loaded = Segment(tmp_path, 0)
    log_path = Path(loaded.path)
    log_path.unlink()
    with pytest.raises(FileNotFoundError):
        loaded.append(batch(1), 1, 0, -1)
    with pytest.raises(FileNotFoundError):
        loaded.read(0, MB, 1 << 62, True)
    assert not log_path.exists()
    assert loaded.next_offset == 1
    loaded.delete()


def run_child(code: str, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
    )


def test_out_of_descriptors_closes_cached_logs_and_then_fails_with_emfile(tmp_path):
    # A child with 64 descriptors and a cache of 64: its opens run out and reclaim cached files;
    # with every descriptor taken by other files and nothing cached, an append fails with EMFILE.
    result = run_child(f"""
        import errno, os, sys
        from pybroker import _native
        assert _native.max_open_log_files() == 64
        root = {str(tmp_path)!r}
        segments = []
        for i in range(150):
            os.mkdir(f"{{root}}/{{i}}")
            s = _native.Segment(f"{{root}}/{{i}}", 0)
            s.append(bytearray(_native.build_batch([(None, b"v%d" % i)], 1)), 0, 0, -1)
            segments.append(s)
        for i, s in enumerate(segments):
            assert _native.read_records(s.read(0, 1 << 20, 1 << 62, True))[0][3] == b"v%d" % i
        assert 0 < _native.open_log_files() < 64

        # Every other descriptor taken, the cache emptied: the next use of a .log fails.
        _native.set_max_open_log_files(1)  # keeps the most recently used: the last one read
        segments.pop().close()
        assert _native.open_log_files() == 0
        _native.set_max_open_log_files(64)
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            assert e.errno == errno.EMFILE
        try:
            segments[7].append(bytearray(_native.build_batch([(None, b"x")], 2)), 1, 0, -1)
        except OSError as e:
            print("append", e.errno, e.filename.endswith(".log"))
        else:
            sys.exit("the append succeeded with no descriptor left")
        for fd in held:
            os.close(fd)
        segments[7].append(bytearray(_native.build_batch([(None, b"x")], 2)), 1, 0, -1)
        print("values", [v for _o, _t, _k, v in _native.read_records(segments[7].read(0, 1 << 20, 1 << 62, True))])
    """, limit=64)
    assert result.returncode == 0, result.stderr + result.stdout
    lines = result.stdout.splitlines()
    assert lines[0] == f"append {errno.EMFILE} True"
    assert lines[1] == "values [b'v7', b'x']"
