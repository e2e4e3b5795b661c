"""`pybroker cluster`'s per-broker properties without a cluster: the templates of --override,
--broker-override and --config, which source wins, the listeners they give each broker (bound,
advertised, the one the command talks to), and the checks made before anything starts."""

from __future__ import annotations

import io
import json
import socket
import subprocess
from pathlib import Path

import pytest

from bench.brokers import free_port, free_ports
from pybroker.cli.cluster_overrides import BrokerOverrides, OverrideError, expand
from pybroker.cli.local_cluster import ClusterError, LocalCluster
from pybroker.cli.main import main
from pybroker.cli.secure_setup import SecureSetup
from pybroker.server.config import read_properties
from pybroker.zookeeper.server import ZooKeeperInstall

FAKE_INSTALL = ZooKeeperInstall("java", ("zookeeper.jar",))
SASL_BESIDE = "listeners=PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{port+100}"
JAAS = ("listener.name.sasl_plaintext.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="alice-secret";')
SASL = [SASL_BESIDE, "sasl.enabled.mechanisms=PLAIN", JAAS]
INTERNAL = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL"]


def make_cluster(tmp_path: Path, brokers: int = 3, port: int = 39092, **kwargs: object) -> LocalCluster:
    kwargs.setdefault("metrics_port", 49404)
    return LocalCluster(tmp_path / "c", brokers, port, install=FAKE_INSTALL, out=io.StringIO(),
                        **kwargs)


# --- templates -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("template", "expanded"), [
    ("PLAINTEXT://{host}:{port}", "PLAINTEXT://127.0.0.1:9093"),
    ("SASL_PLAINTEXT://{host}:{port+100},X://h:{port-93}",
     "SASL_PLAINTEXT://127.0.0.1:9193,X://h:9000"),
    ("PLAINTEXT://proxy-{id}.local:{ port + 1000 }", "PLAINTEXT://proxy-2.local:10093"),
    ("rack-{id}-{id+10}", "rack-2-12"),
    ("no placeholder", "no placeholder"),
])
def test_placeholders_expand_for_one_broker(template, expanded):
    assert expand(template, 2, 9093, "127.0.0.1", key="listeners") == expanded


def test_other_braces_are_kept_outside_the_listener_properties():
    rule = "RULE:^CN=(.{3}),OU=x$/$1/,DEFAULT"
    assert expand(rule, 1, 9092, "127.0.0.1", key="ssl.principal.mapping.rules") == rule
    assert expand('password="{secret}"', 1, 9092, "127.0.0.1", key="x") == 'password="{secret}"'


@pytest.mark.parametrize("key", ["listeners", "advertised.listeners"])
def test_an_unknown_placeholder_in_a_listener_property_is_refused(key):
    with pytest.raises(OverrideError, match=rf"--override {key}=PLAINTEXT://h:\{{prot\}}: unknown "
                                            r"placeholder \{prot\} \(known: \{id\}, \{port\}"):
        expand("PLAINTEXT://h:{prot}", 1, 9092, "127.0.0.1", key=key, source="--override")
    with pytest.raises(OverrideError, match="unknown placeholder {host-1}"):
        expand("PLAINTEXT://{host-1}:1", 1, 9092, "127.0.0.1", key=key)


def test_a_port_offset_out_of_range_is_refused():
    with pytest.raises(OverrideError, match=r"--override listeners: \{port\+60000\} is 69092 on "
                                            "broker 1, not a valid port"):
        expand("PLAINTEXT://{host}:{port+60000}", 1, 9092, "127.0.0.1", key="listeners",
               source="--override")


# --- sources and precedence ----------------------------------------------------------------------

