"""The wire codec: request/response frames ⇄ message objects, compiled from the specs.

For each (API, version, direction) the first use generates Python source for a straight-line
decoder or encoder — fixed-width runs merged into one ``struct`` call, nested arrays as inline
loops, tagged fields in a single pass — compiles it once and caches the function. Nothing is
interpreted field by field per request.

Wire rules implemented here (Kafka's): big-endian integers; classic strings/arrays/bytes carry
int16/int32/int32 lengths (-1 = null); in flexible versions they carry an unsigned varint of
length+1 (0 = null) and every struct ends with a tagged-field section (count, then tag/size/value
each); unknown tags are skipped on decode, and known tagged fields are written only when they differ
from their default. Encoding a request drops fields its version lacks, except that a
non-ignorable one holding a non-default value raises `EncodeError` (as Kafka's generated code
does); responses silently drop them. Request headers are v2 for flexible versions, else v1 (v0 only for
ControlledShutdown v0); response headers are v1 for flexible versions except ApiVersions, whose
response header is always v0.

``records`` fields decode to a memoryview slice of the input (writable when the input is a
bytearray) and encode from any bytes-like object, or in responses from a `LogRegion` of a log
file, which is left unread: the frame is then a `FrameWithRegions`. Every decoding failure
surfaces as `MalformedRequestError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from pybroker._native import LogRegion
from pybroker.protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES, RequestHeader
from pybroker.protocol.schema import FIXED_WIDTH, NONE, Field, Message, Struct
from pybroker.protocol.specs import REQUESTS, RESPONSES
from pybroker.types import ZERO_UUID

__all__ = [
    "MalformedRequestError",
    "UnsupportedVersionError",
    "EncodeError",
    "decode_request_header",
    "decode_request",
    "encode_response",
    "FrameWithRegions",
    "encode_request",
    "decode_response",
    "supported_versions",
    "supported_apis",
    "is_flexible",
    "request_header_version",
    "response_header_version",
    "encode_api_versions_error_v0",
    "generated_source",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
UNSUPPORTED_VERSION = 35


class MalformedRequestError(Exception):
    """The bytes do not decode: truncated, a negative/oversized length, a bad varint, bad UTF-8."""


class UnsupportedVersionError(MalformedRequestError):
    """The (API key, version) pair is not one this codec has a spec for."""


class EncodeError(ValueError):
    """A message object could not be encoded (wrong type, value out of range, null not allowed)."""


# --------------------------------------------------------------------------------------------
# runtime helpers used by the generated code


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos`` → (value, next position). At most 5 bytes (32 bits)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedRequestError("varint longer than 5 bytes")


def _uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"negative unsigned varint {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _array_struct(code: str, n: int) -> struct.Struct:
    s = _ARRAY_STRUCTS.get((code, n))
    if s is None:
        s = struct.Struct(f">{n}{code}")
        if len(_ARRAY_STRUCTS) < 512:
            _ARRAY_STRUCTS[(code, n)] = s
    return s


def _read_fixed_array(code: str, buf: memoryview, pos: int, n: int) -> list[Any]:
    return list(_array_struct(code, n).unpack_from(buf, pos))


def _pack_fixed_array(code: str, values: list[Any]) -> bytes:
    return _array_struct(code, len(values)).pack(*values)


# Per element type, ready packers/unpackers for arrays of 0..15 elements (the common sizes:
# replica lists, partition indexes), so small arrays cost one tuple index and one struct call.
_SMALL = 16
_SMALL_PACK = {
    code: tuple(struct.Struct(f">{n}{code}").pack for n in range(_SMALL)) for code in "bhHiqd?"
}
_SMALL_UNPACK = {
    code: tuple(struct.Struct(f">{n}{code}").unpack_from for n in range(_SMALL))
    for code in "bhHiqd?"
}

_UUID_STRUCT = struct.Struct(">16s")


def _read_uuid(buf: memoryview, pos: int) -> uuid.UUID:
    return _uuid_from_bytes(_UUID_STRUCT.unpack_from(buf, pos)[0])


def _truncated(pos: int, need: int, have: int) -> MalformedRequestError:
    return MalformedRequestError(f"field at byte {pos} needs {need} bytes, only {have - pos} left")


def _uuid_from_bytes(raw: bytes) -> uuid.UUID:
    if raw == b"\x00" * 16:
        return ZERO_UUID
    return uuid.UUID(bytes=raw)


def _too_long(n: int, left: int) -> MalformedRequestError:
    return MalformedRequestError(f"array of {n} elements cannot fit in the {left} bytes left")


def _null_error(name: str) -> MalformedRequestError:
    return MalformedRequestError(f"non-nullable field {name} was serialized as null")


def _encode_null_error(name: str) -> EncodeError:
    return EncodeError(f"field {name} is not nullable in this version")


_BASE_NAMESPACE: dict[str, Any] = {
    "_uv": _read_uvarint,
    "_uvb": _uvarint_bytes,
    "_rfa": _read_fixed_array,
    "_pfa": _pack_fixed_array,
    "_ruuid": _read_uuid,
    "_uuidb": _uuid_from_bytes,
    "_toolong": _too_long,
    "_pack_BB": struct.Struct(">BB").pack,
    "_new": object.__new__,
    "_mv": memoryview,
    "_region": LogRegion,
    "_trunc": _truncated,
    "_nullerr": _null_error,
    "_encnull": _encode_null_error,
    "_M": MalformedRequestError,
    "_E": EncodeError,
}


# --------------------------------------------------------------------------------------------
# code generation


class _Gen:
    """Accumulates the source of one generated function plus the constants it refers to."""

    def __init__(self, msg: Message, version: int, cls: type) -> None:
        self.msg = msg
        self.version = version
        self.flexible = msg.is_flexible(version)
        self.cls = cls
        self.lines: list[str] = []
        self.ns: dict[str, Any] = dict(_BASE_NAMESPACE)
        self._consts: dict[tuple[str, Any], str] = {}
        self._n = 0
        self.indent = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def tmp(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any, prefix: str = "_k") -> str:
        key = (type(value).__name__, id(value) if isinstance(value, list | type) else value)
        try:
            hit = self._consts.get(key)
        except TypeError:  # unhashable
            hit = None
        if hit is not None:
            return hit
        name = f"{prefix}{len(self.ns)}"
        self.ns[name] = value
        try:
            self._consts[key] = name
        except TypeError:
            pass
        return name

    def struct_const(self, fmt: str, op: str) -> str:
        """The name of a bound ``pack``/``unpack_from`` of ``struct.Struct(">" + fmt)``."""
        key = ("struct", f"{op}:{fmt}")
        hit = self._consts.get(key)
        if hit is None:
            hit = f"_{op}_{fmt.replace('?', 'B_')}_{len(self.ns)}"
            self.ns[hit] = getattr(struct.Struct(">" + fmt), op)
            self._consts[key] = hit
        return hit

    def class_of(self, st: Struct) -> type:
        if st is self.msg.struct:
            return self.cls
        nested: type = getattr(self.cls, st.name)  # a generated class: messages.py sets it
        return nested


def _default_expr(g: _Gen, f: Field) -> str:
    """Source for a field's default value (fresh for lists and structs)."""
    if f.struct is not None and not f.is_array:
        return f"{g.const(g.class_of(f.struct), '_C')}()"
    if isinstance(f.default, list):
        return "[]"
    return g.const(f.default, "_d")


