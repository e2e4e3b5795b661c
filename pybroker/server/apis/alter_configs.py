"""AlterConfigs (33): replace a topic's whole set of config overrides (the legacy, non-incremental API)."""

from __future__ import annotations

from pybroker.log.config import ConfigError, validate_topic_configs
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from pybroker.server.config_describer import ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)

_Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        code, message = await _alter(ctx, resource, {c.name: c.value for c in resource.configs}, request.validate_only)
        responses.append(_Result(error_code=code, error_message=message,
                                 resource_type=resource.resource_type, resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _alter(ctx: RequestContext, resource: object, configs: dict[str, str | None], validate_only: bool) -> tuple[ErrorCode, str | None]:
    broker = ctx.broker
    kind, name = resource.resource_type, resource.resource_name  # type: ignore[attr-defined]
    if kind == ResourceType.BROKER:
        return ErrorCode.INVALID_REQUEST, "pybroker has no dynamic broker configs; set them in server.properties"
    if kind != ResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}"
    if broker.metadata_cache.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
    try:
        checked = validate_topic_configs(configs)
    except ConfigError as e:
        return ErrorCode.INVALID_CONFIG, str(e)
    if not validate_only:
        await broker.admin_manager.set_topic_configs(name, checked)
    return ErrorCode.NONE, None


def error_response(request: AlterConfigsRequest, version: int, error: ErrorCode) -> AlterConfigsResponse:
    """Kafka's getErrorResponse: ``error`` for every resource."""
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name)
        for resource in request.resources
    ])
