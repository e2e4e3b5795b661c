"""One Kafka command-line tool, run against pybroker and against Apache Kafka at once, and the
normalization that makes the two outputs comparable.

`ToolPair` knows the addresses of both sides (one broker each, or a cluster each); `ToolPair.run`
starts the tool class twice from the same jars (``{bootstrap}`` in the arguments becomes each
side's bootstrap string), the two JVMs side by side, and answers both outcomes normalized:
broker addresses become ``<broker N>`` (N: the broker's place in its side's list, so ids line up),
UUIDs (member ids, topic ids) ``<uuid>``, epoch-millisecond timestamps ``<time>``, the time stamp
of the tool's own log lines goes, runs of blanks (table padding, which follows the width of what
was replaced) become one space, and blank lines around the output go. What else differs from run
to run is each test's to normalize, with a comment saying why.
"""

from __future__ import annotations

import concurrent.futures
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaToolProcess, run_kafka_tool

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TOPIC_ID = re.compile(r"(TopicId: )[A-Za-z0-9_-]{22}\b")
_EPOCH_MS = re.compile(r"\b1[5-9]\d{11}\b")  # 2017 to 2033
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", re.M)
_BLANKS = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class Outcome:
    """A tool run's exit code and normalized output (``raw``: standard output as printed, not
    compared)."""

    code: int
    out: str
    err: str
    raw: str = field(default="", compare=False, repr=False)

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def normalize(text: str, addresses: Sequence[str]) -> str:
    """``text`` with the run-specific values of the module docstring replaced."""
    for index, address in enumerate(addresses, start=1):
        text = re.sub(re.escape(address) + r"(?!\d)", f"<broker {index}>", text)
    text = _UUID.sub("<uuid>", text)
    text = _TOPIC_ID.sub(r"\1<uuid>", text)
    text = _EPOCH_MS.sub("<time>", text)
    text = _LOG_TIME.sub("", text)
    return "\n".join(_BLANKS.sub(" ", line).strip() for line in text.splitlines()).strip("\n")


@dataclass
class ToolPair:
    """pybroker's broker addresses (``ours``) and Kafka's (``theirs``), in broker id order."""

    ours: Sequence[str]
    theirs: Sequence[str]

    def sides(self) -> tuple[Sequence[str], Sequence[str]]:
        return self.ours, self.theirs

    def run(self, main_class: str, args: Sequence[str], *, version: str = ZOOKEEPER_VERSION,
            input: str | None = None, timeout: float = 120.0) -> tuple[Outcome, Outcome]:
        """``main_class`` with ``args`` against each side at once: (pybroker's, Kafka's) outcomes."""

        def one(addresses: Sequence[str]) -> Outcome:
            bootstrap = ",".join(addresses)
            result = run_kafka_tool(version, main_class, [a.replace("{bootstrap}", bootstrap) for a in args],
                                    timeout, input=input)
            return outcome(result, addresses)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            ours, theirs = pool.map(one, self.sides())
        return ours, theirs

    def same(self, main_class: str, args: Sequence[str], *, version: str = ZOOKEEPER_VERSION,
             input: str | None = None, timeout: float = 120.0, any_order: bool = False) -> Outcome:
        """`run`, asserting that both outcomes are the same (``any_order``: the same lines, in
        whatever order); pybroker's."""
        ours, theirs = self.run(main_class, args, version=version, input=input, timeout=timeout)
        mine, kafkas = (ours, theirs) if not any_order else (
            Outcome(o.code, "\n".join(sorted(o.lines)), o.err) for o in (ours, theirs))
        assert mine == kafkas, f"{main_class} {' '.join(args)}:\npybroker: {ours}\nKafka:    {theirs}"
        return ours


def outcome(result: subprocess.CompletedProcess[str], addresses: Sequence[str]) -> Outcome:
    return Outcome(result.returncode, normalize(result.stdout, addresses), normalize(result.stderr, addresses),
                   result.stdout)


def background(version: str, main_class: str, args: Sequence[str], addresses: Sequence[str],
               directory: Path) -> KafkaToolProcess:
    """A started `KafkaToolProcess` of ``main_class`` against ``addresses`` (``{bootstrap}``)."""
    bootstrap = ",".join(addresses)
    return KafkaToolProcess(version, main_class, [a.replace("{bootstrap}", bootstrap) for a in args],
                            directory).start()