# ---- decoding ------------------------------------------------------------------------------
#
# A "run" is a list of consecutive fixed-width items read with one struct call: (target, code)
# pairs where target is the expression to assign (an attribute, or a temp that is converted
# afterwards). In classic (non-flexible) versions the int16/int32 length prefix of the next
# string/bytes/records/array field joins the run, so ``index`` + records length is one call.


def _length_code(f: Field) -> str:
    return "h" if f.type == "string" else "i"


def _gen_decode_struct(g: _Gen, st: Struct, target: str) -> None:
    """Emit code that builds an instance of ``st`` from buf[pos:] into local ``target``."""
    v = g.version
    g.emit(f"{target} = _new({g.const(g.class_of(st), '_C')})")
    regular: list[Field] = []
    tagged: list[Field] = []
    for f in st.fields:
        if not f.present_in(v):
            g.emit(f"{target}.{f.name} = {_default_expr(g, f)}")
        elif f.tagged_in(v):
            g.emit(f"{target}.{f.name} = {_default_expr(g, f)}")
            tagged.append(f)
        else:
            regular.append(f)
    run: list[tuple[str, str]] = []
    converts: list[str] = []
    for f in regular:
        dest = f"{target}.{f.name}"
        if f.type in FIXED_WIDTH:
            run.append((dest, FIXED_WIDTH[f.type]))
        elif f.type == "uuid":
            raw = g.tmp("u")
            run.append((raw, "16s"))
            converts.append(f"{dest} = _uuidb({raw})")
        elif f.struct is not None and not f.is_array:
            _flush_decode_run(g, run, converts)
            run, converts = [], []
            _gen_decode_field(g, f, dest)
        elif not g.flexible:
            n = g.tmp("n")
            run.append((n, _length_code(f)))
            _flush_decode_run(g, run, converts)
            run, converts = [], []
            _gen_decode_field(g, f, dest, length_var=n)
        else:
            _flush_decode_run(g, run, converts)
            run, converts = [], []
            _gen_decode_field(g, f, dest)
    _flush_decode_run(g, run, converts)
    if g.flexible:
        _gen_decode_tagged(g, tagged, target)


def _flush_decode_run(g: _Gen, run: list[tuple[str, str]], converts: list[str]) -> None:
    if not run:
        return
    fmt = "".join(code for _, code in run)
    size = struct.calcsize(">" + fmt)
    unpack = g.struct_const(fmt, "unpack_from")
    names = ", ".join(t for t, _ in run)
    if len(run) == 1:
        names += ","
    g.emit(f"{names} = {unpack}(buf, pos)")
    g.emit(f"pos += {size}")
    for line in converts:
        g.emit(line)


