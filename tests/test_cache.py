"""Cache entries: made by one process at a time, published whole, and a damaged one is made again, never used."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from retfwheel.cache import (
    KINDS,
    NESTED,
    SCHEMA,
    check,
    entry_lock,
    manifest_of,
    publish_file,
    publish_folder,
    read_verified,
    scratch_path,
    seal,
    usable,
)


def _flip(path, offset=None):
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_published_file_reads_back_and_a_flipped_byte_is_caught(tmp_path):
    entry = tmp_path / "ops" / "key" / "_retf_ops.so"
    assert read_verified(entry, "ops") is None and check(entry, "ops") == "is missing"
    publish_file(entry, "ops", b"\x7fELF library")
    assert read_verified(entry, "ops") == b"\x7fELF library"
    _flip(entry, 5)
    assert read_verified(entry, "ops") is None and "_retf_ops.so changed" in check(entry, "ops")
    assert sorted(p.name for p in entry.parent.iterdir()) == ["._retf_ops.so.retfwheel-entry.json", "_retf_ops.so"]


# A small stand-in of each kind: {relative path: bytes} (a folder entry) or bytes (a file entry), and the file
# whose byte the tests flip: one that is checked on every use.
def _venv_files(extra=None):
    return {"pyvenv.cfg": b"home = /usr/bin\n", "bin/python3.6": b"\x7fELF interpreter" * 64,
            "lib/python3.6/site-packages/numpy-1.18.5.dist-info/RECORD": b"numpy/__init__.py,sha256=x,10\n",
            "lib/python3.6/site-packages/numpy/__init__.py": b"# numpy\n" * 100, **(extra or {})}


SAMPLES = {
    "inputs": ({"tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl": b"PK wheel" * 1000},
               "tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl"),
    "files": (b"PK locked wheel" * 100, ""),
    "built": ({"wrapt-1.12.1-cp36-cp36m-linux_x86_64.whl": b"PK built" * 100}, "wrapt-1.12.1-cp36-cp36m-linux_x86_64.whl"),
    "sdk": ({"tensorflow/include/tensorflow/core/framework/op.h": b"#pragma once\n" * 50,
             "tensorflow/libtensorflow_framework.so.2": b"\x7fELF framework" * 100}, "tensorflow/include/tensorflow/core/framework/op.h"),
    "ops": (b"\x7fELF op library" * 100, ""),
    "venvs": (_venv_files(), "bin/python3.6"),
    "environments": (_venv_files({".retfwheel-environment": b'["tensorflow==1.15.5"]'}),
                     "lib/python3.6/site-packages/numpy-1.18.5.dist-info/RECORD"),
    "roots": ({"usr/bin/x86_64-linux-gnu-g++-10": b"\x7fELF g++" * 100, "usr/lib/gcc/x86_64-linux-gnu/10/cc1plus": b"\x7fELF cc1plus" * 100,
               "etc/os-release": b"bullseye\n"}, "usr/lib/gcc/x86_64-linux-gnu/10/cc1plus"),
    "debian": (b"!<arch>\ndebian-binary" * 100, ""),
    "scans": (b'[{"path": "tensorflow/python/_pywrap_tensorflow_internal.so"}]', ""),
    "renamed": (b"PK rewritten modules" * 100, ""),
    "probes": (b"\x7fELF probe" * 100, ""),
    "locks": (b'[lock]\nversion = 1\n', ""),
}


def _make(root, kind):
    content, flipped = SAMPLES[kind]
    entry = root / kind / "key" / "entry" if kind in NESTED else root / kind / "entry"
    if isinstance(content, bytes):
        publish_file(entry, kind, content)
        return entry, entry
    made = scratch_path(entry)
    for name, data in content.items():
        (made / name).parent.mkdir(parents=True, exist_ok=True)
        (made / name).write_bytes(data)
    if kind in ("venvs", "environments"):
        (made / "bin" / "python").symlink_to("python3.6")
    publish_folder(entry, kind, made)
    return entry, entry / flipped


def test_every_kind_is_covered():
    assert set(SAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_a_byte_flipped_in_any_kind_of_entry_is_caught_and_the_entry_made_again(tmp_path, kind):
    entry, flipped = _make(tmp_path, kind)
    said = []
    assert check(entry, kind) is None and usable(entry, kind, said.append, "thing", "making it again") and not said
    _flip(flipped)
    assert usable(entry, kind, said.append, "thing", "making it again") is False
    assert said == [f"the cached thing {entry} is damaged: {flipped.relative_to(entry).as_posix() if flipped != entry else entry.name} "
                    "changed (its sha256 is not the recorded one); making it again"]
    assert not entry.exists() and not manifest_of(entry).exists(), "a damaged entry is removed before it is made again"
    again, _ = _make(tmp_path, kind)
    assert usable(again, kind, said.append, "thing", "making it again") and len(said) == 1


@pytest.mark.parametrize("kind", ["venvs", "environments", "sdk", "inputs"])
def test_a_folder_entry_with_a_file_lost_added_or_resized_is_caught(tmp_path, kind):
    entry, _ = _make(tmp_path, kind)
    victim = sorted(p for p in entry.rglob("*") if p.is_file() and not p.is_symlink())[-1]
    victim.write_bytes(victim.read_bytes() + b"!")
    assert "changed" in check(entry, kind)
    entry, _ = _make(tmp_path, kind)
    victim.unlink()
    assert "is gone" in check(entry, kind)
    entry, _ = _make(tmp_path, kind)
    (entry / "stray.so").write_bytes(b"")
    assert "stray.so, which it did not when made" in check(entry, kind)


def test_python_bytecode_written_on_use_is_not_damage(tmp_path):
    entry, _ = _make(tmp_path, "environments")
    cached = entry / "lib/python3.6/site-packages/numpy/__pycache__"
    cached.mkdir()
    (cached / "__init__.cpython-36.pyc").write_bytes(b"bytecode")
    assert check(entry, "environments") is None


def test_a_byte_changed_in_a_large_environment_file_is_found_by_a_full_check(tmp_path):
    """On use an environment is checked cheaply (file list, sizes, the critical files' sha256); `cache prune`
    recomputes every sha256."""
    entry, _ = _make(tmp_path, "environments")
    _flip(entry / "lib/python3.6/site-packages/numpy/__init__.py")
    assert check(entry, "environments") is None
    assert "numpy/__init__.py changed" in check(entry, "environments", deep=True)


def test_an_entry_without_a_manifest_or_of_an_older_schema_is_made_again_with_a_line(tmp_path):
    import json

    legacy = tmp_path / "venvs" / "python3.6"
    legacy.mkdir(parents=True)
    (legacy / ".retfwheel-ready").write_text("pip<22 wheel<0.38")  # what retfwheel made before manifests
    said = []
    assert usable(legacy, "venvs", said.append, "venv", "making it again") is False and not legacy.exists()
    assert said == [f"the cached venv {legacy} has no manifest (made by an older retfwheel, or cut short); making it again"]
    entry, _ = _make(tmp_path, "ops")
    document = json.loads(manifest_of(entry).read_text())
    manifest_of(entry).write_text(json.dumps(dict(document, schema=SCHEMA - 1)))
    assert check(entry, "ops") == f"was recorded by cache schema {SCHEMA - 1} (this retfwheel's is {SCHEMA})"
    manifest_of(entry).write_text("{trunc")
    assert check(entry, "ops") == "has an unreadable manifest"
    assert check(entry, "sdk") is not None


def test_what_a_killed_maker_left_is_removed_by_the_next_one(tmp_path):
    entry = tmp_path / "sdk" / "key"
    made = scratch_path(entry).with_name(".key.99999.tmp")  # another process's, killed
    (made / "tensorflow").mkdir(parents=True)
    half = tmp_path / "sdk" / "key" / "tensorflow"
    half.mkdir(parents=True)  # renamed into place, killed before its manifest was written
    said = []
    assert usable(entry, "sdk", said.append, "SDK", "unpacking it again") is False
    assert not made.exists() and not entry.exists() and said


def test_seal_records_the_schema_tool_and_every_file(tmp_path):
    import json

    from retfwheel import __version__

    entry, _ = _make(tmp_path, "venvs")
    document = json.loads(manifest_of(entry).read_text())
    assert document["schema"] == SCHEMA and document["tool"] == __version__ and document["kind"] == "venvs"
    assert document["files"]["bin/python"] == {"link": "python3.6"}
    assert len(document["files"]["pyvenv.cfg"]["sha256"]) == 64
    seal(entry, "venvs")


def test_the_lock_nests_within_one_process(tmp_path):
    """Code holding an entry's lock may call code that takes it again: that must not wait forever."""
    entry = tmp_path / "environments" / "emulated-py36"
    holder = subprocess.run([sys.executable, "-c", f"""
from pathlib import Path
from retfwheel.cache import entry_lock
with entry_lock(Path({str(entry)!r})):
    with entry_lock(Path({str(entry)!r})):
        print("nested")
    print("outer")
"""], capture_output=True, text=True, timeout=30)
    assert holder.stdout.split() == ["nested", "outer"], holder.stderr


def test_another_thread_waits_for_the_lock_and_each_nests_its_own(tmp_path):
    """Threads of one process (a test's pool making two environments at once) exclude each other like processes."""
    import threading
    import time

    from retfwheel.cache import entry_lock

    entry = tmp_path / "environments" / "emulated-py36"
    order: list[str] = []
    first_holds = threading.Event()

    def second() -> None:
        first_holds.wait(10)
        with entry_lock(entry), entry_lock(entry):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with entry_lock(entry):
        first_holds.set()
        time.sleep(0.5)  # the other thread is at its lock by now, and must still be waiting
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]


