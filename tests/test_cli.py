"""The command line as users meet it: output, exit codes per error family, nothing left behind."""

import json
import os
import re
import stat
import zipfile

import pytest

from factory import VERSION_H, compile_library, make_wheel, tensorflow_files

# A framework library whose tensorflow:: symbols split evenly between the two std::string ABIs (the
# abi_tag mangles a name as the C++11 string's do).
TIE_SOURCE = """
#include <string>
namespace tensorflow {
int NameLength(const std::string& name) { return static_cast<int>(name.size()); }
__attribute__((abi_tag("cxx11"))) int Cxx11Length(int n) { return n; }
}
"""
CODES = {"input": 3, "format": 4, "unsafe": 5, "record": 6, "recipe": 7, "target": 8, "processed": 9, "output": 12, "ops": 15}


def assert_clean_failure(run, family, fragment, out_dir=None):
    assert run.code == CODES[family], run.err
    assert "Traceback" not in run.err and run.out == ""
    errors = [line for line in run.err.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and fragment in errors[0], run.err
    if out_dir is not None:
        assert not out_dir.exists() or os.listdir(out_dir) == []


def test_inspect_human_output(cli, tf_wheel, old_recipe):
    run = cli("inspect", tf_wheel(), "--recipe", old_recipe)
    assert run.code == 0, run.err
    assert re.search(r"^tensorflow:\s+2\.6\.2$", run.out, re.M)
    assert "_GLIBCXX_USE_CXX11_ABI=0" in run.out
    assert "tensorflow/libtensorflow_framework.so.2" in run.out and "needed: " in run.out
    assert "verdict: fine as is" in run.out and re.search(r"^retfwheel:\s+not processed$", run.out, re.M)


def test_inspect_json_and_verdicts(cli, tmp_path, libs, old_recipe, recipe):
    files = tensorflow_files(libs.framework_old_abi, {"tensorflow/python/tc.so": libs.to_chars, "tensorflow/python/ng.so": libs.new_glibc})
    wheel = make_wheel(tmp_path, files)
    data = json.loads(cli("inspect", wheel, "--recipe", old_recipe, "--json").out)
    assert data["version"] == 1 and data["tensorflow_version"] == "2.6.2" and data["cxx11_abi"] == 0
    assert data["wheel"]["python"] == ["cp36"] and data["wheel"]["abi"] == ["cp36m"]
    assert data["wheel"]["requires_dist"] == ["numpy (~=1.19.2)", "six (~=1.15.0)"]
    elves = {e["path"]: e for e in data["elf"]}
    assert elves["tensorflow/libtensorflow_framework.so.2"]["verdict"] == "ok"
    assert elves["tensorflow/python/tc.so"]["verdict"] == "needs_libstdcxx"
    assert "GLIBCXX_3.4.25" in elves["tensorflow/python/tc.so"]["reasons"][0]
    assert elves["tensorflow/python/ng.so"]["verdict"] == "cannot_run"
    assert any("glibc has GLIBC_2.27" in r for r in elves["tensorflow/python/ng.so"]["reasons"])
    emu = json.loads(cli("inspect", wheel, "--recipe", recipe, "--json").out)
    assert {e["path"]: e["verdict"] for e in emu["elf"]}["tensorflow/python/ng.so"] == "ok"


def test_inspect_new_abi_wheel(cli, tmp_path, libs):
    wheel = make_wheel(tmp_path, tensorflow_files(libs.framework_new_abi))
    assert json.loads(cli("inspect", wheel, "--json").out)["cxx11_abi"] == 1


def test_build_prints_output_path_last(cli, tf_wheel, recipe, tmp_path):
    out = tmp_path / "out"
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", out, "--report", tmp_path / "r.json")
    assert run.code == 0, run.err
    last = run.out.strip().splitlines()[-1]
    assert last == str(out / os.listdir(out)[0]) and last.endswith(".whl")
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["version"] == 1 and report["output"] == last and report["audit"]


def test_dry_run_prints_plan_and_writes_nothing(cli, tf_wheel, recipe, tmp_path):
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "out", "--dry-run")
    assert run.code == 0, run.err
    assert "plan: tensorflow-2.6.2+retf.test-" in run.out and "dry run: nothing written" in run.out
    assert not (tmp_path / "out").exists()


