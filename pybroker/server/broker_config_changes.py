"""The BROKER and BROKER_LOGGER parts of AlterConfigs (33) and IncrementalAlterConfigs (44)
(the handlers in ``pybroker/server/apis/`` call these).

Owns Kafka's ``ConfigAdminManager`` preprocessing of those resources and ``ZkAdminManager``'s
storing of dynamic broker configs, in Kafka's order: the request's own checks (duplicate keys,
null values), the resource name (this broker's id, or "" for the cluster-wide defaults of a
BROKER resource), the change checked as ``DynamicBrokerConfig.validate`` checks it (refusals are
INVALID_REQUEST with Kafka's message, before authorization, as in Kafka 3.6), then ALTER_CONFIGS
on the cluster (CLUSTER_AUTHORIZATION_FAILED), then the whole new map stored in
``/config/brokers/<id>`` or ``/config/brokers/<default>`` (every broker applies it from the
notification). A BROKER_LOGGER change is authorized first, checked, and applied to this
broker's loggers only (never stored). ``validate_only`` stops before anything changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pybroker.common.config import parse_list
from pybroker.common.errors import ErrorCode
from pybroker.controller.store import DEFAULT_ENTITY
from pybroker.protocol.messages import AlterConfigsRequest, IncrementalAlterConfigsRequest
from pybroker.security.authorizer import AclOperation
from pybroker.server import broker_loggers
from pybroker.server.config import BROKER_CONFIGS
from pybroker.server.config_describer import ResourceType
from pybroker.server.dynamic_broker_config import DynamicConfigError
from pybroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

Outcome = tuple[ErrorCode, "str | None"]
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error, self.message = error, message


def _check_node_id(ctx: RequestContext, name: str) -> None:
    """Kafka's ``validateResourceNameIsCurrentNodeId``: a broker resource goes to that broker."""
    try:
        node_id = int(name)
    except ValueError:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node_id != ctx.services.node_id:
        raise _Refused(ErrorCode.INVALID_REQUEST,
                       f"Unexpected broker id, expected {ctx.services.node_id}, but received {name}")


def _check_keys(names: Sequence[str], null_names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    if null_names:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_names)}")


def _validate(ctx: RequestContext, props: Mapping[str, str], per_broker: bool) -> None:
    try:
        ctx.services.dynamic_config.validate(props, per_broker)
    except DynamicConfigError as e:
        raise _Refused(ErrorCode.INVALID_REQUEST, str(e)) from None


async def _store(ctx: RequestContext, name: str, props: Mapping[str, str]) -> None:
    shown = ",".join(f"{k} -> {'[hidden]' if k in BROKER_CONFIGS and BROKER_CONFIGS[k].type == 'PASSWORD' else v}"
                     for k, v in props.items())
    if name:
        log.info("Updating broker %s with new configuration : %s", name, shown)
    else:
        log.info("Updating brokers with new configuration : %s", shown)
    await ctx.services.admin_manager.set_broker_configs(name or DEFAULT_ENTITY, props)


def _authorized(ctx: RequestContext) -> None:
    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        raise _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)


async def alter_broker(
    ctx: RequestContext, resource: AlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> Outcome:
    """Legacy AlterConfigs of a BROKER resource: its whole dynamic config map replaced (a
    BROKER_LOGGER resource is refused, as Kafka refuses it on this API)."""
    kind, name = resource.resource_type, resource.resource_name
    configs = list(resource.configs)
    try:
        _check_keys([c.name for c in configs], [c.name for c in configs if c.value is None])
        if kind != ResourceType.BROKER:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown resource type {kind}")
        if name:
            _check_node_id(ctx, name)
        props = {c.name: c.value for c in configs if c.value is not None}  # _check_keys refused nulls
        _validate(ctx, props, bool(name))
        _authorized(ctx)
        if not validate_only:
            await _store(ctx, name, props)
    except _Refused as e:
        return e.error, e.message
    return ErrorCode.NONE, None


def _incremental_props(
    current: dict[str, str], ops: Sequence[IncrementalAlterConfigsRequest.AlterableConfig]
) -> dict[str, str]:
    """Kafka's ``prepareIncrementalConfigs`` over a broker's stored map."""
    props = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        if kind == SET:
            assert value is not None  # _check_keys refused a null value to set
            props[name] = value
        elif kind == DELETE:
            props.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
            if definition.type != "LIST":
                verb = "append" if kind == APPEND else "subtract"
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
            old = parse_list(props[name]) if name in props else list(definition.default or [])
            change = (value or "").split(",")
            items = old + [v for v in change if v not in old] if kind == APPEND else [v for v in old if v not in change]
            props[name] = ",".join(items)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown operations type {kind}")
    return props


async def incremental_alter_broker(
    ctx: RequestContext, resource: IncrementalAlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> Outcome:
    """IncrementalAlterConfigs of a BROKER resource (its stored map changed op by op) or a
    BROKER_LOGGER resource (this broker's logger levels)."""
    kind, name = resource.resource_type, resource.resource_name
    ops = list(resource.configs)
    try:
        _check_keys([op.name for op in ops], [op.name for op in ops if op.config_operation != DELETE and op.value is None])
        if kind == ResourceType.BROKER_LOGGER:
            if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
                raise _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message)
            _check_node_id(ctx, name)
            for op in ops:
                try:
                    broker_loggers.validate(op.config_operation, op.name, op.value)
                except broker_loggers.LoggerError as e:
                    code = ErrorCode.INVALID_REQUEST if e.invalid_request else ErrorCode.INVALID_CONFIG
                    raise _Refused(code, str(e)) from None
            if not validate_only:
                for op in ops:
                    broker_loggers.apply(op.config_operation, op.name, op.value)
            return ErrorCode.NONE, None
        if name:
            _check_node_id(ctx, name)
        entity = name or DEFAULT_ENTITY
        stored = await ctx.services.admin_manager.read_broker_configs(entity)
        current = ctx.services.dynamic_config.from_persistent(stored, bool(name))
        props = _incremental_props(current, ops)
        _validate(ctx, props, bool(name))
        _authorized(ctx)
        if not validate_only:
            await _store(ctx, name, props)
    except _Refused as e:
        return e.error, e.message
    return ErrorCode.NONE, None
