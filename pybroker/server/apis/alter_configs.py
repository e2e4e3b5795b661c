"""AlterConfigs (33): replace a topic's whole set of config overrides, or a broker's (its id) or the
cluster's ("") whole set of dynamic broker configs (the legacy, non-incremental API).

Authorization: a BROKER resource needs ALTER_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED, after Kafka's checks of the change itself: see
``pybroker/server/broker_config_changes.py``), a TOPIC ALTER_CONFIGS on the topic (else
TOPIC_AUTHORIZATION_FAILED, before the existence check); the error message is null, as in Kafka.
BROKER_LOGGER is refused (INVALID_REQUEST), as Kafka refuses it on this API. A topic's refusals
carry ZooKeeper-mode Kafka's texts: "The topic 't' does not exist.", and a value Kafka's
``ConfigDef`` refuses after "Invalid config value for resource ConfigResource(type=TOPIC,
name='t'): " (`topic_config_error_message`; IncrementalAlterConfigs uses the same).
"""

from __future__ import annotations

from collections.abc import Sequence

from pybroker.common.config import ConfigError
from pybroker.common.errors import ErrorCode
from pybroker.log.config import InvalidTopicConfigError, validate_topic_configs
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from pybroker.security.authorizer import AclOperation
from pybroker.security.authorizer import ResourceType as AclResource
from pybroker.server.apis.describe_configs import ConfigResource, config_authorization_error
from pybroker.server.broker_config_changes import alter_broker
from pybroker.server.config_describer import ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)
AUTHORIZES = frozenset({(AclOperation.ALTER_CONFIGS, AclResource.CLUSTER), (AclOperation.ALTER_CONFIGS, AclResource.TOPIC)})

_Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    repeated = repeated_resources(request.resources)
    for resource in request.resources:
        code: ErrorCode
        message: str | None
        if (resource.resource_type, resource.resource_name) in repeated:
            code, message = ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
        elif resource.resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
            code, message = await alter_broker(ctx, resource, request.validate_only)
        else:
            code, message = await _alter(ctx, resource, {c.name: c.value for c in resource.configs},
                                         request.validate_only)
        responses.append(_Result(error_code=code, error_message=message,
                                 resource_type=resource.resource_type, resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _alter(ctx: RequestContext, resource: AlterConfigsRequest.AlterConfigsResource, configs: dict[str, str | None], validate_only: bool) -> tuple[ErrorCode, str | None]:
    broker = ctx.services
    kind, name = resource.resource_type, resource.resource_name
    refused = config_authorization_error(ctx, AclOperation.ALTER_CONFIGS, resource)
    if refused is not None:
        return refused, None
    if kind != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}"
    if broker.metadata_cache.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown_topic_message(name)
    try:
        checked = validate_topic_configs(configs)
    except ConfigError as e:
        return ErrorCode.INVALID_CONFIG, topic_config_error_message(name, e)
    if not validate_only:
        await broker.admin_manager.set_topic_configs(name, checked)
    return ErrorCode.NONE, None


def unknown_topic_message(name: str) -> str:
    """ZooKeeper-mode Kafka's message when the topic of an alter does not exist."""
    return f"The topic '{name}' does not exist."


def topic_config_error_message(topic: str, error: ConfigError) -> str:
    """How ZooKeeper-mode Kafka reports a refused topic config change: an unknown name as it
    is, a bad value (a ConfigException) after the resource it was for."""
    if isinstance(error, InvalidTopicConfigError):
        return str(error)
    return f"Invalid config value for resource ConfigResource(type=TOPIC, name='{topic}'): {error}"


def repeated_resources(resources: Sequence[ConfigResource]) -> set[tuple[int, str]]:
    """The (type, name) pairs named more than once in a request (Kafka refuses each copy)."""
    seen: set[tuple[int, str]] = set()
    repeated: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (repeated if key in seen else seen).add(key)
    return repeated


def error_response(request: AlterConfigsRequest, version: int, error: ErrorCode) -> AlterConfigsResponse:
    """Kafka's getErrorResponse: ``error`` for every resource."""
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name)
        for resource in request.resources
    ])
