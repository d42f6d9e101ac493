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


def test_a_kept_line_keeps_its_strings():
    assert rename("TABLE = {'wrapt': 1}\n", keep={1}) == "TABLE = {'wrapt': 1}\n"


def test_the_result_parses_and_other_modules_are_untouched():
    source = "import os\nimport wrapt\nfrom keras import layers as L\nimport numpy as np\n"
    result = rename(source)
    compile(result, "t.py", "exec")
    assert result.splitlines()[0] == "import os" and result.splitlines()[3] == "import numpy as np"
