"""The message classes: one generated ``__slots__`` class per request, response and nested struct.

Every top-level class is a module attribute named after Kafka's message (``ProduceRequest``,
``FetchResponse``); nested struct classes hang off their top-level class under Kafka's struct name
(``ProduceResponse.PartitionProduceResponse``). A class carries the fields of *all* versions of its
spec; the codec fills the ones a version lacks with their defaults.

Constructors take keyword arguments only, each defaulting to the spec's default; list and struct
defaults are fresh objects per instance. Instances compare with ``==`` field by field and have a
readable ``repr``. ``REQUEST_CLASSES`` / ``RESPONSE_CLASSES`` map API key → class.

This module also defines `RequestHeader` (hand-written: the codec decodes headers by hand).
"""

from __future__ import annotations

from typing import Any

from pybroker.protocol.schema import Field, Message, Struct
from pybroker.protocol.specs import REQUESTS, RESPONSES

__all__ = ["RequestHeader", "REQUEST_CLASSES", "RESPONSE_CLASSES", "build_classes"]


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _value_repr(value: object) -> str:
    if isinstance(value, memoryview):
        return f"<{value.nbytes} bytes>"
    if isinstance(value, bytes | bytearray) and len(value) > 64:
        return f"<{len(value)} bytes>"
    return repr(value)


def _repr(self: Any) -> str:
    parts = ", ".join(f"{name}={_value_repr(getattr(self, name))}" for name in self.__slots__)
    return f"{type(self).__qualname__}({parts})"


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    for name in self.__slots__:
        if getattr(self, name) != getattr(other, name):
            return False
    return True


def _make_class(
    struct: Struct, qualname: str, namespace: dict[str, Any], class_names: dict[str, str],
    extra: dict[str, Any] | None = None,
) -> type:
    """Build the class for one struct. ``namespace`` holds the other classes (for struct defaults)."""
    fields: tuple[Field, ...] = struct.fields
    params: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        if f.struct is not None and not f.is_array:
            cls_ref = class_names[f.struct.name]
            params.append(f"{f.name}=_UNSET")
            body.append(f"    self.{f.name} = {cls_ref}() if {f.name} is _UNSET else {f.name}")
        elif isinstance(f.default, list):
            params.append(f"{f.name}=_UNSET")
            body.append(f"    self.{f.name} = [] if {f.name} is _UNSET else {f.name}")
        else:
            const = f"_d{i}"
            namespace_key = f"_{qualname.replace('.', '_')}{const}"
            namespace[namespace_key] = f.default
            params.append(f"{f.name}={namespace_key}")
            body.append(f"    self.{f.name} = {f.name}")
    if params:
        src = "def __init__(self, *, " + ", ".join(params) + "):\n" + "\n".join(body) + "\n"
    else:
        src = "def __init__(self):\n    pass\n"
    local: dict[str, Any] = {}
    exec(compile(src, f"<pybroker.protocol.messages {qualname}>", "exec"), namespace, local)
    init = local["__init__"]
    init.__qualname__ = f"{qualname}.__init__"
    name = qualname.rsplit(".", 1)[-1]
    cls = type(
        name,
        (),
        {
            "__slots__": tuple(f.name for f in fields),
            "__init__": init,
            "__repr__": _repr,
            "__eq__": _eq,
            "__hash__": None,
            "__module__": __name__,
            "__qualname__": qualname,
            "__doc__": f"Kafka {qualname} (fields of every version; generated from its spec).",
            "_spec": struct,
            **(extra or {}),
        },
    )
    return cls


def build_classes(msg: Message) -> type:
    """Build the top-level class of ``msg`` with its nested struct classes as attributes."""
    namespace: dict[str, Any] = {"_UNSET": _UNSET}
    structs = msg.structs()
    class_names = {name: f"_C_{name}" for name in structs}
    nested: dict[str, type] = {}
    for name, st in structs.items():
        cls = _make_class(st, f"{msg.name}.{name}", namespace, class_names)
        namespace[class_names[name]] = cls
        nested[name] = cls
    # The nested classes are attributes of the top one (``ProduceResponse.PartitionProduceResponse``),
    # and ``_structs`` names them all.
    return _make_class(msg.struct, msg.name, namespace, class_names,
                       {"_message": msg, "_structs": nested, **nested})


class RequestHeader:
    """A request header (v0-v2): who is asking for what, and the id to echo in the response."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version")

    def __init__(
        self,
        *,
        api_key: int = 0,
        api_version: int = 0,
        correlation_id: int = 0,
        client_id: str | None = None,
        header_version: int = 1,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version

    __repr__ = _repr
    __eq__ = _eq
    __hash__ = None  # type: ignore[assignment]


REQUEST_CLASSES: dict[int, type] = {}
RESPONSE_CLASSES: dict[int, type] = {}

for _key, _msg in REQUESTS.items():
    REQUEST_CLASSES[_key] = globals()[_msg.name] = build_classes(_msg)
    __all__.append(_msg.name)
for _key, _msg in RESPONSES.items():
    RESPONSE_CLASSES[_key] = globals()[_msg.name] = build_classes(_msg)
    __all__.append(_msg.name)
del _key, _msg

