"""Moving generated protobuf modules under private proto names, checked against protobuf's own descriptors: the
modules here are written the way protoc 3.19 writes them (serialized_start: where the descriptor's bytes first occur
in the file's), and the moved ones must load beside the originals in one descriptor pool."""

import ast

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool

from retfwheel.wheelfile.protos import ProtoError, ScalarField, add_fields, is_generated, move_proto, read_proto

PARENT = "tensorflow._vendor"
F = descriptor_pb2.FieldDescriptorProto


def _attr_file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="board/attr.proto", package="board", syntax="proto3")
    proto.message_type.add(name="Attr").field.add(name="s", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    return proto


def _entry(message: descriptor_pb2.DescriptorProto) -> None:
    """A map<string, board.Attr> field named attr: protoc writes a nested AttrEntry, byte-identical each time."""
    entry = message.nested_type.add(name="AttrEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".board.Attr")
    message.field.add(name="attr", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=f".board.{message.name if message.name == 'Fn' else 'Fn.' + message.name}.AttrEntry")


def _fn_file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="board/fn.proto", package="board", syntax="proto3",
                                               dependency=["board/attr.proto", "google/protobuf/any.proto"])
    fn = proto.message_type.add(name="Fn")
    _entry(fn)
    args = fn.nested_type.add(name="Args")
    _entry(args)
    fn.field.add(name="args", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".board.Fn.Args")
    fn.field.add(name="extra", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".google.protobuf.Any")
    fn.enum_type.add(name="Kind").value.add(name="PLAIN", number=0)
    method = proto.service.add(name="Exporter").method.add(name="Get")
    method.input_type, method.output_type = ".board.Fn", ".board.Attr"
    return proto


def _spans(proto: descriptor_pb2.FileDescriptorProto) -> dict[str, tuple[str, int, int]]:
    """{full name: (kind, start, end)} as protoc computes them: each descriptor's serialization found in the file's."""
    data = proto.SerializeToString()
    spans = {}

    def add(kind, full, message):
        piece = message.SerializeToString()
        start = data.find(piece)
        spans[full] = (kind, start, start + len(piece))

    def walk(message, scope):
        full = f"{scope}.{message.name}"
        add("Descriptor", full, message)
        for nested in message.nested_type:
            walk(nested, full)
        for enum in message.enum_type:
            add("EnumDescriptor", f"{full}.{enum.name}", enum)
    for message in proto.message_type:
        walk(message, proto.package)
    for service in proto.service:
        add("ServiceDescriptor", f"{proto.package}.{service.name}", service)
    return spans


def _module(proto: descriptor_pb2.FileDescriptorProto, module: str) -> str:
    """The protoc 3.19 form of a _pb2 module (the parts the move reads and writes)."""
    data = proto.SerializeToString()
    lines = ["import sys", "_b=sys.version_info[0]<3 and (lambda x:x) or (lambda x:x.encode('latin1'))",
             "from google.protobuf import descriptor as _descriptor", "",
             "DESCRIPTOR = _descriptor.FileDescriptor(", f"  name={proto.name!r},", f"  package={proto.package!r},",
             "  syntax='proto3',", f"  serialized_pb=_b({data.decode('latin-1')!r})", ")", ""]
    for full, (kind, start, end) in _spans(proto).items():
        variable = "_" + full.split(".", 1)[1].replace(".", "_").upper()
        lines += [f"{variable} = _descriptor.{kind}(", f"  name={full.rsplit('.', 1)[1]!r},", f"  full_name={full!r},",
                  "  fields=[_descriptor.FieldDescriptor(", f"    name='x', full_name={full + '.x'!r}, index=0)],",
                  f"  serialized_start={start},", f"  serialized_end={end},", ")", ""]
    lines.append(f"Fn = T('Fn', (), {{'DESCRIPTOR': _FN, '__module__': {module!r}}})")
    return "\n".join(lines) + "\n"


def _serialized(source: str) -> descriptor_pb2.FileDescriptorProto:
    namespace: dict = {}
    start = source.index("serialized_pb=") + len("serialized_pb=")
    literal = source[start:source.index("\n", start)]
    exec(f"value = {literal}", {"_b": lambda s: s.encode("latin-1")}, namespace)
    return descriptor_pb2.FileDescriptorProto.FromString(namespace["value"])


def _moved(proto):
    files = {"board/attr.proto", "board/fn.proto"}
    symbols = read_proto(_module(_attr_file(), "board.attr_pb2"), "a").symbols | \
        read_proto(_module(_fn_file(), "board.fn_pb2"), "f").symbols
    return move_proto(_module(proto, "board.x_pb2"), "board/x_pb2.py", PARENT, files, symbols)


def test_read_proto_names_the_file_and_every_symbol_it_defines():
    found = read_proto(_module(_fn_file(), "board.fn_pb2"), "board/fn_pb2.py")
    assert (found.name, found.package) == ("board/fn.proto", "board")
    assert found.symbols == {"board.Fn", "board.Fn.AttrEntry", "board.Fn.Args", "board.Fn.Args.AttrEntry",
                             "board.Fn.Kind", "board.Exporter"}
    assert is_generated(_module(_fn_file(), "m"))


def test_the_moved_descriptor_names_the_private_file_package_and_types_and_keeps_the_others():
    moved = _serialized(_moved(_fn_file()))
    assert (moved.name, moved.package) == ("tensorflow/_vendor/board/fn.proto", "tensorflow._vendor.board")
    assert list(moved.dependency) == ["tensorflow/_vendor/board/attr.proto", "google/protobuf/any.proto"]
    fn = moved.message_type[0]
    assert [f.type_name for f in fn.field] == [".tensorflow._vendor.board.Fn.AttrEntry",
                                                ".tensorflow._vendor.board.Fn.Args", ".google.protobuf.Any"]
    assert fn.nested_type[0].field[1].type_name == ".tensorflow._vendor.board.Attr"
    method = moved.service[0].method[0]
    assert (method.input_type, method.output_type) == (".tensorflow._vendor.board.Fn", ".tensorflow._vendor.board.Attr")


def _declared(source: str) -> dict[str, tuple[str, int, int]]:
    tree = ast.parse(source)
    found = {}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and "serialized_start" in {k.arg for k in call.keywords}:
            values = {k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)}
            found[values["full_name"]] = (call.func.attr, values["serialized_start"], values["serialized_end"])
    return found


