"""``pybroker configs``: describe and alter topic configs, dynamic broker configs (a broker's id or
``--entity-default``) and broker loggers, describe and alter users' SCRAM credentials (like
kafka-configs.sh: the same options, output and messages).

Describe prints Kafka's layout: a header per entity, then one line per config, sorted by name,
only the dynamic ones (topic overrides) unless ``--all``::

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}

Alter sends one IncrementalAlterConfigs (deletes, then sets) and prints "Completed updating
config for topic t.". Brokers, as kafka-configs does, send the whole new dynamic set with the
legacy AlterConfigs ("Completed updating config for broker 1." / "Completed updating default
config for brokers in the cluster."); broker loggers one IncrementalAlterConfigs to that broker. Errors exit 1 with one ``Error: …`` line on stderr; usage errors exit 2.

Users (``--entity-type users`` or ``--user``) have only SCRAM credentials here (pybroker has no
client quotas): ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'`` upserts (the
iterations optional and first, default 4096, at least the mechanism's minimum; the password is
salted and hashed by the admin client, as kafka-configs does), ``--delete-config SCRAM-SHA-256``
deletes, both in one AlterUserScramCredentials sent to the controller; describe prints::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from pybroker.cli.command_config import CommandConfigError, load_properties, settings_for_command
from pybroker.client.admin import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    DEFAULT_SCRAM_ITERATIONS,
    TOPIC_RESOURCE,
    Admin,
    AdminError,
    ConfigEntry,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from pybroker.client.connection import KafkaClientError
from pybroker.protocol.errors import ErrorCode
from pybroker.security.scram import ScramMechanism

PROG = "pybroker configs"
ENTITY_TYPES = ("topics", "brokers", "broker-loggers", "users")
RESOURCE_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE, "broker-loggers": BROKER_LOGGER_RESOURCE}
# The config source that is "dynamic" for each entity (what describe shows without --all).
DYNAMIC_SOURCES = {"topics": 1, "brokers": 2}  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT_BROKER_SOURCE = 3
OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"  # Kafka's: a separator not inside [...]
VALID_KEY = re.compile(r"[$a-zA-Z0-9._-]*")
# Kafka's QuotaConfigs.isClientOrUserQuotaConfig: keys a user may have that pybroker cannot set.
USER_QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)
# The Java exception a user-level error surfaces as (kafka-configs prints its simple name).
JAVA_EXCEPTIONS = {
    ErrorCode.RESOURCE_NOT_FOUND: "ResourceNotFoundException",
    ErrorCode.DUPLICATE_RESOURCE: "DuplicateResourceException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
}


class UsageError(Exception):
    """A bad command line (exit 2)."""


class CommandError(Exception):
    """A request that cannot be carried out (exit 1)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "configs", help="describe and alter topic, broker and broker-logger configs and users' SCRAM credentials "
                        "(like kafka-configs.sh)",
        description="Describe and alter entity configs (like kafka-configs.sh): topics, brokers (dynamic broker "
                    "configs), broker-loggers, and users' SCRAM credentials.",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "default.api.timeout.ms, and security: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)")
    actions = parser.add_argument_group("actions (give one)")
    actions.add_argument("--describe", action="store_true", help="list the configs of the given entity")
    actions.add_argument("--alter", action="store_true", help="alter the configs of the given entity")
    entity = parser.add_argument_group("entity")
    entity.add_argument("--entity-type", choices=ENTITY_TYPES,
                        help="the entity type: topics, brokers, broker-loggers or users")
    entity.add_argument("--entity-name", metavar="NAME",
                        help="the topic name, broker id or user principal (describe: all when omitted)")
    entity.add_argument("--entity-default", action="store_true", help="the cluster-wide default broker configs")
    entity.add_argument("--topic", metavar="TOPIC", help="shorthand for --entity-type topics --entity-name TOPIC")
    entity.add_argument("--broker", metavar="ID", help="shorthand for --entity-type brokers --entity-name ID")
    entity.add_argument("--broker-defaults", action="store_true", help="shorthand for --entity-type brokers --entity-default")
    entity.add_argument("--user", metavar="USER", help="shorthand for --entity-type users --entity-name USER")
    parser.add_argument("--all", action="store_true", help="describe: every config, not just the dynamic ones")
    parser.add_argument("--add-config", metavar="K=V[,K2=V2]",
                        help="configs to set: k1=v1,k2=[v1,v2,v2],k3=v3 (square brackets group values holding commas); "
                             "for users SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]")
    parser.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K[,K2]", help="config keys to remove (repeatable)")
    parser.set_defaults(run=run)


