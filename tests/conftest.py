from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from factory import (
    FRAMEWORK_SOURCE,
    NEW_GLIBC_SOURCE,
    TO_CHARS_SOURCE,
    compile_library,
    make_wheel,
    tensorflow_files,
)

REPO = Path(__file__).resolve().parent.parent
RECIPES = REPO / "recipes"
# The op package's checks: run in the target interpreter by one runner, defined one module per op family.
OP_CHECKS = REPO / "tests" / "ops" / "check_retf_ops.py"


def op_check_classes() -> list[str]:
    """The runner's check classes (names ending in "Test") in tests/ops/checks/, module by module."""
    modules = sorted((OP_CHECKS.parent / "checks").glob("*.py"))
    return [node.name for path in modules for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.ClassDef) and node.name.endswith("Test")]


@dataclass(frozen=True)
class OpCheckRun:
    """One run of the op checks, every class in one process (a TensorFlow import each would cost more than most
    classes take): each check's outcome, by "Class.test_name", as the runner's --report wrote them."""
    python: str
    returncode: int
    outcomes: dict
    output: str

    def failures(self, check_class: str) -> str | None:
        """Why ``check_class`` did not pass, or None when each of its checks ran and passed (or was skipped)."""
        mine = {name: said for name, said in self.outcomes.items() if name.split(".")[0] == check_class}
        bad = [f"{name}: {said}" for name, said in sorted(mine.items()) if said not in ("ok", "skipped")]
        if mine and not bad:
            return None
        why = "\n".join(bad) if bad else f"none of its checks ran (exit {self.returncode})\n{self.output[-8000:]}"
        return f"{check_class} under {self.python}:\n{why}"


def run_op_checks(python: str, classes: list[str], timeout: float = 3600) -> OpCheckRun:
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="retf-op-checks-") as folder:
        report = Path(folder) / "report.json"
        result = run_bounded([python, OP_CHECKS, "--report", report, "-v", *classes], timeout)
        outcomes = json.loads(report.read_text()) if report.is_file() else {}
    return OpCheckRun(python, result.returncode, outcomes, result.stderr + result.stdout)


@dataclass(frozen=True)
class Libraries:
    framework_old_abi: bytes  # -D_GLIBCXX_USE_CXX11_ABI=0
    framework_new_abi: bytes
    to_chars: bytes  # needs GLIBCXX_3.4.29
    new_glibc: bytes  # needs GLIBC_2.36


@pytest.fixture(scope="session")
def libs(tmp_path_factory) -> Libraries:
    folder = tmp_path_factory.mktemp("libs")
    return Libraries(
        framework_old_abi=compile_library(folder, "fw0.so", FRAMEWORK_SOURCE, flags=("-D_GLIBCXX_USE_CXX11_ABI=0", "-Wl,-rpath,$ORIGIN/")),
        framework_new_abi=compile_library(folder, "fw1.so", FRAMEWORK_SOURCE, flags=("-D_GLIBCXX_USE_CXX11_ABI=1",)),
        to_chars=compile_library(folder, "tc.so", TO_CHARS_SOURCE, flags=("-std=c++17",)),
        new_glibc=compile_library(folder, "ng.so", NEW_GLIBC_SOURCE, cxx=False),
    )


@pytest.fixture
def tf_wheel(tmp_path, libs):
    """A small TensorFlow-shaped wheel with a real framework library (old std::string ABI)."""

    def make(extra: dict[str, bytes] | None = None, **options) -> Path:
        folder = tmp_path / "in"
        folder.mkdir(exist_ok=True)
        return make_wheel(folder, tensorflow_files(libs.framework_old_abi, extra), **options)

    return make


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(tmp_path):
    """Run the real command line in a subprocess."""

    def run(*args: str, env: dict | None = None, cwd: Path = REPO) -> Run:
        environment = dict(os.environ, **(env or {}))
        result = subprocess.run([sys.executable, "-m", "retfwheel", *map(str, args)], capture_output=True, text=True,
                                cwd=cwd, env=environment)
        return Run(result.returncode, result.stdout, result.stderr)

    return run


