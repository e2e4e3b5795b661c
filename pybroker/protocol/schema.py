"""The message-spec DSL: how `specs/` describes a Kafka request or response.

A spec is plain data. `field(...)` declares one field by its Kafka name (``PartitionIndex``), its
type, the versions it exists in, and optionally the versions it may be null in, the versions it is
a tagged field in (and its tag), its default, whether it is ignorable and whether it is a map key.
Struct-typed fields
(``"[]TopicProduceData"`` or ``"LeaderIdAndEpoch"``) carry their own nested ``fields=[...]``.
`request(...)` / `response(...)` wrap a field list into a `Message` with its API key, the versions
this broker supports and the versions that use the flexible (compact + tagged) encoding.

The codec (`codec.py`) and the class builder (`messages.py`) read these objects; nothing here does
any encoding. ``ignorable`` has Kafka's meaning: a request may silently drop the field at a
version that lacks it; for a non-ignorable field the codec refuses to encode a request whose value
is not the default at such a version (responses always drop absent fields). ``map_key`` is Kafka's
``mapKey``: the field is (part of) the key by which Kafka's generated Java indexes the elements of
the array the struct is in. It changes nothing on the wire; it is recorded so a spec states
everything Kafka's definition does (and `tests/tools/check_specs.py` compares it).

Type names: ``int8 int16 int32 int64 uint16 float64 bool string bytes records uuid``, ``[]T`` for
an array of any of those (except records) or of a struct, and a capitalised name for a struct.
Version ranges are written like Kafka's: ``"3+"``, ``"0-7"``, ``"5"``, ``"none"``.
"""

from __future__ import annotations

import keyword
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from pybroker.types import ZERO_UUID

__all__ = [
    "PRIMITIVES",
    "FIXED_WIDTH",
    "VersionRange",
    "Field",
    "Struct",
    "Message",
    "field",
    "request",
    "response",
    "snake_case",
    "NO_DEFAULT",
    "PRIVATE_TAG_START",
    "struct",
]

#: every primitive type name the DSL accepts
PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "float64",
        "bool",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

#: fixed-width primitives and their `struct` format character (big endian, as Kafka writes)
FIXED_WIDTH = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
    "bool": "?",
}



class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: marker for "the spec gave no default": the type's natural default applies
NO_DEFAULT: Any = _NoDefault()

# Tags this project gives its own tagged fields: far above Kafka's, which it allocates from 0 up
# in each struct, so that a later official tag cannot collide (research: kip-semantics §5.2).
PRIVATE_TAG_START = 10000


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``hi`` is None for open-ended (``"3+"``); empty if lo > hi."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | int | None) -> VersionRange:
        """Parse Kafka's notation: ``"3+"``, ``"0-7"``, ``"5"`` or ``"none"``/None (empty)."""
        if text is None:
            return NONE
        if isinstance(text, int):
            return cls(text, text)
        text = text.strip()
        if text == "none":
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return version >= self.lo and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def intersect(self, other: VersionRange) -> VersionRange:
        lo = max(self.lo, other.lo)
        if self.hi is None:
            hi = other.hi
        elif other.hi is None:
            hi = self.hi
        else:
            hi = min(self.hi, other.hi)
        return VersionRange(lo, hi)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NONE = VersionRange(1, 0)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """Kafka field name to Python attribute: PartitionIndex → partition_index, TopicID → topic_id."""
    out = _CAMEL_BOUNDARY.sub("_", name).lower()
    if keyword.iskeyword(out):
        out += "_"
    return out


