import json
import os
import zipfile

import pytest

from retfwheel.errors import AuditError
from retfwheel.stages.pipeline import build_wheel
from retfwheel.targets.recipe import load_recipe
from retfwheel.wheelfile.archive import read_archive
from retfwheel.wheelfile.wheel import read_wheel


def build(wheel, recipe, out):
    return build_wheel(wheel, load_recipe(recipe), out)


def test_output_is_renamed_retagged_and_valid(tf_wheel, recipe, tmp_path):
    result = build(tf_wheel(), recipe, tmp_path / "out")
    out = result.output
    assert out.name == "tensorflow-2.6.2+retf.test-cp36-cp36m-manylinux_2_5_x86_64.manylinux1_x86_64.linux_x86_64.whl"
    wheel = read_wheel(out)
    assert wheel.metadata_name == "tensorflow" and str(wheel.version) == "2.6.2+retf.test"
    assert wheel.dist_info == "tensorflow-2.6.2+retf.test.dist-info"
    assert b"Requires-Dist: numpy (~=1.19.2)" in wheel.metadata and b"A description." in wheel.metadata
    assert b"Generator: retfwheel" in wheel.wheel_file and wheel.wheel_file.count(b"Tag: ") == 3
    provenance = json.loads(wheel.provenance)
    assert provenance["input"]["filename"].startswith("tensorflow_cpu-2.6.2") and provenance["recipe"]["name"] == "test-py36"
    assert len(provenance["input"]["sha256"]) == 64 and provenance["changes"]
    assert sorted(os.listdir(tmp_path / "out")) == [out.name]


def test_members_are_copied_without_recompression_and_ordered(tf_wheel, recipe, tmp_path):
    source = tf_wheel(executables=("tensorflow/libtensorflow_framework.so.2",))
    out = build(source, recipe, tmp_path / "out").output
    with zipfile.ZipFile(source) as a, zipfile.ZipFile(out) as b:
        names = [i.filename for i in b.infolist()]
        assert names[-1].endswith(".dist-info/RECORD")
        assert all(".dist-info/" in n for n in names[names.index(next(n for n in names if ".dist-info/" in n)):])
        for info in a.infolist():
            if info.filename.startswith("tensorflow/"):
                copied = b.getinfo(info.filename)
                assert (copied.CRC, copied.compress_size) == (info.CRC, info.compress_size)
        assert b.getinfo("tensorflow/libtensorflow_framework.so.2").external_attr >> 16 == 0o100755
        assert b.getinfo("tensorflow/__init__.py").external_attr >> 16 == 0o100644
        assert {i.date_time for i in b.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_builds_are_byte_identical_whatever_time_tz_or_umask(tf_wheel, recipe, tmp_path, monkeypatch):
    source = tf_wheel()
    first = build(source, recipe, tmp_path / "a").output.read_bytes()
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    old = os.umask(0o077)
    try:
        second = build(source, recipe, tmp_path / "b").output.read_bytes()
    finally:
        os.umask(old)
    assert first == second


def test_source_date_epoch_sets_the_timestamps(tf_wheel, recipe, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # 2023-11-14T22:13:20Z
    out = build(tf_wheel(), recipe, tmp_path / "out").output
    with zipfile.ZipFile(out) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_record_is_made_from_written_bytes(tf_wheel, recipe, tmp_path):
    out = build(tf_wheel(), recipe, tmp_path / "out").output
    wheel = read_wheel(out)
    from retfwheel.native.scan import scan_wheel

    scan_wheel(wheel, verify=True)  # raises RecordMismatchError on any member whose bytes RECORD does not describe


def test_dist_info_data_dir_is_renamed(tf_wheel, recipe, tmp_path):
    source = tf_wheel({"tensorflow_cpu-2.6.2.data/scripts/tool": b"#!python\nprint(1)\n"})
    out = build(source, recipe, tmp_path / "out").output
    assert read_archive(out).member("tensorflow-2.6.2+retf.test.data/scripts/tool") is not None


def test_dry_run_writes_nothing(tf_wheel, recipe, tmp_path):
    result = build_wheel(tf_wheel(), load_recipe(recipe), tmp_path / "out", dry_run=True)
    assert result.output is None and result.plan.filename.endswith(".whl")
    assert not (tmp_path / "out").exists()


def test_failed_audit_leaves_nothing(tf_wheel, recipe, tmp_path, monkeypatch):
    import retfwheel.stages.pipeline as build_module

    def refuse(*args, **kwargs):
        raise AuditError("audit failed: test")

    monkeypatch.setattr(build_module, "audit_wheel", refuse)
    with pytest.raises(AuditError):
        build(tf_wheel(), recipe, tmp_path / "out")
    assert os.listdir(tmp_path / "out") == []


def test_output_installs_with_installer(tf_wheel, recipe, tmp_path):
    """pypa/installer accepts the output (it validates RECORD hashes while installing)."""
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    out = build(tf_wheel(), recipe, tmp_path / "out").output
    target = tmp_path / "site"
    scheme = {k: str(target / k) for k in ("purelib", "platlib", "headers", "scripts", "data")}
    with WheelFile.open(out) as source:
        source.validate_record()
        install(source, SchemeDictionaryDestination(scheme, "python3", "posix"), {})
    assert (target / "platlib" / "tensorflow" / "libtensorflow_framework.so.2").exists()


def test_a_1x_api_wheel_ships_the_tf115_export_module_its_registry_and_the_check(tf_wheel, recipe, tmp_path):
    """The module reads its registry by the name the build writes it under; the console script calls its main."""
    import ast
    from pathlib import Path

    from retfwheel.stages.plan import TF115_CHECK_SCRIPT, TF115_EXPORT_MODULE, TF115_OPS_FILE

    recipe.write_text('api = "v1"\n' + recipe.read_text())
    out = build(tf_wheel(), recipe, tmp_path / "out").output
    shipped = Path(__file__).resolve().parent.parent / "runtime" / "wheel"
    with zipfile.ZipFile(out) as archive:
        module = archive.read(TF115_EXPORT_MODULE.replace(".", "/") + ".py")
        assert module == (shipped / TF115_EXPORT_MODULE.replace(".", "/")).with_suffix(".py").read_bytes()
        registry = json.loads(archive.read(TF115_OPS_FILE))
        entry_points = archive.read(read_wheel(out).dist_info + "/entry_points.txt").decode()
    assert registry["tensorflow"] == "1.15.5" and "ParseExample" in registry["ops"] and "ParseExampleV2" not in registry["ops"]
    assert f"{TF115_CHECK_SCRIPT} = {TF115_EXPORT_MODULE}:main" in entry_points
    names = {node.targets[0].id: node.value.value for node in ast.parse(module).body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.targets[0], ast.Name)}
    assert names["REGISTRY_FILE"] == TF115_OPS_FILE.rsplit("/", 1)[1]


def test_a_2x_api_wheel_ships_no_export_rewrite(tf_wheel, recipe, tmp_path):
    from retfwheel.stages.plan import TF115_EXPORT_MODULE

    with zipfile.ZipFile(build(tf_wheel(), recipe, tmp_path / "out").output) as archive:
        assert TF115_EXPORT_MODULE.replace(".", "/") + ".py" not in archive.namelist()
