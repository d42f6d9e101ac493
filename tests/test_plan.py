"""build.plan in-process: a pure decision from the read stage's results, before anything is fetched."""

import pytest

from factory import make_wheel, tensorflow_files
from retfwheel.errors import TargetMismatchError, WheelFormatError
from retfwheel.native.inspection import inspect_wheel
from retfwheel.stages.plan import InjectBootstrap, make_plan
from retfwheel.targets.recipe import load_recipe
from retfwheel.wheelfile.writer import NewMember


def plan_for(path, recipe_path):
    recipe = load_recipe(recipe_path)
    return make_plan(inspect_wheel(path, recipe), recipe, "0" * 64, "0.1.0")


def test_names_version_and_tags(tf_wheel, recipe):
    plan = plan_for(tf_wheel(), recipe)
    assert plan.name == "tensorflow" and plan.version == "2.6.2+retf.test"
    assert plan.dist_info == "tensorflow-2.6.2+retf.test.dist-info"
    assert plan.filename.startswith("tensorflow-2.6.2+retf.test-cp36-cp36m-manylinux") and plan.filename.endswith(
        ".linux_x86_64.whl")
    assert all(tag.startswith("cp36-cp36m-") for tag in plan.tags)
    names = {m.name for m in plan.members}
    assert "tensorflow/__init__.py" in names and "tensorflow_cpu-2.6.2.dist-info/METADATA" not in names
    metadata = next(m for m in plan.members if m.name == f"{plan.dist_info}/METADATA")
    assert isinstance(metadata, NewMember) and b"Name: tensorflow\n" in metadata.data
    assert plan.steps == ()  # the bare test recipe vendors nothing and patches nothing


def test_runtime_defaults_plan_the_bootstrap(tf_wheel, make_recipe):
    recipe = make_recipe(extra='\n[runtime_env]\nTF_CPU_ALLOCATOR_USE_BFC = "true"\n')
    (step,) = plan_for(tf_wheel(), recipe).steps
    assert isinstance(step, InjectBootstrap) and step.runtime_env == (("TF_CPU_ALLOCATOR_USE_BFC", "true"),)
    assert step.ops_library is None and step.api == "v2"


def test_an_init_the_bootstrap_cannot_enter_is_refused_while_planning(tf_wheel, make_recipe):
    recipe = make_recipe(extra='\n[runtime_env]\nX = "1"\n')
    with pytest.raises(WheelFormatError, match="does not parse"):
        plan_for(tf_wheel({"tensorflow/__init__.py": b"def broken(:\n"}), recipe)


def test_another_python_is_refused_with_the_download_to_make(libs, tmp_path, recipe):
    wheel = make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi), tag="cp37-cp37m-manylinux2010_x86_64")
    with pytest.raises(TargetMismatchError, match="targets cp36-cp36m") as caught:
        plan_for(wheel, recipe)
    assert "--python-version 3.6" in caught.value.hint


def test_native_code_too_new_for_the_target_is_refused(tf_wheel, libs, old_recipe):
    with pytest.raises(TargetMismatchError, match="cannot run on old-py36"):
        plan_for(tf_wheel({"tensorflow/new.so": libs.new_glibc}), old_recipe)


def test_deeprec_api_extends_the_inputs_configproto_module_or_refuses_an_input_without_one(tf_wheel, make_recipe):
    from retfwheel.stages.oplib import OpFlags
    from retfwheel.stages.plan import CONFIG_MODULE, DEEPREC_OPTIMIZER_OPTIONS, ExtendProto

    recipe_path = make_recipe(extra="\n[ops]\nbuild = true\n\n[features]\ndeeprec_api = true\n")
    recipe_path.write_text('api = "v1"\n' + recipe_path.read_text())
    recipe = load_recipe(recipe_path)
    flags = OpFlags("c++14", 0, 64)

    def plan(wheel):
        return make_plan(inspect_wheel(wheel, recipe), recipe, "0" * 64, "0.1.0", op_flags=flags)

    with pytest.raises(TargetMismatchError, match="no tensorflow/core/protobuf/config_pb2.py") as caught:
        plan(tf_wheel())
    assert "deeprec_api = false" in caught.value.hint
    made = plan(tf_wheel({CONFIG_MODULE: b"# generated\n"}))
    (step,) = [s for s in made.steps if isinstance(s, ExtendProto)]
    assert (step.member, step.message, step.fields) == (CONFIG_MODULE, "tensorflow.OptimizerOptions",
                                                       DEEPREC_OPTIMIZER_OPTIONS)
    assert [f.number for f in step.fields] == [7, 9, 10, 11, 12, 14, 15]  # DeepRec's config.proto