def test_one_broker_beats_every_broker_and_the_command_line_beats_the_file(tmp_path):
    config = tmp_path / "cluster.properties"
    config.write_text("# every broker\nnum.partitions=1\nlog.retention.hours=1\n"
                      "broker.rack=rack-{id}\nbroker.2.num.partitions=2\n"
                      "broker.2.log.retention.hours=2\nbroker.3.log.retention.hours=3\n")
    settings = BrokerOverrides.parse(
        3, ["log.retention.hours=9", "num.partitions=9"],
        ["3:log.retention.hours=33", "3:log.retention.hours=34"], config)
    values = {node: settings.values(node, 9091 + node, "127.0.0.1") for node in (1, 2, 3)}
    assert values[1] == {"num.partitions": "9", "log.retention.hours": "9", "broker.rack": "rack-1"}
    assert values[2] == {"num.partitions": "2", "log.retention.hours": "2", "broker.rack": "rack-2"}
    assert values[3] == {"num.partitions": "9", "log.retention.hours": "34",
                         "broker.rack": "rack-3"}
    assert settings.sections(3, 9094, "127.0.0.1") == [
        (f"--config {config}", {"broker.rack": "rack-3"}),
        ("--override", {"num.partitions": "9"}),
        ("--broker-override 3", {"log.retention.hours": "34"}),
    ]


def test_server_properties_name_each_key_once_under_the_source_that_set_it(tmp_path):
    config = tmp_path / "cluster.properties"
    config.write_text("broker.rack=rack-{id}\nbroker.2.num.partitions=2\n")
    cluster = make_cluster(tmp_path, config_file=config,
                           overrides=["num.partitions=9", "broker.rack=r"],
                           broker_overrides=["2:offsets.topic.replication.factor=1"])
    cluster.write_configs()
    text = cluster.brokers[1].config_path.read_text()
    assert text.endswith(
        "# The defaults of a local cluster (see the README):\n"
        "transaction.state.log.replication.factor=3\n"
        "transaction.state.log.min.isr=2\n"
        "# --override:\n"
        "broker.rack=r\n"
        f"# --config {config}, broker.2.*:\n"
        "num.partitions=2\n"
        "# --broker-override 2:\n"
        "offsets.topic.replication.factor=1\n"
    )
    for broker in cluster.brokers:
        assert read_properties(str(broker.config_path)) == cluster.properties(broker)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"broker_overrides": ["2listeners=x"]},
     "--broker-override '2listeners=x' is not of the form ID:key=value"),
    ({"broker_overrides": ["a:x=y"]}, "--broker-override 'a:x=y' is not of the form ID:key=value"),
    ({"broker_overrides": ["2:=y"]}, "--broker-override '2:=y' is not of the form ID:key=value"),
    ({"broker_overrides": ["4:x=y"]},
     r"--broker-override '4:x=y': there is no broker 4 \(--brokers 3: node ids 1..3\)"),
    ({"broker_overrides": ["2:log.dirs=/x"]},
     "--broker-override 2:log.dirs: pybroker cluster sets log.dirs"),
    ({"overrides": ["node.id=5"]}, "--override node.id: pybroker cluster sets node.id"),
    ({"overrides": ["metrics.prometheus.port=1"]}, "--override metrics.prometheus.port"),
])
def test_malformed_or_managed_settings_are_refused_in_one_line(tmp_path, kwargs, message):
    with pytest.raises(ClusterError, match=message) as raised:
        make_cluster(tmp_path, **kwargs)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("line", "message"), [
    ("broker.7.num.partitions=2", r"broker.7.num.partitions: there is no broker 7"),
    ("zookeeper.connect=h:1", "zookeeper.connect: pybroker cluster sets zookeeper.connect"),
    ("broker.1.log.dir=/x", "broker.1.log.dir: pybroker cluster sets log.dir"),
])
def test_the_config_file_is_checked_as_the_command_line(tmp_path, line, message):
    config = tmp_path / "cluster.properties"
    config.write_text(line + "\n")
    with pytest.raises(ClusterError, match=f"--config {config}: {message}"):
        make_cluster(tmp_path, config_file=config)
    missing = tmp_path / "missing"
    with pytest.raises(ClusterError, match=f"--config {missing}: No such file or directory"):
        make_cluster(tmp_path, config_file=missing)


