"""``pybroker configs``: describe and alter topic configs, dynamic broker configs (a broker's id or
``--entity-default``) and broker loggers, client quotas of users and client ids, and users' SCRAM
credentials (like kafka-configs.sh: the same options, output and messages).

Describe prints Kafka's layout: a header per entity, then one line per config, sorted by name,
only the dynamic ones (topic overrides) unless ``--all``::

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}

Alter sends one IncrementalAlterConfigs (deletes, then sets) and prints "Completed updating
config for topic t.". Brokers, as kafka-configs does, send the whole new dynamic set with the
legacy AlterConfigs ("Completed updating config for broker 1." / "Completed updating default
config for brokers in the cluster."); broker loggers one IncrementalAlterConfigs to that broker. Errors exit 1 with one ``Error: …`` line on stderr; usage errors exit 2.

Users and clients (``--entity-type users|clients``, ``--user``, ``--client``, ``--user-defaults``,
``--client-defaults``; a client of a user with ``--entity-type users --entity-name alice
--entity-type clients --entity-name app``, each ``--entity-name``/``--entity-default`` belonging to
the ``--entity-type`` in the same position) have client quotas, altered with one
AlterClientQuotas (``--add-config 'producer_byte_rate=1024,request_percentage=50'``,
``--delete-config`` of a key the entity has) and described with DescribeClientQuotas (a strict
filter: the name, the default, or every name of each type given)::

    Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0
    Quota configs for the default client-id are consumer_byte_rate=2048.0

(values as Java prints a double, in the order kafka-configs prints them: its HashMap's).

Users also have SCRAM credentials (not in the same command as quotas, not for the default user):
``--add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'`` upserts (the iterations
optional and first, default 4096, at least the mechanism's minimum; the password is salted and
hashed by the admin client, as kafka-configs does), ``--delete-config SCRAM-SHA-256`` deletes,
both in one AlterUserScramCredentials sent to the controller; describe prints, after the quotas::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from pybroker.cli.command_config import (
    AdminOptions,
    CommandConfigError,
    load_properties,
    settings_for_command,
)
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
from pybroker.common.errors import ErrorCode
from pybroker.security.scram import ScramMechanism
from pybroker.server.quota.admin import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from pybroker.server.quota.entities import CLIENT_ID, USER, format_quota_value

PROG = "pybroker configs"
ENTITY_TYPES = ("topics", "brokers", "broker-loggers", "users", "clients")
RESOURCE_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE, "broker-loggers": BROKER_LOGGER_RESOURCE}
# The config source that is "dynamic" for each entity (what describe shows without --all).
DYNAMIC_SOURCES = {"topics": 1, "brokers": 2}  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT_BROKER_SOURCE = 3
OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"  # Kafka's: a separator not inside [...]
VALID_KEY = re.compile(r"[$a-zA-Z0-9._-]*")
# Kafka's QuotaConfigs.isClientOrUserQuotaConfig: the quota keys of users and clients.
USER_QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
# The quota entity types of kafka-configs' entity types (Kafka's ClientQuotaEntity).
QUOTA_ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
# Java's Double.parseDouble (decimal forms; what Scala's toDouble takes).
JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
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
        "configs", help="describe and alter topic, broker and broker-logger configs, client quotas and users' "
                        "SCRAM credentials (like kafka-configs.sh)",
        description="Describe and alter entity configs (like kafka-configs.sh): topics, brokers (dynamic broker "
                    "configs), broker-loggers, client quotas of users and clients, and users' SCRAM credentials.",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "default.api.timeout.ms, and security: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)")
    actions = parser.add_argument_group("actions (give one)")
    actions.add_argument("--describe", action="store_true", help="list the configs of the given entity")
    actions.add_argument("--alter", action="store_true", help="alter the configs of the given entity")
    entity = parser.add_argument_group("entity")
    entity.add_argument("--entity-type", choices=ENTITY_TYPES, action="append", dest="entity_types", default=[],
                        help="the entity type: topics, brokers, broker-loggers, users or clients (users and clients "
                             "may be given together: a client id of a user)")
    entity.add_argument("--entity-name", metavar="NAME", action=_EntityName, dest="entity_names", default=[],
                        help="the topic name, broker id, user principal or client id, for the --entity-type in the "
                             "same position (describe: all when omitted)")
    entity.add_argument("--entity-default", nargs=0, action=_EntityName, dest="entity_names",
                        help="the default entity of the --entity-type in the same position (brokers, users, clients)")
    entity.add_argument("--topic", metavar="TOPIC", help="shorthand for --entity-type topics --entity-name TOPIC")
    entity.add_argument("--client", metavar="CLIENT_ID", help="shorthand for --entity-type clients --entity-name CLIENT_ID")
    entity.add_argument("--user", metavar="USER", help="shorthand for --entity-type users --entity-name USER")
    entity.add_argument("--broker", metavar="ID", help="shorthand for --entity-type brokers --entity-name ID")
    entity.add_argument("--broker-logger", metavar="ID",
                        help="shorthand for --entity-type broker-loggers --entity-name ID")
    entity.add_argument("--client-defaults", action="store_true",
                        help="shorthand for --entity-type clients --entity-default")
    entity.add_argument("--user-defaults", action="store_true", help="shorthand for --entity-type users --entity-default")
    entity.add_argument("--broker-defaults", action="store_true", help="shorthand for --entity-type brokers --entity-default")
    parser.add_argument("--all", action="store_true", help="describe: every config, not just the dynamic ones")
    parser.add_argument("--add-config", metavar="K=V[,K2=V2]",
                        help="configs to set: k1=v1,k2=[v1,v2,v2],k3=v3 (square brackets group values holding commas); "
                             "for users and clients producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50, "
                             "for users also SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]")
    parser.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K[,K2]", help="config keys to remove (repeatable)")
    parser.set_defaults(run=run)


# --- the command line ----------------------------------------------------------------------------

class _EntityName(argparse.Action):
    """``--entity-name NAME`` and ``--entity-default`` (an empty name) into one list, in the order
    given: the n-th belongs to the n-th ``--entity-type`` (Kafka's ``entityNames``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        names = list(getattr(namespace, self.dest, None) or [])
        names.append(values if isinstance(values, str) else "")
        setattr(namespace, self.dest, names)


# The specific entity flags (Kafka's entityFlags, then entityDefaultsFlags, in its order).
ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"), ("broker", "brokers"),
                ("broker_logger", "broker-loggers"))