def test_the_module_keywords_and_spans_match_what_protoc_writes_for_the_moved_descriptor():
    source = _moved(_fn_file())
    spans = _spans(_serialized(source))  # protoc's, for the moved descriptor
    assert _declared(source) == spans
    assert spans["tensorflow._vendor.board.Fn.Args.AttrEntry"][1:] == spans["tensorflow._vendor.board.Fn.AttrEntry"][1:]
    assert "full_name='tensorflow._vendor.board.Fn.Args.x'" in source
    assert "'__module__': 'board.x_pb2'" in source  # the module name is the import rewrite's (renaming)


def test_moved_files_load_beside_the_originals_in_one_pool():
    pool = descriptor_pool.DescriptorPool()
    any_file = descriptor_pb2.FileDescriptorProto(name="google/protobuf/any.proto", package="google.protobuf")
    any_file.message_type.add(name="Any")
    pool.Add(any_file)
    pool.Add(_attr_file())
    pool.Add(_fn_file())
    pool.Add(_serialized(_moved(_attr_file())))
    pool.Add(_serialized(_moved(_fn_file())))
    ours = pool.FindMessageTypeByName("tensorflow._vendor.board.Fn")
    assert ours.fields_by_name["attr"].message_type.fields_by_name["value"].message_type.full_name == \
        "tensorflow._vendor.board.Attr"
    assert pool.FindMessageTypeByName("board.Fn").file.name == "board/fn.proto"


def test_a_module_whose_spans_disagree_with_its_descriptor_is_refused():
    source = _module(_fn_file(), "board.fn_pb2")
    start = source.index("serialized_start=") + len("serialized_start=")
    tampered = source[:start] + "1" + source[start:]
    with pytest.raises(ProtoError, match="spans do not match"):
        move_proto(tampered, "board/fn_pb2.py", PARENT, {"board/fn.proto"}, {"board.Fn"})


def test_a_module_in_another_form_is_refused():
    with pytest.raises(ProtoError, match="not a protoc module"):
        read_proto("from google.protobuf import descriptor_pool\n"
                   "DESCRIPTOR = descriptor_pool.Default().AddSerializedFile(b'')\n", "new_pb2.py")


DEEPREC_LIKE = (ScalarField("do_op_fusion", 7, "bool"), ScalarField("micro_batch_num", 9, "int32"))


def test_added_fields_are_in_the_descriptor_the_spans_and_the_python_descriptors_as_protoc_would_write_them():
    source = add_fields(_module(_fn_file(), "board.fn_pb2"), "board/fn_pb2.py", "board.Fn.Args", DEEPREC_LIKE)
    extended = _serialized(source)
    args = extended.message_type[0].nested_type[1]
    assert [(f.name, f.number, f.type, f.label, f.json_name) for f in args.field[1:]] == [
        ("do_op_fusion", 7, F.TYPE_BOOL, F.LABEL_OPTIONAL, "doOpFusion"),
        ("micro_batch_num", 9, F.TYPE_INT32, F.LABEL_OPTIONAL, "microBatchNum")]
    # the bytes are protoc's for the extended file, so protobuf's own pool takes them and finds the fields
    expected = _fn_file()
    fields = expected.message_type[0].nested_type[1].field
    fields.add(name="do_op_fusion", number=7, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL, json_name="doOpFusion")
    fields.add(name="micro_batch_num", number=9, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32, json_name="microBatchNum")
    assert extended.SerializeToString() == expected.SerializeToString()
    assert _declared(source) == _spans(extended)  # every span after the message moved, the message's grew
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_attr_file())
    from google.protobuf import any_pb2
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(extended)
    assert pool.FindFieldByName("board.Fn.Args.micro_batch_num").number == 9
    assert ("_descriptor.FieldDescriptor(name='micro_batch_num', full_name='board.Fn.Args.micro_batch_num', index=2, "
            "number=9, type=5, cpp_type=1, label=1, has_default_value=False, default_value=0,") in source


def test_a_field_the_message_has_or_a_message_it_lacks_is_refused():
    source = add_fields(_module(_fn_file(), "board.fn_pb2"), "board/fn_pb2.py", "board.Fn.Args", DEEPREC_LIKE)
    with pytest.raises(ProtoError, match="already has a field named or numbered as do_op_fusion"):
        add_fields(source, "board/fn_pb2.py", "board.Fn.Args", DEEPREC_LIKE[:1])
    with pytest.raises(ProtoError, match="no message board.Nothing"):
        add_fields(source, "board/fn_pb2.py", "board.Nothing", DEEPREC_LIKE)