# --- listeners -----------------------------------------------------------------------------------

def test_a_sasl_listener_beside_plaintext_on_every_broker(tmp_path):
    cluster = make_cluster(tmp_path, overrides=[
        "listeners=SASL_PLAINTEXT://{host}:{port+100},PLAINTEXT://{host}:{port}", *SASL[1:]])
    cluster.write_configs()
    cluster.write_manifest("starting")
    for node, broker in enumerate(cluster.brokers, start=1):
        props = read_properties(str(broker.config_path))
        assert props["listeners"] == (f"SASL_PLAINTEXT://127.0.0.1:{39191 + node},"
                                      f"PLAINTEXT://127.0.0.1:{39091 + node}")
        assert broker.config_path.read_text().count("listeners=") == 1
    # The command talks PLAINTEXT (the first such listener), and lists it as the bootstrap servers.
    assert cluster.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094"
    manifest = json.loads(cluster.manifest_path.read_text())
    assert manifest["bootstrap_listener"] == "PLAINTEXT"
    broker2 = manifest["brokers"][1]
    assert broker2["address"] == "127.0.0.1:39093"
    assert broker2["listeners"] == {"SASL_PLAINTEXT": "127.0.0.1:39193",
                                    "PLAINTEXT": "127.0.0.1:39093"}
    assert broker2["advertised_listeners"] == broker2["listeners"]
    assert list(broker2) == ["node_id", "address", "listeners", "advertised_listeners",
                             "metrics_port", "pid", "config", "data_dir", "log"]
    cluster.controller_id = 1
    cluster.print_summary()
    out = cluster.out.getvalue()
    assert (" " * 11 + "listeners SASL_PLAINTEXT://127.0.0.1:39193,"
            "PLAINTEXT://127.0.0.1:39093\n") in out
    assert "Bootstrap servers: 127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094\n" in out
    assert ("Bootstrap servers (SASL_PLAINTEXT): "
            "127.0.0.1:39192,127.0.0.1:39193,127.0.0.1:39194\n") in out


def test_advertised_listeners_of_a_proxy_per_broker(tmp_path):
    cluster = make_cluster(tmp_path, overrides=[
        "listeners=PLAINTEXT://{host}:{port},INTERNAL://{host}:{port+10}", *INTERNAL,
        "advertised.listeners=PLAINTEXT://proxy-{id}.local:{port+1000},INTERNAL://{host}:{port+10}",
    ], broker_overrides=[
        "3:advertised.listeners=PLAINTEXT://elsewhere:7000,INTERNAL://{host}:{port+10}"])
    cluster.write_manifest()
    brokers = json.loads(cluster.manifest_path.read_text())["brokers"]
    assert [b["address"] for b in brokers] == [f"127.0.0.1:{p}" for p in (39092, 39093, 39094)]
    assert [b["advertised_listeners"]["PLAINTEXT"] for b in brokers] == [
        "proxy-1.local:40092", "proxy-2.local:40093", "elsewhere:7000"]
    assert brokers[0]["listeners"] == {"PLAINTEXT": "127.0.0.1:39092",
                                       "INTERNAL": "127.0.0.1:39102"}
    cluster.controller_id = 1
    cluster.print_summary()
    out = cluster.out.getvalue()
    assert ("listeners PLAINTEXT://127.0.0.1:39092,INTERNAL://127.0.0.1:39102; advertised "
            "PLAINTEXT://proxy-1.local:40092,INTERNAL://127.0.0.1:39102\n") in out


def test_a_listener_on_every_interface_is_reached_on_loopback(tmp_path):
    cluster = make_cluster(tmp_path, brokers=2, overrides=[
        "listeners=PLAINTEXT://0.0.0.0:{port}",
        "advertised.listeners=PLAINTEXT://localhost:{port}"])
    assert cluster.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39093"
    cluster = make_cluster(tmp_path, brokers=2,
                           broker_overrides=["2:listeners=PLAINTEXT://:{port}"])
    assert cluster.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39093"
    cluster.write_manifest()
    advertised = json.loads(cluster.manifest_path.read_text())["brokers"][1]["advertised_listeners"]
    assert advertised == {"PLAINTEXT": f"{socket.getfqdn()}:39093"}  # as the broker registers


