"""Killed at any moment, nothing half-made remains: the output folder never holds a partial wheel, and the next
build removes what a killed build left, never what a running one is using."""

import fcntl
import os
import signal
import subprocess
import sys
import time

from conftest import REPO
from retfwheel.wheelfile.staging import OWNER, UNOWNED_GRACE, remove_stale, staging_folder


def test_only_the_folders_of_dead_builds_are_removed(tmp_path):
    dead = tmp_path / ".retfwheel-dead"
    dead.mkdir()
    (dead / OWNER).write_text("")
    (dead / "half.whl").write_bytes(b"PK")
    unowned_old = tmp_path / ".retfwheel-unowned-old"
    unowned_old.mkdir()
    os.utime(unowned_old, (time.time() - 2 * UNOWNED_GRACE,) * 2)
    unowned_new = tmp_path / ".retfwheel-unowned-new"
    unowned_new.mkdir()
    not_ours = tmp_path / ".retfwheel-notes"  # a folder of the user's that happens to share the prefix
    not_ours.mkdir()
    (not_ours / "keep.txt").write_text("mine")
    os.utime(not_ours, (time.time() - 2 * UNOWNED_GRACE,) * 2)
    (tmp_path / "mine.whl").write_bytes(b"user's")
    with staging_folder(tmp_path) as live:
        assert sorted(p.name for p in remove_stale(tmp_path)) == [".retfwheel-dead", ".retfwheel-unowned-old"]
        assert live.is_dir() and unowned_new.is_dir() and (tmp_path / "mine.whl").read_bytes() == b"user's"
        assert (not_ours / "keep.txt").read_text() == "mine"
        other = os.open(live / OWNER, os.O_RDONLY)  # another open file description: the lock is really held
        try:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                raise AssertionError("the staging folder's lock was not held")
            except BlockingIOError:
                pass
        finally:
            os.close(other)
    assert not live.exists()


def test_a_build_killed_at_any_moment_leaves_nothing_half_made(tf_wheel, recipe, tmp_path):
    """SIGKILL at points spread over a whole build: the output folder then holds nothing, hidden staging left for
    the next build, or the finished wheel; and the next build into it gives the same bytes and nothing else."""
    source = tf_wheel({"tensorflow/python/blob.bin": os.urandom(32 << 20)})

    def command(out):
        return [sys.executable, "-m", "retfwheel", "build", str(source), "--recipe", str(recipe), "--out-dir", str(out),
                "--cache-dir", str(tmp_path / "cache")]

    started = time.monotonic()
    reference = subprocess.run(command(tmp_path / "reference"), capture_output=True, text=True, cwd=REPO, timeout=600)
    assert reference.returncode == 0, reference.stderr[-2000:]
    duration = time.monotonic() - started
    (expected,) = (tmp_path / "reference").glob("*.whl")
    outcomes = set()
    for index, fraction in enumerate((0.2, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)):
        out = tmp_path / f"killed-{index}"
        process = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        time.sleep(duration * fraction)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        left = sorted(p.name for p in out.iterdir()) if out.exists() else []
        wheels = [name for name in left if not name.startswith(".")]
        assert wheels in ([], [expected.name]), f"killed at {fraction:.0%}: {left}"
        if wheels:
            assert (out / expected.name).read_bytes() == expected.read_bytes(), f"killed at {fraction:.0%}: a partial wheel"
        outcomes.add("wheel" if wheels else "staging" if left else "nothing")
        again = subprocess.run(command(out), capture_output=True, text=True, cwd=REPO, timeout=600)
        assert again.returncode == 0, again.stderr[-2000:]
        assert sorted(p.name for p in out.iterdir()) == [expected.name], f"after the rebuild: {list(out.iterdir())}"
        assert (out / expected.name).read_bytes() == expected.read_bytes()
    assert "nothing" in outcomes or "staging" in outcomes, f"every kill came after the build: {outcomes}"