@dataclass(eq=False)
class Struct:
    """A named group of fields: a message body or a nested struct (Kafka's struct name)."""

    name: str
    fields: tuple[Field, ...]
    versions: VersionRange = dc_field(default_factory=lambda: VersionRange(0, None))

    def field_named(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


@dataclass(eq=False)
class Field:
    """One field of a struct. ``name`` is the snake_case attribute; ``kafka_name`` Kafka's name."""

    kafka_name: str
    name: str
    type: str
    versions: VersionRange
    nullable_versions: VersionRange
    tagged_versions: VersionRange
    tag: int | None
    default: Any
    ignorable: bool
    struct: Struct | None = None
    map_key: bool = False
    extension: str | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """For ``[]T`` the element type T; otherwise the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for a struct-typed field and for an array of structs."""
        return self.struct is not None

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged_in(self, version: int) -> bool:
        return version in self.tagged_versions


@dataclass(eq=False)
class Message:
    """A request or response spec: API key, supported and flexible versions, and its body struct."""

    api_key: int
    name: str  # e.g. "ProduceRequest"
    kind: str  # "request" or "response"
    valid_versions: VersionRange
    flexible_versions: VersionRange
    struct: Struct

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.struct.fields

    @property
    def min_version(self) -> int:
        return self.valid_versions.lo

    @property
    def max_version(self) -> int:
        assert self.valid_versions.hi is not None
        return self.valid_versions.hi

    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions

    def structs(self) -> dict[str, Struct]:
        """Every nested struct by its Kafka name (the body struct itself is not included)."""
        found: dict[str, Struct] = {}

        def walk(s: Struct) -> None:
            for f in s.fields:
                if f.struct is not None:
                    prior = found.get(f.struct.name)
                    if prior is None:
                        found[f.struct.name] = f.struct
                        walk(f.struct)
                    elif prior is not f.struct and _shape(prior) != _shape(f.struct):
                        raise ValueError(f"{self.name}: two different structs named {f.struct.name}")

        walk(self.struct)
        return found


def _shape(s: Struct) -> tuple:
    return tuple((f.name, f.type, str(f.versions)) for f in s.fields)


def _natural_default(type_name: str, nullable: VersionRange) -> Any:
    if type_name.startswith("[]"):
        return []
    if type_name in ("int8", "int16", "int32", "int64", "uint16"):
        return 0
    if type_name == "float64":
        return 0.0
    if type_name == "bool":
        return False
    if type_name == "string":
        return ""
    if type_name == "bytes":
        return b""
    if type_name == "records":
        return None
    if type_name == "uuid":
        return ZERO_UUID
    return None  # struct: the builder makes a fresh instance


def _check_default(name: str, type_name: str, default: Any, nullable: VersionRange) -> Any:
    if default is None:
        if nullable.empty and type_name != "records":
            raise ValueError(f"field {name}: default null but never nullable")
        return None
    if type_name.startswith("[]"):
        if default != []:
            raise ValueError(f"field {name}: an array default can only be [] or None")
        return []
    if type_name in ("int8", "int16", "int32", "int64", "uint16"):
        if not isinstance(default, int) or isinstance(default, bool):
            raise ValueError(f"field {name}: default {default!r} is not an int")
        return default
    if type_name == "float64":
        return float(default)
    if type_name == "bool":
        if not isinstance(default, bool):
            raise ValueError(f"field {name}: default {default!r} is not a bool")
        return default
    if type_name == "string":
        if not isinstance(default, str):
            raise ValueError(f"field {name}: default {default!r} is not a str")
        return default
    if type_name == "uuid":
        return uuid.UUID(str(default))
    raise ValueError(f"field {name}: type {type_name} takes no explicit default")


def field(
    kafka_name: str,
    type: str,
    versions: str | int = "0+",
    *,
    nullable: str | int | None = None,
    tagged: str | int | None = None,
    tag: int | None = None,
    default: Any = NO_DEFAULT,
    ignorable: bool = False,
    fields: Sequence[Field] | None = None,
    struct: Struct | None = None,
    map_key: bool = False,
    extension: str | None = None,
) -> Field:
    """Declare one field.

    ``kafka_name``: Kafka's CamelCase name (the attribute is its snake_case form).
    ``type``: a primitive, ``[]T``, or a struct name; struct types need ``fields`` (or ``struct``,
    to reuse a struct declared elsewhere, like Kafka's common structs).
    ``versions``/``nullable``/``tagged``: version ranges; ``tag`` is required when ``tagged`` is set.
    ``default``: Kafka's default (omitted: 0, False, "", b"", zero UUID, [], None for records).
    ``map_key``: Kafka's ``mapKey`` (no wire effect); only for primitive, non-array fields.
    ``extension``: this project's addition to Kafka's message (the KIP it implements, such as
    ``"KIP-253"``); it must be a tagged field with a tag from `PRIVATE_TAG_START` on, which a
    Kafka peer skips as an unknown tag, and is absent from the wire while at its default.
    """
    vers = VersionRange.parse(versions)
    null = VersionRange.parse(nullable)
    tagv = VersionRange.parse(tagged)
    if (tag is None) != tagv.empty:
        raise ValueError(f"field {kafka_name}: tag and tagged versions go together")
    if extension is not None and (tag is None or tag < PRIVATE_TAG_START):
        raise ValueError(f"field {kafka_name}: an extension needs a tag from {PRIVATE_TAG_START} on")
    elem = type[2:] if type.startswith("[]") else type
    if map_key and (type.startswith("[]") or elem not in PRIMITIVES or type == "records"):
        raise ValueError(f"field {kafka_name}: a map key must be a primitive, not {type}")
    st: Struct | None = None
    if elem in PRIMITIVES:
        if fields is not None or struct is not None:
            raise ValueError(f"field {kafka_name}: primitive type {type} has no fields")
        if type == "[]records":
            raise ValueError(f"field {kafka_name}: arrays of records are not a Kafka type")
    else:
        if not elem[:1].isupper():
            raise ValueError(f"field {kafka_name}: unknown type {type}")
        if struct is not None:
            if fields is not None or struct.name != elem:
                raise ValueError(f"field {kafka_name}: struct {struct.name} does not match {type}")
            st = struct
        else:
            if fields is None:
                raise ValueError(f"field {kafka_name}: struct type {type} needs fields")
            st = Struct(elem, tuple(fields), vers)
        if not type.startswith("[]") and not null.empty:
            raise ValueError(f"field {kafka_name}: nullable struct fields are not supported")
    if default is NO_DEFAULT:
        dflt = _natural_default(type, null)
    elif st is not None and not type.startswith("[]"):
        raise ValueError(f"field {kafka_name}: struct fields take no default")
    else:
        dflt = _check_default(kafka_name, type, default, null)
    return Field(
        kafka_name=kafka_name,
        name=snake_case(kafka_name),
        type=type,
        versions=vers,
        nullable_versions=null,
        tagged_versions=tagv,
        tag=tag,
        default=dflt,
        ignorable=ignorable,
        struct=st,
        map_key=map_key,
        extension=extension,
    )


def struct(name: str, fields: Iterable[Field], versions: str = "0+") -> Struct:
    """Declare a struct once to reuse it in several fields (Kafka's ``commonStructs``)."""
    return Struct(name, tuple(fields), VersionRange.parse(versions))


def _message(
    kind: str,
    api_key: int,
    name: str,
    valid: str,
    flexible: str,
    fields: Sequence[Field],
) -> Message:
    suffix = "Request" if kind == "request" else "Response"
    full = name if name.endswith(suffix) else name + suffix
    valid_r = VersionRange.parse(valid)
    if valid_r.hi is None or valid_r.empty:
        raise ValueError(f"{full}: valid versions must be a closed range")
    msg = Message(
        api_key=api_key,
        name=full,
        kind=kind,
        valid_versions=valid_r,
        flexible_versions=VersionRange.parse(flexible),
        struct=Struct(full, tuple(fields), valid_r),
    )
    _validate(msg)
    return msg


def request(api_key: int, name: str, valid: str, flexible: str, fields: Sequence[Field]) -> Message:
    """A request spec: ``request(0, "Produce", "3-9", "9+", [...])`` → ``ProduceRequest``."""
    return _message("request", api_key, name, valid, flexible, fields)


def response(
    api_key: int, name: str, valid: str, flexible: str, fields: Sequence[Field]
) -> Message:
    """A response spec: ``response(0, "Produce", "3-9", "9+", [...])`` → ``ProduceResponse``."""
    return _message("response", api_key, name, valid, flexible, fields)


def _validate(msg: Message) -> None:
    """Catch spec mistakes early: duplicate names/tags, tagged fields outside flexible versions."""

    def walk(s: Struct) -> None:
        names: set[str] = set()
        for v in msg.versions():
            tags: set[int] = set()
            for f in s.fields:
                if not f.present_in(v) or not f.tagged_in(v):
                    continue
                if not msg.is_flexible(v):
                    raise ValueError(f"{msg.name}.{f.name}: tagged in non-flexible v{v}")
                assert f.tag is not None
                if f.tag in tags:
                    raise ValueError(f"{msg.name}.{s.name}: tag {f.tag} used twice in v{v}")
                tags.add(f.tag)
        for f in s.fields:
            if f.name in names:
                raise ValueError(f"{msg.name}.{s.name}: field {f.name} declared twice")
            names.add(f.name)
            if f.struct is not None:
                walk(f.struct)

    walk(msg.struct)
    msg.structs()  # raises on two different structs sharing a name