TWO_LISTENERS = "listeners=PLAINTEXT://{host}:{port},INTERNAL://{host}:{port+10}"


@pytest.mark.parametrize(("overrides", "message"), [
    (["listeners=PLAINTEXT://{host}:9000"],
     "port 9000 is both broker 1's listener PLAINTEXT and broker 2's listener PLAINTEXT: give each "
     "broker ports"),
    (["listeners=PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{port+1}"],
     "port 39093 is both broker 1's listener SASL_PLAINTEXT and broker 2's listener PLAINTEXT"),
    (["listeners=PLAINTEXT://{host}:0"],
     "broker 1's listener PLAINTEXT has port 0: pybroker cluster needs a fixed port"),
    (["listeners=PLAINTEXT://{host}:{port}", "advertised.listeners=PLAINTEXT://proxy:9000"],
     "brokers 1 and 2 both advertise PLAINTEXT://proxy:9000: each broker needs an address of its "
     "own"),
    (["listeners=SASL_PLAINTEXT://{host}:{port}", "sasl.enabled.mechanisms=PLAIN",
      "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol=PLAIN"],
     r"broker 1: listeners=SASL_PLAINTEXT://127.0.0.1:39092 has no PLAINTEXT listener"),
    ([TWO_LISTENERS, INTERNAL[0], "inter.broker.listener.name=BROKER"],
     "broker 1: Listener with name BROKER defined in inter.broker.listener.name not found"),
    ([TWO_LISTENERS, *INTERNAL, "advertised.listeners=PLAINTEXT://{host}:{port}"],
     "broker 1: inter.broker.listener.name must be a listener name defined in "
     "advertised.listeners"),
    ([TWO_LISTENERS],
     "broker 1: Error creating broker listeners from .*No security protocol defined for listener "
     "INTERNAL"),
    (["listeners=PLAINTEXT://{host}:{port},PLAINTEXT://{host}:{port+10}"],
     "broker 1: Each listener must have a different name"),
    (["listeners=PLAINTEXT://{host}:2181"], "port 2181 is both ZooKeeper's"),
])
def test_listener_mistakes_are_refused_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ClusterError, match=message) as raised:
        make_cluster(tmp_path, brokers=2, overrides=overrides)
    assert "\n" not in str(raised.value)


def test_every_broker_needs_the_same_listener_for_the_command(tmp_path):
    with pytest.raises(ClusterError, match="broker 2: the command would talk to it on listener "
                                           "CLIENT, to broker 1 on PLAINTEXT"):
        make_cluster(tmp_path, brokers=2, broker_overrides=[
            "2:listeners=CLIENT://{host}:{port}",
            "2:listener.security.protocol.map=CLIENT:PLAINTEXT",
            "2:inter.broker.listener.name=CLIENT"])


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> SecureSetup:
    return SecureSetup.prepare(tmp_path_factory.mktemp("secure"))


def test_secure_talks_on_its_sasl_ssl_listener_beside_a_plaintext_one(tmp_path, secure):
    cluster = make_cluster(tmp_path, secure=secure, overrides=[
        "listeners=PLAINTEXT://{host}:{port+10},SASL_SSL://{host}:{port}",
        "listener.security.protocol.map=SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT"])
    assert cluster.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094"
    assert cluster.bootstrap_listener == "SASL_SSL"
    cluster.write_configs()
    text = cluster.brokers[0].config_path.read_text()
    assert text.count("listeners=") == 1 and text.count("listener.security.protocol.map=") == 1
    props = read_properties(str(cluster.brokers[0].config_path))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39102,SASL_SSL://127.0.0.1:39092"
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    with pytest.raises(ClusterError, match="broker 1: --secure needs the SASL_SSL listener"):
        make_cluster(tmp_path, secure=secure, overrides=[
            "listeners=PLAINTEXT://{host}:{port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT"])


