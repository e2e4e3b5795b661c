"""Checkpoint files: Kafka's text format, atomic replacement, damage reported."""

import pytest

from pybroker.log.checkpoint import CheckpointError, LeaderEpochCheckpointFile, OffsetCheckpointFile
from pybroker.types import TopicPartition


def test_offset_checkpoint_round_trip_in_kafkas_format(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(str(path))
    checkpoint.write({TopicPartition("b", 1): 7, TopicPartition("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert checkpoint.read() == {TopicPartition("a", 0): 42, TopicPartition("b", 1): 7}
    assert not (tmp_path / "log-start-offset-checkpoint.tmp").exists()


def test_missing_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(str(tmp_path / "nope")).read() == {}


@pytest.mark.parametrize("text", ["", "0\n"])
def test_a_checkpoint_without_a_count_reads_empty_as_in_kafka(tmp_path, text):
    # Kafka creates cleaner-offset-checkpoint empty; its CheckpointFile reads that as no entries.
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text(text)
    assert OffsetCheckpointFile(str(path)).read() == {}


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "1\n"])
def test_damaged_checkpoint_is_reported(tmp_path, text):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match="recovery-point-offset-checkpoint"):
        OffsetCheckpointFile(str(path)).read()


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(str(path)).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(str(path)).read() == [(0, 0), (3, 120)]
