"""Capture real clients' request frames as golden files for the codec tests.

A small asyncio TCP server on 127.0.0.1 (a free port) answers with our codec — ApiVersions with
an advertised table, Metadata with a single broker and the requested topics (one partition
each), and plausible answers to the requests that follow (InitProducerId, CreateTopics, Produce,
ListOffsets, Fetch, a one-member consumer group, ...) — and writes every request frame it
receives, size prefix included, to ``tests/golden/<client>/<Api>_v<version>_<n>.bin``.

    python tests/tools/capture.py run                 # every client: P1, groups, SASL tables
    python tests/tools/capture.py run --clients kcat  # just one

Each client scenario runs in its own subprocess under a timeout and is killed by its PID if it
overruns; the server listens on 127.0.0.1 only. Only the first few frames of each
(api, version) are kept per client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pybroker.protocol import codec, messages  # noqa: E402
from pybroker.protocol.api_keys import ApiKey  # noqa: E402

GOLDEN = REPO / "tests" / "golden"
KEEP_PER_KIND = 3
TOPIC = "golden"
CLUSTER_ID = "golden-cluster-0001"
TOPIC_ID = uuid.UUID("6f1d2c3b-4a59-4e87-9c6d-5b4a39281706")

P1_KEYS = {18, 0, 1, 2, 3, 23, 19, 20, 37, 32, 33, 44, 22, 60}
GROUP_KEYS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 21}
SASL_KEYS = {17, 36}


def advertised(table: str) -> list[tuple[int, int, int]]:
    keys = {"p1": P1_KEYS, "groups": P1_KEYS | GROUP_KEYS}.get(table, P1_KEYS | GROUP_KEYS | SASL_KEYS)
    return [t for t in codec.supported_apis() if t[0] in keys]


class Recorder:
    """Writes request frames to the golden directory, a few per (api, version)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.counts: dict[tuple[int, int], int] = {}
        out_dir.mkdir(parents=True, exist_ok=True)

    def record(self, api_key: int, version: int, frame: bytes) -> None:
        n = self.counts.get((api_key, version), 0)
        self.counts[(api_key, version)] = n + 1
        if n >= KEEP_PER_KIND:
            return
        try:
            name = ApiKey(api_key).kafka_name
        except ValueError:
            name = f"Api{api_key}"
        (self.out_dir / f"{name}_v{version}_{n}.bin").write_bytes(frame)


