"""The leader-epoch cache: Kafka's endOffsetFor and truncation rules."""

from pybroker.log.leader_epoch import LeaderEpochCache


def cache_with(tmp_path, entries):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_end_offset_for(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (2, 10), (4, 30)])
    assert cache.end_offset_for(4, 50) == (4, 50)  # latest epoch: the log end offset
    assert cache.end_offset_for(2, 50) == (2, 30)
    assert cache.end_offset_for(3, 50) == (2, 30)  # unknown epoch between: floor epoch, next start
    assert cache.end_offset_for(5, 50) == (-1, -1)
    assert cache.end_offset_for(-1, 50) == (-1, -1)
    (tmp_path / "x").mkdir()
    cache2 = cache_with(tmp_path / "x", [(3, 5)])
    assert cache2.end_offset_for(1, 9) == (1, 5)  # below the first epoch


def test_assign_persists_and_ignores_old_epochs(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (1, 5), (0, 9)])
    assert cache.entries == [(1, 0)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(1, 0)]


def test_every_assignment_reaches_the_file(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (2, 10), (4, 30)])
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0), (2, 10), (4, 30)]
    cache.assign(5, 20)  # supersedes the entry at 30
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0), (2, 10), (5, 20)]


def test_truncation(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (2, 10), (4, 30)])
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15), (4, 30)]
    cache.truncate_from_end(30)
    assert cache.entries == [(2, 15)]
    assert cache.epoch_for_offset(20) == 2
