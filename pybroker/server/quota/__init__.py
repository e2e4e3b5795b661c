"""Client quotas and replication throttles (Kafka's ``QuotaFactory`` and its managers).

One module per concern:

- `rate`: Kafka's windowed ``Rate`` / ``SimpleRate`` (``quota.window.num`` samples of
  ``quota.window.size.seconds``) on an injected clock, and the throttle-time formula.
- `client_quota_manager`: ``ClientQuotaManager`` (produce and fetch byte rates, request
  percentage): the (user, client-id) quota entities with their precedence, a rate per resolved
  entity, and the throttle time of a request.
- `entities`: quota entity names as stored (``/config/users/<user>/clients/<id>``...), the quota
  config keys, and their validation (what AlterClientQuotas and ``pybroker configs`` check).
- `replication_quota_manager`: ``ReplicationQuotaManager`` (leader and follower replication
  throttles for the replicas a topic lists as throttled).
- `quota_managers`: `QuotaManagers`, the broker's set of managers, fed by the store's config
  handlers and the dynamic broker configs.
- `throttling`: what the request dispatcher asks after each request: record, compute
  ``throttle_time_ms``, and mute the connection (KIP-219).
"""