class Responder:
    """Builds answers good enough for a client to go on to its next request."""

    def __init__(self, port: int, table: str) -> None:
        self.port = port
        self.table = advertised(table)
        self.topics: dict[str, int] = {TOPIC: 1}
        self.member_ids: dict[str, str] = {}
        self.assignments: dict[str, bytes] = {}

    def answer(self, key: int, version: int, req: Any) -> Any | None:
        fn = getattr(self, f"on_{ApiKey(key).name.lower()}", None)
        if fn is None:
            return messages.RESPONSE_CLASSES[key]()
        return fn(req, version)

    def on_api_versions(self, req: Any, version: int) -> Any:
        R = messages.ApiVersionsResponse
        return R(api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in self.table])

    def on_metadata(self, req: Any, version: int) -> Any:
        M = messages.MetadataResponse
        names = list(self.topics) if req.topics is None else [t.name for t in req.topics]
        for name in names:
            if name is not None:
                self.topics.setdefault(name, 1)
        topics = [
            M.MetadataResponseTopic(name=name, topic_id=TOPIC_ID if name == TOPIC else uuid.uuid4(), partitions=[
                M.MetadataResponsePartition(partition_index=p, leader_id=1, leader_epoch=0,
                                            replica_nodes=[1], isr_nodes=[1])
                for p in range(self.topics[name])])
            for name in names if name is not None
        ]
        return M(brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                 cluster_id=CLUSTER_ID, controller_id=1, topics=topics)

    def on_init_producer_id(self, req: Any, version: int) -> Any:
        return messages.InitProducerIdResponse(producer_id=4242, producer_epoch=0)

    def on_produce(self, req: Any, version: int) -> Any | None:
        if req.acks == 0:
            return None
        P = messages.ProduceResponse
        return P(responses=[P.TopicProduceResponse(name=t.name, partition_responses=[
            P.PartitionProduceResponse(index=p.index, base_offset=0, log_start_offset=0)
            for p in t.partition_data]) for t in req.topic_data])

    def on_fetch(self, req: Any, version: int) -> Any:
        time.sleep(min(req.max_wait_ms, 200) / 1000)
        F = messages.FetchResponse
        return F(responses=[F.FetchableTopicResponse(topic=t.topic, partitions=[
            F.PartitionData(partition_index=p.partition, high_watermark=0, last_stable_offset=0,
                            log_start_offset=0, records=b"")
            for p in t.partitions]) for t in req.topics])

    def on_list_offsets(self, req: Any, version: int) -> Any:
        L = messages.ListOffsetsResponse
        return L(topics=[L.ListOffsetsTopicResponse(name=t.name, partitions=[
            L.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0, timestamp=-1,
                                           leader_epoch=0)
            for p in t.partitions]) for t in req.topics])

    def on_offset_for_leader_epoch(self, req: Any, version: int) -> Any:
        Om = messages.OffsetForLeaderEpochResponse
        return Om(topics=[Om.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            Om.EpochEndOffset(partition=p.partition, leader_epoch=0, end_offset=0)
            for p in t.partitions]) for t in req.topics])

    def on_create_topics(self, req: Any, version: int) -> Any:
        C = messages.CreateTopicsResponse
        for t in req.topics:
            self.topics[t.name] = max(t.num_partitions, 1)
        return C(topics=[C.CreatableTopicResult(name=t.name, topic_id=uuid.uuid4(),
                                                num_partitions=max(t.num_partitions, 1),
                                                replication_factor=1, configs=[])
                         for t in req.topics])

    def on_delete_topics(self, req: Any, version: int) -> Any:
        D = messages.DeleteTopicsResponse
        names = req.topic_names if version < 6 else [t.name for t in req.topics]
        return D(responses=[D.DeletableTopicResult(name=n) for n in names])

    def on_create_partitions(self, req: Any, version: int) -> Any:
        C = messages.CreatePartitionsResponse
        return C(results=[C.CreatePartitionsTopicResult(name=t.name) for t in req.topics])

    def on_describe_configs(self, req: Any, version: int) -> Any:
        D = messages.DescribeConfigsResponse
        return D(results=[D.DescribeConfigsResult(
            resource_type=r.resource_type, resource_name=r.resource_name, configs=[
                D.DescribeConfigsResourceResult(name="retention.ms", value="604800000",
                                                config_source=5)])
            for r in req.resources])

    def on_alter_configs(self, req: Any, version: int) -> Any:
        A = messages.AlterConfigsResponse
        return A(responses=[A.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name) for r in req.resources])

    def on_incremental_alter_configs(self, req: Any, version: int) -> Any:
        A = messages.IncrementalAlterConfigsResponse
        return A(responses=[A.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name) for r in req.resources])

    def on_describe_cluster(self, req: Any, version: int) -> Any:
        D = messages.DescribeClusterResponse
        return D(cluster_id=CLUSTER_ID, controller_id=1, brokers=[
            D.DescribeClusterBroker(broker_id=1, host="127.0.0.1", port=self.port)])

    def on_delete_records(self, req: Any, version: int) -> Any:
        D = messages.DeleteRecordsResponse
        return D(topics=[D.DeleteRecordsTopicResult(name=t.name, partitions=[
            D.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=max(p.offset, 0))
            for p in t.partitions]) for t in req.topics])

    # ---- a one-member-at-a-time consumer group ------------------------------------------------

    def on_find_coordinator(self, req: Any, version: int) -> Any:
        F = messages.FindCoordinatorResponse
        if version >= 4:
            return F(coordinators=[F.Coordinator(key=k, node_id=1, host="127.0.0.1", port=self.port)
                                   for k in req.coordinator_keys])
        return F(node_id=1, host="127.0.0.1", port=self.port)

    def on_join_group(self, req: Any, version: int) -> Any:
        J = messages.JoinGroupResponse
        member = req.member_id or f"member-{uuid.uuid4()}"
        if not req.member_id and version >= 4:
            return J(error_code=79, member_id=member, protocol_name="")  # MEMBER_ID_REQUIRED
        proto = req.protocols[0] if req.protocols else None
        return J(generation_id=1, protocol_type=req.protocol_type,
                 protocol_name=proto.name if proto else "", leader=member, member_id=member,
                 members=[J.JoinGroupResponseMember(member_id=member, metadata=proto.metadata if proto else b"")])

    def on_sync_group(self, req: Any, version: int) -> Any:
        S = messages.SyncGroupResponse
        mine = next((a.assignment for a in req.assignments if a.member_id == req.member_id), b"")
        return S(protocol_type=req.protocol_type, protocol_name=req.protocol_name, assignment=mine)

    def on_offset_fetch(self, req: Any, version: int) -> Any:
        Om = messages.OffsetFetchResponse
        if version >= 8:
            return Om(groups=[Om.OffsetFetchResponseGroup(group_id=g.group_id, topics=[
                Om.OffsetFetchResponseTopics(name=t.name, partitions=[
                    Om.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, metadata="")
                    for p in t.partition_indexes]) for t in (g.topics or [])]) for g in req.groups])
        return Om(topics=[Om.OffsetFetchResponseTopic(name=t.name, partitions=[
            Om.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="")
            for p in t.partition_indexes]) for t in (req.topics or [])])

    def on_offset_commit(self, req: Any, version: int) -> Any:
        Om = messages.OffsetCommitResponse
        return Om(topics=[Om.OffsetCommitResponseTopic(name=t.name, partitions=[
            Om.OffsetCommitResponsePartition(partition_index=p.partition_index) for p in t.partitions])
            for t in req.topics])

    def on_leave_group(self, req: Any, version: int) -> Any:
        L = messages.LeaveGroupResponse
        return L(members=[L.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id)
                          for m in req.members])

    def on_list_groups(self, req: Any, version: int) -> Any:
        L = messages.ListGroupsResponse
        return L(groups=[L.ListedGroup(group_id="golden-group", protocol_type="consumer",
                                       group_state="Stable", group_type="classic")])

    def on_describe_groups(self, req: Any, version: int) -> Any:
        D = messages.DescribeGroupsResponse
        return D(groups=[D.DescribedGroup(group_id=g, group_state="Empty", protocol_type="consumer")
                         for g in req.groups])

    def on_offset_delete(self, req: Any, version: int) -> Any:
        Od = messages.OffsetDeleteResponse
        return Od(topics=[Od.OffsetDeleteResponseTopic(name=t.name, partitions=[
            Od.OffsetDeleteResponsePartition(partition_index=p.partition_index) for p in t.partitions])
            for t in req.topics])

    def on_sasl_handshake(self, req: Any, version: int) -> Any:
        return messages.SaslHandshakeResponse(mechanisms=["PLAIN"])

    def on_sasl_authenticate(self, req: Any, version: int) -> Any:
        return messages.SaslAuthenticateResponse(auth_bytes=b"", session_lifetime_ms=3600000)

    def on_delete_groups(self, req: Any, version: int) -> Any:
        D = messages.DeleteGroupsResponse
        return D(results=[D.DeletableGroupResult(group_id=g) for g in req.groups_names])


