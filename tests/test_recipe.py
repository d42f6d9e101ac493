import pytest

from retfwheel.errors import RecipeError
from retfwheel.features import BY_KEY, FEATURES
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
def test_sparse_adam_kernels_need_the_1x_api_and_the_op_library(tmp_path, mode):
    text = 'api = "v1"\n' + GOOD + f'\n[features]\nsparse_adam = "{mode}"\n'
    with pytest.raises(RecipeError, match=f'sparse_adam = "{mode}" needs api = "v1" and \\[ops\\] build = true'):
        load_recipe(write(tmp_path, text))
    recipe = load_recipe(write(tmp_path, text + "\n[ops]\nbuild = true\n"))
    assert (recipe.api, recipe.feature("sparse_adam"), recipe.deprecations) == ("v1", mode, ())
    with pytest.raises(RecipeError, match='sparse_adam = .*eager.*expected "dense" or "fused" or "lazy"'):
        load_recipe(write(tmp_path, text.replace(mode, "eager")))


@pytest.mark.parametrize("key", [f.key for f in FEATURES if f.on_off and f.needs_ops])
def test_on_off_switches_need_the_1x_api_and_the_op_library(tmp_path, key):
    text = 'api = "v1"\n' + GOOD + f"\n[features]\n{key} = true\n"
    with pytest.raises(RecipeError, match=f'\\[features\\] {key} = true needs api = "v1" and \\[ops\\] build = true'):
        load_recipe(write(tmp_path, text))
    recipe = load_recipe(write(tmp_path, text + "\n[ops]\nbuild = true\n"))
    assert recipe.feature(key) == "1"
    assert load_recipe(write(tmp_path, GOOD)).feature(key) == "0"
    with pytest.raises(RecipeError, match=f"{key}.*expected true or false"):
        load_recipe(write(tmp_path, text.replace("= true", '= "yes"') + "\n[ops]\nbuild = true\n"))


@pytest.mark.parametrize("key", [f.key for f in FEATURES if not f.needs_ops])
def test_ops_free_switches_need_only_the_1x_api(tmp_path, key):
    text = GOOD + f"\n[features]\n{key} = true\n"
    with pytest.raises(RecipeError, match=f'\\[features\\] {key} = true needs api = "v1" \\(the 1.x API\\)'):
        load_recipe(write(tmp_path, text))
    recipe = load_recipe(write(tmp_path, 'api = "v1"\n' + text))
    assert (recipe.feature(key), recipe.ops.build) == ("1", False)


def test_an_unknown_switch_is_named_with_the_likely_one(tmp_path):
    with pytest.raises(RecipeError, match="\\[features\\] unknown key 'fused_embeddings'; did you mean 'fused_embedding'"):
        load_recipe(write(tmp_path, GOOD + "\n[features]\nfused_embeddings = true\n"))


@pytest.mark.parametrize("key", [f.key for f in FEATURES])
def test_a_top_level_v1_key_is_read_with_a_deprecation_line(tmp_path, key):
    feature = BY_KEY[key]
    value = next(c for c in feature.choices if c != feature.default)
    text = f'api = "v1"\nv1_{key} = {feature.recipe_text(value)}\n' + GOOD + "\n[ops]\nbuild = true\n"
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.feature(key) == value
    assert recipe.deprecations == (f"{tmp_path / 'r.toml'}: top-level v1_{key} is deprecated; write it as "
                                   f"{key} = {feature.recipe_text(value)} in [features] (the old key is read for one "
                                   "more release)",)
    with pytest.raises(RecipeError, match=f"v1_{key} and \\[features\\] {key} both set it"):
        load_recipe(write(tmp_path, text + f"\n[features]\n{key} = {feature.recipe_text(value)}\n"))


def test_the_environments_pip_is_the_users(tmp_path, emulated):
    assert load_recipe(emulated).environment.pip == "19.0.3"
    recipe = load_recipe(write(tmp_path, GOOD + '\n[environment]\npackages = ["tensorflow==1.15.5"]\n'))
    assert recipe.environment.pip == "19.0.3"  # the oldest pip that installs TF 1.15.5 from PyPI
    assert load_recipe(write(tmp_path, GOOD + '\n[environment]\npip = "9.0.1"\n')).environment.pip == "9.0.1"
    with pytest.raises(RecipeError, match=r"\[environment\] pip = 'latest': expected a pip version such as"):
        load_recipe(write(tmp_path, GOOD + '\n[environment]\npip = "latest"\n'))
