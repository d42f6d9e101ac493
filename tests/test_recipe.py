import pytest

from retfwheel.errors import RecipeError
from retfwheel.targets.recipe import host_glibc, load_recipe

GOOD = """
[target]
python = "3.6"
glibc = "2.27"
glibcxx = "3.4.25"
cxxabi = "1.3.11"
gcc = "7.0.0"

[output]
name = "tensorflow"
local_version = "retf.t"
"""


def write(tmp_path, text, name="r.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_recipes_load(emulated, bionic):
    emu = load_recipe(emulated)
    assert emu.target.python == (3, 6) and emu.target.abi == "cp36m"
    assert emu.target.glibc == host_glibc() and emu.target.glibcxx == (3, 4, 28)
    assert str(emu.input_requirement) == "tensorflow-cpu==2.6.2" and emu.output.name == "tensorflow"
    bio = load_recipe(bionic)
    assert bio.target.glibc == (2, 27) and bio.target.glibcxx == (3, 4, 25)


def test_defaults(tmp_path):
    recipe = load_recipe(write(tmp_path, GOOD))
    assert recipe.target.abi == "cp36m" and recipe.target.arch == "x86_64" and recipe.output.platform == "auto"
    assert recipe.input_requirement is None and len(recipe.sha256) == 64


def test_every_problem_is_reported_at_once_with_did_you_mean(tmp_path):
    text = GOOD.replace('python = "3.6"', 'pyton = "3.6"').replace('local_version = "retf.t"', 'local_version = "no spaces"')
    text += '\n[deps]\nleve = ["wheel"]\n[extras]\n'
    with pytest.raises(RecipeError) as info:
        load_recipe(write(tmp_path, text))
    problems = info.value.problems
    assert any("[target] unknown key 'pyton'; did you mean 'python'?" in p for p in problems)
    assert any("[target] missing key 'python'" in p for p in problems)
    assert any("local_version" in p and "local version label" in p for p in problems)
    assert any("[deps] unknown key 'leve'; did you mean 'leave'?" in p for p in problems)
    assert any("unknown key 'extras'" in p for p in problems)
    assert all(p.startswith(str(tmp_path / "r.toml") + ":") for p in problems)


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ('glibc = "2.27"', 'glibc = 2.27', "expected a version string"),
        ('python = "3.6"', 'python = "2.7"', "Python 3 version"),
        ('name = "tensorflow"', 'name = "-bad-"', "distribution name"),
    ],
)
def test_bad_values_name_the_key(tmp_path, old, new, fragment):
    with pytest.raises(RecipeError, match=fragment):
        load_recipe(write(tmp_path, GOOD.replace(old, new)))


def test_input_must_be_pinned(tmp_path):
    with pytest.raises(RecipeError, match="pin one exact version"):
        load_recipe(write(tmp_path, GOOD + '\n[input]\nrequirement = "tensorflow-cpu>=2.6"\n'))


def test_malformed_toml_and_missing_file(tmp_path):
    with pytest.raises(RecipeError, match="not valid TOML"):
        load_recipe(write(tmp_path, "[target\n"))
    with pytest.raises(RecipeError, match="no such recipe"):
        load_recipe(tmp_path / "absent.toml")


@pytest.mark.parametrize("mode", ["fused", "lazy"])
def test_v1_sparse_adam_kernels_need_the_1x_api_and_the_op_library(tmp_path, mode):
    text = f'api = "v1"\nv1_sparse_adam = "{mode}"\n' + GOOD
    with pytest.raises(RecipeError, match=f'"{mode}" needs api = "v1" and \\[ops\\] build = true'):
        load_recipe(write(tmp_path, text))
    recipe = load_recipe(write(tmp_path, text + "\n[ops]\nbuild = true\n"))
    assert (recipe.api, recipe.v1_sparse_adam) == ("v1", mode)
    with pytest.raises(RecipeError, match="v1_sparse_adam"):
        load_recipe(write(tmp_path, text.replace(mode, "eager")))


@pytest.mark.parametrize("key", ["v1_fused_sparse", "v1_fused_embedding", "v1_fused_matmul_grad", "v1_fast_decode_csv",
                                 "v1_large_block_allocator", "v1_fused_concat_grad", "v1_deeprec_optimizers"])
def test_fused_sparse_and_deeprec_switches_need_the_1x_api_and_the_op_library(tmp_path, key):
    text = f'api = "v1"\n{key} = true\n' + GOOD
    with pytest.raises(RecipeError, match=f'{key} = true needs api = "v1" and \\[ops\\] build = true'):
        load_recipe(write(tmp_path, text))
    recipe = load_recipe(write(tmp_path, text + "\n[ops]\nbuild = true\n"))
    assert getattr(recipe, key) is True
    assert load_recipe(write(tmp_path, GOOD)).v1_fused_sparse is False
    with pytest.raises(RecipeError, match=f"{key}.*expected true or false"):
        load_recipe(write(tmp_path, text.replace("= true", '= "yes"') + "\n[ops]\nbuild = true\n"))


def test_the_environments_pip_is_the_users(tmp_path, emulated):
    assert load_recipe(emulated).environment.pip == "19.0.3"
    recipe = load_recipe(write(tmp_path, GOOD + '\n[environment]\npackages = ["tensorflow==1.15.5"]\n'))
    assert recipe.environment.pip == "19.0.3"  # the oldest pip that installs TF 1.15.5 from PyPI
    assert load_recipe(write(tmp_path, GOOD + '\n[environment]\npip = "9.0.1"\n')).environment.pip == "9.0.1"
    with pytest.raises(RecipeError, match=r"\[environment\] pip = 'latest': expected a pip version such as"):
        load_recipe(write(tmp_path, GOOD + '\n[environment]\npip = "latest"\n'))
