"""The brokers a Spark bench invocation names (bench/spark/targets.py): launched single brokers,
launched local clusters (``pybroker-clusterN``, topics with replication factor min(N, 3)) and
running brokers by address."""

from __future__ import annotations

import pytest

from bench.spark.targets import TargetSpec


def test_a_cluster_spec_names_its_brokers_and_replicates_on_up_to_three():
    assert (TargetSpec.parse("pybroker-cluster3").kind, TargetSpec.parse("pybroker-cluster3").nodes) == ("cluster", 3)
    assert [TargetSpec.parse(f"pybroker-cluster{n}").replication_factor for n in (1, 2, 3, 5)] == [1, 2, 3, 3]
    assert TargetSpec.parse("pybroker").replication_factor == 1
    assert TargetSpec.parse("kafka=10.0.0.5:9092").replication_factor == 1


@pytest.mark.parametrize("text", ["pybroker-cluster", "pybroker-cluster0", "pybroker-clusterx", "cluster3"])
def test_other_names_are_refused(text):
    with pytest.raises(ValueError, match="pybroker-clusterN"):
        TargetSpec.parse(text)
