"""Mutation checks: each verification test must fail when the behaviour it names is removed.

    python tests/tools/mutations.py [NAME ...]

For each mutation below (all of them, or those named): change the product code as described,
run the tests that claim the behaviour, expect every one of them to fail (a failure or an error,
such as the broker-log check at teardown), then restore the file (always, also on Ctrl-C).
Prints one line per mutation and exits 1 if any test survived a mutation (passed).
It edits files of the working tree while it runs: run it alone, never beside the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOG_MANAGER = "pybroker/log/log_manager.py"
REPLICA_MANAGER = "pybroker/server/replica_manager.py"
COORDINATOR = "pybroker/server/group/coordinator.py"
GROUP_TESTS = "tests/integration/test_group_protocol.py"
PURGATORY_TESTS = "tests/unit/test_delete_records_purgatory.py"


@dataclass
class Mutation:
    name: str
    what: str
    path: str
    edits: list[tuple[str, str]]  # (exact text, replacement); each text must occur exactly once
    tests: list[str]


MUTATIONS = [
    Mutation(
        "close-is-a-crash", "the dispatcher's deliberate closes raise KeyError instead of CloseConnection",
        "pybroker/server/dispatcher.py",
        [('raise CloseConnection(f"malformed request header', 'raise KeyError(f"malformed request header'),
         ('raise CloseConnection(f"unsupported API', 'raise KeyError(f"unsupported API'),
         ('raise CloseConnection(f"malformed {ApiKey', 'raise KeyError(f"malformed {ApiKey')],
        ["tests/integration/test_bad_input.py::test_unknown_api_or_version_closes_connection",
         "tests/integration/test_bad_input.py::test_malformed_body_closes_connection",
         f"{GROUP_TESTS}::test_truncated_join_group_gets_closed_and_broker_keeps_serving"],
    ),
    Mutation(
        "oversized-frame-crashes", "an oversized frame raises inside the protocol instead of closing",
        "pybroker/network/framing.py",
        [("                self.frame_size_invalid(size)\n                return\n",
          "                raise RuntimeError('frame size')\n")],
        ["tests/integration/test_bad_input.py::test_frame_size_outside_limits_closes_connection"],
    ),
    Mutation(
        "internal-error-closes", "a failing handler closes the connection instead of answering -1",
        "pybroker/server/dispatcher.py",
        [("response = self.handler.error_response(self.request, header.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)",
          "response = None")],
        ["tests/unit/test_dispatcher.py::test_a_handler_that_raises_gets_unknown_server_error_and_a_logged_stack_trace",
         "tests/unit/test_dispatcher.py::test_a_handler_whose_future_fails_gets_unknown_server_error"],
    ),
    Mutation(
        "retention-runs-once", "kafka-log-retention runs once instead of every interval",
        LOG_MANAGER,
        [("self._tasks.append(self.scheduler.schedule(name, action, delay, interval))",
          "self._tasks.append(self.scheduler.schedule(name, action, delay, None if key == 'retention' else interval))")],
        ["tests/unit/test_retention.py::test_retention_task_repeats_every_interval_with_current_configs"],
    ),
    Mutation(
        "retention-ignores-initial-delay", "the first retention run waits a whole interval",
        LOG_MANAGER,
        [('delay = self.initial_task_delay_ms if key == "retention" else interval', "delay = interval")],
        ["tests/unit/test_retention.py::test_retention_task_first_runs_after_the_initial_delay"],
    ),
    Mutation(
        "no-long-poll", "a fetch that finds too little answers at once instead of waiting",
        REPLICA_MANAGER,
        [("        if max_wait_ms <= 0 or not requests or answerable(results, total, errors):\n", "        if True:\n")],
        ["tests/integration/test_fetch_produce_protocol.py::test_long_poll_wakes_when_a_record_arrives",
         "tests/integration/test_fetch_produce_protocol.py::test_long_poll_returns_empty_at_max_wait",
         "tests/integration/test_fetch_produce_protocol.py::test_pipelined_requests_are_answered_in_order"],
    ),
    Mutation(
        "fetch-waits-across-segments", "a fetch behind the end offset's segment waits out max_wait (case F)",
        REPLICA_MANAGER,
        [("            if log_.segment_base_offset_of(request.fetch_offset) != log_.segment_base_offset_of(end):\n",
          "            if False:\n")],
        ["tests/unit/test_delayed_fetch.py::test_a_fetch_behind_the_high_watermarks_segment_is_answered_at_once",
         "tests/unit/test_delayed_fetch.py::test_a_parked_fetch_completes_when_the_high_watermark_moves_to_a_newer_segment",
         "tests/integration/test_delayed_fetch.py::test_fetches_on_older_segments_are_answered_without_waiting"],
    ),
    Mutation(
        "checkpoints-share-a-temp-file", "two writes of an offset checkpoint at once (one writer per file undone)",
        LOG_MANAGER,
        [("        saves = {log_dir: self._checkpoint_writers[log_dir, name].request() for log_dir in self.live_log_dirs}\n",
          "        saves = {log_dir: CoalescingFileWriter(self._checkpoint_writers[log_dir, name].path, functools.partial("
          "self._render_checkpoint, log_dir, name)).request() for log_dir in self.live_log_dirs}\n")],
        ["tests/unit/test_log_dirs.py::test_checkpoints_asked_for_at_once_share_one_writer_and_never_race",
         "tests/integration/test_concurrent_cleanup.py::test_deletions_from_eight_connections_at_once_are_all_answered_and_the_broker_stays_up"],
    ),
    Mutation(
        "replies-not-held-back", "a ready reply is written before an earlier request's pending one",
        "pybroker/network/connection.py",
        [("        elif self._pending:\n            self._pending.append(reply)", "        elif False:\n            pass")],
        ["tests/integration/test_fetch_produce_protocol.py::test_pipelined_requests_are_answered_in_order"],
    ),
    Mutation(
        "no-duplicate-detection", "an idempotent producer's retried batch is not recognised",
        "pybroker/log/log.py",
        [("if client else None\n", "if False else None\n")],
        ["tests/integration/test_produce_consume.py::test_idempotent_producer_by_default_in_kafka_python",
         "tests/integration/test_produce_consume.py::test_confluent_idempotent_producer"],
    ),
    Mutation(
        "too-large-appended", "a batch over message.max.bytes is appended, then refused",
        "pybroker/log/log.py",
        [("from pybroker import _native\n",
          "from pybroker import _native\nfrom pybroker.common.errors import RecordTooLargeError\n"),
         ("info = _native.validate_batches(records, self.config.max_message_bytes)",
          "info = _native.validate_batches(records, 2**31 - 1)"),
         ("        self.unflushed_messages += info.record_count\n        return LogAppendInfo(",
          "        self.unflushed_messages += info.record_count\n"
          "        if info.size > self.config.max_message_bytes:\n"
          "            raise RecordTooLargeError('appended, then refused')\n"
          "        return LogAppendInfo(")],
        ["tests/integration/test_bad_input.py::test_batch_over_max_message_bytes_is_rejected"],
    ),
    Mutation(
        "no-shutdown-checkpoint", "a clean shutdown does not write the offset checkpoints",
        LOG_MANAGER,
        [("        await self._epoch_writer.close()\n        await self.write_all_checkpoints()\n",
          "        await self._epoch_writer.close()\n")],
        ["tests/integration/test_retention.py::test_log_start_offset_checkpoint_follows_retention"],
    ),
    Mutation(
        "ack-names-wrong-offset", "a produce answer names the offset after the one written",
        REPLICA_MANAGER,
        [("            base_offset=info.first_offset,", "            base_offset=info.first_offset + 1,")],
        ["tests/integration/test_durability.py::test_kill_9_during_appends_keeps_every_acknowledged_record"],
    ),
    Mutation(
        "delete-records-wrong-low-watermark", "the replica manager reports the leader's start offset as the low watermark",
        REPLICA_MANAGER,
        [("ErrorCode.NONE, low_watermark, partition.log.log_start_offset, requested_offset=requested",
          "ErrorCode.NONE, partition.log.log_start_offset, partition.log.log_start_offset, requested_offset=requested")],
        # every test of the file but the three below, whose answers this cannot change
        [PURGATORY_TESTS, "-k", "not (dead_replica or not_leader_at_delete_time or local_errors)"],
    ),
    Mutation(
        "dead-replicas-hold-the-low-watermark", "the low watermark waits for replicas that are not alive",
        "pybroker/server/partition.py",
        [("            if self.is_replica_isr_eligible(broker):\n                low = min(", "            if True:\n                low = min(")],
        [f"{PURGATORY_TESTS}::test_dead_replica_does_not_hold_the_low_watermark"],
    ),
    Mutation(
        "delete-records-on-a-follower", "DeleteRecords moves a follower's log start offset",
        "pybroker/server/partition.py",
        [("        log = self.require_leader()\n        if not log.config.delete_enabled:",
          "        log = self.log\n        if not log.config.delete_enabled:")],
        [f"{PURGATORY_TESTS}::test_not_leader_at_delete_time_answers_6_without_waiting"],
    ),
    Mutation(
        "delete-records-on-internal-topics", "DeleteRecords may move an internal topic's start offset",
        REPLICA_MANAGER,
        [("    def _delete_records_on_local_log(self, tp: TopicPartition, offset: int) -> DeleteRecordsResult:\n"
          "        if tp.topic in INTERNAL_TOPICS:\n",
          "    def _delete_records_on_local_log(self, tp: TopicPartition, offset: int) -> DeleteRecordsResult:\n"
          "        if False:\n")],
        [f"{PURGATORY_TESTS}::test_replica_manager_local_errors"],
    ),
    Mutation(
        "short-sessions", "member sessions last a quarter of session.timeout.ms",
        COORDINATOR,
        [("timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms",
          "timeout = member.session_timeout_ms // 4 if timeout_ms is None else timeout_ms")],
        [f"{GROUP_TESTS}::test_session_expiry_removes_a_silent_member"],
    ),
    Mutation(
        "short-pending-members", "a pending member (KIP-394) expires after a quarter of its session",
        COORDINATOR,
        [("DelayedHeartbeat(self, group, new_member_id, True, join.session_timeout_ms)",
          "DelayedHeartbeat(self, group, new_member_id, True, join.session_timeout_ms // 4)")],
        [f"{GROUP_TESTS}::test_pending_member_that_never_rejoins_expires"],
    ),
    Mutation(
        "short-rebalance-timeout", "the join phase ends after a quarter of the rebalance timeout",
        COORDINATOR,
        [("            operation = DelayedJoin(self, group, group.rebalance_timeout_ms)",
          "            operation = DelayedJoin(self, group, group.rebalance_timeout_ms // 4)")],
        [f"{GROUP_TESTS}::test_members_that_do_not_rejoin_in_time_are_dropped_unless_static"],
    ),
    Mutation(
        "short-initial-delay", "group.initial.rebalance.delay.ms is cut to a quarter",
        COORDINATOR,
        [("delay = self.config.initial_rebalance_delay_ms", "delay = self.config.initial_rebalance_delay_ms // 4")],
        [f"{GROUP_TESTS}::test_initial_rebalance_delay_gathers_early_members",
         "tests/integration/test_groups_clients.py::test_initial_rebalance_delay_holds_back_the_first_assignment"],
    ),
]


def run(mutation: Mutation) -> tuple[list[str], list[str], float]:
    """Apply, test, restore: (test cases that failed, test cases that survived, seconds)."""
    path = REPO / mutation.path
    original = path.read_text()
    mutated = original
    for old, new in mutation.edits:
        if mutated.count(old) != 1:
            raise SystemExit(f"{mutation.name}: {old!r} occurs {mutated.count(old)} times in {mutation.path}")
        mutated = mutated.replace(old, new)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        try:
            path.write_text(mutated)
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                            *mutation.tests], cwd=REPO, capture_output=True, text=True, timeout=1800)
        finally:
            path.write_text(original)
        killed: dict[str, bool] = {}
        for case in ElementTree.parse(report).iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            failed = case.find("failure") is not None or case.find("error") is not None
            killed[name] = killed.get(name, False) or failed
    return ([n for n, k in killed.items() if k], [n for n, k in killed.items() if not k],
            time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="mutations to run (default: all)")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    survivors = 0
    for mutation in chosen:
        failed, survived, seconds = run(mutation)
        survivors += len(survived) + (not failed)
        verdict = "killed" if failed and not survived else "SURVIVED"
        print(f"{verdict} {mutation.name}: {mutation.what} ({mutation.path}); {len(failed)} test(s) failed"
              + (f", {len(survived)} passed: {', '.join(survived)}" if survived else "") + f" [{seconds:.0f} s]",
              flush=True)
        for name in failed:
            print(f"    fails: {name}")
    print(f"{len(chosen)} mutations, {survivors} surviving test(s)")
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