def _gen_read_length(g: _Gen, var: str, code: str, large: bool = False) -> None:
    """Read a length into ``var``: classic int16/int32 (``code`` 'h'/'i') or compact (N+1).

    ``large``: the length is usually above 127 (records, bytes), so decode two-byte varints
    inline instead of calling the general varint reader.
    """
    if g.flexible:
        g.emit(f"{var} = buf[pos]")
        if large:
            g.emit(f"if {var} < 128:")
            g.emit("    pos += 1")
            g.emit("elif buf[pos + 1] < 128:")
            g.emit(f"    {var} = ({var} & 127) | (buf[pos + 1] << 7)")
            g.emit("    pos += 2")
            g.emit("else:")
            g.emit(f"    {var}, pos = _uv(buf, pos)")
        else:
            g.emit("pos += 1")
            g.emit(f"if {var} > 127:")
            g.emit(f"    {var}, pos = _uv(buf, pos - 1)")
        g.emit(f"{var} -= 1")
    else:
        unpack = g.struct_const(code, "unpack_from")
        g.emit(f"{var}, = {unpack}(buf, pos)")
        g.emit(f"pos += {2 if code == 'h' else 4}")


def _gen_decode_field(g: _Gen, f: Field, dest: str, length_var: str | None = None) -> None:
    """Emit code decoding one field value into the expression ``dest``.

    ``length_var`` names a local already holding the field's classic length prefix.
    """
    t = f.type
    if t in FIXED_WIDTH:
        unpack = g.struct_const(FIXED_WIDTH[t], "unpack_from")
        g.emit(f"{dest}, = {unpack}(buf, pos)")
        g.emit(f"pos += {struct.calcsize('>' + FIXED_WIDTH[t])}")
        return
    if t == "uuid":
        g.emit(f"{dest} = _ruuid(buf, pos)")
        g.emit("pos += 16")
        return
    if f.struct is not None and not f.is_array:
        tmp = g.tmp("s")
        _gen_decode_struct(g, f.struct, tmp)
        g.emit(f"{dest} = {tmp}")
        return
    n = length_var
    if n is None:
        n = g.tmp("n")
        _gen_read_length(g, n, _length_code(f), large=t in ("bytes", "records"))
    g.emit(f"if {n} < 0:")
    if f.nullable_in(g.version):
        g.emit(f"    {dest} = None")
    else:
        g.emit(f"    raise _nullerr({f.name!r})")
    if f.is_array:
        _gen_decode_array_body(g, f, dest, n)
        return
    g.emit("else:")
    g.indent += 1
    e = g.tmp("e")
    g.emit(f"{e} = pos + {n}")
    g.emit(f"if {e} > blen:")
    g.emit(f"    raise _trunc(pos, {n}, blen)")
    if t == "string":
        g.emit(f"{dest} = buf[pos:{e}].tobytes().decode()")
    elif t == "bytes":
        g.emit(f"{dest} = buf[pos:{e}].tobytes()")
    else:  # records
        g.emit(f"{dest} = buf[pos:{e}]")
    g.emit(f"pos = {e}")
    g.indent -= 1


def _gen_decode_array_body(g: _Gen, f: Field, dest: str, n: str) -> None:
    g.emit(f"elif {n} > blen - pos:")
    g.emit(f"    raise _toolong({n}, blen - pos)")
    g.emit("else:")
    g.indent += 1
    et = f.element_type
    if et in FIXED_WIDTH:
        code = FIXED_WIDTH[et]
        size = struct.calcsize(">" + code)
        small = g.const(_SMALL_UNPACK[code], "_su")
        g.emit(f"if {n} < {_SMALL}:")
        g.emit(f"    {dest} = list({small}[{n}](buf, pos))")
        g.emit("else:")
        g.emit(f"    {dest} = _rfa({code!r}, buf, pos, {n})")
        g.emit(f"pos += {n} * {size}")
    else:
        lst = g.tmp("l")
        g.emit(f"{lst} = []")
        g.emit(f"{dest} = {lst}")
        g.emit(f"for _ in range({n}):")
        g.indent += 1
        if f.struct is not None:
            item = g.tmp("o")
            _gen_decode_struct(g, f.struct, item)
        else:
            item = g.tmp("x")
            _gen_decode_field(g, _element_field(f), item)
        g.emit(f"{lst}.append({item})")
        g.indent -= 1
    g.indent -= 1


def _element_field(f: Field) -> Field:
    """A pseudo-field for one element of a primitive array (elements are never null)."""
    return Field(
        kafka_name=f.kafka_name,
        name=f.name + "[]",
        type=f.element_type,
        versions=f.versions,
        nullable_versions=NONE,
        tagged_versions=NONE,
        tag=None,
        default=None,
        ignorable=False,
    )