ENTITY_DEFAULT_FLAGS = (("client_defaults", "clients"), ("user_defaults", "users"), ("broker_defaults", "brokers"))


def entity_types_and_names(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Kafka's ``entityTypes`` and ``entityNames``: the ``--entity-type`` values then the specific
    flags' types; the ``--entity-name`` / ``--entity-default`` names ("" for a default) then the
    flags' names. There may be fewer names than types (describe every entity of a type)."""
    types = list(args.entity_types)
    names = list(args.entity_names or [])
    for flag, kind in ENTITY_FLAGS:
        if getattr(args, flag) is not None:
            types.append(kind)
            names.append(getattr(args, flag))
    for flag, kind in ENTITY_DEFAULT_FLAGS:
        if getattr(args, flag):
            types.append(kind)
            names.append("")
    return types, names


def _entity(args: argparse.Namespace, action: str) -> tuple[list[str], list[str]]:
    """The entity types and names, checked as kafka-configs' ``checkArgs`` does."""
    types, names = entity_types_and_names(args)
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise CommandError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if not types:
        raise UsageError("give the entity: --entity-type topics|brokers|broker-loggers|users|clients (with "
                         "--entity-name or --entity-default), --topic, --broker, --broker-defaults, --broker-logger, "
                         "--user, --user-defaults, --client or --client-defaults")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise CommandError("Only 'users' and 'clients' entity types may be specified together")
    specific = any(getattr(args, f) is not None for f, _ in ENTITY_FLAGS) or any(
        getattr(args, f) for f, _ in ENTITY_DEFAULT_FLAGS)
    if (args.entity_types or args.entity_names) and specific:
        raise CommandError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    if len(names) > len(types):
        raise CommandError("More entity names specified than entity types")
    kind = types[0]
    if kind in ("brokers", "broker-loggers"):
        for name in names:
            if name and not name.isdigit():
                raise CommandError(f"The entity name for {kind} must be a valid integer broker id, but it is: {name}")
    if kind == "topics" and "" in names:
        raise UsageError("--entity-default applies to brokers, users and clients, not topics")
    if kind == "broker-loggers" and "" in names:
        raise UsageError("--entity-default applies to brokers, users and clients, not broker-loggers")
    if action == "describe" and kind == "broker-loggers" and not names:
        raise UsageError("an entity name must be specified with --describe of broker-loggers")
    if action == "alter":
        if not names:
            raise UsageError("An entity name must be specified with --alter")
        if len(names) != len(types):
            raise CommandError("An entity name must be specified for every entity type")
    return types, names


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


def _validate(args: argparse.Namespace) -> tuple[str, tuple[list[str], list[str]]]:
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
    return action, _entity(args, action)


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


# --- users and clients: quotas and SCRAM credentials ---------------------------------------------

def check_user_client_configs(types: list[str], names: list[str], to_set: dict[str, str], to_delete: list[str]) -> bool:
    """kafka-configs' checks of the keys altered for users and clients (``alterConfig``): quota keys
    for a client or a user's client, quota or SCRAM keys for a user (SCRAM not for the default user,
    and not with quota keys in the same command). True when the alteration is of quotas."""
    def is_scram(key: str) -> bool:
        return ScramMechanism.for_name(key) is not None

    unknown_set = [k for k in to_set if not is_scram(k) and k not in USER_QUOTA_CONFIGS]
    unknown_delete = [k for k in to_delete if not is_scram(k) and k not in USER_QUOTA_CONFIGS]
    scram_set = [k for k in to_set if is_scram(k)]
    scram_delete = [k for k in to_delete if is_scram(k)]
    quotas = any(k in USER_QUOTA_CONFIGS for k in [*to_set, *to_delete])
    if types[0] == "clients" or len(types) == 2:
        if unknown_set or scram_set:
            raise CommandError("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                               f"config names: Set({', '.join(unknown_set + scram_set)})")
        if unknown_delete or scram_delete:
            raise CommandError("Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected "
                               f"config names: List({', '.join(unknown_delete + scram_delete)})")
        return True
    if unknown_set:
        raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
                           f"Unexpected config names: Set({', '.join(unknown_set)})")
    if unknown_delete:
        raise CommandError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                           f"--bootstrap-server. Unexpected config names: List({', '.join(unknown_delete)})")
    if scram_set or scram_delete:
        if "" in names:
            raise CommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                               "Credentials using --bootstrap-server.")
        if quotas:
            raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                               "using --bootstrap-server.")
    return quotas


