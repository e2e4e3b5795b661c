"""``pybroker consumer-groups``: list, describe and delete consumer groups, and reset or delete
their committed offsets (like kafka-consumer-groups.sh: the same flags, tables and messages).

Tables go to stdout, laid out as Kafka lays them out (a blank line, then the header); notes
about a group (no active members, rebalancing) and warnings go to stderr, as Kafka prints them.
Errors exit non-zero with one ``Error: …`` line on stderr; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from pybroker.cli.command_config import ClientSettings, settings_for_command
from pybroker.client.admin import Admin, AdminError, GroupDescription, OffsetSpec
from pybroker.client.connection import KafkaClientError
from pybroker.types import TopicPartition

ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
SCENARIOS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime", "by-duration")
VALID_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
REBALANCING = ("PreparingRebalance", "CompletingRebalance")
MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
PROG = "pybroker consumer-groups"

# Which actions each option goes with (Kafka's checkInvalidArgs).
VALID_WITH = {
    "groups": ("describe", "delete", "reset-offsets", "delete-offsets"),
    "all_groups": ("describe", "delete", "reset-offsets"),
    "topics": ("reset-offsets", "delete-offsets"),
    "all_topics": ("reset-offsets",),
    "members": ("describe",),
    "offsets": ("describe",),
    "verbose": ("describe",),
    "state": ("describe", "list"),
    "dry_run": ("reset-offsets",),
    "execute": ("reset-offsets",),
    **{s.replace("-", "_"): ("reset-offsets",) for s in SCENARIOS},
}


class UsageError(Exception):
    """A bad command line (exit 2)."""


class CommandError(Exception):
    """A request the broker (or the group's state) refused (exit 1)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "consumer-groups", help="list, describe, delete consumer groups; reset offsets (like kafka-consumer-groups.sh)",
        description="List, describe and delete consumer groups, and reset or delete their committed offsets "
                    "(like kafka-consumer-groups.sh). Give exactly one action.",
    )
    actions = parser.add_argument_group("actions")
    actions.add_argument("--list", action="store_true", help="list the consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe groups: offsets and lag (default), --members or --state")
    actions.add_argument("--delete", action="store_true", help="delete groups (only empty ones)")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="reset committed offsets of an inactive group (a dry run unless --execute)")
    actions.add_argument("--delete-offsets", action="store_true", help="delete a group's committed offsets of topics")
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)")
    parser.add_argument("--group", dest="groups", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every consumer group")
    parser.add_argument("--topic", dest="topics", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="a topic, or some of its partitions (repeatable; reset and delete offsets)")
    parser.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for (reset)")
    parser.add_argument("--members", action="store_true", help="describe: the members")
    parser.add_argument("--offsets", action="store_true", help="describe: offsets and lag (the default)")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATE[,STATE]",
                        help="describe: the group's state; list: show states, only these if given")
    parser.add_argument("--verbose", action="store_true", help="describe --members: each member's partitions too")
    scenarios = parser.add_argument_group("reset scenarios (give one)")
    scenarios.add_argument("--to-earliest", action="store_true", help="the earliest offset")
    scenarios.add_argument("--to-latest", action="store_true", help="the latest offset")
    scenarios.add_argument("--to-current", action="store_true", help="the committed offset (latest if none)")
    scenarios.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within the log)")
    scenarios.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    scenarios.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                           help="the first offset at or after this time (UTC unless a zone such as Z or +01:00 follows)")
    scenarios.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this duration")
    parser.add_argument("--dry-run", action="store_true", help="reset: only print the new offsets (the default)")
    parser.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS",
                        help="how long to retry while the coordinator is unavailable (default 5000)")
    parser.set_defaults(run=run)


# --- the command line ----------------------------------------------------------------------------

def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False and value != []  # 0 (--to-offset 0) is given


def _flag(dest: str) -> str:
    return {"groups": "--group", "topics": "--topic"}.get(dest, "--" + dest.replace("_", "-"))