class CaptureServer:
    """The asyncio server, run on its own thread so client scenarios can run beside it."""

    def __init__(self, recorder: Recorder, table: str) -> None:
        self.recorder = recorder
        self.port = free_port()
        self.responder = Responder(self.port, table)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()
        self.log: list[str] = []

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self.handle, "127.0.0.1", self.port))
        self.server = server
        self.ready.set()
        self.loop.run_forever()
        server.close()
        self.loop.run_until_complete(server.wait_closed())

    def start(self) -> None:
        self.thread.start()
        self.ready.wait(5)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                body = await reader.readexactly(size)
                frame = size.to_bytes(4, "big") + body
                reply = self.process(frame)
                if reply is False:
                    break
                if reply is not None:
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except codec.MalformedRequestError as exc:  # e.g. raw SASL tokens after Handshake v0
            self.log.append(f"closed: {exc}")
        finally:
            writer.close()

    def process(self, frame: bytes) -> bytes | bool | None:
        view = memoryview(bytearray(frame))[4:]
        header, offset = codec.decode_request_header(view)
        key, version = header.api_key, header.api_version
        self.recorder.record(key, version, frame)
        self.log.append(f"{key} v{version}")
        if offset < 0:
            if key == 18:
                return bytes(codec.encode_api_versions_error_v0(header.correlation_id, [(18, 0, 3)]))
            return False
        req = codec.decode_request(key, version, view, offset)
        resp = self.responder.answer(key, version, req)
        if resp is None:
            return None
        return bytes(codec.encode_response(key, version, header.correlation_id, resp))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- client scenarios (each runs in a subprocess: ``capture.py client NAME PORT TABLE``) ------


