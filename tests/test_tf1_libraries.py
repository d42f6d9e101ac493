"""Libraries built for TensorFlow 1.x in the user's environment (custom-op libraries that link
libtensorflow_framework.so.1): `inspect --recipe` and `verify` list them, loading one on the wheel says what it is
and how to rebuild it, and rebuilt that way it loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROGRAM_TIMEOUT, run_bounded
from factory import compile_library, make_wheel
from retfwheel.native.tf1 import tf1_extensions

REPO = Path(__file__).resolve().parent.parent
TF115_RECIPE = REPO / "recipes" / "emulated-py36.toml"
V1_RECIPE = REPO / "recipes" / "emulated-py36-tf1api.toml"

# TensorFlow's own custom-op example: the first element kept, the rest zeroed.
ZERO_OUT = """
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("ZeroOut")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return Status::OK();
    });

class ZeroOutOp : public OpKernel {
 public:
  explicit ZeroOutOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
    auto in = input.flat<int32>();
    auto out = output->flat<int32>();
    for (int i = 0; i < out.size(); ++i) out(i) = i == 0 ? in(0) : 0;
  }
};

REGISTER_KERNEL_BUILDER(Name("ZeroOut").Device(DEVICE_CPU), ZeroOutOp);
"""
# As such packages load their library: tf.load_op_library next to the module.
PACKAGE = b"""import os
import tensorflow as tf
zero_out = tf.load_op_library(os.path.join(os.path.dirname(__file__), "_zero_out_ops.so")).zero_out
"""
RUN_OP = ("import sys, tensorflow as tf; op = tf.load_op_library(sys.argv[1]).zero_out([5, 4, 3]); "
          "print(tf.compat.v1.Session().run(op).tolist())")
FLAGS = "import json, tensorflow as tf; print(json.dumps(tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags()))"


def test_a_distribution_is_listed_by_the_framework_library_its_elf_files_link(tmp_path):
    """Found by DT_NEEDED, not by name; TF 1.x itself (which ships the framework library), other ELF files and
    damaged ones are not listed."""
    site = "lib/python3.6/site-packages"
    stub = compile_library(tmp_path, "libtensorflow_framework.so.1", "int tf1_stub(void) { return 1; }", cxx=False,
                           flags=("-Wl,-soname,libtensorflow_framework.so.1",))
    (tmp_path / "libtensorflow_framework.so.1").write_bytes(stub)
    linking = compile_library(tmp_path, "linking.so", "int tf1_stub(void); int op(void) { return tf1_stub(); }",
                              cxx=False, flags=("-Wl,--no-as-needed", f"-L{tmp_path}", "-l:libtensorflow_framework.so.1"))
    plain = compile_library(tmp_path, "plain.so", "int plain(void) { return 2; }", cxx=False)
    files = {f"{site}/tf1_op/_ops.so": linking, f"{site}/tf1_op/_ops.so.1": linking, f"{site}/tf1_op/helper.so": plain,
             f"{site}/tf1_op/notes.so": b"not an ELF file", f"{site}/tf1_op/cut.so": linking[:200],
             f"{site}/numpy/core/_multiarray.so": plain,
             f"{site}/tensorflow_core/libtensorflow_framework.so.1": stub,
             f"{site}/tensorflow_core/python/_pywrap_tensorflow_internal.so": linking}
    for path, data in files.items():
        (tmp_path / "env" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "env" / path).write_bytes(data)
    snapshot = {"tf1-op": {"version": "0.1", "files": [p for p in files if "/tf1_op/" in p]},
                "numpy": {"version": "1.18.5", "files": [p for p in files if "/numpy/" in p]},
                "tensorflow": {"version": "1.15.5", "files": [p for p in files if "/tensorflow_core/" in p]}}
    assert tf1_extensions(snapshot, tmp_path / "env") == {"tf1-op 0.1": (f"{site}/tf1_op/_ops.so",
                                                                           f"{site}/tf1_op/_ops.so.1")}


def run(recipe: Path, venv: Path | None, *arguments: str) -> subprocess.CompletedProcess:
    env_option = ("--env", str(venv)) if venv else ()
    return run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", recipe, *env_option, "python", *arguments],
                       PROGRAM_TIMEOUT, cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def build_zero_out(recipe: Path, venv: Path | None, folder: Path, standard: str) -> bytes:
    """The zero_out op library compiled as TensorFlow's guide does it, with the compile and link flags of the
    TensorFlow ``recipe`` runs (after the source, so the linker keeps the framework library)."""
    flags = run(recipe, venv, "-c", FLAGS)
    assert flags.returncode == 0, flags.stderr[-2000:]
    folder.mkdir()
    (folder / "zero_out.cc").write_text(ZERO_OUT)
    subprocess.run(["g++", standard, "-shared", "-fPIC", "-O1", folder / "zero_out.cc", "-o", folder / "zero_out.so",
                    *json.loads(flags.stdout.splitlines()[-1])], check=True)
    return (folder / "zero_out.so").read_bytes()


@pytest.mark.slow
def test_a_custom_op_library_built_for_tf_1_15_says_so_on_the_wheel_and_rebuilt_loads(python36, v1_venv, tmp_path):
    built_for_115 = build_zero_out(TF115_RECIPE, None, tmp_path / "tf115", "-std=c++11")
    (tmp_path / "zero_out_115.so").write_bytes(built_for_115)
    on_115 = run(TF115_RECIPE, None, "-c", RUN_OP, str(tmp_path / "zero_out_115.so"))
    assert on_115.stdout.splitlines()[-1:] == ["[5, 0, 0]"], on_115.stderr[-2000:]  # a real TF 1.15 custom op

    wheel = make_wheel(tmp_path, {"tf1_zero_out/__init__.py": PACKAGE, "tf1_zero_out/_zero_out_ops.so": built_for_115},
                       name="tf1_zero_out", version="0.1", tag="py3-none-linux_x86_64", requires=())
    pip = [v1_venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check"]
    installed = run_bounded([*pip, "install", "--no-index", "--no-deps", wheel], PROGRAM_TIMEOUT)
    assert installed.returncode == 0, installed.stderr[-2000:]
    try:
        imported = run(V1_RECIPE, v1_venv, "-c", "import tf1_zero_out")
        snapshot = run(V1_RECIPE, v1_venv, str(REPO / "runtime" / "probes" / "snapshot.py"))
        listed = tf1_extensions(json.loads(snapshot.stdout), v1_venv)  # as verify lists the environment's
    finally:
        removed = run_bounded([*pip, "uninstall", "-y", "tf1-zero-out"], PROGRAM_TIMEOUT)
    assert removed.returncode == 0, removed.stderr[-2000:]
    assert imported.returncode != 0
    error = imported.stderr.strip().splitlines()
    assert error[-2].startswith("tensorflow.python.framework.errors_impl.NotFoundError: libtensorflow_framework.so.1")
    assert error[-1].startswith("retf: ") and "_zero_out_ops.so (tf1-zero-out 0.1) was built for TensorFlow 1.x" in error[-1]
    assert "tf.sysconfig.get_compile_flags()" in error[-1]
    assert listed == {"tf1-zero-out 0.1": ("lib/python3.6/site-packages/tf1_zero_out/_zero_out_ops.so",)}

    # Rebuilt as the message says, against the wheel's TensorFlow, it loads and runs there.
    (tmp_path / "zero_out_26.so").write_bytes(build_zero_out(V1_RECIPE, v1_venv, tmp_path / "tf26", "-std=c++14"))
    on_wheel = run(V1_RECIPE, v1_venv, "-c", RUN_OP, str(tmp_path / "zero_out_26.so"))
    assert on_wheel.stdout.splitlines()[-1:] == ["[5, 0, 0]"], on_wheel.stderr[-2000:]
