"""wheelfile.writer in-process: deterministic bytes, canonical order, RECORD from what was written."""

import dataclasses
import zipfile

from retfwheel.native.inspection import inspect_wheel
from retfwheel.stages.plan import make_plan
from retfwheel.targets.recipe import load_recipe
from retfwheel.wheelfile.record import hash_bytes, parse_record
from retfwheel.wheelfile.wheel import read_wheel
from retfwheel.wheelfile.writer import DEFAULT_EPOCH, CopyMember, NewMember, write_wheel


def planned(path, recipe_path):
    recipe = load_recipe(recipe_path)
    return make_plan(inspect_wheel(path, recipe), recipe, "0" * 64, "0.1.0")


def test_same_plan_same_bytes_whatever_the_file_name(tf_wheel, recipe, tmp_path):
    plan = planned(tf_wheel(), recipe)
    one = write_wheel(plan, tmp_path / "one.whl", DEFAULT_EPOCH)
    two = write_wheel(plan, tmp_path / "two.whl", DEFAULT_EPOCH)
    assert one.path.read_bytes() == two.path.read_bytes()
    later = write_wheel(plan, tmp_path / "later.whl", DEFAULT_EPOCH + 86400)
    assert later.path.read_bytes() != one.path.read_bytes()  # the epoch is the only input that moves them


def test_payload_then_dist_info_then_record(tf_wheel, recipe, tmp_path):
    plan = planned(tf_wheel(), recipe)
    names = zipfile.ZipFile(write_wheel(plan, tmp_path / "w.whl", DEFAULT_EPOCH).path).namelist()
    first_meta = next(i for i, n in enumerate(names) if n.startswith(plan.dist_info + "/"))
    assert all(not n.startswith(plan.dist_info) for n in names[:first_meta])
    assert all(n.startswith(plan.dist_info) for n in names[first_meta:]) and names[-1] == plan.record_path


def test_record_describes_the_bytes_written_and_copies_keep_their_compressed_bytes(tf_wheel, recipe, tmp_path):
    source = tf_wheel()
    plan = planned(source, recipe)
    # a planned member whose bytes differ from what a stale plan said: RECORD must follow the bytes
    plan = dataclasses.replace(plan, members=plan.members + (NewMember("tensorflow/extra.py", b"X = 2\n"),))
    written = write_wheel(plan, tmp_path / plan.filename, DEFAULT_EPOCH)
    with zipfile.ZipFile(written.path) as zf:
        rows = parse_record(zf.read(plan.record_path).decode(), plan.record_path)
        for name in zf.namelist():
            if name != plan.record_path:
                assert rows[name].hash == hash_bytes(zf.read(name)), name
        copied = [m for m in plan.members if isinstance(m, CopyMember)]
        with zipfile.ZipFile(source) as original:
            for member in copied:
                assert zf.getinfo(member.name).compress_size == original.getinfo(member.source.name).compress_size
    assert read_wheel(written.path).record["tensorflow/extra.py"].hash == hash_bytes(b"X = 2\n")