def scenario_aiokafka(port: int, table: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    boot = f"127.0.0.1:{port}"

    async def main() -> None:
        if table == "sasl":
            producer = AIOKafkaProducer(bootstrap_servers=boot, request_timeout_ms=3000,
                                        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                        sasl_plain_username="alice", sasl_plain_password="secret")
            await _try(producer.start())
            await _try(producer.stop())
        elif table == "p1":
            admin = AIOKafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=3000)
            await admin.start()
            await _try(admin.create_topics([NewTopic("golden-a", 2, 1)], timeout_ms=2000))
            await _try(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)]))
            await _try(admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                                                           {"retention.ms": "1000"})]))
            await _try(admin.create_partitions({TOPIC: NewPartitions(2)}))
            await _try(admin.delete_topics(["golden-a"]))
            await admin.close()
            producer = AIOKafkaProducer(bootstrap_servers=boot, request_timeout_ms=3000)
            await producer.start()
            await _try(producer.send_and_wait(TOPIC, b"hello", key=b"k"))
            await producer.stop()
            idem = AIOKafkaProducer(bootstrap_servers=boot, enable_idempotence=True, request_timeout_ms=3000)
            await idem.start()
            await _try(idem.send_and_wait(TOPIC, b"x"))
            await idem.stop()
            consumer = AIOKafkaConsumer(bootstrap_servers=boot, request_timeout_ms=3000, fetch_max_wait_ms=100)
            await consumer.start()
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            await _try(consumer.seek_to_beginning(tp))
            await _try(consumer.getmany(timeout_ms=500))
            await consumer.stop()
        else:
            admin = AIOKafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=3000)
            await admin.start()
            await _try(admin.list_consumer_groups())
            await _try(admin.describe_consumer_groups(["golden-group"]))
            await _try(admin.list_consumer_group_offsets("golden-group"))
            from aiokafka.admin import RecordsToDelete
            await _try(admin.delete_records({TopicPartition(TOPIC, 0): RecordsToDelete(0)}))
            await admin.close()
            consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=boot, group_id="golden-group",
                                        request_timeout_ms=3000, fetch_max_wait_ms=100)
            await consumer.start()
            await _try(consumer.getmany(timeout_ms=1500))
            await _try(consumer.commit({TopicPartition(TOPIC, 0): 1}))
            await consumer.stop()

    asyncio.run(main())