def scram_alterations(
    user: str, to_set: dict[str, str], to_delete: list[str],
) -> list[UserScramCredentialUpsertion | UserScramCredentialDeletion]:
    """kafka-configs' checks of a user's configs (``alterConfig`` and
    ``alterUserScramCredentialConfigs``) and the SCRAM alterations they make: deletions, then
    upsertions (none when the configs are quotas)."""
    if check_user_client_configs(["users"], [user], to_set, to_delete):
        return []
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


def quota_filter(types: list[str], names: list[str]) -> list[tuple[str, int, str | None]]:
    """Kafka's ``getAllClientQuotasConfigs`` filter components, one per entity type: its name
    (match exact), the default (a name ""), or any name (no name given)."""
    components: list[tuple[str, int, str | None]] = []
    for i, kind in enumerate(types):
        name = names[i] if i < len(names) else None
        if name is None:
            components.append((QUOTA_ENTITY_TYPES[kind], MATCH_ANY, None))
        elif name == "":
            components.append((QUOTA_ENTITY_TYPES[kind], MATCH_DEFAULT, None))
        else:
            components.append((QUOTA_ENTITY_TYPES[kind], MATCH_EXACT, name))
    return components


def quota_entity(types: list[str], names: list[str]) -> dict[str, str | None]:
    """The AlterClientQuotas entity: each type with its name, None for the default."""
    return {QUOTA_ENTITY_TYPES[kind]: name or None for kind, name in zip(types, names, strict=True)}


def parse_java_double(key: str, value: str) -> float:
    """Scala's ``String.toDouble`` (Java's ``Double.parseDouble``) of a quota value."""
    text = value.strip()
    if not JAVA_DOUBLE.fullmatch(text):
        raise CommandError(f"Cannot parse quota configuration value for {key}: {value}")
    return float(text.rstrip("fFdD"))