def test_a_second_process_waits_for_the_entry_it_would_make(tmp_path):
    entry = tmp_path / "venvs" / "python3.6"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from pathlib import Path
from retfwheel.cache import entry_lock
with entry_lock(Path({str(entry)!r})):
    print("held", flush=True)
    time.sleep(1.5)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with entry_lock(entry):
            waited = time.monotonic() - started
        assert waited > 0.5, f"took the lock after {waited:.2f} s while another process held it"
    finally:
        holder.wait(timeout=30)


@pytest.mark.slow
def test_two_processes_making_the_same_venv_both_get_it(python36, tmp_path):
    """Two cold builds sharing one cache used to break each other making <cache>/venvs/python3.6."""
    folder = tmp_path / "venvs" / "python3.6"
    code = f"from pathlib import Path; from retfwheel.targets.interpreter import pip_venv; " \
           f"print(pip_venv(Path({str(python36)!r}), Path({str(folder)!r})))"
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in results]
    assert {out.strip() for out, _ in results} == {str(folder / "bin" / "python")}


def _fake_cache(root):
    import os

    from retfwheel.cache import MARKER, STAGING_AGE

    (root / MARKER).write_text("")
    (root / "inputs" / "k1").mkdir(parents=True)
    (root / "inputs" / "k1" / "tf.whl").write_bytes(b"x" * 1000)
    seal(root / "inputs" / "k1", "inputs")
    (root / "inputs" / "k0").mkdir(parents=True)  # cut short, or made before entries had manifests
    (root / "inputs" / "k0" / "tf.whl").write_bytes(b"x")
    environment, _ = _make(root, "environments")
    _flip(environment / "lib/python3.6/site-packages/numpy/__init__.py")  # seen only by a full check
    publish_file(root / "ops" / "good" / "_retf_ops.so", "ops", b"library")
    publish_file(root / "ops" / "bad" / "_retf_ops.so", "ops", b"library")
    (root / "ops" / "bad" / "_retf_ops.so").write_bytes(b"librarY")
    old_scratch = root / ".build-abc"
    old_scratch.mkdir()
    os.utime(old_scratch, (time.time() - 2 * STAGING_AGE,) * 2)
    (root / ".build-new").mkdir()  # may belong to a running build
    (root / "notes.txt").write_text("not the cache's")