async def _try(coro: Any) -> Any:
    try:
        return await asyncio.wait_for(coro, 5)
    except Exception as exc:  # noqa: BLE001 - capture runs keep going
        print("  (client error:", type(exc).__name__, exc, ")", file=sys.stderr)
        return None


def _sync_try(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        print("  (client error:", type(exc).__name__, exc, ")", file=sys.stderr)
        return None


def scenario_kafka_python(port: int, table: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    boot = f"127.0.0.1:{port}"
    if table == "sasl":
        admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=3000,
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                 sasl_plain_username="alice", sasl_plain_password="secret")
        _sync_try(admin.list_topics)
        _sync_try(admin.close)
    elif table == "p1":
        admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=3000)
        _sync_try(admin.create_topics, [NewTopic("golden-b", 2, 1)], timeout_ms=2000)
        _sync_try(admin.describe_configs, [ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        _sync_try(admin.alter_configs, [ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                                                       {"retention.ms": "1000"})], raise_on_unknown=False)
        _sync_try(admin.create_partitions, {TOPIC: NewPartitions(2)})
        _sync_try(admin.describe_cluster)
        _sync_try(admin.delete_topics, ["golden-b"])
        _sync_try(admin.close)
        producer = KafkaProducer(bootstrap_servers=boot, request_timeout_ms=3000, max_block_ms=3000)
        fut = producer.send(TOPIC, b"hello", key=b"k")
        _sync_try(fut.get, timeout=5)
        _sync_try(producer.close, timeout=2)
        consumer = KafkaConsumer(bootstrap_servers=boot, request_timeout_ms=3000, fetch_max_wait_ms=100)
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        _sync_try(consumer.seek_to_beginning, tp)
        _sync_try(consumer.poll, timeout_ms=500)
        _sync_try(consumer.offsets_for_times, {tp: 1000})
        _sync_try(consumer.close)
    else:
        admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=3000)
        _sync_try(admin.list_groups)
        _sync_try(admin.describe_groups, ["golden-group"])
        _sync_try(admin.delete_records, {TopicPartition(TOPIC, 0): 0})
        _sync_try(admin.delete_group_offsets, "golden-group", [TopicPartition(TOPIC, 0)])
        _sync_try(admin.delete_groups, ["golden-group"])
        _sync_try(admin.close)
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=boot, group_id="golden-group",
                                 request_timeout_ms=3000, fetch_max_wait_ms=100)
        _sync_try(consumer.poll, timeout_ms=1500)
        _sync_try(consumer.poll, timeout_ms=500)
        _sync_try(consumer.commit, {TopicPartition(TOPIC, 0): __import__("kafka").OffsetAndMetadata(1, "", -1)})
        _sync_try(consumer.close)


