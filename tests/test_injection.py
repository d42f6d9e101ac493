import ast

import pytest

from retfwheel.wheelfile.injection import BEGIN, END, InjectionError, bootstrap_block, inject

TF_HEAD = b'''# Copyright 2015 The TensorFlow Authors. All Rights Reserved.
# ==============================================================================
"""
Top-level module of TensorFlow.
"""

from __future__ import absolute_import as _absolute_import
from __future__ import division as _division

import distutils as _distutils
import sys as _sys
'''
BLOCK = bootstrap_block("tensorflow._retf", {"label": "t"})


def lines_of(data: bytes) -> list[str]:
    return data.decode().splitlines()


def test_block_goes_after_docstring_and_future_imports():
    out = lines_of(inject(TF_HEAD, BLOCK, "tensorflow/__init__.py"))
    begin = out.index(BEGIN)
    assert out[begin - 1] == "from __future__ import division as _division"
    assert out[out.index(END) + 1] == "try:" and out[out.index(END) + 2] == ""
    assert out.index("    import distutils as _distutils") > out.index(END)
    tree = ast.parse("\n".join(out))
    names = [type(n).__name__ for n in tree.body]
    assert names == ["Expr", "ImportFrom", "ImportFrom", "FunctionDef", "Assign", "Delete", "Try"]
    assert [type(n).__name__ for n in tree.body[-1].body] == ["Import", "Import"]


def test_no_docstring_keeps_leading_comments_and_encoding_line_first():
    source = b"# -*- coding: utf-8 -*-\n# licence\n\nimport os\n"
    out = lines_of(inject(source, BLOCK, "x"))
    assert out[:3] == ["# -*- coding: utf-8 -*-", "# licence", ""] and out[3] == BEGIN
    assert out[out.index("try:") + 1] == "    import os" and out[-1] == "    del _retf_resume"


def test_crlf_line_endings_are_kept():
    source = TF_HEAD.replace(b"\n", b"\r\n")
    out = inject(source, BLOCK, "x")
    assert b"\n" not in out.replace(b"\r\n", b"") and BEGIN.encode() + b"\r\n" in out


def test_docstring_only_and_empty_files():
    assert lines_of(inject(b'"""Doc."""', BLOCK, "x"))[1] == BEGIN
    assert lines_of(inject(b"", BLOCK, "x"))[0] == BEGIN
    out = lines_of(inject(b'"""Doc."""\n# only a comment\n', BLOCK, "x"))
    assert out[out.index("try:") + 1:out.index("finally:")] == ["    # only a comment", "    pass"]


def test_decorated_first_statement():
    out = lines_of(inject(b"@decorator\ndef f():\n    pass\n", BLOCK, "x"))
    assert out[0] == BEGIN and out[out.index("try:") + 1:out.index("finally:")] == [
        "    @decorator", "    def f():", "        pass"]


def test_the_package_code_keeps_its_strings_byte_for_byte_and_its_indentation_style():
    source = (b'import sys\nTEXT = """first\n  second\n\tthird"""\nif sys:\n  x = (1,\n1)\n  y = "a\\\nb"\n'
              b'def f():\n  """Doc\n  more."""\n  return TEXT\n')
    out = inject(source, BLOCK, "x").decode()
    assert '    TEXT = """first\n  second\n\tthird"""\n' in out and '"a\\\nb"' in out and "  more.\"\"\"" in out
    namespace = {"__file__": "/site/tensorflow/__init__.py"}
    exec(compile(out.replace("from tensorflow._retf import run as _run", "_run = lambda *a: None"), "x", "exec"),
         namespace)
    assert namespace["f"]() == "first\n  second\n\tthird" and namespace["y"] == "ab" and "_retf_resume" not in namespace
    tabs = inject(b"if True:\n\tx = 1\n", BLOCK, "x").decode()
    assert "\tif True:\n\t\tx = 1\n" in tabs