def _gen_decode_tagged(g: _Gen, tagged: list[Field], target: str) -> None:
    nt = g.tmp("t")
    g.emit(f"{nt} = buf[pos]")
    g.emit("pos += 1")
    g.emit(f"if {nt}:")
    g.indent += 1
    g.emit(f"if {nt} > 127:")
    g.emit(f"    {nt}, pos = _uv(buf, pos - 1)")
    tag, size, end = g.tmp("tg"), g.tmp("sz"), g.tmp("te")
    g.emit(f"for _ in range({nt}):")
    g.indent += 1
    g.emit(f"{tag}, pos = _uv(buf, pos)")
    g.emit(f"{size}, pos = _uv(buf, pos)")
    g.emit(f"{end} = pos + {size}")
    g.emit(f"if {end} > blen:")
    g.emit(f"    raise _trunc(pos, {size}, blen)")
    first = True
    for f in sorted(tagged, key=lambda x: x.tag or 0):
        g.emit(f"{'if' if first else 'elif'} {tag} == {f.tag}:")
        first = False
        g.indent += 1
        _gen_decode_field(g, f, f"{target}.{f.name}")
        g.indent -= 1
    g.emit(f"pos = {end}")
    g.indent -= 2


def _compile_decoder(msg: Message, version: int, cls: type) -> Callable[..., Any]:
    g = _Gen(msg, version, cls)
    g.emit("blen = len(buf)")
    _gen_decode_struct(g, msg.struct, "o")
    g.emit("return o, pos")
    name = f"decode_{msg.name}_v{version}"
    src = f"def {name}(buf, pos):\n" + "\n".join(g.lines) + "\n"
    return _exec(src, name, g.ns)


# ---- encoding ------------------------------------------------------------------------------
#
# Mirrors decoding: fixed-width runs become one ``pack`` call, and in classic versions the length
# prefix of the following variable-width field is packed in the same call. Such a field is then
# encoded in two steps: "prepare" (compute its bytes and length before the pack) and "finish"
# (append the payload after it).


def _gen_encode_struct(g: _Gen, st: Struct, src: str, out: str) -> None:
    """Emit code appending the encoding of struct instance ``src`` to bytearray ``out``."""
    v = g.version
    regular: list[Field] = []
    tagged: list[Field] = []
    for f in st.fields:
        if not f.present_in(v):
            if g.msg.kind == "request" and not f.ignorable:
                _gen_check_absent(g, f, f"{src}.{f.name}")
            continue
        (tagged if f.tagged_in(v) else regular).append(f)
    run: list[tuple[str, str]] = []
    for f in regular:
        expr = f"{src}.{f.name}"
        if f.type in FIXED_WIDTH:
            run.append((expr, FIXED_WIDTH[f.type]))
        elif f.type == "uuid":
            run.append((f"{expr}.bytes", "16s"))
        elif f.struct is not None and not f.is_array:
            _flush_encode_run(g, run, out)
            run = []
            val = g.tmp("v")
            g.emit(f"{val} = {expr}")
            _gen_encode_struct(g, f.struct, val, out)
        elif not g.flexible:
            val, length = _gen_encode_prepare(g, f, expr)
            run.append((length, _length_code(f)))
            _flush_encode_run(g, run, out)
            run = []
            _gen_encode_finish(g, f, val, out)
        else:
            _flush_encode_run(g, run, out)
            run = []
            _gen_encode_field(g, f, expr, out)
    _flush_encode_run(g, run, out)
    if g.flexible:
        _gen_encode_tagged(g, tagged, src, out)


def _gen_check_absent(g: _Gen, f: Field, expr: str) -> None:
    """Requests only: a non-ignorable field that this version lacks must hold its default, or
    the request cannot say what the caller asked for (Kafka raises UnsupportedVersionException
    the same way; e.g. DeleteRecords ``leader_only=True`` below v3)."""
    if f.struct is not None and not f.is_array:
        return  # a nested struct's own fields are not checked
    if f.is_array:
        cond = expr
    elif f.default is None:
        cond = f"{expr} is not None"
    else:
        cond = f"{expr} != {g.const(f.default, '_dflt')}"
    message = (
        f"{g.msg.name} v{g.version} has no field {f.name}: "
        "it must be left at its default (use a version that has it)"
    )
    g.emit(f"if {cond}:")
    g.emit(f"    raise _E({message!r})")


def _flush_encode_run(g: _Gen, run: list[tuple[str, str]], out: str) -> None:
    if not run:
        return
    fmt = "".join(code for _, code in run)
    pack = g.struct_const(fmt, "pack")
    g.emit(f"{out} += {pack}({', '.join(expr for expr, _ in run)})")