def scenario_confluent(port: int, table: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    boot = f"127.0.0.1:{port}"
    if table == "sasl":
        admin = AdminClient({"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                             "sasl.password": "secret"})
        _sync_try(admin.list_topics, timeout=3)
    elif table == "p1":
        admin = AdminClient({"bootstrap.servers": boot})
        for fut in admin.create_topics([NewTopic("golden-c", 2, 1)], operation_timeout=2).values():
            _sync_try(fut.result, timeout=5)
        for fut in admin.describe_configs([ConfigResource("topic", TOPIC)]).values():
            _sync_try(fut.result, timeout=5)
        res = ConfigResource("topic", TOPIC, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        for fut in admin.incremental_alter_configs([res]).values():
            _sync_try(fut.result, timeout=5)
        for fut in admin.alter_configs([ConfigResource("topic", TOPIC, set_config={"retention.ms": "5"})]).values():
            _sync_try(fut.result, timeout=5)
        for fut in admin.create_partitions([NewPartitions(TOPIC, 2)]).values():
            _sync_try(fut.result, timeout=5)
        for fut in admin.delete_topics(["golden-c"], operation_timeout=2).values():
            _sync_try(fut.result, timeout=5)
        producer = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 1})
        producer.produce(TOPIC, b"hello", key=b"k")
        producer.flush(5)
        consumer = Consumer({"bootstrap.servers": boot, "group.id": "unused", "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        consumer.poll(1.0)
        _sync_try(consumer.get_watermark_offsets, TopicPartition(TOPIC, 0), timeout=3)
        consumer.close()
    else:
        admin = AdminClient({"bootstrap.servers": boot})
        _sync_try(admin.list_consumer_groups(request_timeout=3).result, timeout=5)
        for fut in admin.describe_consumer_groups(["golden-group"], request_timeout=3).values():
            _sync_try(fut.result, timeout=5)
        for fut in admin.delete_records([TopicPartition(TOPIC, 0, 0)], request_timeout=3).values():
            _sync_try(fut.result, timeout=5)
        consumer = Consumer({"bootstrap.servers": boot, "group.id": "golden-group",
                             "fetch.wait.max.ms": 100, "session.timeout.ms": 6000})
        consumer.subscribe([TOPIC])
        for _ in range(4):
            consumer.poll(0.5)
        _sync_try(consumer.commit, offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        consumer.close()
        for fut in admin.delete_consumer_groups(["golden-group"], request_timeout=3).values():
            _sync_try(fut.result, timeout=5)


SCENARIOS = {
    "aiokafka": scenario_aiokafka,
    "kafka-python": scenario_kafka_python,
    "confluent-kafka": scenario_confluent,
}


def kcat_commands(port: int, table: str) -> list[list[str]]:
    boot = f"127.0.0.1:{port}"
    if table == "p1":
        return [
            ["kcat", "-b", boot, "-L", "-m", "3"],
            ["kcat", "-b", boot, "-P", "-t", TOPIC, "-m", "3"],
            ["kcat", "-b", boot, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-m", "3"],
            ["kcat", "-b", boot, "-Q", "-t", f"{TOPIC}:0:1000", "-m", "3"],
        ]
    if table == "sasl":
        return [["kcat", "-b", boot, "-L", "-m", "3", "-X", "security.protocol=SASL_PLAINTEXT",
                 "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=secret"]]
    return [["kcat", "-b", boot, "-G", "golden-group", TOPIC, "-e", "-m", "3"]]


def run_bounded(cmd: list[str], timeout: float, stdin: bytes | None = None) -> None:
    """Run a client process; kill it (by its PID, with its process group) if it overruns."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        print(f"  {cmd[0]}... timed out after {timeout}s (killed pid {proc.pid})")
    tail = (err or b"").decode(errors="replace").strip().splitlines()[-3:]
    for line in tail:
        print("   ", line[:160])


def run(clients: list[str], tables: list[str], timeout: float) -> None:
    for client in clients:
        out = GOLDEN / client
        if out.exists():
            shutil.rmtree(out)
        recorder = Recorder(out)
        for table in tables:
            server = CaptureServer(recorder, table)
            server.start()
            print(f"{client} [{table}] on 127.0.0.1:{server.port}")
            if client == "kcat":
                for cmd in kcat_commands(server.port, table):
                    stdin = b"one\ntwo\n" if "-P" in cmd else None
                    run_bounded(cmd, timeout / 4, stdin)
            else:
                run_bounded([sys.executable, __file__, "client", client, str(server.port), table], timeout)
            server.stop()
            print("   requests:", " ".join(sorted(set(server.log))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_run = sub.add_parser("run", help="capture every (or the given) client")
    p_run.add_argument("--clients", nargs="*", default=[*SCENARIOS, "kcat"])
    p_run.add_argument("--tables", nargs="*", default=["p1", "groups", "sasl"])
    p_run.add_argument("--timeout", type=float, default=60.0)
    p_client = sub.add_parser("client", help="(internal) run one client scenario")
    p_client.add_argument("name")
    p_client.add_argument("port", type=int)
    p_client.add_argument("table")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.clients, args.tables, args.timeout)
    else:
        SCENARIOS[args.name](args.port, args.table)


if __name__ == "__main__":
    main()