def test_already_processed_wheel_is_refused(cli, tf_wheel, recipe, tmp_path):
    first = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "one").out.strip().splitlines()[-1]
    run = cli("build", first, "--recipe", recipe, "--out-dir", tmp_path / "two")
    assert_clean_failure(run, "processed", "already produced by retfwheel", tmp_path / "two")
    assert "already processed" in cli("inspect", first).out


def _raw_zip(path, entries):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize("name, fragment", [("../evil.py", "escapes the install directory"), ("/etc/evil", "absolute path")])
def test_unsafe_names_are_refused(cli, tmp_path, recipe, name, fragment):
    wheel = _raw_zip(tmp_path / "tensorflow_cpu-2.6.2-cp36-cp36m-linux_x86_64.whl", [(name, b"x", 0o100644)])
    assert_clean_failure(cli("build", wheel, "--recipe", recipe, "--out-dir", tmp_path / "o"), "unsafe", fragment, tmp_path / "o")


def test_symlink_entry_is_refused(cli, tmp_path, recipe):
    wheel = _raw_zip(tmp_path / "tensorflow_cpu-2.6.2-cp36-cp36m-linux_x86_64.whl", [("tensorflow/link", b"/etc/passwd", stat.S_IFLNK | 0o777)])
    assert_clean_failure(cli("inspect", wheel), "unsafe", "symbolic link")


def test_duplicate_names_are_refused(cli, tmp_path, recipe):
    path = tmp_path / "tensorflow_cpu-2.6.2-cp36-cp36m-linux_x86_64.whl"
    with pytest.warns(UserWarning):
        _raw_zip(path, [("tensorflow/a.py", b"1", 0o100644), ("tensorflow/a.py", b"2", 0o100644)])
    assert_clean_failure(cli("build", path, "--recipe", recipe, "--out-dir", tmp_path / "o"), "unsafe", "appears twice", tmp_path / "o")


def test_empty_truncated_and_non_zip_files(cli, tmp_path, tf_wheel, recipe):
    empty = tmp_path / "empty.whl"
    empty.write_bytes(b"")
    assert_clean_failure(cli("inspect", empty), "format", "file is empty")
    text = tmp_path / "text.whl"
    text.write_text("not a zip\n")
    assert_clean_failure(cli("inspect", text), "format", "not a zip archive")
    good = tf_wheel().read_bytes()
    cut = tmp_path / "tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl"
    cut.write_bytes(good[: len(good) // 2])
    assert_clean_failure(cli("build", cut, "--recipe", recipe, "--out-dir", tmp_path / "o"), "format", "", tmp_path / "o")


def test_corrupt_member_data_is_caught(cli, tmp_path, tf_wheel, recipe):
    data = bytearray(tf_wheel().read_bytes())
    index = data.index(b"tensorflow/python/ops/array_ops.py") + len(b"tensorflow/python/ops/array_ops.py")
    data[index + 2] ^= 0xFF  # inside the compressed bytes of the first member after its local header
    path = tmp_path / "tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl"
    path.write_bytes(bytes(data))
    assert_clean_failure(cli("build", path, "--recipe", recipe, "--out-dir", tmp_path / "o"), "format", "array_ops.py", tmp_path / "o")


def test_not_a_wheel_name(cli, tmp_path, tf_wheel):
    wheel = tf_wheel()
    renamed = wheel.with_name("tensorflow.zip")
    wheel.rename(renamed)
    assert_clean_failure(cli("inspect", renamed), "format", "not a wheel file name")


def test_record_hash_mismatch(cli, tmp_path, tf_wheel, recipe):
    wheel = tf_wheel(tamper={"tensorflow/python/ops/array_ops.py": b"def identity(x):\n    return y\n"})
    run = cli("build", wheel, "--recipe", recipe, "--out-dir", tmp_path / "o")
    assert_clean_failure(run, "record", "does not match its RECORD hash", tmp_path / "o")


def test_file_missing_from_record(cli, tmp_path, tf_wheel, recipe):
    wheel = tf_wheel(omit_from_record=("tensorflow/python/ops/array_ops.py",))
    assert_clean_failure(cli("inspect", wheel), "record", "does not list 'tensorflow/python/ops/array_ops.py'")


def test_not_tensorflow(cli, tmp_path, recipe):
    wheel = make_wheel(tmp_path, {"numpy/__init__.py": b""}, name="numpy", version="1.19.5")
    assert_clean_failure(cli("build", wheel, "--recipe", recipe, "--out-dir", tmp_path / "o"), "target", "not a TensorFlow wheel", tmp_path / "o")


def test_other_python(cli, tmp_path, libs, recipe):
    wheel = make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi), tag="cp38-cp38-manylinux2010_x86_64")
    run = cli("build", wheel, "--recipe", recipe, "--out-dir", tmp_path / "o")
    assert_clean_failure(run, "target", "built for cp38-cp38-manylinux2010_x86_64, but the recipe targets cp36-cp36m", tmp_path / "o")


