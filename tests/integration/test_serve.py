"""`pybroker serve` with no configuration: one broker on 127.0.0.1:9092, data in ./pybroker-data."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest

from tests.conftest import wait_until
from tests.integration import clients


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.skipif(not port_free(9092), reason="127.0.0.1:9092 is in use on this machine")
def test_zero_config_serve(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "pybroker", "serve"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: not port_free(9092) or proc.poll() is not None, timeout=30, message="port 9092")
        assert proc.poll() is None, proc.stdout.read().decode()
        clients.produce_confluent("127.0.0.1:9092", "zero-config", [(b"k", b"v")])
        assert (tmp_path / "pybroker-data" / "zero-config-0" / "00000000000000000000.log").exists()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert (tmp_path / "pybroker-data" / ".kafka_cleanshutdown").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