# --- ports ---------------------------------------------------------------------------------------

def test_metrics_ports_avoid_every_listener_port(tmp_path):
    cluster = make_cluster(tmp_path, metrics_port=None, overrides=SASL)
    listener_ports = {e.port for b in cluster.brokers for e in b.listeners}
    assert listener_ports == {39092, 39093, 39094, 39192, 39193, 39194}
    assert not {b.metrics_port for b in cluster.brokers} & listener_ports
    base = free_ports(103)  # its listeners' ports free, whatever else runs beside this test
    clash = make_cluster(tmp_path, port=base, metrics_port=base + 101, zookeeper_port=free_port(), overrides=SASL)
    with pytest.raises(ClusterError, match=f"port {base + 101} on 127.0.0.1 \\(broker 1's metrics\\)"):
        clash.check()


def test_a_listener_port_in_use_is_refused_naming_the_listener(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        listeners = f"listeners=PLAINTEXT://{{host}}:{{port}},SASL_PLAINTEXT://{{host}}:{port}"
        cluster = LocalCluster(tmp_path / "c", 1, free_port(), zookeeper_port=free_port(),
                               install=FAKE_INSTALL, out=io.StringIO(), metrics=False,
                               overrides=[listeners, *SASL[1:]])
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 \\(broker 1, listener "
                                               "SASL_PLAINTEXT\\) is in use: .* Choose other ports "
                                               "with --port or in the listeners"):
            cluster.check()


# --- without these settings nothing changes ------------------------------------------------------

def test_without_listener_settings_the_files_are_as_before(tmp_path):
    cluster = make_cluster(tmp_path, brokers=2, overrides=["num.partitions=3", "x.y={z}"])
    cluster.write_configs()
    cluster.write_manifest("starting")
    c = tmp_path / "c"
    assert cluster.brokers[1].config_path.read_text() == (
        f"# Broker 2 of the local cluster in {c}, written by `pybroker cluster`\n"
        "# (which rewrites this file each time it starts; the data in log.dirs is kept).\n"
        "# Restart this broker alone, while the cluster runs, with:\n"
        f"#   pybroker serve --config {c}/broker-2/server.properties\n"
        "node.id=2\n"
        "listeners=PLAINTEXT://127.0.0.1:39093\n"
        f"log.dirs={c}/broker-2/data\n"
        "zookeeper.connect=127.0.0.1:2181\n"
        "metrics.prometheus.port=49405\n"
        "# The defaults of a local cluster (see the README):\n"
        "offsets.topic.replication.factor=2\n"
        "transaction.state.log.replication.factor=2\n"
        "transaction.state.log.min.isr=2\n"
        "# --override:\n"
        "num.partitions=3\n"
        "x.y={z}\n"
    )
    manifest = json.loads(cluster.manifest_path.read_text())
    assert list(manifest) == ["pid", "state", "bootstrap_servers", "controller", "zookeeper",
                              "brokers"]
    assert list(manifest["brokers"][0]) == ["node_id", "address", "metrics_port", "pid", "config",
                                            "data_dir", "log"]


def test_cli_errors_are_one_line_and_start_nothing(tmp_path, monkeypatch, capsys):
    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("no process may start")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    directory = str(tmp_path / "c")
    assert main(["cluster", "--dir", directory, "--broker-override", "9:num.partitions=2"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "there is no broker 9" in err
    listeners = "listeners=PLAINTEXT://{host}:{port},SASL_PLAINTEXT://{host}:{oops}"
    assert main(["cluster", "--dir", directory, "--override", listeners]) == 1
    out, err = capsys.readouterr()
    assert err == (f"pybroker cluster: --override {listeners}: unknown placeholder {{oops}} "
                   "(known: {id}, {port}, {host}, {id+N}, {port+N}, {port-N})\n")
    assert not (tmp_path / "c").exists()