def test_native_code_too_new_for_the_target(cli, tmp_path, libs, old_recipe):
    wheel = make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi, {"tensorflow/python/ng.so": libs.new_glibc}))
    run = cli("build", wheel, "--recipe", old_recipe, "--out-dir", tmp_path / "o")
    assert_clean_failure(run, "target", "cannot run on old-py36: needs GLIBC_2.36", tmp_path / "o")


def test_missing_input_file(cli, tmp_path, recipe):
    assert_clean_failure(cli("inspect", tmp_path / "absent.whl"), "input", "no such file")


def test_recipe_problems_are_all_listed(cli, tmp_path, tf_wheel):
    recipe = tmp_path / "bad.toml"
    recipe.write_text('[target]\npyton = "3.6"\n[output]\nname = "tensorflow"\n')
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "o")
    assert run.code == CODES["recipe"] and "Traceback" not in run.err
    errors = [line for line in run.err.splitlines() if line.startswith("ERROR: ")]
    assert any("did you mean 'python'?" in e for e in errors) and any("missing key 'glibc'" in e for e in errors)
    assert any("missing key 'local_version'" in e for e in errors)


def test_debug_shows_the_traceback(cli, tmp_path):
    run = cli("--debug", "inspect", tmp_path / "absent.whl")
    assert run.code == CODES["input"] and "Traceback" in run.err


def test_op_library_needs_the_wheels_headers(cli, tmp_path, tf_wheel, make_recipe):
    recipe = make_recipe(extra='\n[ops]\nbuild = true\nbuilder = "host"\n')
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "o")
    assert_clean_failure(run, "ops", "the wheel ships no C++ headers for the op library", tmp_path / "o")
    assert "hint: " in run.err and "[ops] build = false" in run.err


def test_op_flags_come_from_the_tsl_headers_of_a_newer_tensorflow(cli, tmp_path, tf_wheel, make_recipe):
    headers = {"tensorflow/include/tensorflow/core/public/version.h": VERSION_H.replace(b"MINOR_VERSION 6", b"MINOR_VERSION 11"),
               "tensorflow/include/tensorflow/core/framework/allocator.h": b'#include "tensorflow/tsl/framework/allocator.h"\n',
               "tensorflow/include/tensorflow/tsl/framework/allocator.h": b"constexpr size_t kAllocatorAlignment = 64;\n"}
    recipe = make_recipe(extra='\n[ops]\nbuild = true\nbuilder = "host"\n')
    run = cli("build", tf_wheel(headers), "--recipe", recipe, "--out-dir", tmp_path / "o", "--dry-run")
    assert run.code == 0, run.err
    assert "-std=c++17, _GLIBCXX_USE_CXX11_ABI=0, EIGEN_MAX_ALIGN_BYTES=64" in run.out


def test_a_string_abi_tie_is_refused_naming_both_counts(cli, tmp_path, make_recipe):
    tie = compile_library(tmp_path, "tie.so", TIE_SOURCE, flags=("-D_GLIBCXX_USE_CXX11_ABI=0",))
    wheel = make_wheel(tmp_path, tensorflow_files(tie))
    assert "(tensorflow:: symbols: 1 old std::string, 1 C++11)" in cli("inspect", wheel).out
    recipe = make_recipe(extra='\n[ops]\nbuild = true\nbuilder = "host"\n')
    run = cli("build", wheel, "--recipe", recipe, "--out-dir", tmp_path / "o")
    assert_clean_failure(run, "ops", "1 of its tensorflow:: symbols use the C++11 std::string and 1 the old one",
                         tmp_path / "o")