BASE_RECIPE = """
description = "test target"

[target]
python = "3.6"
glibc = "{glibc}"
glibcxx = "{glibcxx}"
cxxabi = "1.3.12"
gcc = "7.0.0"

[output]
name = "tensorflow"
local_version = "{label}"
extra_platform_tags = ["linux_x86_64"]
"""


@pytest.fixture
def make_recipe(tmp_path):
    """Write a recipe into the test's folder; ``extra`` is appended TOML."""

    def make(name="test-py36", glibc="host", glibcxx="3.4.28", label="retf.test", extra=""):
        folder = tmp_path / "recipes"
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.toml"
        path.write_text(BASE_RECIPE.format(glibc=glibc, glibcxx=glibcxx, label=label) + extra)
        return path

    return make


@pytest.fixture
def recipe(make_recipe):
    """This machine's glibc, Python 3.6, a bullseye-like libstdc++ (3.4.28); nothing vendored."""
    return make_recipe()


@pytest.fixture
def old_recipe(make_recipe):
    """An Ubuntu 18.04-like target: glibc 2.27, GLIBCXX_3.4.25."""
    return make_recipe("old-py36", glibc="2.27", glibcxx="3.4.25", label="retf.old")


@pytest.fixture
def emulated():
    return RECIPES / "emulated-py36.toml"


@pytest.fixture
def bionic():
    return RECIPES / "ubuntu18.04-py36.toml"


# --- the real TensorFlow wheel, built and verified once per test session (slow tests only) ---

def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "retfwheel", *map(str, args)], capture_output=True, text=True, cwd=cwd)


# Every TF program a test runs is bounded: each finishes in well under a minute here; one that hangs (as Keras inside
# a while loop once did on the wheel) fails its test instead of stalling the suite.
PROGRAM_TIMEOUT = 600


