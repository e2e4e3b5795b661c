"""The Kafka wire protocol: API keys, error codes, message specs, generated classes and the codec.

- `api_keys.ApiKey`, `errors.ErrorCode`: Kafka's numbering.
- `schema`: the spec DSL; `specs/`: one spec module per API (request + response).
- `messages`: the generated message classes (``messages.ProduceRequest``, ...).
- `codec`: frames ⇄ message objects (``decode_request_header``, ``decode_request``,
  ``encode_response``, ``encode_request``, ``decode_response``, ...).

This package does no I/O and imports nothing from the layers above it.
"""