def quota_ops(old: dict[str, float], to_set: dict[str, str], to_delete: list[str]) -> dict[str, float | None]:
    """Kafka's ``alterQuotaConfigs``: a deleted key must be set; each value a double."""
    invalid = [key for key in to_delete if key not in old]
    if invalid:
        raise CommandError(f"Invalid config(s): {','.join(invalid)}")
    ops: dict[str, float | None] = {key: parse_java_double(key, value) for key, value in to_set.items()}
    ops.update({key: None for key in to_delete})
    return ops


def java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: list[str]) -> list[str]:
    """The iteration order of a Java ``new HashMap<>(keys.size())`` filled with ``keys`` in
    order: by bucket of the final table, insertion order within one (how kafka-configs, iterating
    the admin client's map, lists a quota entity's values)."""
    capacity = 1
    while capacity < len(keys):
        capacity *= 2
    threshold = int(capacity * 0.75)
    for size in range(1, len(keys) + 1):
        if size > threshold:
            capacity *= 2
            threshold = int(capacity * 0.75)

    def bucket(key: str) -> int:
        h = java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)


def format_quota_entity(entity: dict[str, str | None]) -> str:
    """``user-principal 'alice', client-id 'app'`` / ``the default client-id`` (Kafka's entitySubstr)."""
    parts = []
    for kind, label in ((USER, "user-principal"), (CLIENT_ID, "client-id"), ("ip", "ip")):
        if kind in entity:
            name = entity[kind]
            parts.append(f"the default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(parts)


def format_quota_line(entity: dict[str, str | None], values: dict[str, float]) -> str:
    entries = ", ".join(f"{key}={format_quota_value(values[key])}" for key in java_hash_map_order(list(values)))
    return f"Quota configs for {format_quota_entity(entity)} are {entries}"


async def _describe_quotas_and_users(admin: Admin, types: list[str], names: list[str]) -> None:
    """kafka-configs' ``describeClientQuotaAndUserScramCredentialConfigs``: the quota entities
    the filter matches strictly, then (users only, no default) the users' SCRAM credentials."""
    for entity, values in await admin.describe_client_quotas(quota_filter(types, names), strict=True):
        print(format_quota_line(entity, values))
    if "clients" not in types and "" not in names:
        await _describe_users(admin, names[0] if names else None)


async def _alter_quotas(admin: Admin, types: list[str], names: list[str], to_set: dict[str, str],
                        to_delete: list[str]) -> None:
    found = await admin.describe_client_quotas(quota_filter(types, names), strict=True)
    old = found[0][1] if found else {}
    ops = quota_ops(old, to_set, to_delete)
    await admin.alter_client_quotas([(quota_entity(types, names), ops)])


async def _describe_users(admin: Admin, name: str | None) -> None:
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


def _completed(kind: str, name: str) -> str:
    if name:
        return f"Completed updating config for {kind[:-1]} {name}."
    return f"Completed updating default config for {kind} in the cluster."


async def _run(args: argparse.Namespace, action: str, types: list[str], names: list[str],
               client: AdminOptions) -> int:
    kind, name = types[0], (names[0] if names else None)
    to_set = _configs_to_set(args) if action == "alter" else {}
    to_delete = _configs_to_delete(args)
    quotas = alterations = None
    if action == "alter" and kind in QUOTA_ENTITY_TYPES:
        quotas = check_user_client_configs(types, names, to_set, to_delete)
        if not quotas:
            alterations = scram_alterations(names[0], to_set, to_delete)
    async with Admin(args.bootstrap_server, **client) as admin:
        if action == "describe" and kind in QUOTA_ENTITY_TYPES:
            await _describe_quotas_and_users(admin, types, names)
        elif action == "describe":
            await _describe(admin, kind, name, args.all)
        elif quotas:
            await _alter_quotas(admin, types, names, to_set, to_delete)
            print(_completed(kind, names[0]))
        elif alterations is not None:
            await admin.alter_user_scram_credentials(alterations)
            print(_completed(kind, names[0]))
        else:
            assert name is not None
            await _alter(admin, kind, name, to_set, to_delete)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        action, (types, names) = _validate(args)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except CommandError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    client = settings.admin_options("pybroker-configs")
    if settings.default_api_timeout_ms is not None:
        client["retry_timeout"] = settings.default_api_timeout_ms / 1000
    try:
        return asyncio.run(_run(args, action, types, names, client))
    except (AdminError, CommandError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
