"""The project's message specs, one module per Kafka API, and the registry of all of them.

Each module defines ``REQUEST`` and ``RESPONSE`` (`pybroker.protocol.schema.Message`) whose valid
versions are the versions this broker supports. ``REQUESTS`` / ``RESPONSES`` map API key → spec.
"""

from __future__ import annotations

from types import ModuleType

from pybroker.protocol.schema import Message
from pybroker.protocol.specs import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_position,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_leader_epochs_for_partitions,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)

#: every spec module, in API-key order
MODULES: tuple[ModuleType, ...] = tuple(
    sorted(
        (
            produce,
            fetch,
            list_offsets,
            metadata,
            leader_and_isr,
            stop_replica,
            update_metadata,
            controlled_shutdown,
            api_versions,
            create_topics,
            delete_topics,
            init_producer_id,
            offset_for_leader_epoch,
            describe_configs,
            alter_configs,
            describe_acls,
            create_acls,
            delete_acls,
            create_partitions,
            incremental_alter_configs,
            describe_cluster,
            alter_partition,
            delete_records,
            find_coordinator,
            join_group,
            sync_group,
            heartbeat,
            leave_group,
            offset_commit,
            offset_fetch,
            list_groups,
            describe_groups,
            delete_groups,
            elect_leaders,
            offset_delete,
            sasl_handshake,
            sasl_authenticate,
            consumer_group_position,
            partition_leader_epochs_for_partitions,
            add_offsets_to_txn,
            add_partitions_to_txn,
            describe_transactions,
            end_txn,
            list_transactions,
            txn_offset_commit,
            write_txn_markers,
            describe_user_scram_credentials,
            alter_user_scram_credentials,
            describe_client_quotas,
            alter_client_quotas,
            describe_producers,
            alter_partition_reassignments,
            list_partition_reassignments,
            alter_replica_log_dirs,
            describe_log_dirs,
        ),
        key=lambda m: m.REQUEST.api_key,
    )
)

REQUESTS: dict[int, Message] = {m.REQUEST.api_key: m.REQUEST for m in MODULES}
RESPONSES: dict[int, Message] = {m.RESPONSE.api_key: m.RESPONSE for m in MODULES}


def _check() -> None:
    for m in MODULES:
        req, resp = m.REQUEST, m.RESPONSE
        if req.api_key != resp.api_key or req.valid_versions != resp.valid_versions:
            raise ValueError(f"{m.__name__}: request/response key or versions differ")
        if req.flexible_versions != resp.flexible_versions:
            raise ValueError(f"{m.__name__}: request/response flexible versions differ")
    if len(REQUESTS) != len(MODULES):
        raise ValueError("two spec modules share an API key")


_check()
