"""Request handlers, one module per Kafka API.

Each module defines ``API_KEY``, ``VERSIONS`` (the inclusive range this broker answers) and
``handle(ctx, request)``, which returns the response message, a future of it, or None (no
response, e.g. Produce with acks=0), and ``error_response(request, version, error)``: Kafka's
``getErrorResponse``, the answer carrying ``error`` when ``handle`` fails (None: close instead).
``HANDLERS`` is the registry the dispatcher routes by and ApiVersions advertises: an API is
advertised exactly when its module is listed here.

Authorization is declared per handler: each module also defines ``AUTHORIZES``, the frozenset of
(``AclOperation``, ``ResourceType``) pairs its handler may ask (``frozenset()`` for the APIs Kafka
never authorizes: ApiVersions and the SASL APIs), and asks only through its ``RequestContext``
(``ctx.authorize``, ``ctx.authorize_cluster``, ``ctx.authorize_by_resource_type``,
``ctx.authorized_operations``), in Kafka's order (authorization before existence checks) and
with Kafka's errors (TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The dispatcher
gives the context the declaration; asking an undeclared pair raises (UNKNOWN_SERVER_ERROR to the
client). ``tests/unit/test_handler_authorization.py`` fails for a registered module without a
declaration, and for any code outside ``RequestContext`` that calls the authorizer.
"""

from __future__ import annotations

from types import ModuleType

from pybroker.server.apis import (
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

_MODULES: list[ModuleType] = [
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    offset_for_leader_epoch,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_acls,
    create_acls,
    delete_acls,
    init_producer_id,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    delete_records,
    write_txn_markers,
    delete_groups,
    offset_delete,
    describe_cluster,
    describe_transactions,
    list_transactions,
    leader_and_isr,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    alter_partition,
    elect_leaders,
    api_versions,
    sasl_handshake,
    sasl_authenticate,
    consumer_group_position,
    partition_leader_epochs_for_partitions,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_client_quotas,
    alter_client_quotas,
    describe_producers,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_log_dirs,
    alter_replica_log_dirs,
]

HANDLERS: dict[int, ModuleType] = {int(module.API_KEY): module for module in _MODULES}
