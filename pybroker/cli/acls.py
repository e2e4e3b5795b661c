"""``pybroker acls``: add, remove and list ACLs, like kafka-acls.sh with ``--bootstrap-server``.

Kafka's options (``--add``/``--remove``/``--list``; ``--allow-principal``/``--deny-principal``,
``--allow-host``/``--deny-host``, ``--operation`` with Kafka's names, all repeatable;
``--topic``/``--group``/``--transactional-id`` (repeatable) and ``--cluster``;
``--resource-pattern-type`` literal, prefixed, match or any; ``--principal`` to narrow ``--list``;
``--force``; ``--command-config``) and Kafka's output (``AclCommand.scala``; the header lines end
with a space, each entry line starts with a tab, the first one after a space)::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
        (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
        (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

A host defaults to ``*`` for the principals given, the operation to ``All``. ``--remove`` asks for
confirmation on a terminal; without ``--force`` and without a terminal to ask on (CI, pipes) it
refuses with one line on stderr instead of guessing. Usage errors exit 2; a failed call prints
``Error while executing ACL command: …`` and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from pybroker.cli.command_config import AdminOptions, settings_for_command
from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.security.acl import (
    ANY_ENTRY,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
    operation_name,
    parse_operation,
)
from pybroker.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.security.principal import KafkaPrincipal, PrincipalFormatError

PROG = "pybroker acls"
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "match": PatternType.MATCH,
                 "any": PatternType.ANY}
VALID_OPERATIONS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


class UsageError(ValueError):
    pass


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "acls", help="add, remove or list ACLs (like kafka-acls.sh)",
        description="This tool helps to manage acls on kafka (like kafka-acls.sh --bootstrap-server).",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="REQUIRED: the server(s) to connect to")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client settings")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    actions.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    actions.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    parser.add_argument("--topic", action="append", default=[], help="topic ('*': all topics); repeatable")
    parser.add_argument("--group", action="append", default=[], help="consumer group ('*': all groups); repeatable")
    parser.add_argument("--transactional-id", action="append", default=[],
                        help="transactional id ('*': all); repeatable")
    parser.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    parser.add_argument("--resource-pattern-type", default="literal", type=str.lower, choices=sorted(PATTERN_TYPES),
                        help="literal or prefixed when adding; also match or any when listing or removing "
                             "(default: literal)")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="principal allowed (User:'*' is every user); repeatable")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="principal denied (deny rules take precedence over allow rules); repeatable")
    parser.add_argument("--allow-host", action="append", default=[], help="host of --allow-principal (default *)")
    parser.add_argument("--deny-host", action="append", default=[], help="host of --deny-principal (default *)")
    parser.add_argument("--operation", action="append", default=[],
                        help="operation allowed or denied (default All): "
                             + ", ".join(operation_name(op) for op in VALID_OPERATIONS))
    parser.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                        help="with --list: only the ACLs of this principal; repeatable")
    parser.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    parser.set_defaults(run=run)


def _principals(values: list[str]) -> list[str]:
    out = []
    for value in values:
        try:
            out.append(str(KafkaPrincipal.parse(value.strip())))
        except PrincipalFormatError as e:
            raise UsageError(str(e)) from None
    return list(dict.fromkeys(out))


def _resource_filters(args: argparse.Namespace, required: bool) -> list[ResourcePatternFilter]:
    pattern_type = PATTERN_TYPES[args.resource_pattern_type]
    filters = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pattern_type) for t in args.topic]
    if args.cluster and pattern_type == PatternType.LITERAL:
        filters.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    filters += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), pattern_type) for g in args.group]
    filters += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id]
    if not filters and required:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
    return list(dict.fromkeys(filters))


def _entries(args: argparse.Namespace) -> list[AccessControlEntry]:
    operations = [parse_operation(o.strip()) for o in (args.operation or ["All"])]
    entries: list[AccessControlEntry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        names = _principals(principals)
        hosts = [h.strip() for h in hosts] or (["*"] if names else [])
        entries += [AccessControlEntry(p, h, op, permission) for p in names for op in operations for h in hosts]
    return list(dict.fromkeys(entries))


def _filter_to_acls(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    entries = _entries(args)
    out = {f: entries for f in _resource_filters(args, required=True)}
    for resource_filter, acls in out.items():
        valid = SUPPORTED_OPERATIONS[resource_filter.resource_type] | {AclOperation.ALL}
        if any(acl.operation not in valid for acl in acls):
            raise UsageError(f"ResourceType {resource_filter.resource_type.name} only supports operations "
                             + ",".join(op.name for op in sorted(valid)))
    return out


def _block(entries: list[AccessControlEntry]) -> str:
    return "\n".join("\t" + str(e) for e in entries)


def _print_resource_acls(grouped: dict[ResourcePattern, list[AccessControlEntry]]) -> None:
    for pattern, entries in grouped.items():
        print(f"Current ACLs for resource `{pattern}`: \n {_block(entries)} \n")


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    filters = _resource_filters(args, required=False)
    bindings: list[AclBinding] = []
    if not filters:
        bindings += await admin.describe_acls()
    for resource_filter in filters:
        bindings += await admin.describe_acls(AclBindingFilter(resource_filter, ANY_ENTRY))
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        entries = grouped.setdefault(binding.pattern, [])
        if binding.entry not in entries:
            entries.append(binding.entry)
    principals = _principals(args.principal)
    if not principals:
        _print_resource_acls(grouped)
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        narrowed = {p: [e for e in es if e.principal == principal] for p, es in grouped.items()}
        _print_resource_acls({p: es for p, es in narrowed.items() if es})


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    if not sys.stdin.isatty():
        raise UsageError("removing ACLs needs a confirmation and there is no terminal to ask it on: "
                         "add --force to remove without asking")
    print(message, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


async def _main(args: argparse.Namespace, client: AdminOptions) -> None:
    async with Admin(args.bootstrap_server, **client) as admin:
        if args.add:
            for resource_filter, entries in _filter_to_acls(args).items():
                pattern = ResourcePattern(resource_filter.resource_type, resource_filter.name or "",
                                          resource_filter.pattern_type)
                print(f"Adding ACLs for resource `{pattern}`: \n {_block(entries)} \n", flush=True)
                await admin.create_acls([AclBinding(pattern, e) for e in entries])
        elif args.remove:
            for resource_filter, entries in _filter_to_acls(args).items():
                if not entries:
                    if _confirm(args, f"Are you sure you want to delete all ACLs for resource filter "
                                      f"`{resource_filter}`? (y/n)"):
                        await admin.delete_acls([AclBindingFilter(resource_filter, ANY_ENTRY)])
                elif _confirm(args, f"Are you sure you want to remove ACLs: \n {_block(entries)} \n from resource "
                                    f"filter `{resource_filter}`? (y/n)"):
                    await admin.delete_acls([AclBindingFilter(resource_filter, e.to_filter()) for e in entries])
        await _list(admin, args)


def run(args: argparse.Namespace) -> int:
    try:
        if args.add and args.resource_pattern_type in ("match", "any"):
            raise UsageError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' "
                             "is not valid when adding acls.")
        if args.add and not (args.allow_principal or args.deny_principal):
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        if args.principal and not args.list:
            raise UsageError("The --principal option is only available if --list is set")
        if args.list and (args.allow_principal or args.deny_principal or args.allow_host or args.deny_host):
            raise UsageError("--list does not take --allow-principal, --deny-principal, --allow-host or --deny-host")
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    client = settings.admin_options("pybroker-acls")
    try:
        asyncio.run(_main(args, client))
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except (AdminError, KafkaClientError, OSError, TimeoutError) as e:
        print(f"Error while executing ACL command: {e}", file=sys.stderr)
        return 1
    return 0