def _gen_encode_prepare(g: _Gen, f: Field, expr: str) -> tuple[str, str]:
    """Classic versions: emit code computing the payload and the length prefix of a
    string/bytes/records/array field. Returns (payload variable, length variable)."""
    val, length = g.tmp("v"), g.tmp("n")
    g.emit(f"{val} = {expr}")
    g.emit(f"if {val} is None:")
    if f.nullable_in(g.version):
        g.emit(f"    {length} = -1")
    else:
        g.emit(f"    raise _encnull({f.name!r})")
    if f.type == "string":
        g.emit("else:")
        g.emit(f"    {val} = {val}.encode()")
        g.emit(f"    {length} = len({val})")
    elif f.is_array:
        g.emit("else:")
        g.emit(f"    {length} = len({val})")
    else:  # bytes / records
        g.emit(f"elif {val}.__class__ is _mv and {val}.format != 'B':")
        g.emit(f"    {val} = {val}.cast('B')")
        g.emit(f"    {length} = len({val})")
        g.emit("else:")
        g.emit(f"    {length} = len({val})")
    return val, length


def _gen_encode_finish(g: _Gen, f: Field, val: str, out: str) -> None:
    """Classic versions: append the payload prepared by `_gen_encode_prepare`."""
    if f.is_array:
        g.emit(f"if {val} is not None:")
        g.indent += 1
        _gen_encode_array_items(g, f, val, out)
        g.indent -= 1
    elif f.nullable_in(g.version):
        g.emit(f"if {val} is not None:")
        g.indent += 1
        _gen_append_payload(g, f, val, out)
        g.indent -= 1
    else:
        _gen_append_payload(g, f, val, out)


def _gen_append_payload(g: _Gen, f: Field, val: str, out: str) -> None:
    """Append a string/bytes/records payload after its length. A ``records`` value may be a
    `LogRegion`: its bytes stay in the log file, and only its place in the frame is noted."""
    if f.type == "records":
        g.emit(f"if {val}.__class__ is _region:")
        g.emit(f"    {out}.regions.append((len({out}), {val}))")
        g.emit("else:")
        g.emit(f"    {out} += {val}")
    else:
        g.emit(f"{out} += {val}")


def _gen_encode_array_items(g: _Gen, f: Field, val: str, out: str) -> None:
    et = f.element_type
    if et in FIXED_WIDTH:
        code = FIXED_WIDTH[et]
        small = g.const(_SMALL_PACK[code], "_sp")
        count = g.tmp("k")
        g.emit(f"{count} = len({val})")
        g.emit(f"if {count} < {_SMALL}:")
        g.emit(f"    {out} += {small}[{count}](*{val})")
        g.emit("else:")
        g.emit(f"    {out} += _pfa({code!r}, {val})")
        return
    item = g.tmp("x")
    g.emit(f"for {item} in {val}:")
    g.indent += 1
    if f.struct is not None:
        _gen_encode_struct(g, f.struct, item, out)
    else:
        _gen_encode_field(g, _element_field(f), item, out)
    g.indent -= 1


def _gen_write_compact_length(g: _Gen, expr: str, out: str) -> None:
    n = g.tmp("n")
    g.emit(f"{n} = {expr} + 1")
    g.emit(f"if {n} < 128:")
    g.emit(f"    {out}.append({n})")
    g.emit(f"elif {n} < 16384:")
    g.emit(f"    {out} += _pack_BB(({n} & 127) | 128, {n} >> 7)")
    g.emit("else:")
    g.emit(f"    {out} += _uvb({n})")


def _gen_encode_field(g: _Gen, f: Field, expr: str, out: str) -> None:
    """Emit code appending one field value (any type, either encoding) to ``out``."""
    t = f.type
    if t in FIXED_WIDTH:
        pack = g.struct_const(FIXED_WIDTH[t], "pack")
        g.emit(f"{out} += {pack}({expr})")
        return
    if t == "uuid":
        g.emit(f"{out} += {expr}.bytes")
        return
    if f.struct is not None and not f.is_array:
        val = g.tmp("v")
        g.emit(f"{val} = {expr}")
        _gen_encode_struct(g, f.struct, val, out)
        return
    if not g.flexible:
        val, length = _gen_encode_prepare(g, f, expr)
        pack = g.struct_const(_length_code(f), "pack")
        g.emit(f"{out} += {pack}({length})")
        _gen_encode_finish(g, f, val, out)
        return
    val = g.tmp("v")
    g.emit(f"{val} = {expr}")
    g.emit(f"if {val} is None:")
    if f.nullable_in(g.version):
        g.emit(f"    {out}.append(0)")
    else:
        g.emit(f"    raise _encnull({f.name!r})")
    g.emit("else:")
    g.indent += 1
    if f.is_array:
        _gen_write_compact_length(g, f"len({val})", out)
        _gen_encode_array_items(g, f, val, out)
    elif t == "string":
        raw = g.tmp("b")
        g.emit(f"{raw} = {val}.encode()")
        _gen_write_compact_length(g, f"len({raw})", out)
        g.emit(f"{out} += {raw}")
    else:  # bytes / records: any bytes-like
        g.emit(f"if {val}.__class__ is _mv and {val}.format != 'B':")
        g.emit(f"    {val} = {val}.cast('B')")
        _gen_write_compact_length(g, f"len({val})", out)
        _gen_append_payload(g, f, val, out)
    g.indent -= 1


