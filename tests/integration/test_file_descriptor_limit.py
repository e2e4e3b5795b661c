"""A broker whose logs need more open files than RLIMIT_NOFILE allows says so in one line and
exits, instead of failing half-way through loading on an ``open``."""

from __future__ import annotations

import resource
import subprocess
import sys

from pybroker.log.file_descriptors import RESERVED_DESCRIPTORS
from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.types import TopicPartition

PARTITIONS = 120
LIMIT = RESERVED_DESCRIPTORS + 100  # fewer than the 120 segments + the reserve


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def test_too_few_descriptors_for_the_logs_is_one_clear_line(tmp_path):
    data = tmp_path / "data"
    config = BrokerConfig({})
    manager = LogManager([str(data)], lambda topic: config.log_config(), node_id=1, cluster_id="c")
    manager.load()
    for index in range(PARTITIONS):
        manager.get_or_create_log(TopicPartition("many", index), "AAAAAAAAAAAAAAAAAAAAAA")
    for partition_log in manager.logs.values():
        partition_log.close()

    result = subprocess.run(
        [sys.executable, "-m", "pybroker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={data}"],
        capture_output=True, text=True, timeout=60, preexec_fn=_limit_open_files,
    )

    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("pybroker: ")]
    assert len(lines) == 1, result.stderr
    needed = PARTITIONS + RESERVED_DESCRIPTORS
    assert f"{PARTITIONS} partition logs in log.dirs hold {PARTITIONS} segments" in lines[0]
    assert f"needs at least {needed} descriptors" in lines[0]
    assert f"RLIMIT_NOFILE is {LIMIT}" in lines[0]
    assert f"ulimit -n {needed}" in lines[0]
    assert "Traceback" not in result.stderr


def test_the_soft_limit_is_raised_to_the_hard_limit():
    code = (
        "import resource\n"
        "from pybroker.log.file_descriptors import raise_open_file_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "assert soft == 256, soft\n"
        "print(raise_open_file_limit(), hard)\n"
    )
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    assert result.returncode == 0, result.stderr
    raised, limit = result.stdout.split()
    assert raised == limit