def test_verify_needs_an_environment_section(cli, tmp_path, tf_wheel, recipe):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = cli("verify", tf_wheel(), "--recipe", recipe, env={"TMPDIR": str(scratch)})
    assert_clean_failure(run, "recipe", "has no [environment] section")
    assert list(scratch.iterdir()) == []  # no scratch folder left behind


def test_a_package_init_the_bootstrap_cannot_enter_is_refused_by_the_dry_run(cli, tf_wheel, make_recipe, tmp_path):
    broken = tf_wheel({"tensorflow/__init__.py": b'"""TensorFlow."""\nif True\n    pass\n'})
    recipe = make_recipe(extra='\n[runtime_env]\nTF_CPU_ALLOCATOR_USE_BFC = "true"\n')
    run = cli("build", broken, "--recipe", recipe, "--out-dir", tmp_path / "out", "--dry-run")
    assert_clean_failure(run, "format", "tensorflow/__init__.py: does not parse", tmp_path / "out")


def test_builtin_recipes_are_listed_and_used_by_name_from_any_folder(cli, tf_wheel, tmp_path):
    listed = cli("recipes", "--json", cwd=tmp_path)
    assert listed.code == 0, listed.err
    rows = {row["name"]: row for row in json.loads(listed.out)["recipes"]}
    assert {"emulated-py36", "emulated-py36-tf1api", "ubuntu18.04-py36"} <= set(rows)
    assert rows["ubuntu18.04-py36"]["glibc"] == "2.27" and rows["emulated-py36-tf1api"]["api"] == "v1"
    assert rows["emulated-py36"]["input"] == "tensorflow-cpu==2.6.2"
    table = cli("recipes", cwd=tmp_path)
    assert table.out.splitlines()[0].split() == ["name", "python", "glibc", "glibcxx", "api", "input"]
    run = cli("inspect", tf_wheel(), "--recipe", "ubuntu18.04-py36", cwd=tmp_path)
    assert run.code == 0 and "verdict" in run.out, run.err


def test_unknown_recipe_name_suggests_the_close_one(cli, tf_wheel, tmp_path):
    run = cli("build", tf_wheel(), "--recipe", "ubuntu18.04-py3", "--out-dir", tmp_path / "out", cwd=tmp_path)
    assert_clean_failure(run, "recipe", "ubuntu18.04-py3: no such recipe file, and no built-in recipe of that name",
                         tmp_path / "out")
    assert "did you mean ubuntu18.04-py36?" in run.err


def test_a_produced_wheel_carries_an_sbom_that_inspect_shows(cli, tf_wheel, recipe, tmp_path):
    source = tf_wheel()
    built = cli("build", source, "--recipe", recipe, "--out-dir", tmp_path / "out")
    assert built.code == 0, built.err
    wheel = built.out.strip().splitlines()[-1]
    data = json.loads(cli("inspect", wheel, "--json").out)
    (component,) = data["sbom"]
    assert component["role"] == "input" and component["name"] == "tensorflow-cpu" and component["version"] == "2.6.2"
    import hashlib

    assert component["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert "SBOM (tensorflow-2.6.2+retf.test.dist-info/sboms/retfwheel.cdx.json, 1 components):" in cli("inspect", wheel).out
    with zipfile.ZipFile(wheel) as zf:
        document = json.loads(zf.read("tensorflow-2.6.2+retf.test.dist-info/sboms/retfwheel.cdx.json"))
    assert document["bomFormat"] == "CycloneDX" and document["components"][0]["purl"] == "pkg:pypi/tensorflow-cpu@2.6.2"


def test_an_unwritable_cache_is_one_clear_error(cli, tf_wheel, recipe, tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "out", "--cache-dir", blocked / "cache")
    assert_clean_failure(run, "output", "the cache folder cannot be written", tmp_path / "out")
    assert "--cache-dir DIR or set RETFWHEEL_CACHE_DIR" in run.err


def test_a_deprecated_recipe_key_is_read_with_one_warning_line(cli, tf_wheel, recipe, tmp_path):
    recipe.write_text("v1_fused_sparse = false\n" + recipe.read_text())
    run = cli("build", tf_wheel(), "--recipe", recipe, "--out-dir", tmp_path / "out", "--dry-run")
    assert run.code == 0, run.err
    warnings = [line for line in run.err.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {recipe}: top-level v1_fused_sparse is deprecated; write it as fused_sparse = false "
                        "in [features] (the old key is read for one more release)"]
    assert "dry run: nothing written" in run.out