def _nondefault_expr(g: _Gen, f: Field, expr: str) -> str:
    """An expression that is true when field value ``expr`` differs from the field's default."""
    if f.struct is not None and not f.is_array:
        parts = [
            _nondefault_expr(g, sub, f"{expr}.{sub.name}")
            for sub in f.struct.fields
            if sub.present_in(g.version)
        ]
        return "(" + " or ".join(parts) + ")" if parts else "False"
    if isinstance(f.default, list):
        return f"({expr} is None or len({expr}) > 0)"
    if f.default is None:
        return f"({expr} is not None)"
    return f"({expr} != {g.const(f.default, '_dflt')})"


def _gen_encode_tagged(g: _Gen, tagged: list[Field], src: str, out: str) -> None:
    if not tagged:
        g.emit(f"{out}.append(0)")
        return
    tagged = sorted(tagged, key=lambda x: x.tag or 0)
    flags = []
    for f in tagged:
        flag = g.tmp("h")
        g.emit(f"{flag} = {_nondefault_expr(g, f, f'{src}.{f.name}')}")
        flags.append(flag)
    count = g.tmp("c")
    g.emit(f"{count} = {' + '.join(flags)}")
    g.emit(f"if not {count}:")
    g.emit(f"    {out}.append(0)")
    g.emit("else:")
    g.indent += 1
    g.emit(f"{out}.append({count})")  # fewer than 128 known tags per struct
    for f, flag in zip(tagged, flags, strict=True):
        g.emit(f"if {flag}:")
        g.indent += 1
        tb = g.tmp("tb")
        g.emit(f"{tb} = bytearray()")
        _gen_encode_field(g, f, f"{src}.{f.name}", tb)
        g.emit(f"{out} += _uvb({f.tag})")
        g.emit(f"{out} += _uvb(len({tb}))")
        g.emit(f"{out} += {tb}")
        g.indent -= 1
    g.indent -= 1


def _compile_encoder(msg: Message, version: int, cls: type) -> Callable[..., Any]:
    g = _Gen(msg, version, cls)
    _gen_encode_struct(g, msg.struct, "o", "out")
    g.emit("return out")
    name = f"encode_{msg.name}_v{version}"
    src = f"def {name}(o, out):\n" + "\n".join(g.lines) + "\n"
    return _exec(src, name, g.ns)


_SOURCES: dict[str, str] = {}


def _exec(src: str, name: str, ns: dict[str, Any]) -> Callable[..., Any]:
    code = compile(src, f"<pybroker.protocol.codec {name}>", "exec")
    exec(code, ns)
    _SOURCES[name] = src
    return ns[name]


def generated_source(api_key: int, api_version: int, kind: str, direction: str) -> str:
    """The generated source of one codec function (for debugging and docs).

    ``kind`` is "request" or "response", ``direction`` "decode" or "encode".
    """
    _function(kind, direction, api_key, api_version)
    msg = (REQUESTS if kind == "request" else RESPONSES)[api_key]
    return _SOURCES[f"{direction}_{msg.name}_v{api_version}"]


# --------------------------------------------------------------------------------------------
# caches and lookup
#
# Keys are ``api_key * 65536 + api_version`` (unique for any pair of int16s): one int hash per
# call instead of a tuple. Header versions are precomputed for every supported pair.


def _k(api_key: int, api_version: int) -> int:
    return api_key * 65536 + api_version


_REQUEST_HEADER_VERSION: dict[int, int] = {}
_RESPONSE_HEADER_VERSION: dict[int, int] = {}
for _key, _msg in REQUESTS.items():
    for _v in _msg.versions():
        _REQUEST_HEADER_VERSION[_k(_key, _v)] = 2 if _msg.is_flexible(_v) else 1
        _RESPONSE_HEADER_VERSION[_k(_key, _v)] = (
            1 if _msg.is_flexible(_v) and _key != API_VERSIONS_KEY else 0
        )
del _key, _msg, _v

_DECODE_REQUEST: dict[int, Callable[..., Any]] = {}
_ENCODE_REQUEST: dict[int, Callable[..., Any]] = {}
_DECODE_RESPONSE: dict[int, Callable[..., Any]] = {}
_ENCODE_RESPONSE: dict[int, Callable[..., Any]] = {}
_CACHES = {
    ("request", "decode"): _DECODE_REQUEST,
    ("request", "encode"): _ENCODE_REQUEST,
    ("response", "decode"): _DECODE_RESPONSE,
    ("response", "encode"): _ENCODE_RESPONSE,
}