def test_prune_removes_half_made_and_damaged_entries_only(tmp_path):
    from retfwheel.cache import prune

    _fake_cache(tmp_path)
    removed = {p.relative_to(tmp_path).as_posix() for p in prune(tmp_path)}
    assert removed == {".build-abc", "ops/bad/_retf_ops.so", "inputs/k0", "environments/entry"}
    assert check(tmp_path / "ops" / "good" / "_retf_ops.so", "ops") is None and (tmp_path / ".build-new").is_dir()
    assert {p.relative_to(tmp_path).as_posix() for p in prune(tmp_path, older_than_days=0)} == {"inputs/k1", "ops/good/_retf_ops.so"}


def test_cache_command_shows_sizes_and_clear_touches_only_cache_entries(cli, tmp_path):
    import json

    _fake_cache(tmp_path)
    shown = json.loads(cli("cache", "--cache-dir", tmp_path, "--json").out)
    kinds = {k["kind"]: k for k in shown["kinds"]}
    assert kinds["inputs"]["entries"] == 2 and 1001 <= kinds["inputs"]["bytes"] < 2000 and kinds["ops"]["entries"] == 2
    run = cli("cache", "--cache-dir", tmp_path, "clear")
    assert run.code == 0 and "cleared inputs, ops, environments" in run.out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-abc", ".build-new", ".retfwheel-cache", "notes.txt"]