def test_code_whose_tree_the_indentation_would_change_is_refused(monkeypatch):
    import retfwheel.wheelfile.injection as injection

    monkeypatch.setattr(injection, "_indented", lambda text: "".join("    " + line for line in text.splitlines(True)))
    with pytest.raises(InjectionError, match="could not be placed under the bootstrap's `try` unchanged"):
        inject(b'TEXT = """a\nb"""\n', BLOCK, "x")
    assert inject(b"TEXT = 'a'\n", BLOCK, "x")  # no line inside a string: the same tree


@pytest.mark.parametrize("body", ["VALUE = 1\n", "raise ImportError('no')\n", "raise KeyboardInterrupt\n"])
def test_what_the_bootstrap_returns_is_called_once_however_the_package_code_ends(body):
    patched = inject(f'"""Doc."""\n{body}'.encode(), BLOCK, "x").decode()
    calls = []
    namespace = {"__file__": "/site/tensorflow/__init__.py", "calls": calls}
    code = compile(patched.replace("from tensorflow._retf import run as _run",
                                   "_run = lambda *a: (lambda: calls.append('resumed'))"), "x", "exec")
    try:
        exec(code, namespace)
    except (ImportError, KeyboardInterrupt):
        assert body.startswith("raise")
    else:
        assert namespace["VALUE"] == 1
    assert calls == ["resumed"] and "_retf_resume" not in namespace


def test_second_injection_and_broken_sources_are_refused():
    once = inject(TF_HEAD, BLOCK, "x")
    with pytest.raises(InjectionError, match="already carries"):
        inject(once, BLOCK, "x")
    with pytest.raises(InjectionError, match="does not parse"):
        inject(b"def (:\n", BLOCK, "x")


def test_block_runs_once_and_leaves_no_name_behind():
    namespace = {"__file__": "/site/tensorflow/__init__.py"}
    code = bootstrap_block("json", {}).replace("from json import run as _run", "_run = lambda *a: calls.append(a)")
    calls = []
    namespace["calls"] = calls
    exec(compile(code, "x", "exec"), namespace)
    assert len(calls) == 1 and calls[0][0] == "/site/tensorflow" and "_retf_bootstrap" not in namespace


def test_finishing_blocks_go_last_in_order_and_only_once():
    from retfwheel.wheelfile.injection import API_BEGIN, OPS_BEGIN, api_block, append, ops_block

    patched = inject(TF_HEAD, BLOCK, "tensorflow/__init__.py")
    patched = append(patched, ops_block("tensorflow._retf.ops", {"library": "retf/_retf_ops.so"}), "init")
    patched = append(patched, api_block("tensorflow._retf.v1_api", {"features": {}}), "init")
    out = lines_of(patched)
    assert out.index(BEGIN) < out.index("    import sys as _sys") < out.index("finally:") < out.index(OPS_BEGIN)
    assert out.index(OPS_BEGIN) < out.index(API_BEGIN)
    assert "    _call(globals(), {\"library\": \"retf/_retf_ops.so\"})" in out
    ast.parse(patched)
    with pytest.raises(InjectionError, match="already carries the block"):
        append(patched, ops_block("tensorflow._retf.ops", {}), "init")


def test_finishing_block_settings_are_a_python_literal():
    from retfwheel.stages.bootstrap_config import ApiSettings
    from retfwheel.wheelfile.injection import api_block

    settings = ApiSettings("tensorflow 2.6.2", (("sparse_adam", "fused"), ("fused_sparse", "1"))).to_json()
    block = api_block("json", settings)
    calls = []
    exec(compile(block.replace("from json import expose_v1_api as _call", "_call = lambda *a: calls.append(a)"),
                 "x", "exec"), {"calls": calls})
    assert calls[0][1] == settings
    assert settings["features"]["fused_sparse"] == {
        "value": "1", "default": "0", "env": "RETF_FUSED_SPARSE", "choices": ["0", "1"], "needs_ops": "1",
        "what": "tf.train.AdagradOptimizer and FtrlOptimizer apply sparse gradients in retf's fused kernels"}
    with pytest.raises(ValueError, match="strings, numbers or lists"):
        api_block("json", {"v1_fused_sparse": True})