def _function(kind: str, direction: str, api_key: int, api_version: int) -> Callable[..., Any]:
    """The compiled function for (kind, direction, api, version), compiling it on first use."""
    cache = _CACHES[(kind, direction)]
    fn = cache.get(_k(api_key, api_version))
    if fn is not None:
        return fn
    specs = REQUESTS if kind == "request" else RESPONSES
    classes = REQUEST_CLASSES if kind == "request" else RESPONSE_CLASSES
    msg = specs.get(api_key)
    if msg is None or api_version not in msg.valid_versions:
        raise UnsupportedVersionError(f"no spec for api key {api_key} version {api_version}")
    compile_fn = _compile_decoder if direction == "decode" else _compile_encoder
    fn = compile_fn(msg, api_version, classes[api_key])
    cache[_k(api_key, api_version)] = fn
    return fn


def supported_versions(api_key: int) -> tuple[int, int]:
    """(min, max) version this codec handles for ``api_key``; KeyError if it has no spec."""
    msg = REQUESTS[api_key]
    return msg.min_version, msg.max_version


def supported_apis() -> list[tuple[int, int, int]]:
    """Every (api_key, min, max) the codec handles, in key order (an ApiVersions table)."""
    return [(k, m.min_version, m.max_version) for k, m in sorted(REQUESTS.items())]


def is_flexible(api_key: int, version: int) -> bool:
    """True when ``version`` of ``api_key`` uses the flexible (compact + tagged) encoding."""
    msg = REQUESTS.get(api_key)
    if msg is None:
        raise KeyError(api_key)
    return msg.is_flexible(version)


def request_header_version(api_key: int, api_version: int) -> int | None:
    """2 for flexible versions, 1 otherwise (0 for ControlledShutdown v0); None if unknown."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return _REQUEST_HEADER_VERSION.get(_k(api_key, api_version))


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions responses always use header v0."""
    hv = _RESPONSE_HEADER_VERSION.get(_k(api_key, api_version))
    if hv is None:
        raise UnsupportedVersionError(f"no spec for api key {api_key} version {api_version}")
    return hv


# --------------------------------------------------------------------------------------------
# public entry points

_unpack_header = struct.Struct(">hhih").unpack_from
_unpack_hhi = struct.Struct(">hhi").unpack_from
_unpack_i = struct.Struct(">i").unpack_from
_pack_hhih = struct.Struct(">hhih").pack
_pack_ii = struct.Struct(">ii").pack
_pack_hhh = struct.Struct(">hhh").pack
_pack_hi = struct.Struct(">hi").pack
_pack_into_i = struct.Struct(">i").pack_into
_new = object.__new__