def _validate(args: argparse.Namespace) -> str:
    chosen = [a for a in ACTIONS if getattr(args, a.replace("-", "_"))]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join("--" + a for a in ACTIONS))
    action = chosen[0]
    for dest, actions in VALID_WITH.items():
        if _given(args, dest) and action not in actions:
            raise UsageError(f"option {_flag(dest)} can't be used with --{action}")
    if action in ("describe", "delete", "reset-offsets") and bool(args.groups) == args.all_groups:
        raise UsageError(f"--{action} takes one of these options: --all-groups, --group")
    if action == "describe" and sum([args.members, args.offsets, args.state is not None]) > 1:
        raise UsageError("--describe takes at most one of these options: --members, --offsets, --state")
    if args.verbose and not args.members:
        raise UsageError("--verbose goes with --describe --members")
    if action == "delete-offsets":
        if len(args.groups) != 1:
            raise UsageError("--delete-offsets takes exactly one --group")
        if not args.topics:
            raise UsageError("--delete-offsets needs --topic")
    if action == "reset-offsets":
        if bool(args.topics) == args.all_topics:
            raise UsageError("--reset-offsets takes one of these scopes: --all-topics, --topic")
        scenarios = [s for s in SCENARIOS if _given(args, s.replace("-", "_"))]
        if len(scenarios) != 1:
            raise UsageError("--reset-offsets takes exactly one of these scenarios: " + ", ".join("--" + s for s in SCENARIOS))
        if args.dry_run and args.execute:
            raise UsageError("--reset-offsets only accepts one of --execute and --dry-run")
        if args.to_datetime is not None:
            parse_datetime(args.to_datetime)
        if args.by_duration is not None:
            parse_duration(args.by_duration)
    for topic in args.topics:
        parse_topic_arg(topic)
    if action == "list" and args.state:
        parse_states(args.state)
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    return action


def parse_states(text: str) -> list[str]:
    """Kafka's state list (comma-separated, case-insensitive) in Kafka's spelling."""
    by_lower = {s.lower(): s for s in VALID_STATES}
    states = [by_lower.get(s.strip().lower()) for s in text.split(",")]
    if None in states:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(VALID_STATES)}")
    return list(dict.fromkeys(s for s in states if s is not None))


def parse_topic_arg(text: str) -> tuple[str, list[int] | None]:
    """``topic`` (every partition) or ``topic:0,2``."""
    topic, colon, partitions = text.partition(":")
    if not topic:
        raise UsageError(f"Invalid topic arg '{text}', expected a topic name")
    if not colon:
        return topic, None
    indexes = []
    for item in partitions.split(","):
        if not item.strip().isdigit():
            raise UsageError(f"Invalid partition '{item}' specified in topic arg '{text}'")
        indexes.append(int(item))
    return topic, indexes


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+HH``, ``+HHmm``, ``+HH:mm``; UTC when none) → epoch milliseconds."""
    match = _DATETIME.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss, "
                         "optionally with a zone (Z, +HH, +HHmm or +HH:mm)")
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups()[:7])
    zone = match.group(8) or "Z"
    if zone == "Z":
        tz = UTC
    else:
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        tz = timezone(offset if zone[0] == "+" else -offset)
    try:
        moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    except ValueError as e:
        raise UsageError(f"Error parsing timestamp '{text}': {e}") from None
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?)?", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PnDTnHnMn.nS``) → ms."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()) or text.strip().upper().endswith("T"):
        raise UsageError(f"Error parsing duration '{text}': expected PnDTnHnMnS, e.g. PT1H or P1DT2H30M")
    days, hours, minutes, seconds, fraction = match.groups()
    total = timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                      seconds=int(seconds or 0), microseconds=int((fraction or "0").ljust(6, "0")[:6]))
    return int(total.total_seconds() * 1000)


def _table(header: list[str], rows: list[list[str]], widths: list[int]) -> str:
    """Kafka's ``%-Ns`` columns: each but the last padded to its minimum width or its longest value."""
    sizes = [max(widths[i], len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header) - 1)]
    return "\n".join(
        " ".join([value.ljust(size) for value, size in zip(line, sizes, strict=False)] + [line[-1]]).rstrip()
        for line in [header, *rows]
    )


