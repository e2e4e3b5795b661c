"""The typed stub of the generated message classes: ``messages.pyi``, written from the specs.

``messages.py`` builds its classes at import time, so a type checker cannot see them; this module
writes what it builds as a stub: per message a class with its fields (every version's), their
types, and a keyword-only constructor; nested structs as classes inside it, as
``ProduceResponse.PartitionProduceResponse`` is at run time. Types follow the codec: integers are
``int``, ``string`` is ``str``, ``bytes`` is ``bytes``, ``uuid`` is ``uuid.UUID``, ``records`` is
what the codec decodes (a ``memoryview``) or encodes (also ``bytes`` or a ``LogRegion``), and a
field nullable in any version may be None.

``python -m pybroker.protocol.stubgen`` rewrites the committed stub;
``tests/unit/test_message_stub.py`` fails while it differs from what this module writes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pybroker.protocol.schema import Field, Message, Struct
from pybroker.protocol.specs import REQUESTS, RESPONSES

STUB = Path(__file__).with_name("messages.pyi")

_PRIMITIVE_TYPES = {
    "int8": "int", "int16": "int", "uint16": "int", "int32": "int", "int64": "int",
    "float64": "float", "bool": "bool", "string": "str", "bytes": "bytes", "uuid": "uuid.UUID",
    "records": "Records",
}

_HEADER = '''"""Typed stub of ``pybroker.protocol.messages``, written by ``python -m pybroker.protocol.stubgen``
from the specs; do not edit."""

import uuid
from typing import Any, TypeAlias

from pybroker._native import LogRegion
from pybroker.protocol.schema import Message

__all__: list[str]

#: a ``records`` field: decoded as a view of the frame, encoded from bytes or a log region
Records: TypeAlias = memoryview | bytes | bytearray | LogRegion

REQUEST_CLASSES: dict[int, type[Any]]
RESPONSE_CLASSES: dict[int, type[Any]]

def build_classes(msg: Message) -> type: ...

class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    def __init__(
        self, *, api_key: int = ..., api_version: int = ..., correlation_id: int = ...,
        client_id: str | None = ..., header_version: int = ...,
    ) -> None: ...
'''


def _field_type(f: Field, owner: str) -> str:
    if f.struct is not None:
        inner = f"{owner}.{f.struct.name}"
    else:
        inner = _PRIMITIVE_TYPES[f.element_type]
    text = f"list[{inner}]" if f.is_array else inner
    return f"{text} | None" if not f.nullable_versions.empty else text


def _class(struct: Struct, name: str, owner: str, indent: str, nested: Sequence[tuple[str, Struct]] = ()) -> list[str]:
    lines = [f"{indent}class {name}:"]
    inner = indent + "    "
    for nested_name, nested_struct in nested:
        lines += _class(nested_struct, nested_name, owner, inner)
    for f in struct.fields:
        lines.append(f"{inner}{f.name}: {_field_type(f, owner)}")
    params = ", ".join(f"{f.name}: {_field_type(f, owner)} = ..." for f in struct.fields)
    lines.append(f"{inner}def __init__(self, *, {params}) -> None: ..." if params
                 else f"{inner}def __init__(self) -> None: ...")
    return lines


def _message(msg: Message) -> list[str]:
    return ["", *_class(msg.struct, msg.name, msg.name, "", sorted(msg.structs().items()))]


def render() -> str:
    """The stub's text."""
    lines = [_HEADER.rstrip("\n")]
    for messages in (REQUESTS, RESPONSES):
        for key in sorted(messages):
            lines += _message(messages[key])
    return "\n".join(lines) + "\n"


def main() -> int:
    STUB.write_text(render())
    print(f"wrote {STUB}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
