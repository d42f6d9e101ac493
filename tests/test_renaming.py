import pytest

from retfwheel.wheelfile.renaming import RenameError, rename_imports

RENAMES = {"wrapt": "tensorflow._vendor", "keras": "tensorflow._vendor"}


def rename(source: str, keep=()) -> str:
    return rename_imports(source, "t.py", RENAMES, keep)


@pytest.mark.parametrize(("before", "after"), [
    ("import wrapt\n", "from tensorflow._vendor import wrapt\n"),
    ("import wrapt as _wrapt  # the proxy types\n", "from tensorflow._vendor import wrapt as _wrapt  # the proxy types\n"),
    ("import keras.engine.base_layer as base\n", "import tensorflow._vendor.keras.engine.base_layer as base\n"),
    ("from keras import backend\n", "from tensorflow._vendor.keras import backend\n"),
    ("from keras.engine import (\n    base_layer,\n    training)\n",
     "from tensorflow._vendor.keras.engine import (\n    base_layer,\n    training)\n"),
    ("def f():\n    from  wrapt.wrappers import ObjectProxy\n    return ObjectProxy\n",
     "def f():\n    from  tensorflow._vendor.wrapt.wrappers import ObjectProxy\n    return ObjectProxy\n"),
    ("from . import wrapt\nfrom .keras import x\n", "from . import wrapt\nfrom .keras import x\n"),
    ("import wraptx\nfrom kerasy import y\n", "import wraptx\nfrom kerasy import y\n"),
])
def test_imports_point_at_the_private_name(before, after):
    assert rename(before) == after


@pytest.mark.parametrize(("before", "after"), [
    ('keras = _LazyLoader("keras", globals(), "keras.api._v2.keras")\n',
     'keras = _LazyLoader("keras", globals(), "tensorflow._vendor.keras.api._v2.keras")\n'),
    ("m = importlib.import_module('keras.engine')\n", "m = importlib.import_module('tensorflow._vendor.keras.engine')\n"),
    ('_keras_module = "keras.api._v1.keras"\n', '_keras_module = "tensorflow._vendor.keras.api._v1.keras"\n'),
    ("@keras_export('keras.layers.Dense')\nclass Dense: pass\n", "@keras_export('keras.layers.Dense')\nclass Dense: pass\n"),
    ("ok = _is_known_loaded_type(f, 'wrapt', 'FunctionWrapper')\n",
     "ok = _is_known_loaded_type(f, 'wrapt', 'FunctionWrapper')\n"),
    ('"""Uses wrapt and keras."""\nx = "keras layers"\n', '"""Uses wrapt and keras."""\nx = "keras layers"\n'),
    ("s = 'é'; import wrapt\n", "s = 'é'; from tensorflow._vendor import wrapt\n"),
    ("X = T(dict(DESCRIPTOR=d), {'DESCRIPTOR': d, '__module__': 'keras.protobuf.versions_pb2'})\n",
     "X = T(dict(DESCRIPTOR=d), {'DESCRIPTOR': d, '__module__': 'tensorflow._vendor.keras.protobuf.versions_pb2'})\n"),
])
def test_module_names_in_strings_are_rewritten_only_where_code_imports_by_name(before, after):
    assert rename(before) == after


@pytest.mark.parametrize(("source", "said"), [
    ("import keras.engine\n", "binds 'keras' itself"),
    ("import os, wrapt\n", "several modules"),
    ("TABLE = {'wrapt': 1}\n", "t.py:1: the string 'wrapt' names a renamed module"),
    ("m = importlib.import_module('ker' 'as.engine')\n", "the string 'keras.engine'"),
    ("def f(:\n", "cannot parse"),
])
def test_what_cannot_be_rewritten_one_for_one_fails_with_file_and_line(source, said):
    with pytest.raises(RenameError, match=said.replace("(", r"\(")):
        rename(source)


@pytest.mark.parametrize("source", [
    "setattr(module, 'keras', keras)\nif hasattr(module, 'keras'): pass\n",
    "name = get_canonical_name_for_symbol(cls, api_name='keras')\n",
    "KERAS_API_NAME = 'keras'\n_WSGI_KEY = 'keras.request_context'\n",
    "if fmt in ('h5', 'keras'): pass\nok = names != ('keras.layers.Layer',)\n",
    "parser = ArgumentParser(prog='keras')\n",
    "keras_model_summary('keras', model, step=0)\n",
    "handler = grpc.method_handlers_generic_handler('keras.service.Exporter', handlers)\n",
])
def test_public_names_attributes_and_compared_values_keep_the_name(source):
    assert rename(source) == source


@pytest.mark.parametrize("source", [
    "_KERAS_MODULE = 'keras.api'\n",  # an upper-case constant that is not a *_NAME or *_KEY may be imported by name
    "x = {'keras': 1}\n",
])
def test_anything_else_naming_a_renamed_module_still_fails(source):
    with pytest.raises(RenameError):
        rename(source)


def test_a_kept_string_stays():
    assert rename("TABLE = {'wrapt': 1}\n", keep={"wrapt"}) == "TABLE = {'wrapt': 1}\n"


def test_the_result_parses_and_other_modules_are_untouched():
    source = "import os\nimport wrapt\nfrom keras import layers as L\nimport numpy as np\n"
    result = rename(source)
    compile(result, "t.py", "exec")
    assert result.splitlines()[0] == "import os" and result.splitlines()[3] == "import numpy as np"


def test_a_private_string_is_replaced_exactly_once_or_the_build_stops():
    from retfwheel.wheelfile.renaming import replace_private_strings
    source = 'for e in iter_entry_points("tensorboard_plugins"): pass\n'
    moved = {'"tensorboard_plugins"': '"tensorflow._vendor.tensorboard_plugins"'}
    assert replace_private_strings(source, "d.py", moved) == \
        'for e in iter_entry_points("tensorflow._vendor.tensorboard_plugins"): pass\n'
    with pytest.raises(RenameError, match="d.py: expected \"tensorboard_plugins\" once, found it 0 times"):
        replace_private_strings("x = 1\n", "d.py", moved)