# --- the command line ----------------------------------------------------------------------------

def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, entity name); name None means every entity of the type (describe only),
    "" the broker defaults."""
    given = []
    if args.entity_type:
        if args.entity_name is not None and args.entity_default:
            raise UsageError("--entity-name and --entity-default can't be used together")
        given.append((args.entity_type, "" if args.entity_default else args.entity_name))
    elif args.entity_name is not None or args.entity_default:
        raise UsageError("--entity-name and --entity-default need --entity-type")
    if args.topic is not None:
        given.append(("topics", args.topic))
    if args.broker is not None:
        given.append(("brokers", args.broker))
    if args.broker_defaults:
        given.append(("brokers", ""))
    if args.user is not None:
        given.append(("users", args.user))
    if not given:
        raise UsageError("give the entity: --entity-type topics|brokers|users (with --entity-name or --entity-default), "
                         "--topic, --broker, --broker-defaults or --user")
    if len(given) > 1:
        raise UsageError("give only one entity")
    kind, name = given[0]
    if kind == "topics" and name == "":
        raise UsageError("--entity-default applies to brokers and users, not topics")
    if kind in ("brokers", "broker-loggers") and name and not name.isdigit():
        raise CommandError(f"The entity name for {kind} must be a valid integer broker id, but it is: {name}")
    if kind == "broker-loggers" and name == "":
        raise UsageError("--entity-default applies to brokers, clients and users, not broker-loggers")
    return kind, name


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config: ``k=v`` pairs split at commas outside ``[...]``; brackets dropped."""
    out = {}
    for item in re.split("," + OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise CommandError('Invalid entity config: all configs to be added must be in the format "key=val" or '
                               '"key=[val1,val2]" to group values which contain commas.')
        out[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return out


def _validate(args: argparse.Namespace) -> tuple[str, tuple[str, str | None]]:
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    action = "describe" if args.describe else "alter"
    changes = args.add_config is not None or args.add_config_file is not None or bool(args.delete_config)
    if action == "describe" and changes:
        raise UsageError("--add-config, --add-config-file and --delete-config can only be used with --alter")
    if action == "alter" and not changes:
        raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
    if action == "alter" and args.all:
        raise UsageError("--all can only be used with --describe")
    kind, name = _entity(args)
    if action == "describe" and kind == "broker-loggers" and name is None:
        raise UsageError("an entity name must be specified with --describe of broker-loggers")
    if action == "alter" and name is None:
        raise UsageError("An entity name must be specified with --alter")
    return action, (kind, name)


def _configs_to_set(args: argparse.Namespace) -> dict[str, str]:
    configs: dict[str, str] = {}
    if args.add_config_file is not None:
        try:
            configs.update(load_properties(args.add_config_file))
        except CommandConfigError as e:
            raise CommandError(str(e).replace("--command-config", "--add-config-file")) from None
    if args.add_config is not None:
        configs.update(parse_add_config(args.add_config))
    for key in configs:
        if not VALID_KEY.fullmatch(key):
            raise CommandError(f"Invalid character found for config key: {key}")
    return configs


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]


# --- describe and alter --------------------------------------------------------------------------

def format_entry(entry: ConfigEntry) -> str:
    def show(value: str | None) -> str:
        return "null" if value is None else value

    synonyms = ", ".join(f"{s.source_name}:{s.name}={show(s.value)}" for s in entry.synonyms)
    return f"  {entry.name}={show(entry.value)} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


async def _describe(admin: Admin, kind: str, name: str | None, describe_all: bool) -> None:
    if name is not None and not describe_all:
        if kind == "topics" and name not in await admin.list_topics():
            print(f"The topic '{name}' doesn't exist and doesn't have dynamic config.")
            return
        if kind == "brokers" and name and int(name) not in {n.node_id for n in await admin.brokers()}:
            print(f"The broker '{name}' doesn't exist and doesn't have dynamic config.")
            return
    if name is not None:
        names = [name]
    elif kind == "topics":
        names = await admin.list_topics()
    else:
        names = [str(n.node_id) for n in await admin.brokers()] + [""]
    for entity in names:
        if entity == "":
            print(f"Default configs for {kind} in the cluster are:")
            wanted = None if describe_all else DYNAMIC_DEFAULT_BROKER_SOURCE
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {entity} are:")
            wanted = None if describe_all else DYNAMIC_SOURCES.get(kind)
        if kind == "broker-loggers":
            wanted = None  # every logger: kafka-configs filters no source for them
        for entry in await admin.describe_configs(RESOURCE_TYPES[kind], entity, include_synonyms=True):
            if wanted is None or entry.source == wanted:
                print(format_entry(entry))


async def _alter(admin: Admin, kind: str, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
    resource = RESOURCE_TYPES[kind]
    if kind == "brokers":
        await _alter_brokers(admin, name, to_set, to_delete)
    elif kind == "broker-loggers":
        await _alter_broker_loggers(admin, name, to_set, to_delete)
    else:
        await _alter_topic(admin, resource, name, to_set, to_delete)
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")


async def _alter_topic(admin: Admin, resource: int, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
    kind = "topics"
    if to_delete:
        dynamic = DYNAMIC_SOURCES[kind] if name else DYNAMIC_DEFAULT_BROKER_SOURCE
        current = {e.name for e in await admin.describe_configs(resource, name, include_synonyms=False) if e.source == dynamic}
        invalid = [key for key in to_delete if key not in current]
        if invalid:
            raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    await admin.incremental_alter_configs(resource, name, to_set, to_delete)


# --- brokers and broker loggers ------------------------------------------------------------------

async def _alter_brokers(admin: Admin, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
    """kafka-configs' brokers alter: the broker's (or the cluster defaults') dynamic configs as
    described, plus the additions, minus the deletions, sent whole with the legacy AlterConfigs."""
    dynamic = DYNAMIC_SOURCES["brokers"] if name else DYNAMIC_DEFAULT_BROKER_SOURCE
    old = {e.name: e.value for e in await admin.describe_configs(BROKER_RESOURCE, name, include_synonyms=False)
           if e.source == dynamic}
    invalid = [key for key in to_delete if key not in old]
    if invalid:
        raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    new = {k: v for k, v in {**old, **to_set}.items() if k not in to_delete}
    sensitive = [k for k, v in new.items() if v is None]
    if sensitive:
        raise CommandError("All sensitive broker config entries must be specified for --alter, missing entries: "
                           f"Set({', '.join(sensitive)})")
    await admin.alter_configs(BROKER_RESOURCE, name, {k: v for k, v in new.items() if v is not None})


async def _alter_broker_loggers(admin: Admin, name: str, to_set: dict[str, str], to_delete: list[str]) -> None:
    """kafka-configs' broker-loggers alter: every logger named must exist; SETs and DELETEs in one
    IncrementalAlterConfigs to that broker."""
    valid = {e.name for e in await admin.describe_configs(BROKER_LOGGER_RESOURCE, name, include_synonyms=True)}
    invalid = [k for k in to_delete if k not in valid] + [k for k in to_set if k not in valid]
    if invalid:
        raise CommandError(f"Invalid broker logger(s): {','.join(invalid)}")
    await admin.incremental_alter_configs(BROKER_LOGGER_RESOURCE, name, to_set, to_delete)


# --- users: SCRAM credentials --------------------------------------------------------------------

def scram_alterations(
    user: str, to_set: dict[str, str], to_delete: list[str],
) -> list[UserScramCredentialUpsertion | UserScramCredentialDeletion]:
    """kafka-configs' checks of a user's configs (``alterConfig`` and
    ``alterUserScramCredentialConfigs``) and the alterations they make: deletions, then
    upsertions."""
    unknown_set = [k for k in to_set if ScramMechanism.for_name(k) is None and k not in USER_QUOTA_CONFIGS]
    unknown_delete = [k for k in to_delete if ScramMechanism.for_name(k) is None and k not in USER_QUOTA_CONFIGS]
    if unknown_set:
        raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
                           f"Unexpected config names: Set({', '.join(unknown_set)})")
    if unknown_delete:
        raise CommandError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                           f"--bootstrap-server. Unexpected config names: List({', '.join(unknown_delete)})")
    quotas = [k for k in [*to_set, *to_delete] if k in USER_QUOTA_CONFIGS]
    scram = len(quotas) < len(to_set) + len(to_delete)
    if scram and user == "":
        raise CommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                           "using --bootstrap-server.")
    if scram and quotas:
        raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                           "--bootstrap-server.")
    if quotas:
        raise CommandError(f"Client quotas are not supported by pybroker: {', '.join(quotas)}")
    alterations: list[UserScramCredentialUpsertion | UserScramCredentialDeletion] = [
        UserScramCredentialDeletion(user, key) for key in to_delete]
    for key, value in to_set.items():
        mechanism = ScramMechanism.for_name(key)
        assert mechanism is not None
        match = SCRAM_VALUE.fullmatch(value)
        if match is None:
            raise CommandError(f"Invalid credential property {mechanism.name}={value}")
        iterations_text, password = match.groups()
        if iterations_text is None or iterations_text == "-1":
            iterations = DEFAULT_SCRAM_ITERATIONS
        else:
            try:
                iterations = int(iterations_text)
            except ValueError:
                raise CommandError(f'For input string: "{iterations_text}"') from None
        if iterations < mechanism.min_iterations:
            raise CommandError(f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} "
                               f"required for {mechanism.mechanism_name}")
        alterations.append(UserScramCredentialUpsertion(user, key, password, iterations))
    return alterations