def _note(message: str) -> None:
    print(message, file=sys.stderr)


# --- actions -------------------------------------------------------------------------------------

async def _consumer_groups(admin: Admin) -> list[str]:
    return [g.group_id for g in await admin.list_groups() if g.is_consumer_group]


async def _groups(admin: Admin, args: argparse.Namespace) -> list[str]:
    return list(dict.fromkeys(args.groups)) if args.groups else await _consumer_groups(admin)


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    if args.state is None:
        for group in await _consumer_groups(admin):
            print(group)
        return 0
    states = parse_states(args.state) if args.state else None
    listed = [g for g in await admin.list_groups(states) if g.is_consumer_group]
    print(_table(["GROUP", "STATE"], [[g.group_id, g.state or ""] for g in listed], [15, 0]))
    return 0


def _check_described(group: str, description: GroupDescription) -> None:
    if description.protocol_type not in ("consumer", ""):
        raise CommandError(f"Group '{group}' is not a consumer group (protocol type {description.protocol_type}).")
    if description.state == "Dead":
        raise CommandError(f"Consumer group '{group}' does not exist.")


def _note_state(group: str, state: str) -> None:
    if state == "Empty":
        _note(f"Consumer group '{group}' has no active members.")
    elif state in REBALANCING:
        _note(f"Warning: Consumer group '{group}' is rebalancing.")


