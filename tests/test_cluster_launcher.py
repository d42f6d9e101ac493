"""retfwheel.proof.cluster with plain Python processes: waiting, stopping servers by pid, failures and time-outs."""

import socket
import sys

from retfwheel.proof import cluster
from retfwheel.proof.cluster import Task, cluster_spec, free_ports, run_cluster

SERVER = "import time\nprint('serving', flush=True)\nwhile True: time.sleep(1)"


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_ports_differ_and_the_spec_names_each_task():
    ports = free_ports(5)
    assert len(set(ports)) == 5
    spec = cluster_spec({"ps": 2, "worker": 3})
    hosts = spec["ps"] + spec["worker"]
    assert len(spec["ps"]) == 2 and len(spec["worker"]) == 3 and len(set(hosts)) == 5
    assert all(h.startswith("localhost:") for h in hosts)


def test_a_port_handed_out_is_not_handed_out_again_once_free(monkeypatch):
    """The kernel may give a port again as soon as it is closed; a cluster picked then must not get another's
    ports, whose tasks bind them only once TensorFlow has loaded."""
    given = iter([61001, 61002, 61001, 61003, 61002, 61004])

    class Socket:
        def __init__(self, *args):
            self.port = next(given)

        def bind(self, address):
            pass

        def getsockname(self):
            return ("127.0.0.1", self.port)

        def close(self):
            pass

    monkeypatch.setattr(cluster, "_HANDED_OUT", set())
    monkeypatch.setattr(socket, "socket", Socket)
    assert free_ports(2) == [61001, 61002]
    assert free_ports(2) == [61003, 61004]


def test_servers_stop_when_the_workers_are_done():
    run = run_cluster([Task("ps", 0, python(SERVER), server=True),
                       Task("worker", 0, python("import json, os; print(json.dumps({'task': os.environ['ROLE']}))"),
                            env={"ROLE": "w0"})], timeout=60)
    assert run.ok and not run.timed_out and run.failure() == ""
    ps, worker = run.of("ps")[0], run.of("worker")[0]
    assert ps.stopped and "serving" in ps.stdout  # stopped by us, after it had started
    assert worker.returncode == 0 and not worker.stopped and worker.json == {"task": "w0"}


def test_a_failing_worker_stops_everything_at_once():
    run = run_cluster([Task("ps", 0, python(SERVER), server=True),
                       Task("worker", 0, python("import time; time.sleep(60)")),
                       Task("worker", 1, python("import sys; sys.exit('no graph for you')"))], timeout=60)
    assert not run.ok and run.seconds < 30
    assert run.failure() == "worker:1 exited with 1: no graph for you"
    assert run.of("worker")[0].stopped


def test_a_cluster_that_hangs_is_stopped_at_the_deadline():
    run = run_cluster([Task("worker", 0, python("import time; time.sleep(60)"))], timeout=1)
    assert run.timed_out and not run.ok and run.seconds < 30
    assert "did not finish in time" in run.failure()


def test_a_server_that_dies_at_start_fails_the_cluster():
    run = run_cluster([Task("ps", 0, python("import sys; sys.exit('port in use')"), server=True),
                       Task("worker", 0, python("import time; time.sleep(60)"))], timeout=60)
    assert not run.ok and run.seconds < 30
    assert run.failure() == "ps:0 exited with 1: port in use"


def test_tasks_die_with_a_launcher_killed_before_its_clean_up(tmp_path):
    """A launcher killed by SIGKILL runs no clean-up; its tasks must not outlive it."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "server.pid"
    server = tmp_path / "server.py"
    server.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nwhile True:\n    time.sleep(1)\n")
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        "import sys\n"
        "from retfwheel.proof.cluster import Task, run_cluster\n"
        f"run_cluster([Task('ps', 0, (sys.executable, {str(server)!r}), server=True),\n"
        "             Task('worker', 0, (sys.executable, '-c', 'import time; time.sleep(60)'))], timeout=60)\n")
    # Its scratch folder outlives it: in this test's folder, not the machine's temporary one.
    process = subprocess.Popen([sys.executable, str(launcher)], env=dict(os.environ, TMPDIR=str(tmp_path)))
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    server_pid = int(pid_file.read_text())
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(server_pid, signal.SIGKILL)
    raise AssertionError("the server outlived its launcher")
