"""``pybroker configs`` for client quotas (`pybroker.cli.configs`): kafka-configs' entity types
and names from the command line, the DescribeClientQuotas filter and AlterClientQuotas entity
they make, the checks of the keys, value parsing, and the printed lines (Java's HashMap order,
checked against a JVM once: see the expected orders)."""

from __future__ import annotations

import argparse

import pytest

from pybroker.cli import configs
from pybroker.cli.configs import (
    CommandError,
    check_user_client_configs,
    entity_types_and_names,
    format_quota_line,
    java_hash_map_order,
    parse_java_double,
    quota_entity,
    quota_filter,
    quota_ops,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configs.add_parser(parser.add_subparsers())
    return parser.parse_args(["configs", "--bootstrap-server", "h:1", *argv])


@pytest.mark.parametrize(("argv", "types", "names"), [
    (("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app"),
     ["users", "clients"], ["alice", "app"]),
    (("--entity-type", "clients", "--entity-default", "--entity-type", "users", "--entity-name", "bob"),
     ["clients", "users"], ["", "bob"]),
    (("--entity-type", "users", "--entity-type", "clients", "--entity-name", "alice"), ["users", "clients"], ["alice"]),
    (("--user", "alice", "--client-defaults"), ["users", "clients"], ["alice", ""]),
    (("--client", "app", "--user-defaults"), ["clients", "users"], ["app", ""]),
    (("--broker-logger", "1",), ["broker-loggers"], ["1"]),
    (("--entity-type", "clients"), ["clients"], []),
])
def test_kafka_configs_entity_types_and_names(argv, types, names):
    assert entity_types_and_names(parse("--describe", *argv)) == (types, names)


def test_filter_and_entity():
    assert quota_filter(["users", "clients"], ["alice"]) == [("user", 0, "alice"), ("client-id", 2, None)]
    assert quota_filter(["clients"], [""]) == [("client-id", 1, None)]
    assert quota_entity(["users", "clients"], ["", "app"]) == {"user": None, "client-id": "app"}


@pytest.mark.parametrize(("types", "names", "to_set", "to_delete", "message"), [
    (["clients"], ["a"], {"SCRAM-SHA-256": "password=x"}, [],
     "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: "
     "Set(SCRAM-SHA-256)"),
    (["users", "clients"], ["u", "a"], {}, ["retention.ms"],
     "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: "
     "List(retention.ms)"),
    (["users"], [""], {"SCRAM-SHA-512": "password=x"}, [],
     "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using "
     "--bootstrap-server."),
])
def test_checks_of_the_keys(types, names, to_set, to_delete, message):
    with pytest.raises(CommandError) as e:
        check_user_client_configs(types, names, to_set, to_delete)
    assert str(e.value) == message


def test_quota_or_scram():
    assert check_user_client_configs(["users"], [""], {"producer_byte_rate": "1"}, []) is True
    assert check_user_client_configs(["users"], ["u"], {"SCRAM-SHA-256": "password=x"}, []) is False


def test_values_and_deletions():
    assert parse_java_double("k", " 1e3 ") == 1000.0 and parse_java_double("k", "2.5d") == 2.5
    for bad in ("fast", "1_000", "inf", ""):
        with pytest.raises(CommandError, match=f"Cannot parse quota configuration value for k: {bad}"):
            parse_java_double("k", bad)
    assert quota_ops({"a": 1.0}, {"producer_byte_rate": "10"}, ["a"]) == {"producer_byte_rate": 10.0, "a": None}
    with pytest.raises(CommandError, match=r"^Invalid config\(s\): b,c$"):
        quota_ops({"a": 1.0}, {}, ["b", "c"])


def test_lines_as_kafka_configs_prints_them():
    # Orders a JVM printed for new HashMap<>(n) filled in these orders.
    assert java_hash_map_order(["producer_byte_rate", "consumer_byte_rate", "request_percentage"]) == [
        "consumer_byte_rate", "producer_byte_rate", "request_percentage"]
    assert java_hash_map_order(["request_percentage", "producer_byte_rate"]) == [
        "request_percentage", "producer_byte_rate"]
    assert java_hash_map_order(["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                "controller_mutation_rate"]) == [
        "producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "request_percentage"]
    assert format_quota_line({"user": "alice", "client-id": None}, {"producer_byte_rate": 1024.0,
                                                                     "request_percentage": 2.5e9}) == (
        "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1024.0, "
        "request_percentage=2.5E9")
