"""DescribeConfigs (32): topic configs (overrides over broker defaults), this broker's configs (its
id: every config with Kafka's sources and synonyms), the cluster-wide dynamic defaults (""), and
this broker's loggers (BROKER_LOGGER, its id). Another broker's id is refused with Kafka's
INVALID_REQUEST: clients send a broker resource to that broker.

Authorization (Kafka's ``handleDescribeConfigsRequest``): a BROKER or BROKER_LOGGER resource needs
DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED), a TOPIC DESCRIBE_CONFIGS on
the topic (else TOPIC_AUTHORIZATION_FAILED, before the existence check); refused resources carry
the error's default message and no configs, and come after the described ones, as in Kafka.

A topic's overrides are read from the store (ZooKeeper), not from this broker's notified copy, so
a describe through any broker sees an alter through another at once, as in Kafka.
"""

from __future__ import annotations

from typing import Protocol

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from pybroker.security.authorizer import AclOperation
from pybroker.security.authorizer import ResourceType as AclResource
from pybroker.server import config_describer
from pybroker.server.config_describer import ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (0, 4)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE_CONFIGS, AclResource.CLUSTER), (AclOperation.DESCRIBE_CONFIGS, AclResource.TOPIC)})

_Result = DescribeConfigsResponse.DescribeConfigsResult


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    refused = [(resource, error) for resource in request.resources
               if (error := config_authorization_error(ctx, AclOperation.DESCRIBE_CONFIGS, resource)) is not None]
    denied = {id(resource) for resource, _ in refused}
    results = [await _describe(ctx, request, resource) for resource in request.resources if id(resource) not in denied]
    results += [_Result(error_code=error, error_message=error.message, resource_type=resource.resource_type,
                        resource_name=resource.resource_name, configs=[])
                for resource, error in refused]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


class ConfigResource(Protocol):
    """A resource of a DescribeConfigs, AlterConfigs or IncrementalAlterConfigs request."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


def config_authorization_error(ctx: RequestContext, operation: AclOperation, resource: ConfigResource) -> ErrorCode | None:
    """The error for a config resource ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) is refused
    on: a broker's or broker logger's needs it on the cluster, a topic's on the topic; None when
    allowed (or for another resource type, which the handler answers itself)."""
    kind, name = resource.resource_type, resource.resource_name
    if kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        return None if ctx.authorize_cluster(operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if kind == ResourceType.TOPIC:
        return None if ctx.authorize(operation, AclResource.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


async def _describe(
    ctx: RequestContext, request: DescribeConfigsRequest, resource: DescribeConfigsRequest.DescribeConfigsResource
) -> _Result:
    broker = ctx.services
    kind, name = resource.resource_type, resource.resource_name
    # Kafka's ConfigHelper: a null or an empty key list both mean every config.
    keys = resource.configuration_keys or None

    def error(code: ErrorCode, message: str) -> _Result:
        return _Result(error_code=code, error_message=message, resource_type=kind, resource_name=name, configs=[])

    if kind == ResourceType.TOPIC:
        if broker.metadata_cache.topic(name) is None:
            return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")  # Kafka's ConfigHelper sets no message
        # Read from the store, as ZooKeeper-mode Kafka reads ZooKeeper: an alter through another
        # broker is seen at once, not when its change notification arrives here.
        overrides = await broker.admin_manager.read_topic_configs(name)
        entries = config_describer.describe_topic(broker, name, keys, overrides)
    elif kind == ResourceType.BROKER:
        # "" names the cluster-wide dynamic defaults (only those set there are answered).
        if not name:
            entries = config_describer.describe_broker_defaults(broker, keys)
        elif not _is_int(name):
            return error(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        elif int(name) != broker.node_id:
            return error(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}")
        else:
            entries = config_describer.describe_broker(broker, keys)
    elif kind == ResourceType.BROKER_LOGGER:
        if not name:
            return error(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if not _is_int(name):
            return error(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        if int(name) != broker.node_id:
            return error(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} but received {name}")
        entries = config_describer.describe_broker_loggers(keys)
    else:
        return error(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")
    include_synonyms = request.include_synonyms
    include_docs = ctx.api_version >= 3 and request.include_documentation
    configs = [
        DescribeConfigsResponse.DescribeConfigsResourceResult(
            name=e.name,
            value=e.value,
            read_only=e.read_only,
            config_source=e.source,
            is_sensitive=e.is_sensitive,
            synonyms=[
                DescribeConfigsResponse.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms
            ] if include_synonyms else [],
            config_type=e.type,  # BROKER_LOGGER entries: 0 (UNKNOWN), as Kafka leaves it
            documentation=(e.documentation or None) if include_docs else None,
        )
        for e in entries
    ]
    # Kafka's generated DescribeConfigsResult starts with an empty message, and success sets none.
    return _Result(error_code=ErrorCode.NONE, error_message="", resource_type=kind, resource_name=name, configs=configs)


def _is_int(name: str) -> bool:
    """Java's ``Integer.parseInt`` accepts it (a sign, then digits)."""
    return name.lstrip("+-").isdigit() and -(2**31) <= int(name) < 2**31


def error_response(request: DescribeConfigsRequest, version: int, error: ErrorCode) -> DescribeConfigsResponse:
    """Kafka's getErrorResponse: ``error`` for every resource, no configs."""
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        _Result(error_code=error, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name, configs=[])
        for resource in request.resources
    ])