def run_bounded(command: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run that fails the test after ``timeout`` seconds, stopping the command and every process it
    started (its own session), never anything else."""
    process = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"still running after {timeout:.0f} s, stopped: {' '.join(map(str, command))}\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="session")
def python36():
    from retfwheel.errors import InputFileError
    from retfwheel.targets.interpreter import find_python

    try:
        return find_python((3, 6))
    except InputFileError as exc:
        pytest.skip(f"no Python 3.6 interpreter on this machine: {exc}")


@pytest.fixture(scope="session")
def real_wheel():
    from retfwheel.targets.fetch import cache_root, fetch_default_input
    from retfwheel.targets.recipe import load_recipe

    return fetch_default_input(load_recipe(RECIPES / "emulated-py36.toml"), cache_root())


@pytest.fixture(scope="session")
def built_wheel(real_wheel, python36, tmp_path_factory):
    """tensorflow-cpu 2.6.2 rebuilt with recipes/emulated-py36.toml."""
    out = tmp_path_factory.mktemp("built")
    run = run_cli("build", real_wheel, "--recipe", RECIPES / "emulated-py36.toml", "--out-dir", out)
    assert run.returncode == 0, run.stderr[-3000:]
    return Path(run.stdout.strip().splitlines()[-1])


DOCKER_ENTRY_POINT = REPO / "docker" / "ubuntu18.04-py36" / "entrypoint.sh"


@pytest.fixture(scope="session")
def verified(built_wheel, tmp_path_factory):
    """`verify --json --keep-env` of the built wheel: (exit code, report, kept venv with the wheel installed). Run
    through the Ubuntu 18.04 image's entry point (its `retf-verify`) pointed at the emulated environment, as
    `make demo` runs it: the wheel named relative to the working folder."""
    import json

    kept = tmp_path_factory.mktemp("kept") / "env"
    env = dict(os.environ, RETF_RECIPE=str(RECIPES / "emulated-py36.toml"),
               RETFWHEEL=str(Path(sys.executable).parent / "retfwheel"))
    run = subprocess.run([DOCKER_ENTRY_POINT, built_wheel.name, "--json", "--keep-env", kept], capture_output=True,
                         text=True, env=env, cwd=built_wheel.parent)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        report = {"checks": [], "stderr": run.stderr[-3000:]}
    return run.returncode, report, kept / "venv"


def kept_environment(recipe, real_wheel, folder, wheel=None):
    """``real_wheel`` built with ``recipe`` (or its ``wheel`` so built), verified, and left installed in a kept copy
    of its environment."""
    if wheel is None:
        built = run_cli("build", real_wheel, "--recipe", recipe, "--out-dir", folder / "out")
        assert built.returncode == 0, built.stderr[-3000:]
        wheel = built.stdout.strip().splitlines()[-1]
    verified = run_cli("verify", wheel, "--recipe", recipe, "--keep-env", folder / "env")
    assert verified.returncode == 0, verified.stdout + verified.stderr[-2000:]
    assert "pass  TF 1.15 program unchanged" in verified.stdout
    (folder / "verify.txt").write_text(verified.stdout)
    return folder / "env" / "venv"


def installed_environment(recipe: Path, wheel: Path, folder: Path) -> Path:
    """A fresh copy of ``recipe``'s old environment with ``wheel`` installed by its own pip, offline: the venv (for
    a wheel another test verified already, or built by the same recipe but for one switch)."""
    from retfwheel.targets.environment import prepare_environment
    from retfwheel.targets.fetch import cache_root
    from retfwheel.targets.recipe import load_recipe

    env = prepare_environment(load_recipe(recipe), cache_root(), None, lambda message: None).copy_to(folder)
    install = run_bounded([env.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", wheel],
                          900, cwd=folder)
    assert install.returncode == 0, (install.stdout + install.stderr)[-3000:]
    return env.venv


class VerifiedBuilds:
    """(recipe name, input requirement) -> (verify's exit code, its JSON report, the kept venv with the wheel
    installed): the input fetched and built with the recipe and its shipped lock, then verified, each once per session
    (the matrix's rows and the programs run on them share them). ``start`` begins some at once, two at a time: one
    verify leaves a core idle much of its time (pip, one import after another)."""

    def __init__(self, tmp_path_factory):
        from concurrent.futures import ThreadPoolExecutor

        self.folders = tmp_path_factory
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.made: dict[tuple[str, str], Future] = {}

    def start(self, *rows: tuple[str, str]) -> None:
        for recipe, requirement in rows:
            if (recipe, requirement) not in self.made:
                folder = self.folders.mktemp(f"{recipe}-{requirement.replace('==', '-')}")
                self.made[(recipe, requirement)] = self.pool.submit(self._make, recipe, requirement, folder)

    def __call__(self, recipe: str, requirement: str) -> tuple[int, dict, Path]:
        self.start((recipe, requirement))
        return self.made[(recipe, requirement)].result()

    @staticmethod
    def built(recipe: str, requirement: str, out: Path) -> Path:
        import dataclasses

        from packaging.requirements import Requirement

        from retfwheel.targets.fetch import cache_root, fetch_default_input
        from retfwheel.targets.recipe import load_recipe

        loaded = dataclasses.replace(load_recipe(RECIPES / f"{recipe}.toml"), input_requirement=Requirement(requirement))
        run = run_cli("build", fetch_default_input(loaded, cache_root()), "--recipe", recipe, "--out-dir", out)
        assert run.returncode == 0, run.stderr[-3000:]
        return Path(run.stdout.strip().splitlines()[-1])

    def _make(self, recipe: str, requirement: str, folder: Path) -> tuple[int, dict, Path]:
        import json

        wheel = self.built(recipe, requirement, folder / "out")
        run = run_cli("verify", wheel, "--recipe", recipe, "--json", "--keep-env", folder / "env")
        try:
            report = json.loads(run.stdout)
        except ValueError:
            pytest.fail(f"verify of {wheel} printed no report (exit {run.returncode}):\n{run.stderr[-3000:]}")
        return run.returncode, report, folder / "env" / "venv"


@pytest.fixture(scope="session")
def verified_builds(tmp_path_factory):
    builds = VerifiedBuilds(tmp_path_factory)
    yield builds
    builds.pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def v1_wheel(real_wheel, python36, tmp_path_factory) -> Path:
    """tensorflow-cpu 2.6.2 rebuilt with recipes/emulated-py36-tf1api.toml."""
    out = tmp_path_factory.mktemp("v1-built")
    run = run_cli("build", real_wheel, "--recipe", RECIPES / "emulated-py36-tf1api.toml", "--out-dir", out)
    assert run.returncode == 0, run.stderr[-3000:]
    return Path(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def v1_venv_started(verified_builds, python36, tmp_path_factory) -> Future:
    """v1_venv's making, begun in verified_builds' pool: the default input built with recipes/emulated-py36-tf1api.toml
    (the bytes of v1_wheel), verified and kept."""
    from retfwheel.targets.fetch import cache_root, fetch_default_input
    from retfwheel.targets.recipe import load_recipe

    def make(folder: Path) -> Path:
        real = fetch_default_input(load_recipe(RECIPES / "emulated-py36.toml"), cache_root())
        return kept_environment(RECIPES / "emulated-py36-tf1api.toml", real, folder)

    return verified_builds.pool.submit(make, tmp_path_factory.mktemp("v1"))


@pytest.fixture(scope="session")
def v1_venv(v1_venv_started, v1_wheel) -> Path:
    """The wheel of recipes/emulated-py36-tf1api.toml, verified, installed in a kept copy of the old environment."""
    venv = v1_venv_started.result()
    (installed,) = (venv.parent.parent / "out").glob("*.whl")
    assert installed.read_bytes() == v1_wheel.read_bytes(), "the kept environment's wheel is not v1_wheel's bytes"
    return venv


@pytest.fixture(scope="session", autouse=True)
def started_with_the_session(request):
    """The builds and verifications the selected tests need, begun with the session, two at a time, in the order the
    tests need them: the kept 1.x-API environment, then the rows of verified_builds that tests take and are
    parametrized over (tests/test_matrix.py's). Each leaves a core idle much of its time, as do the tests that run
    first (the op checks' verify, the cold builds, the users' pips)."""
    import inspect

    items = request.session.items
    if any("v1_venv" in item.fixturenames for item in items):
        try:
            request.getfixturevalue("v1_venv_started")
        except pytest.skip.Exception:
            pass  # no Python 3.6: the tests that take v1_venv are skipped for it, the others run
    rows = [(item.callspec.params["recipe"], item.callspec.params["requirement"]) for item in items
            if hasattr(item, "callspec") and {"recipe", "requirement"} <= set(item.callspec.params)
            and "verified_builds" in inspect.signature(item.function).parameters]
    if rows:
        request.getfixturevalue("verified_builds").start(*dict.fromkeys(rows))


# --- comparing training runs -----------------------------------------------------------------------
# Two runs of one TF 1.x program with the same seeds, data and one thread compute the same thing; TF 2.6.2
# and 1.15.5 still differ in the last bits (matmul, reductions), a few float32 ulps (4.5e-7 relative at
# most seen here). The tolerances keep over 20x margin on that early on (1e-5 for the first steps, where
# nothing has had time to compound) and over 200x after (1e-4), and are far tighter than a change of
# optimizer semantics (lazy instead of dense Adam moves the third loss by 10%).
EARLY_STEPS = 10
EARLY_RTOL = 1e-5
RTOL = 1e-4


def training_differences(reference: list[float], produced: list[float]) -> list[str]:
    """Steps whose losses differ by more than the tolerance (all steps if the lengths differ)."""
    import math

    if len(reference) != len(produced):
        return [f"{len(produced)} losses, expected {len(reference)}"]
    problems = []
    for step, (want, got) in enumerate(zip(reference, produced)):
        rtol = EARLY_RTOL if step < EARLY_STEPS else RTOL
        if not math.isclose(got, want, rel_tol=rtol):
            problems.append(f"step {step}: {got!r} vs {want!r} (rtol {rtol})")
    return problems