async def _latest_offsets(admin: Admin, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Log-end offsets; a partition whose offset cannot be listed (say, its topic is gone) is left out."""
    if not partitions:
        return {}
    try:
        listed = await admin.list_offsets(partitions, "latest")
    except AdminError as e:
        if not e.failures:
            raise
        rest = [tp for tp in partitions if tp not in e.failures]
        listed = await admin.list_offsets(rest, "latest") if rest else {}
    return {tp: o.offset for tp, o in listed.items()}


async def _describe_offsets(admin: Admin, group: str, description: GroupDescription) -> str | None:
    committed = await admin.list_group_offsets(group)
    members = sorted((m for m in description.members if m.assignment), key=lambda m: -len(m.assignment))
    placed: list[tuple[TopicPartition, list[str]]] = []
    for member in members:
        placed += [(tp, [member.member_id, member.host, member.client_id]) for tp in sorted(member.assignment)]
    assigned = {tp for tp, _ in placed}
    placed += [(tp, [MISSING] * 3) for tp in sorted(committed) if tp not in assigned]
    if not placed:
        return None
    ends = await _latest_offsets(admin, list(dict.fromkeys(tp for tp, _ in placed)))
    rows = []
    for tp, consumer in placed:
        current = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append([group, tp.topic, str(tp.partition), MISSING if current is None else str(current),
                     MISSING if end is None else str(end), MISSING if lag is None else str(lag), *consumer])
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    return _table(header, rows, [15, 15, 10, 15, 15, 15, 15, 15, 0])


def _describe_members(group: str, description: GroupDescription, verbose: bool) -> str | None:
    if not description.members:
        return None
    with_instance = any(m.group_instance_id for m in description.members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else []), "HOST", "CLIENT-ID", "#PARTITIONS"]
    widths = [15, 15, *([17] if with_instance else []), 15, 15, 15]
    if verbose:
        header.append("ASSIGNMENT")
        widths.append(0)
    rows = []
    for m in description.members:
        row = [group, m.member_id, *([m.group_instance_id or ""] if with_instance else []), m.host, m.client_id,
               str(len(m.assignment))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in m.assignment:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            row.append(", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or MISSING)
        rows.append(row)
    return _table(header, rows, widths)


def _describe_state(group: str, description: GroupDescription) -> str:
    node = description.coordinator
    coordinator = f"{node.host}:{node.port} ({node.node_id})"
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [group, coordinator, description.protocol, description.state, str(len(description.members))]
    return _table(header, [row], [15, 25, 20, 15, 0])


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    groups = await _groups(admin, args)
    descriptions = await admin.describe_groups(groups)
    failed = False
    for group in groups:
        description = descriptions[group]
        try:
            _check_described(group, description)
        except CommandError as e:
            print(f"Error: {e}", file=sys.stderr)
            failed = True
            continue
        _note_state(group, description.state)
        if args.members:
            table = _describe_members(group, description, args.verbose)
        elif args.state is not None:
            table = _describe_state(group, description)
        else:
            table = await _describe_offsets(admin, group, description)
        if table is not None:
            print("\n" + table)
    return 1 if failed else 0


def _quoted(groups: list[str]) -> str:
    return ", ".join(f"'{g}'" for g in groups)


async def _delete(admin: Admin, args: argparse.Namespace) -> int:
    groups = await _groups(admin, args)
    try:
        await admin.delete_groups(groups)
    except AdminError as e:
        if not e.failures:
            raise
        deleted = [g for g in groups if g not in e.failures]
        if deleted:
            print(f"These consumer groups were deleted successfully: {_quoted(deleted)}")
        details = "; ".join(f"Group '{g}' could not be deleted due to: {f.error.name} ({f.message})" for g, f in e.failures.items())
        print(f"Error: Deletion of some consumer groups failed: {details}", file=sys.stderr)
        return 1
    print(f"Deletion of requested consumer groups ({_quoted(groups)}) was successful.")
    return 0


@dataclass
class _Reset:
    admin: Admin
    args: argparse.Namespace

    async def partitions(self, group: str) -> list[TopicPartition]:
        if self.args.all_topics:
            return list(await self.admin.list_group_offsets(group))
        out: list[TopicPartition] = []
        whole = []
        for arg in self.args.topics:
            topic, indexes = parse_topic_arg(arg)
            if indexes is None:
                whole.append(topic)
            else:
                out += [TopicPartition(topic, p) for p in indexes]
        if whole:
            for description in await self.admin.describe_topics(list(dict.fromkeys(whole))):
                out += [TopicPartition(description.name, p.partition) for p in description.partitions]
        return list(dict.fromkeys(out))

    async def _listed(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        try:
            listed = await self.admin.list_offsets(partitions, spec)
        except AdminError as e:
            what = {"earliest": "starting offset", "latest": "ending offset"}.get(str(spec), "offset by timestamp")
            raise CommandError(f"Error getting {what} of topic partition {e.resource.removeprefix('partition ')}: "
                               f"{e.error.name} ({e.message})") from None
        return {tp: o.offset for tp, o in listed.items()}

    async def _in_range(self, requested: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        starts = await self._listed(list(requested), "earliest")
        ends = await self._listed(list(requested), "latest")
        out = {}
        for tp, offset in requested.items():
            if offset > ends[tp]:
                _note(f"WARN: New offset ({offset}) is higher than latest offset for topic partition {tp}. "
                      f"Value will be set to {ends[tp]}")
                offset = ends[tp]
            elif offset < starts[tp]:
                _note(f"WARN: New offset ({offset}) is lower than earliest offset for topic partition {tp}. "
                      f"Value will be set to {starts[tp]}")
                offset = starts[tp]
            out[tp] = offset
        return out

    async def _by_time(self, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        found = await self._listed(partitions, timestamp)
        empty = [tp for tp in partitions if found[tp] < 0]
        for tp in empty:
            _note(f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset.")
        return {**found, **await self._listed(empty, "latest")}

    async def new_offsets(self, group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        args = self.args
        if args.to_offset is not None:
            return await self._in_range(dict.fromkeys(partitions, args.to_offset))
        if args.to_earliest:
            return await self._listed(partitions, "earliest")
        if args.to_latest:
            return await self._listed(partitions, "latest")
        if args.to_current:
            committed = await self.admin.list_group_offsets(group, partitions)
            latest = await self._listed([tp for tp in partitions if tp not in committed], "latest")
            return {tp: committed[tp].offset if tp in committed else latest[tp] for tp in partitions}
        if args.shift_by is not None:
            committed = await self.admin.list_group_offsets(group, partitions)
            for tp in partitions:
                if tp not in committed:
                    raise CommandError(f"Cannot shift offset for partition {tp} since there is no current committed offset")
            return await self._in_range({tp: committed[tp].offset + args.shift_by for tp in partitions})
        if args.to_datetime is not None:
            return await self._by_time(partitions, parse_datetime(args.to_datetime))
        assert args.by_duration is not None
        return await self._by_time(partitions, max(0, int(time.time() * 1000) - parse_duration(args.by_duration)))


async def _reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    if not args.dry_run and not args.execute:
        _note("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to say so explicitly, or --execute to reset the offsets.")
    groups = await _groups(admin, args)
    descriptions = await admin.describe_groups(groups)
    reset = _Reset(admin, args)
    plans: dict[str, dict[TopicPartition, int]] = {}
    errors: list[str] = []
    for group in groups:
        description = descriptions[group]
        if description.protocol_type not in ("consumer", ""):
            errors.append(f"Group '{group}' is not a consumer group (protocol type {description.protocol_type}).")
            continue
        if description.state not in ("Empty", "Dead"):
            errors.append(f"Assignments can only be reset if the group '{group}' is inactive, "
                          f"but the current state is {description.state}.")
            continue
        try:
            offsets = await reset.new_offsets(group, await reset.partitions(group))
            if args.execute:
                await admin.alter_group_offsets(group, offsets)
        except (CommandError, AdminError) as e:
            errors.append(str(e))
            continue
        plans[group] = offsets
    if plans:
        rows = [[group, tp.topic, str(tp.partition), str(offset)]
                for group, offsets in plans.items() for tp, offset in sorted(offsets.items())]
        print("\n" + _table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, [30, 30, 10, 0]))
    for error in errors:
        print(f"Error: {error}", file=sys.stderr)
    return 1 if errors else 0


async def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    group = args.groups[0]
    partitions: list[TopicPartition] = []
    statuses: dict[tuple[str, int], str] = {}
    whole = []
    for arg in args.topics:
        topic, indexes = parse_topic_arg(arg)
        if indexes is None:
            whole.append(topic)
        else:
            partitions += [TopicPartition(topic, p) for p in indexes]
    for topic in dict.fromkeys(whole):
        try:
            (description,) = await admin.describe_topics([topic])
        except AdminError as e:
            statuses[(topic, -1)] = f"Error: {e.error.message}"
            continue
        partitions += [TopicPartition(topic, p.partition) for p in description.partitions]
    partitions = list(dict.fromkeys(partitions))
    if partitions:
        try:
            await admin.delete_group_offsets(group, partitions)
        except AdminError as e:
            if not e.failures:  # the group as a whole
                raise CommandError({
                    "INVALID_GROUP_ID": f"'{group}' is not valid.",
                    "GROUP_ID_NOT_FOUND": f"'{group}' does not exist.",
                    "NON_EMPTY_GROUP": f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
                }.get(e.error.name, str(e))) from None
            for tp, failure in e.failures.items():
                assert isinstance(tp, TopicPartition)
                statuses[(tp.topic, tp.partition)] = f"Error: {failure.message}"
    for tp in partitions:
        statuses.setdefault((tp.topic, tp.partition), "Successful")
    failed = any(status != "Successful" for status in statuses.values())
    if not failed:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topics)} group {group}")
    rows = [[topic, str(p) if p >= 0 else "Not Provided", status] for (topic, p), status in sorted(statuses.items())]
    print("\n" + _table(["TOPIC", "PARTITION", "STATUS"], rows, [30, 15, 0]))
    if failed:
        print("Error: Encounter some partition level error, see the follow-up details above.", file=sys.stderr)
    return 1 if failed else 0


RUNNERS = {
    "list": _list, "describe": _describe, "delete": _delete,
    "reset-offsets": _reset_offsets, "delete-offsets": _delete_offsets,
}


async def _run(args: argparse.Namespace, action: str, settings: ClientSettings) -> int:
    client = settings.admin_options("pybroker-consumer-groups")
    client["retry_timeout"] = args.timeout / 1000
    async with Admin(args.bootstrap_server, **client) as admin:
        return await RUNNERS[action](admin, args)


def run(args: argparse.Namespace) -> int:
    try:
        action = _validate(args)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    try:
        return asyncio.run(_run(args, action, settings))
    except (AdminError, CommandError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