def test_prune_and_clear_refuse_a_folder_that_is_not_a_cache(cli, tmp_path):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "my-data.csv").write_text("a user's")
    run = cli("cache", "--cache-dir", tmp_path, "clear")
    assert run.code == 3 and "not a folder retfwheel has used as its cache" in run.err
    assert (tmp_path / "inputs" / "my-data.csv").read_text() == "a user's"


def test_a_damaged_or_legacy_scan_is_redone_and_the_wheel_is_the_same(tf_wheel, recipe, tmp_path):
    from retfwheel.cache import entries
    from retfwheel.stages.pipeline import build_wheel
    from retfwheel.targets.recipe import load_recipe

    source = tf_wheel()
    cache = tmp_path / "cache"
    expected = build_wheel(source, load_recipe(recipe), tmp_path / "first", cache=cache).output.read_bytes()
    (scan,) = entries(cache, "scans")
    _flip(scan)
    said = []
    again = build_wheel(source, load_recipe(recipe), tmp_path / "second", cache=cache, progress=said.append).output
    assert f"the cached ELF analysis {scan} is damaged: {scan.name} changed (its sha256 is not the recorded one); " \
           "analysing the wheel again" in said
    assert again.read_bytes() == expected and check(scan, "scans") is None
    manifest_of(scan).unlink()  # as a retfwheel from before manifests left it
    said.clear()
    again = build_wheel(source, load_recipe(recipe), tmp_path / "third", cache=cache, progress=said.append).output
    assert any(line.startswith(f"the cached ELF analysis {scan} has no manifest") for line in said)
    assert again.read_bytes() == expected and check(scan, "scans") is None


def test_a_damaged_probe_extension_is_compiled_again(tmp_path, monkeypatch):
    from retfwheel.proof.verify import probe_extension

    monkeypatch.delenv("RETF_PROBE_EXTENSION", raising=False)
    probe = probe_extension(tmp_path)
    expected = probe.read_bytes()
    _flip(probe)
    said = []
    assert probe_extension(tmp_path, said.append) == probe and probe.read_bytes() == expected
    assert said == [f"the cached probe extension {probe} is damaged: {probe.name} changed (its sha256 is not the "
                    "recorded one); compiling it again"]


# --- the real default input, cold caches (slow) ---
# Each test makes its own cache, seeded with a copy of the already-downloaded input (so 172 MB is not downloaded
# again); everything else a build needs (venv, locked files, sdists built, SDK, op library, scans) is made there.

BUILD_TIMEOUT = 900


def _cold_cache(real_wheel, folder):
    """A new cache holding only the default input, published as `retfwheel build` would have."""
    from conftest import RECIPES
    from retfwheel.cache import MARKER
    from retfwheel.targets.fetch import input_entry
    from retfwheel.targets.recipe import load_recipe

    entry = input_entry(load_recipe(RECIPES / "emulated-py36.toml"), folder)
    made = scratch_path(entry)
    made.mkdir(parents=True)

    shutil.copyfile(real_wheel, made / real_wheel.name)  # copied: the tests damage it, never the original
    publish_folder(entry, "inputs", made)
    (folder / MARKER).write_text("")
    return folder


def _build_command(cache, out):
    return [sys.executable, "-m", "retfwheel", "build", "--recipe", "emulated-py36", "--out-dir", str(out),
            "--cache-dir", str(cache)]