async def _describe_users(admin: Admin, name: str | None) -> None:
    if name == "":
        return  # the default user has quotas only, and pybroker has none
    results = await admin.user_scram_credential_results(None if name is None else [name])
    for user, result in results.items():
        if isinstance(result, AdminError):
            if result.error == ErrorCode.RESOURCE_NOT_FOUND:
                continue  # no credentials: not listed (Kafka's DescribeUserScramCredentialsResult.users)
            exception = JAVA_EXCEPTIONS.get(result.error, f"{result.error.name} error")
            print(f"Error retrieving SCRAM credential configs for user-principal '{user}': {exception}: "
                  f"{result.message}")
            continue
        text = ", ".join(f"{info.mechanism}=iterations={info.iterations}" for info in result)
        print(f"SCRAM credential configs for user-principal '{user}' are {text}")


async def _run(args: argparse.Namespace, action: str, kind: str, name: str | None, client: dict[str, object]) -> int:
    to_set = _configs_to_set(args) if action == "alter" else {}
    to_delete = _configs_to_delete(args)
    alterations = scram_alterations(name or "", to_set, to_delete) if kind == "users" and action == "alter" else []
    async with Admin(args.bootstrap_server, **client) as admin:  # type: ignore[arg-type]
        if action == "describe" and kind == "users":
            await _describe_users(admin, name)
        elif action == "describe":
            await _describe(admin, kind, name, args.all)
        elif kind == "users":
            assert name is not None
            await admin.alter_user_scram_credentials(alterations)
            print(f"Completed updating config for user {name}.")
        else:
            assert name is not None
            await _alter(admin, kind, name, to_set, to_delete)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        action, (kind, name) = _validate(args)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except CommandError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    client: dict[str, object] = {"client_id": settings.client_id or "pybroker-configs"}
    client["security"] = settings.security
    if settings.request_timeout_ms is not None:
        client["request_timeout"] = settings.request_timeout_ms / 1000
    if settings.default_api_timeout_ms is not None:
        client["retry_timeout"] = settings.default_api_timeout_ms / 1000
    try:
        return asyncio.run(_run(args, action, kind, name, client))
    except (AdminError, CommandError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
