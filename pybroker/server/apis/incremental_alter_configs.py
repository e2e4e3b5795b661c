"""IncrementalAlterConfigs (44): SET, DELETE, APPEND or SUBTRACT individual topic configs, dynamic
broker configs (a broker's id, or "" for the cluster defaults) and this broker's logger levels
(BROKER_LOGGER).

Authorization: a BROKER or BROKER_LOGGER resource needs ALTER_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED; for BROKER after Kafka's checks of the change itself, see
``pybroker/server/broker_config_changes.py``), a TOPIC ALTER_CONFIGS on the topic (else
TOPIC_AUTHORIZATION_FAILED, before the existence check); the error message is null, as in Kafka.

A topic's operations are checked in Kafka's order: duplicate names and null values before
authorization, then each operation in turn, then the topic's existence, then the resulting
configs. Where Kafka fails outside its own error types (an unknown operation, APPEND or
SUBTRACT on an unknown name) it answers UNKNOWN_SERVER_ERROR without a message, and so does
pybroker.
"""

from __future__ import annotations

from enum import IntEnum

from pybroker.common.config import ConfigError, parse_list
from pybroker.common.errors import ErrorCode
from pybroker.log.config import TOPIC_CONFIGS, InvalidTopicConfigError, validate_topic_configs
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from pybroker.security.authorizer import AclOperation
from pybroker.security.authorizer import ResourceType as AclResource
from pybroker.server.apis.alter_configs import (
    repeated_resources,
    topic_config_error_message,
    unknown_topic_message,
)
from pybroker.server.apis.describe_configs import config_authorization_error
from pybroker.server.broker_config_changes import incremental_alter_broker
from pybroker.server.config_describer import ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)
AUTHORIZES = frozenset({(AclOperation.ALTER_CONFIGS, AclResource.CLUSTER), (AclOperation.ALTER_CONFIGS, AclResource.TOPIC)})

_Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class _RequestError(Exception):
    pass


class _ServerError(Exception):
    """Where Kafka's topic path fails outside its own error types (a ``MatchError`` on an unknown
    operation, a missing key when appending to or subtracting from an unknown config): it
    answers UNKNOWN_SERVER_ERROR with no message."""


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    repeated = repeated_resources(request.resources)
    for resource in request.resources:
        code: ErrorCode
        message: str | None
        if (resource.resource_type, resource.resource_name) in repeated:
            code, message = ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
        elif resource.resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
            code, message = await incremental_alter_broker(ctx, resource, request.validate_only)
        else:
            code, message = await _alter(ctx, resource, request.validate_only)
        responses.append(_Result(error_code=code, error_message=message,
                                 resource_type=resource.resource_type, resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _preprocess(ops: list[IncrementalAlterConfigsRequest.AlterableConfig]) -> None:
    """Kafka's ``ConfigAdminManager.preprocess``, before any authorization: a name given twice,
    then every null value but a DELETE's."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise _RequestError("Error due to duplicate config keys")
    nulls = [op.name for op in ops if op.config_operation != OpType.DELETE and op.value is None]
    if nulls:
        raise _RequestError(f"Null value not supported for : {', '.join(nulls)}")


def _apply(current: dict[str, str], ops: list[IncrementalAlterConfigsRequest.AlterableConfig], defaults: dict[str, str]) -> dict[str, str]:
    """``current`` with ``ops`` applied in order (Kafka's ``prepareIncrementalConfigs``); unknown
    names of SET and DELETE are left to the validation of the result."""
    updated = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        definition = TOPIC_CONFIGS.get(name)
        if kind == OpType.SET:
            assert value is not None  # _preprocess refused a null value to set
            updated[name] = value
        elif kind == OpType.DELETE:
            updated.pop(name, None)
        elif kind in (OpType.APPEND, OpType.SUBTRACT):
            if definition is None:
                raise _ServerError
            if definition.type != "LIST":
                verb = "append" if kind == OpType.APPEND else "subtract"
                raise InvalidTopicConfigError(f"Config value {verb} is not allowed for config key: {name}")
            items = parse_list(updated.get(name, defaults[name]))
            change = parse_list(value or "")
            if kind == OpType.APPEND:
                items += [item for item in change if item not in items]
            else:
                items = [item for item in items if item not in change]
            updated[name] = ",".join(items)
        else:
            raise _ServerError
    return updated


async def _alter(
    ctx: RequestContext, resource: IncrementalAlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    broker = ctx.services
    kind, name = resource.resource_type, resource.resource_name
    try:
        _preprocess(resource.configs)
    except _RequestError as e:
        return ErrorCode.INVALID_REQUEST, str(e)
    refused = config_authorization_error(ctx, AclOperation.ALTER_CONFIGS, resource)
    if refused is not None:
        return refused, None
    if kind != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}"
    if not name:
        return ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
    defaults = {n: ",".join(v) if isinstance(v := broker.config.topic_default(n), list) else str(v) for n in TOPIC_CONFIGS}
    stored = await broker.admin_manager.read_topic_configs(name)
    try:
        # Kafka applies the operations before it looks the topic up.
        applied = _apply(stored, resource.configs, defaults)
        if broker.metadata_cache.topic(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown_topic_message(name)
        updated = validate_topic_configs(applied)
    except _ServerError:
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    except ConfigError as e:
        return ErrorCode.INVALID_CONFIG, topic_config_error_message(name, e)
    if not validate_only:
        await broker.admin_manager.set_topic_configs(name, updated)
    return ErrorCode.NONE, None


def error_response(
    request: IncrementalAlterConfigsRequest, version: int, error: ErrorCode
) -> IncrementalAlterConfigsResponse:
    """Kafka's getErrorResponse: ``error`` for every resource."""
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name)
        for resource in request.resources
    ])
