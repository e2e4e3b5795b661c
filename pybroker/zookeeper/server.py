"""A standalone ZooKeeper server from the Debian package, run as a child process.

Owns finding the install (`ZooKeeperInstall.find`: ``/usr/share/java/zookeeper.jar``, whose
manifest lists its dependency jars, plus ``/etc/zookeeper/conf`` and slf4j-simple when present),
writing a generated ``zoo.cfg`` into a directory of the caller's, and the life of one
``ZooKeeperServerMain`` JVM: started in its own process group with its output in a log file,
ready once the ``ruok`` four-letter word answers ``imok`` and ``srvr`` reports a serving
mode, stopped by its PID (SIGTERM, then SIGKILL after a timeout). The data directory lives
under the given directory and is reused when the same directory is started again, so a
restarted server keeps its znodes.

Concurrency rules: every method blocks (starting takes about half a second); call them from a
plain thread or a test, not from an event loop. One object runs at most one process at a time.
The server listens on 127.0.0.1 only, with the AdminServer (which would bind 0.0.0.0:8080)
disabled.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pybroker.child_process import terminated_with_parent

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_CONF_DIR = Path("/etc/zookeeper/conf")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_COMMAND = "apt-get install --no-install-recommends zookeeper"
FOUR_LETTER_WORDS = "ruok,srvr,mntr,stat"


class ZooKeeperNotInstalledError(RuntimeError):
    """The Debian ZooKeeper package (or Java) is missing; the message says how to install it."""


class ZooKeeperStartError(RuntimeError):
    """The server did not come up; the message names its log file."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    """Where the Java launcher and ZooKeeper's classes are."""

    java: str
    classpath: tuple[str, ...]

    @classmethod
    def find(
        cls,
        jar: Path = DEBIAN_ZOOKEEPER_JAR,
        conf_dir: Path = DEBIAN_CONF_DIR,
        slf4j_binding: Path = SLF4J_SIMPLE_JAR,
    ) -> ZooKeeperInstall:
        """The Debian install; raises `ZooKeeperNotInstalledError` when the jar or java is missing."""
        if not jar.is_file():
            raise ZooKeeperNotInstalledError(
                f"ZooKeeper is not installed ({jar} is missing): install it with `{INSTALL_COMMAND}`"
            )
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperNotInstalledError(
                f"java is not on the PATH, which ZooKeeper needs: install it with `{INSTALL_COMMAND}`"
            )
        classpath = [str(conf_dir)] if conf_dir.is_dir() else []
        classpath.append(str(jar))
        if slf4j_binding.is_file():
            # Without an SLF4J binding on the classpath the server logs nothing at all.
            classpath.append(str(slf4j_binding))
        return cls(java, tuple(classpath))


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``mntr``, ``stat``) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server on 127.0.0.1:``port``, configured and kept in ``directory``.

    ``min_session_timeout_ms`` and ``max_session_timeout_ms`` bound the session timeouts the
    server grants (ZooKeeper's defaults are 2 and 20 ticks); tests use a short ``tick_time_ms``
    and a low minimum so that a session expires within a second or two. ``force_sync=False``
    skips the fsync of each transaction (faster; still survives a process crash, not a power
    cut).
    """

    def __init__(
        self,
        directory: Path | str,
        port: int = 2181,
        *,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        force_sync: bool = True,
        heap_mb: int = 256,
        install: ZooKeeperInstall | None = None,
    ) -> None:
        self.install = install or ZooKeeperInstall.find()
        self.directory = Path(directory)
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.force_sync = force_sync
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def connect_string(self) -> str:
        """``host:port``, the form of Kafka's ``zookeeper.connect`` (append a chroot if wanted)."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write_config(self) -> Path:
        """Write ``zoo.cfg`` (overwriting a previous one); the data directory is kept."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
            "maxClientCnxns=0",  # unlimited: every broker of a local cluster comes from 127.0.0.1
        ]
        if self.min_session_timeout_ms is not None:
            lines.append(f"minSessionTimeout={self.min_session_timeout_ms}")
        if self.max_session_timeout_ms is not None:
            lines.append(f"maxSessionTimeout={self.max_session_timeout_ms}")
        if not self.force_sync:
            lines.append("forceSync=no")
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def command(self) -> list[str]:
        return [
            self.install.java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # a quicker start matters more here than peak throughput
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
            "-cp",
            os.pathsep.join(self.install.classpath),
            MAIN_CLASS,
            str(self.config_path),
        ]

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and wait until it answers ``ruok``; raises `ZooKeeperStartError`."""
        if self.alive:
            raise ZooKeeperStartError(f"ZooKeeper is already running as PID {self.pid} on port {self.port}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.write_config()
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a terminal's Ctrl-C is not for it
                preexec_fn=terminated_with_parent(),  # but it ends if whoever started it is killed
            )
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with code {code} before answering on {self.connect_string}; see {self.log_path}"
                )
            if self._serving():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperStartError(
                    f"ZooKeeper did not answer ruok on {self.connect_string} within {timeout}s; see {self.log_path}"
                )
            time.sleep(0.02)

    def _serving(self) -> bool:
        # ``ruok`` answers imok as soon as the port is bound, before the database is loaded;
        # ``srvr`` says "not currently serving requests" until then, and the mode afterwards.
        try:
            if four_letter_word("127.0.0.1", self.port, "ruok", timeout=1.0) != "imok":
                return False
            return "Mode:" in four_letter_word("127.0.0.1", self.port, "srvr", timeout=1.0)
        except OSError:
            return False

    def four_letter_word(self, word: str) -> str:
        return four_letter_word("127.0.0.1", self.port, word)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM by PID, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL by PID: an unclean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> ZooKeeperServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
