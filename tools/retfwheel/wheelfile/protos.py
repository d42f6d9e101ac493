"""Moving the protocol buffers of privately named distributions to private proto names.

protobuf keeps one descriptor pool per process, keyed by ``.proto`` file name and by full symbol name: a second
``tensorboard/compat/proto/summary.proto`` or a second ``tensorboard.Summary`` from another file is refused at
import ("A file with this name is already in the pool", "... is already defined in file ..."). A distribution that
ships under a private name next to the environment's own copy must therefore also move its protos: every ``.proto``
file name under the private folder (``tensorflow/_vendor/tensorboard/compat/proto/summary.proto``) and every
package under the private parent (``tensorflow._vendor.tensorboard``). Serialized messages carry field numbers, not
names, so the bytes these protos read and write are unchanged; gRPC method paths (``/tensorboard.service.X/Y``,
in ``*_pb2_grpc.py``) are wire names and keep theirs.

A generated ``_pb2`` module (protoc before 3.20) holds the serialized ``FileDescriptorProto`` (``serialized_pb=``),
the names again as keyword arguments, and each message's, enum's and service's byte span in it
(``serialized_start``/``serialized_end``). The bytes are walked with the descriptor schema's field numbers, the
names rewritten, and the spans recomputed; the spans the walk finds in the original must equal the module's own, or
the module is refused. Modules in another form fail (ProtoError, with the file).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass

from .renaming import RenameError
from .renaming import called_name as _called


class ProtoError(RenameError):
    pass


@dataclass(frozen=True)
class ProtoFile:
    """What one generated module declares: its ``.proto`` file name, package and the full names it defines."""

    path: str  # the Python module's member name
    name: str
    package: str
    symbols: frozenset[str]


# Field numbers of descriptor.proto: which fields hold nested descriptors, names to move, or file names.
_FILE = {"messages": 4, "enums": 5, "services": 6, "extensions": 7}
_MESSAGE = {"fields": 2, "extensions": 6, "messages": 3, "enums": 4}
_FIELD_TYPE_NAMES = (2, 6)  # extendee, type_name
_METHOD_TYPE_NAMES = (2, 3)  # input_type, output_type
_KINDS = {"Descriptor": "message", "EnumDescriptor": "enum", "ServiceDescriptor": "service"}
_Encoded = tuple  # (bytes, [(full name, start, end)])


def is_generated(source: str) -> bool:
    return "_descriptor.FileDescriptor(" in source or "AddSerializedFile(" in source


def read_proto(source: str, path: str) -> ProtoFile:
    descriptor, _, _ = _file_descriptor(source, path)
    walk = _Walk(lambda name: name, lambda kind, name: name)
    walk.file(descriptor)
    return ProtoFile(path, walk.name, walk.package, frozenset(full for full, _, _ in walk.spans))


def move_proto(source: str, path: str, parent: str, files: Collection[str], symbols: Collection[str]) -> str:
    """``source`` (the generated module ``path``) with its proto file name, package and every reference to a file in
    ``files`` or a symbol in ``symbols`` moved under ``parent`` (a dotted package; files under its folder)."""
    folder = parent.replace(".", "/") + "/"
    descriptor, node, tree = _file_descriptor(source, path)
    original = _Walk(lambda name: name, lambda kind, name: name)
    original.file(descriptor)
    declared = _declared_spans(tree)
    found = _protoc_spans(descriptor, original.spans)
    if declared != found:
        wrong = sorted(set(declared.items()) ^ set(found.items()))[:3]
        raise ProtoError(f"{path}: the serialized descriptor's spans do not match the module's ({wrong}); "
                         "regenerate it with protoc 3.19 or earlier")

    def moved_type(kind: str, name: str) -> str:
        if kind == "package":
            return f"{parent}.{name}" if name else parent
        return f".{parent}{name}" if name[1:] in symbols else name

    def moved_file(name: str) -> str:
        return folder + name if name in files else name

    walk = _Walk(moved_file, moved_type)
    data = walk.file(descriptor)
    spans = _protoc_spans(data, walk.spans)
    package = original.package

    def full(name: str) -> str:
        return f"{parent}.{name}" if name else parent

    edits: list[tuple[ast.expr, str]] = [(_keyword(node, "serialized_pb"), repr(data))]
    for keyword, value in (("name", folder + original.name), ("package", full(package))):
        edits.append((_keyword(node, keyword), repr(value)))
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or call is node:
            continue
        name_node = _keyword_or_none(call, "full_name")
        if name_node is None:
            continue
        old = name_node.value  # type: ignore[attr-defined]
        new = full(old) if package == "" or old.startswith(package + ".") else None
        if new is None:
            raise ProtoError(f"{path}:{name_node.lineno}: {old!r} is outside the file's package {package!r}")
        edits.append((name_node, repr(new)))
        kind = _KINDS.get(_called(call))
        if kind is not None:
            start, end = spans[new]
            edits += [(_keyword(call, "serialized_start"), str(start)), (_keyword(call, "serialized_end"), str(end))]
    return _apply(source, edits)


@dataclass(frozen=True)
class ScalarField:
    """An optional scalar field to add to a message: bool or int32, proto3 (no presence, default false / 0)."""

    name: str
    number: int
    kind: str  # "bool" or "int32"


# descriptor.proto's FieldDescriptorProto.Type and Python's FieldDescriptor.CPPTYPE_* of each kind
_SCALARS = {"bool": (8, 7, "False"), "int32": (5, 1, "0")}


def add_fields(source: str, path: str, message: str, fields: tuple[ScalarField, ...]) -> str:
    """``source`` (the generated module ``path``) with ``fields`` added to the message ``message`` (a full name): in
    the serialized descriptor, with every span recomputed, and as the module's Python field descriptors. A message
    another build extended, or a field number or name it already has, is refused."""
    descriptor, node, tree = _file_descriptor(source, path)
    original = _Walk(lambda name: name, lambda kind, name: name)
    original.file(descriptor)
    if _declared_spans(tree) != _protoc_spans(descriptor, original.spans):
        raise ProtoError(f"{path}: the serialized descriptor's spans do not match the module's; "
                         "regenerate it with protoc 3.19 or earlier")
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) == "Descriptor"
             and getattr(_keyword_or_none(c, "full_name"), "value", None) == message]
    listed = _keyword_or_none(calls[0], "fields") if calls else None
    if not isinstance(listed, ast.List) or not listed.elts:
        raise ProtoError(f"{path}: no message {message} with a fields=[...] list")
    known = {(getattr(_keyword_or_none(f, "name"), "value", None), getattr(_keyword_or_none(f, "number"), "value", None))
             for f in listed.elts if isinstance(f, ast.Call)}
    clash = [f.name for f in fields if any(f.name == name or f.number == number for name, number in known)]
    if clash:
        raise ProtoError(f"{path}: {message} already has a field named or numbered as {', '.join(clash)}")

    extra = b"".join(_length_delimited(_MESSAGE["fields"], _field_proto(f)) for f in fields)

    class Extending(_Walk):
        def message(self, data: bytes, scope: str) -> _Encoded:
            encoded, spans = super().message(data, scope)
            if spans[0][0] != message:
                return encoded, spans
            return encoded + extra, [(message, 0, len(encoded) + len(extra)), *spans[1:]]

    walk = Extending(lambda name: name, lambda kind, name: name)
    data = walk.file(descriptor)
    spans = _protoc_spans(data, walk.spans)
    edits: list[tuple[ast.expr, str]] = [(_keyword(node, "serialized_pb"), repr(data))]
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and _called(call) in _KINDS:
            start, end = spans[_keyword(call, "full_name").value]  # type: ignore[attr-defined]
            edits += [(_keyword(call, "serialized_start"), str(start)), (_keyword(call, "serialized_end"), str(end))]
    last = listed.elts[-1]
    indent = " " * last.col_offset
    added = "".join(
        f",\n{indent}_descriptor.FieldDescriptor(name={f.name!r}, full_name={message + '.' + f.name!r}, "
        f"index={len(listed.elts) + i}, number={f.number}, type={_SCALARS[f.kind][0]}, cpp_type={_SCALARS[f.kind][1]}, "
        f"label=1, has_default_value=False, default_value={_SCALARS[f.kind][2]}, message_type=None, enum_type=None, "
        "containing_type=None, is_extension=False, extension_scope=None, serialized_options=None, file=DESCRIPTOR)"
        for i, f in enumerate(fields))
    edits.append((last, ast.get_source_segment(source, last) + added))  # type: ignore[operator]
    return _apply(source, edits)


def _field_proto(field: ScalarField) -> bytes:
    """A FieldDescriptorProto: name, number, LABEL_OPTIONAL, type, json_name (as protoc writes it)."""
    json_name = "".join(part.capitalize() if i else part for i, part in enumerate(field.name.split("_")))
    return (_length_delimited(1, field.name.encode()) + _varint_field(3, field.number) + _varint_field(4, 1)
            + _varint_field(5, _SCALARS[field.kind][0]) + _length_delimited(10, json_name.encode()))


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _put_varint(number << 3 | 2) + _put_varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _put_varint(number << 3) + _put_varint(value)


def _protoc_spans(data: bytes, spans) -> dict[str, tuple[int, int]]:
    """{full name: span} as protoc writes them: the first place the descriptor's bytes occur in the file's (so two
    byte-identical nested messages, like two ``map<string, AttrValue>`` entries, share the first one's span)."""
    found = {}
    for full, start, end in spans:
        first = data.find(data[start:end])
        found[full] = (first, first + end - start)
    return found


def _keyword_or_none(call: ast.Call, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr:
    value = _keyword_or_none(call, name)
    if value is None:
        raise ProtoError(f"line {call.lineno}: {_called(call)}(...) has no {name}=")
    return value


def _file_descriptor(source: str, path: str) -> tuple[bytes, ast.Call, ast.Module]:
    try:
        tree = ast.parse(source, path)
    except SyntaxError as error:
        raise ProtoError(f"{path}:{error.lineno}: cannot parse: {error.msg}") from None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "FileDescriptor"]
    if len(calls) != 1 or _keyword_or_none(calls[0], "serialized_pb") is None:
        raise ProtoError(f"{path}: not a protoc module of the FileDescriptor(serialized_pb=...) form (protoc 3.19 or "
                         "earlier); its proto names cannot be moved")
    value = _keyword(calls[0], "serialized_pb")
    if isinstance(value, ast.Call) and len(value.args) == 1:  # _b('...'): protoc's Python 2 shim, latin-1 encoded
        value = value.args[0]
    if not (isinstance(value, ast.Constant) and isinstance(value.value, (str, bytes))):
        raise ProtoError(f"{path}:{value.lineno}: serialized_pb is not a literal")
    data = value.value.encode("latin-1") if isinstance(value.value, str) else value.value
    return data, calls[0], tree


def _declared_spans(tree: ast.Module) -> dict[str, tuple[int, int]]:
    spans = {}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and _called(call) in _KINDS:
            full = _keyword(call, "full_name")
            start, end = _keyword(call, "serialized_start"), _keyword(call, "serialized_end")
            if all(isinstance(v, ast.Constant) for v in (full, start, end)):
                spans[full.value] = (start.value, end.value)  # type: ignore[attr-defined]
    return spans


def _apply(source: str, edits: list[tuple[ast.expr, str]]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    encoded = source.encode("utf-8")
    spans: list[tuple[int, int, bytes]] = []
    for node, text in edits:
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        spans.append((start, end, text.encode("utf-8")))
    for start, end, replacement in sorted(spans, reverse=True):
        encoded = encoded[:start] + replacement + encoded[end:]
    return encoded.decode("utf-8")


class _Walk:
    """Re-encodes a FileDescriptorProto with names moved, recording each message's, enum's and service's span
    (``spans``: full name, start, end, in the bytes written)."""

    def __init__(self, moved_file, moved_type):
        self.moved_file, self.moved_type = moved_file, moved_type
        self.spans: list[tuple[str, int, int]] = []
        self.name = self.package = ""

    def file(self, data: bytes) -> bytes:
        fields = _fields(data)
        self.name = next((v.decode() for n, _, v in fields if n == 1), "")
        self.package = next((v.decode() for n, _, v in fields if n == 2), "")
        scope = self.moved_type("package", self.package)

        def one(number: int, value: bytes) -> _Encoded:
            if number in (1, 3):
                return self.moved_file(value.decode()).encode(), []
            if number == 2:
                return scope.encode(), []
            if number == _FILE["messages"]:
                return self.message(value, scope)
            if number == _FILE["enums"]:
                return self.named(value, scope)
            if number == _FILE["services"]:
                return self.service(value, scope)
            if number == _FILE["extensions"]:
                return self.typed(value, _FIELD_TYPE_NAMES)
            return value, []
        encoded, self.spans = _encode(fields, one)
        return encoded

    def message(self, data: bytes, scope: str) -> _Encoded:
        fields = _fields(data)
        full = self._full(fields, scope)

        def one(number: int, value: bytes) -> _Encoded:
            if number in (_MESSAGE["fields"], _MESSAGE["extensions"]):
                return self.typed(value, _FIELD_TYPE_NAMES)
            if number == _MESSAGE["messages"]:
                return self.message(value, full)
            if number == _MESSAGE["enums"]:
                return self.named(value, full)
            return value, []
        encoded, spans = _encode(fields, one)
        return encoded, [(full, 0, len(encoded)), *spans]

    def named(self, data: bytes, scope: str) -> _Encoded:
        return data, [(self._full(_fields(data), scope), 0, len(data))]

    def service(self, data: bytes, scope: str) -> _Encoded:
        fields = _fields(data)
        encoded, _ = _encode(fields, lambda n, v: self.typed(v, _METHOD_TYPE_NAMES) if n == 2 else (v, []))
        return encoded, [(self._full(fields, scope), 0, len(encoded))]

    def typed(self, data: bytes, numbers: tuple[int, ...]) -> _Encoded:
        return _encode(_fields(data),
                       lambda n, v: (self.moved_type("type", v.decode()).encode() if n in numbers else v, []))

    @staticmethod
    def _full(fields, scope: str) -> str:
        name = next((v.decode() for n, _, v in fields if n == 1), "")
        return f"{scope}.{name}" if scope else name


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtoError("a truncated serialized descriptor")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(data: bytes) -> list[tuple[int, int, bytes]]:
    """(field number, wire type, raw value: the payload of a length-delimited field, else the value's bytes)."""
    fields, at = [], 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, end = _varint(data, at)
        elif wire == 1:
            end = at + 8
        elif wire == 5:
            end = at + 4
        elif wire == 2:
            size, at = _varint(data, at)
            end = at + size
        else:
            raise ProtoError(f"wire type {wire} in a serialized descriptor")
        if end > len(data):
            raise ProtoError("a truncated serialized descriptor")
        fields.append((number, wire, data[at:end]))
        at = end
    return fields


def _encode(fields, rewrite) -> _Encoded:
    """The fields again, each length-delimited payload through ``rewrite(number, payload)`` -> (payload, spans in
    it); the spans returned are offsets in the bytes written."""
    out, spans = bytearray(), []
    for number, wire, value in fields:
        out += _put_varint(number << 3 | wire)
        if wire != 2:
            out += value
            continue
        payload, inner = rewrite(number, value)
        out += _put_varint(len(payload))
        spans += [(name, len(out) + start, len(out) + end) for name, start, end in inner]
        out += payload
    return bytes(out), spans
