"""Cache entries: made by one process at a time, published whole, and a damaged one is made again, never used."""

import subprocess
import sys
import time

import pytest

from retfwheel.targets.cache import entry_lock, is_damaged, publish, read_verified


def test_a_published_entry_reads_back_and_a_flipped_byte_is_caught(tmp_path):
    entry = tmp_path / "ops" / "key" / "_retf_ops.so"
    assert read_verified(entry) is None and not is_damaged(entry)
    publish(entry, b"\x7fELF library")
    assert read_verified(entry) == b"\x7fELF library"
    data = bytearray(entry.read_bytes())
    data[5] ^= 0x01
    entry.write_bytes(bytes(data))
    assert read_verified(entry) is None and is_damaged(entry)
    (tmp_path / "legacy.so").write_bytes(b"made before entries carried their sha256")
    assert is_damaged(tmp_path / "legacy.so")
    assert sorted(p.name for p in entry.parent.iterdir()) == ["_retf_ops.so", "_retf_ops.so.sha256"]  # no temporaries


def test_the_lock_nests_within_one_process(tmp_path):
    """Making an environment makes its venv, the same entry: taking its lock again must not wait forever."""
    entry = tmp_path / "environments" / "emulated-py36"
    holder = subprocess.run([sys.executable, "-c", f"""
from pathlib import Path
from retfwheel.targets.cache import entry_lock
with entry_lock(Path({str(entry)!r})):
    with entry_lock(Path({str(entry)!r})):
        print("nested")
    print("outer")
"""], capture_output=True, text=True, timeout=30)
    assert holder.stdout.split() == ["nested", "outer"], holder.stderr


def test_a_second_process_waits_for_the_entry_it_would_make(tmp_path):
    entry = tmp_path / "venvs" / "python3.6"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from pathlib import Path
from retfwheel.targets.cache import entry_lock
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

    from retfwheel.targets.cache import MARKER, STAGING_AGE

    (root / MARKER).write_text("")
    (root / "inputs" / "k1").mkdir(parents=True)
    (root / "inputs" / "k1" / "tf.whl").write_bytes(b"x" * 1000)
    publish(root / "ops" / "good" / "_retf_ops.so", b"library")
    publish(root / "ops" / "bad" / "_retf_ops.so", b"library")
    (root / "ops" / "bad" / "_retf_ops.so").write_bytes(b"librarY")
    old_scratch = root / ".build-abc"
    old_scratch.mkdir()
    os.utime(old_scratch, (time.time() - 2 * STAGING_AGE,) * 2)
    (root / ".build-new").mkdir()  # may belong to a running build
    (root / "notes.txt").write_text("not the cache's")


def test_prune_removes_half_made_and_damaged_entries_only(tmp_path):
    from retfwheel.targets.cache import prune

    _fake_cache(tmp_path)
    removed = {p.relative_to(tmp_path).as_posix() for p in prune(tmp_path)}
    assert removed == {".build-abc", "ops/bad"}
    assert (tmp_path / "ops" / "good").is_dir() and (tmp_path / ".build-new").is_dir()
    assert {p.relative_to(tmp_path).as_posix() for p in prune(tmp_path, older_than_days=0)} >= {"inputs/k1", "ops/good"}


def test_cache_command_shows_sizes_and_clear_touches_only_cache_entries(cli, tmp_path):
    import json

    _fake_cache(tmp_path)
    shown = json.loads(cli("cache", "--cache-dir", tmp_path, "--json").out)
    kinds = {k["kind"]: k for k in shown["kinds"]}
    assert kinds["inputs"]["entries"] == 1 and kinds["inputs"]["bytes"] == 1000 and kinds["ops"]["entries"] == 2
    run = cli("cache", "--cache-dir", tmp_path, "clear")
    assert run.code == 0 and "cleared inputs, ops" in run.out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-abc", ".build-new", ".retfwheel-cache", "notes.txt"]


def test_prune_and_clear_refuse_a_folder_that_is_not_a_cache(cli, tmp_path):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "my-data.csv").write_text("a user's")
    run = cli("cache", "--cache-dir", tmp_path, "clear")
    assert run.code == 3 and "not a folder retfwheel has used as its cache" in run.err
    assert (tmp_path / "inputs" / "my-data.csv").read_text() == "a user's"
