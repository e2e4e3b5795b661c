"""What a broker does about its open-file limit at start-up (`pybroker.log.file_descriptors`): the
soft limit raised to the hard one and both logged, the cache of open log files sized to half of
it (at least 64), and a limit too low to run refused in one line. ``resource`` is replaced by a
fake here; tests/integration/test_file_descriptor_limit.py runs the real thing."""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator

import pytest

from pybroker import _native
from pybroker.log import file_descriptors
from pybroker.log.file_descriptors import (
    MIN_LOG_FILES,
    MIN_OPEN_FILES,
    FileDescriptorLimitError,
    check_open_file_limit,
    configure_open_files,
    log_file_capacity,
)


class FakeLimits:
    def __init__(self, soft: int, hard: int) -> None:
        self.limits = (soft, hard)

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.limits

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE and limits[1] == self.limits[1]
        self.limits = limits


@pytest.fixture
def native_capacity() -> Iterator[None]:
    previous = _native.max_open_log_files()
    yield
    _native.set_max_open_log_files(previous)


def fake(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> FakeLimits:
    limits = FakeLimits(soft, hard)
    monkeypatch.setattr(file_descriptors.resource, "getrlimit", limits.getrlimit)
    monkeypatch.setattr(file_descriptors.resource, "setrlimit", limits.setrlimit)
    return limits


def test_the_cache_gets_half_the_limit_and_at_least_its_floor():
    assert log_file_capacity(4096) == 2048
    assert log_file_capacity(1_048_576) == 524_288
    assert log_file_capacity(MIN_OPEN_FILES) == MIN_LOG_FILES
    assert log_file_capacity(100) == MIN_LOG_FILES
    assert log_file_capacity(resource.RLIM_INFINITY) == file_descriptors.UNLIMITED // 2


def test_start_up_raises_the_limit_logs_both_and_sizes_the_cache(monkeypatch, caplog, native_capacity):
    limits = fake(monkeypatch, 1024, 8192)
    with caplog.at_level(logging.INFO, logger=file_descriptors.__name__):
        assert configure_open_files() == 4096
    assert limits.limits == (8192, 8192)
    assert _native.max_open_log_files() == 4096
    assert [r.levelno for r in caplog.records] == [logging.INFO] * 3
    assert [r.getMessage() for r in caplog.records] == [
        "Raised the open-file limit (RLIMIT_NOFILE) from 1024 to the hard limit 8192",
        "Open-file limit (RLIMIT_NOFILE): soft 8192, hard 8192",
        "Keeping at most 4096 log segment files open (half the open-file limit; the least recently used are "
        "closed and opened again when needed)",
    ]


def test_an_unlimited_limit_is_shown_so(monkeypatch, caplog, native_capacity):
    fake(monkeypatch, resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    with caplog.at_level(logging.INFO, logger=file_descriptors.__name__):
        assert configure_open_files() == file_descriptors.UNLIMITED // 2
    assert "Open-file limit (RLIMIT_NOFILE): soft unlimited, hard unlimited" in caplog.messages


def test_a_limit_below_the_minimum_is_refused_with_what_to_do(monkeypatch, native_capacity):
    fake(monkeypatch, 100, 100)
    before = _native.max_open_log_files()
    with pytest.raises(FileDescriptorLimitError) as refused:
        configure_open_files()
    assert str(refused.value).startswith("Too few file descriptors: RLIMIT_NOFILE is 100 (hard limit 100)")
    assert f"ulimit -n {MIN_OPEN_FILES}" in str(refused.value)
    assert _native.max_open_log_files() == before
    check_open_file_limit(MIN_OPEN_FILES)  # the minimum itself is fine
