"""Local TensorFlow clusters: tasks on localhost ports picked here, every process bounded in time and
stopped by its own process id. Used by `verify`, the tests and the benchmarks to run parameter-server
programs in an emulated old environment."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from retfwheel.process import last_json

_PR_SET_PDEATHSIG = 1
_POLL_SECONDS = 0.05
_STOP_SECONDS = 5.0
# Ports handed out by this process: a cluster's tasks bind theirs seconds after they were picked (once TensorFlow has
# loaded), and another cluster started meanwhile must not be given them again.
_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()


@dataclass(frozen=True)
class Task:
    """One process of a cluster. Servers (``server=True``) run until the other tasks are done."""

    job: str
    index: int
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    server: bool = False

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"


@dataclass(frozen=True)
class TaskResult:
    task: Task
    returncode: int
    stopped: bool  # still running at the end (a server) or when the cluster failed, then stopped here
    stdout: str
    stderr: str

    @property
    def json(self) -> dict | None:
        """The last JSON object line the task printed, if any."""
        return last_json(self.stdout)


@dataclass(frozen=True)
class ClusterRun:
    results: tuple[TaskResult, ...]
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(r.returncode == 0 and not r.stopped for r in self.results if not r.task.server)

    def of(self, job: str) -> list[TaskResult]:
        return [r for r in self.results if r.task.job == job]

    def failure(self) -> str:
        """One line on what went wrong, for an error message ("" when nothing did)."""
        if self.timed_out:
            return f"the cluster did not finish in time ({self.seconds:.0f} s)"
        for result in self.results:
            if not result.stopped and (result.task.server or result.returncode != 0):
                lines = [line for line in result.stderr.splitlines() if line.strip()]
                return f"{result.task.name} exited with {result.returncode}: {(lines or ['no output'])[-1][:400]}"
        return ""


def free_ports(count: int) -> list[int]:
    """Ports free on localhost now and not handed out by this process before."""
    picked: list[int] = []
    held: list[socket.socket] = []
    with _HANDING_OUT:
        try:
            while len(picked) < count:
                handle = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                handle.bind(("127.0.0.1", 0))
                held.append(handle)  # held until all are picked, so none is picked twice
                if (port := handle.getsockname()[1]) not in _HANDED_OUT:
                    picked.append(port)
            _HANDED_OUT.update(picked)
            return picked
        finally:
            for handle in held:
                handle.close()


def cluster_spec(jobs: dict[str, int]) -> dict[str, list[str]]:
    """A cluster spec with ``jobs[name]`` tasks per job, each on its own free localhost port."""
    ports = iter(free_ports(sum(jobs.values())))
    return {job: [f"localhost:{next(ports)}" for _ in range(count)] for job, count in jobs.items()}


def run_cluster(tasks: list[Task], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None) -> ClusterRun:
    """Start every task, wait for the non-server ones, then stop the servers.

    The first non-server task that fails, or the timeout, stops all. Only the processes started
    here are signalled, by their process ids.
    """
    base = dict(os.environ if env is None else env)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="retfwheel-cluster-") as scratch:
        running = []
        try:
            for task in tasks:
                out = open(Path(scratch) / f"{task.job}-{task.index}.out", "w+")
                err = open(Path(scratch) / f"{task.job}-{task.index}.err", "w+")
                process = subprocess.Popen(list(task.command), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                           env={**base, **task.env}, cwd=cwd, preexec_fn=_die_with_parent)
                running.append((task, process, out, err))
            timed_out = _wait(running, start + timeout)
        finally:
            stopped = {id(process) for _task, process, _out, _err in running if _stop(process)}
        results = []
        for task, process, out, err in running:
            out.seek(0)
            err.seek(0)
            results.append(TaskResult(task, process.returncode, id(process) in stopped, out.read(), err.read()))
            out.close()
            err.close()
    return ClusterRun(tuple(results), timed_out, time.monotonic() - start)


def _wait(running, deadline: float) -> bool:
    """True when the deadline passed first."""
    waited = [(task, process) for task, process, _o, _e in running if not task.server]
    while time.monotonic() < deadline:
        codes = [process.poll() for _task, process in waited]
        if any(code not in (None, 0) for code in codes) or all(code is not None for code in codes):
            return False
        if any(task.server and process.poll() is not None for task, process, _o, _e in running):
            return False  # a server that exits by itself failed to start
        time.sleep(_POLL_SECONDS)
    return True


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the thread that started it ends first (killed before its own
    clean-up), so no task outlives the launcher. Kept across exec; Linux only, a no-op elsewhere. ``prctl`` is
    looked up in the parent (``_PRCTL``): the child of a process with threads calls no loader."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _stop(process: subprocess.Popen) -> bool:
    """Stop a process still running (SIGTERM, then SIGKILL); whether it was."""
    if process.poll() is not None:
        return False
    process.terminate()
    try:
        process.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return True