def _skip_tagged(buf: memoryview, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequestError("tagged field runs past the end of the header")
    return pos


def decode_request_header(buf: memoryview) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of ``buf`` (a frame without its size prefix).

    Returns (header, body_offset). For an API/version the codec has no spec for, only the fixed
    part (api_key, api_version, correlation_id) is trusted: body_offset is -1 and client_id is
    filled in only when it happens to parse, so the server can answer ApiVersions with
    UNSUPPORTED_VERSION or close the connection.
    """
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    h = _new(RequestHeader)
    if len(buf) >= 10:
        h.api_key, h.api_version, h.correlation_id, n = _unpack_header(buf, 0)
    elif len(buf) >= 8:
        h.api_key, h.api_version, h.correlation_id = _unpack_hhi(buf, 0)
        n = -2  # no room for a client_id length
    else:
        raise MalformedRequestError(f"request header needs at least 8 bytes, got {len(buf)}")
    hv = _REQUEST_HEADER_VERSION.get(h.api_key * 65536 + h.api_version)
    if hv is None:
        if h.api_key == CONTROLLED_SHUTDOWN_KEY and h.api_version == 0:
            h.client_id, h.header_version = None, 0
            return h, -1
        h.header_version = 2 if h.api_key == API_VERSIONS_KEY and h.api_version >= 3 else 1
        h.client_id = None
        if 0 <= n <= len(buf) - 10:
            try:
                h.client_id = buf[10 : 10 + n].tobytes().decode()
            except UnicodeDecodeError:
                pass
        return h, -1
    h.header_version = hv
    if hv == 0:  # pragma: no cover - ControlledShutdown v0 has no spec here
        h.client_id = None
        return h, 8
    if n < 0:
        if n != -1:
            raise MalformedRequestError(f"request header: bad client_id length {n}")
        h.client_id = None
        pos = 10
    else:
        pos = 10 + n
        if pos > len(buf):
            raise MalformedRequestError("request header: client_id runs past the end of the frame")
        try:
            h.client_id = buf[10:pos].tobytes().decode()
        except UnicodeDecodeError as exc:
            raise MalformedRequestError(f"request header: client_id is not UTF-8: {exc}") from None
    if hv == 2:
        try:
            if buf[pos] == 0:
                pos += 1
            else:
                pos = _skip_tagged(buf, pos)
        except IndexError:
            raise MalformedRequestError("request header: missing tagged fields") from None
    return h, pos


def decode_request(api_key: int, api_version: int, buf: memoryview, offset: int) -> Any:
    """Decode a request body starting at ``offset`` of ``buf``. Trailing bytes are ignored."""
    fn = _DECODE_REQUEST.get(api_key * 65536 + api_version)
    if fn is None:
        fn = _function("request", "decode", api_key, api_version)
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    try:
        return fn(buf, offset)[0]
    except MalformedRequestError:
        raise
    except Exception as exc:
        raise MalformedRequestError(
            f"api {api_key} v{api_version}: cannot decode request: {exc!r}"
        ) from exc


def encode_response(
    api_key: int, api_version: int, correlation_id: int, response: Any
) -> bytearray | FrameWithRegions:
    """A complete response frame: 4-byte size, response header, body (a `FrameWithRegions` when
    records are log regions)."""
    key = api_key * 65536 + api_version
    fn = _ENCODE_RESPONSE.get(key)
    if fn is None:
        fn = _function("response", "encode", api_key, api_version)
    out = _FrameBuffer(_pack_ii(0, correlation_id))
    if _RESPONSE_HEADER_VERSION[key]:
        out.append(0)
    try:
        fn(response, out)
    except EncodeError:
        raise
    except Exception as exc:
        raise EncodeError(
            f"api {api_key} v{api_version}: cannot encode response: {exc!r}"
        ) from exc
    if out.regions:
        return FrameWithRegions(out)
    _pack_into_i(out, 0, len(out) - 4)
    return out


class _FrameBuffer(bytearray):
    """A response being encoded, with the places of its `LogRegion` records (none usually)."""

    __slots__ = ("regions",)

    def __init__(self, initial: bytes) -> None:
        super().__init__(initial)
        self.regions: list[tuple[int, LogRegion]] = []


class FrameWithRegions:
    """A response frame whose ``records`` fields are still in log files.

    ``parts`` is the frame in wire order: its own bytes (size prefix, header, the fields around
    the records) as memoryviews, and each `LogRegion` in its place, for the network layer to
    send with ``sendfile`` (Kafka's zero-copy fetch). ``len()`` is the whole frame's size, prefix
    included; ``bytes()`` reads the regions and joins everything (for other transports and tests).
    """

    __slots__ = ("parts", "size")

    def __init__(self, buffer: _FrameBuffer) -> None:
        size = len(buffer) + sum(len(region) for _, region in buffer.regions)
        _pack_into_i(buffer, 0, size - 4)
        view = memoryview(buffer)
        parts: list[memoryview | LogRegion] = []
        start = 0
        for at, region in buffer.regions:
            if at > start:
                parts.append(view[start:at])
            parts.append(region)
            start = at
        if start < len(buffer):
            parts.append(view[start:])
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(part.read() if isinstance(part, LogRegion) else part for part in self.parts)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, request: Any
) -> bytearray:
    """A complete request frame: 4-byte size, request header (v1, or v2 if flexible), body."""
    fn = _ENCODE_REQUEST.get(api_key * 65536 + api_version)
    if fn is None:
        fn = _function("request", "encode", api_key, api_version)
    hv = request_header_version(api_key, api_version)
    out = bytearray(4)
    if client_id is None:
        out += _pack_hhih(api_key, api_version, correlation_id, -1)
    else:
        raw = client_id.encode()
        out += _pack_hhih(api_key, api_version, correlation_id, len(raw))
        out += raw
    if hv == 2:
        out.append(0)
    try:
        fn(request, out)
    except EncodeError:
        raise
    except Exception as exc:
        raise EncodeError(
            f"api {api_key} v{api_version}: cannot encode request: {exc!r}"
        ) from exc
    _pack_into_i(out, 0, len(out) - 4)
    return out


def decode_response(api_key: int, api_version: int, buf: memoryview) -> tuple[int, Any]:
    """Decode a response frame (without its size prefix) → (correlation_id, response)."""
    fn = _function("response", "decode", api_key, api_version)
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    try:
        (correlation_id,) = _unpack_i(buf, 0)
        pos = 4
        if _RESPONSE_HEADER_VERSION[_k(api_key, api_version)] == 1:
            pos = _skip_tagged(buf, pos)
        return correlation_id, fn(buf, pos)[0]
    except MalformedRequestError:
        raise
    except Exception as exc:
        raise MalformedRequestError(
            f"api {api_key} v{api_version}: cannot decode response: {exc!r}"
        ) from exc


def encode_api_versions_error_v0(
    correlation_id: int, supported: list[tuple[int, int, int]]
) -> bytearray:
    """An ApiVersions response in the v0 layout with UNSUPPORTED_VERSION (35), header v0.

    The answer to an ApiVersions request whose version the broker does not know: every client can
    parse it, and ``supported`` (api_key, min, max) tells it which version to retry with.
    """
    out = bytearray(_pack_ii(0, correlation_id))
    out += _pack_hi(UNSUPPORTED_VERSION, len(supported))
    for key, lo, hi in supported:
        out += _pack_hhh(key, lo, hi)
    _pack_into_i(out, 0, len(out) - 4)
    return out