def _build(cache, out):
    from conftest import REPO, run_bounded

    run = run_bounded(_build_command(cache, out), BUILD_TIMEOUT, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    (wheel,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    return wheel, run.stderr


def _another_machine(folder):
    """What differs on another machine, for a build started in ``folder``: HOME, TMPDIR, the working folder, the time
    zone and the umask (keywords for subprocess.Popen)."""
    for name in ("home", "tmp", "work"):
        (folder / name).mkdir()
    env = dict(os.environ, HOME=str(folder / "home"), TMPDIR=str(folder / "tmp"), TZ="Pacific/Chatham")
    env.pop("XDG_CACHE_HOME", None)
    return {"env": env, "cwd": folder / "work", "preexec_fn": lambda: os.umask(0o077)}


@pytest.fixture(scope="module")
def cold_pair(real_wheel, python36, tmp_path_factory):
    """Two cold builds started together on one empty cache, each as on another machine (``_another_machine``):
    (cache, their exit codes and stderr, their wheels)."""
    cache = _cold_cache(real_wheel, tmp_path_factory.mktemp("shared-cache"))
    outs = [tmp_path_factory.mktemp(f"out{i}") for i in range(2)]
    machines = [_another_machine(tmp_path_factory.mktemp(f"machine{i}")) for i in range(2)]
    for machine in machines:
        machine["env"]["RETF_PYTHON36"] = str(python36)
    runs = [subprocess.Popen(_build_command(cache, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, **machine) for out, machine in zip(outs, machines)]
    results = []
    try:
        for run in runs:
            results.append(run.communicate(timeout=BUILD_TIMEOUT))
    finally:
        for run in runs:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    wheels = [sorted(p for p in out.iterdir() if not p.name.startswith(".")) for out in outs]
    return cache, [(run.returncode, err) for run, (_, err) in zip(runs, results)], wheels


@pytest.mark.slow
def test_two_cold_builds_on_one_empty_cache_of_another_machine_give_a_warm_builds_bytes(cold_pair, built_wheel):
    """Everything compiled anew (the op library, the locked sdists) by one of two builds started together, under
    another cache folder, HOME, TMPDIR, working folder, time zone and umask: both wheels are byte for byte the wheel
    of a build on this machine's warm cache."""
    _, runs, wheels = cold_pair
    assert [code for code, _ in runs] == [0, 0], [err[-2000:] for _, err in runs]
    assert [len(found) for found in wheels] == [1, 1]
    assert [found[0].name for found in wheels] == [built_wheel.name] * 2
    assert wheels[0][0].read_bytes() == wheels[1][0].read_bytes() == built_wheel.read_bytes()
    made = [err for _, err in runs if "compiling the retf op library" in err]
    assert len(made) == 1, "both builds compiled the op library: the second did not wait for the first's"
    assert any("building wrapt-1.12.1.tar.gz" in err for _, err in runs), "no locked sdist was built anew"


@pytest.mark.slow
def test_a_byte_flipped_in_each_kind_of_entry_a_build_uses_is_made_again_and_the_wheel_is_the_same(cold_pair, tmp_path):
    from retfwheel.cache import entries

    cache, runs, wheels = cold_pair
    assert [code for code, _ in runs] == [0, 0]
    expected = wheels[0][0]
    flipped = {}
    for kind, pick in (("inputs", "*.whl"), ("files", ""), ("built", "*.whl"), ("ops", ""), ("scans", ""),
                       ("renamed", ""), ("venvs", "lib/python3.6/site-packages/pip-*.dist-info/RECORD"), ("sdk", "tensorflow/include/tensorflow/core/framework/op.h")):
        found = entries(cache, kind)
        assert found, f"the cold build made no {kind} entry"
        entry = found[-1]
        victim = entry if not pick else sorted(p for p in entry.glob(pick) if not p.is_symlink())[0]
        assert not victim.is_symlink() and victim.stat().st_nlink == 1, f"{victim} is shared: not damaged"
        _flip(victim)
        flipped[kind] = entry
    rebuilt, stderr = _build(cache, tmp_path / "out")
    for kind, entry in flipped.items():
        assert f"{entry} is damaged" in stderr, f"{kind}: no line says {entry} was damaged\n{stderr[-3000:]}"
        assert check(entry, kind) is None, f"{kind}: {entry} was not made again"
    assert rebuilt.name == expected.name and rebuilt.read_bytes() == expected.read_bytes()


# Progress lines of a cold build, in the order it reaches them (each killed build's successor redoes what it cut)
PHASES = ("compiling the retf op library", "downloading ", "building ", "writing ")


@pytest.mark.slow
def test_a_cold_build_killed_in_each_phase_leaves_no_wheel_and_the_next_gives_the_same_bytes(cold_pair, real_wheel,
                                                                                              tmp_path):
    """SIGKILL (the whole process group) a moment after each phase of a cold build starts, then build on with
    the same cache: never a wheel in the output folder until the build that finishes, and its bytes are those
    of builds that were never killed."""
    from conftest import REPO

    _, runs, wheels = cold_pair
    assert [code for code, _ in runs] == [0, 0]
    expected = wheels[0][0]
    cache = _cold_cache(real_wheel, tmp_path / "cache")
    out = tmp_path / "out"
    killed = []
    for phase in PHASES:
        process = subprocess.Popen(_build_command(cache, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, cwd=REPO, start_new_session=True)
        try:
            seen = []
            deadline = time.monotonic() + BUILD_TIMEOUT
            assert process.stderr is not None
            for line in process.stderr:
                seen.append(line)
                if phase in line or time.monotonic() > deadline:
                    break
            time.sleep(1.0 if phase != "writing " else 0.0)  # into a download, a compile; writing takes a second
            assert process.poll() is None, f"the build was over before the kill while {phase.strip()}"
            os.killpg(process.pid, signal.SIGKILL)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
        assert any(phase in line for line in seen), f"the build never reached {phase!r}: {''.join(seen)[-2000:]}"
        left = [p.name for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else []
        assert left == [], f"killed while {phase.strip()}: {left} in the output folder"
        if phase == "writing ":
            assert [p for p in out.iterdir() if p.name.startswith(".retfwheel-")], "the kill came after the writing"
        killed.append(phase)
    rebuilt, _ = _build(cache, out)
    assert sorted(p.name for p in out.iterdir()) == [expected.name], "a killed build's staging was left behind"
    assert rebuilt.read_bytes() == expected.read_bytes()
    assert killed == list(PHASES)


@pytest.mark.slow
def test_a_damaged_environment_its_system_libstdcxx_and_debian_package_are_made_again(make_recipe, python36, tmp_path):
    """The emulated environment's entries: the pinned Debian package, the old libstdc++ taken from it, the venv."""
    from retfwheel.cache import entries
    from retfwheel.targets.environment import prepare_environment
    from retfwheel.targets.recipe import load_recipe

    recipe = load_recipe(make_recipe(extra="""
[environment]
packages = []
system_libstdcxx = { package = "libstdc++6", version = "10.2.1-6", suite = "bullseye", sha256 = "5c155c58935870bf3b4bfe769116841c0d286a74f59eccfd5645693ac23f06b1" }
"""))
    cache = tmp_path / "cache"
    made = prepare_environment(recipe, cache, python36, lambda message: None)
    runtime = made.system_runtime.read_bytes()
    (deb,) = entries(cache, "debian")
    record = next(made.venv.glob("lib/python3.6/site-packages/pip-*.dist-info/RECORD"))
    for victim in (deb, made.system_runtime, record):
        _flip(victim)
    said = []
    again = prepare_environment(recipe, cache, python36, said.append)
    damaged = [line for line in said if " is damaged: " in line]
    assert [line.split(" is damaged")[0] for line in damaged] == [
        f"the cached system libstdc++ {made.system_runtime}", f"the cached Debian package {deb}",
        f"the cached {recipe.name} environment {made.venv}"], said
    assert again.system_runtime.read_bytes() == runtime
    assert all(check(entry, kind) is None for entry, kind in ((deb, "debian"), (again.system_runtime, "environments"),
                                                              (again.venv, "environments")))
    assert subprocess.run([str(again.python), "-c", "import pip"], timeout=60).returncode == 0
