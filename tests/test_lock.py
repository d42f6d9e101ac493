"""target.lock in-process: the lock file round-trips, and a lock made for other requirements is refused."""

import pytest

from factory import make_wheel, tensorflow_files
from retfwheel.errors import RecipeError
from retfwheel.targets.lock import (
    Lock,
    LockedPackage,
    check_lock,
    find_lock,
    format_lock,
    lock_candidates,
    lock_destination,
    read_lock,
    requirements_digest,
    vendored_requirements,
)
from retfwheel.targets.recipe import find_recipe, is_builtin, load_recipe
from retfwheel.wheelfile.wheel import read_wheel


def test_round_trip_and_drift(libs, tmp_path):
    wheel = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi)))
    requirements = vendored_requirements(wheel, ("six",))
    assert [r.name for r in requirements] == ["numpy"]  # six is left to the environment
    lock = Lock(tmp_path / "r.lock", "r", "tensorflow-cpu==2.6.2", requirements_digest(requirements),
                (LockedPackage("numpy", "1.19.5", "numpy-1.19.5-cp36-cp36m-manylinux2010_x86_64.whl", "a" * 64, "wheel"),))
    lock.path.write_text(format_lock(lock))
    again = read_lock(lock.path)
    assert again == lock
    check_lock(again, wheel, requirements)
    with pytest.raises(RecipeError, match="requirements differ"):
        check_lock(again, wheel, vendored_requirements(wheel, ()))  # six is not left any more: another closure


def test_a_hand_edited_lock_is_refused(tmp_path):
    path = tmp_path / "r.lock"
    path.write_text('[lock]\nversion = 1\nrecipe = "r"\ninput = "x"\nrequirements_sha256 = "zz"\n\n[[package]]\nname = "numpy"\n')
    with pytest.raises(RecipeError):
        read_lock(path)


DEPS = '\n[deps]\nvendor = true\n'


def test_each_input_has_its_own_lock_next_to_a_users_recipe(make_recipe, libs, tmp_path):
    recipe = load_recipe(make_recipe(extra=DEPS))
    cpu = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi)))
    gpu = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi), name="tensorflow", version="2.4.4"))
    store = tmp_path / "cache" / "locks"
    first = lock_destination(recipe, cpu, None, store, builtin=False)
    second = lock_destination(recipe, gpu, None, store, builtin=False)
    assert first == recipe.path.parent / "test-py36.tensorflow-cpu-2.6.2.lock"
    assert second == recipe.path.parent / "test-py36.tensorflow-2.4.4.lock"
    assert lock_destination(recipe, cpu, tmp_path / "mine", store, builtin=False) == tmp_path / "mine" / first.name
    assert lock_candidates(recipe, cpu, tmp_path / "mine", store) == [tmp_path / "mine" / first.name, first,
                                                                      store / first.name]


def test_a_builtin_recipe_never_gets_a_lock_written_into_the_tool(libs, tmp_path):
    recipe = load_recipe(find_recipe("emulated-py36"))
    assert is_builtin(recipe)
    wheel = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi), version="2.4.4"))
    store = tmp_path / "cache" / "locks"
    assert lock_destination(recipe, wheel, None, store, builtin=True) == store / "emulated-py36.tensorflow-cpu-2.4.4.lock"


def test_a_missing_lock_names_the_command_that_makes_it(make_recipe, libs, tmp_path):
    recipe = load_recipe(make_recipe(extra=DEPS))
    wheel = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi)))
    with pytest.raises(RecipeError, match="no lock for tensorflow-cpu 2.6.2") as caught:
        find_lock(recipe, wheel, None, tmp_path / "store", str(recipe.path))
    assert caught.value.hint == f"make one: retfwheel lock --recipe {recipe.path} {wheel.path}"


def test_a_fixed_lock_in_the_recipe_is_used_for_every_input(make_recipe, libs, tmp_path):
    recipe = load_recipe(make_recipe(extra=DEPS + 'lock = "pinned.lock"\n'))
    wheel = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi)))
    assert lock_candidates(recipe, wheel, tmp_path / "mine", tmp_path / "store") == [recipe.path.parent / "pinned.lock"]
