"""`retfwheel verify`: install a wheel into a fresh copy of the recipe's old environment and prove it runs."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name

from retfwheel.cache import entry_lock, entry_path, publish_file, usable
from retfwheel.errors import InputFileError
from retfwheel.native.elf import read_elf
from retfwheel.native.tf1 import needed_libraries, tf1_extensions
from retfwheel.process import last_json, last_line
from retfwheel.proof.cluster import Task, cluster_spec, run_cluster
from retfwheel.stages.plan import BOOTSTRAP_FILE, RUNTIME_DIR, TF115_CHECK_SCRIPT
from retfwheel.stages.sharing import importable_names
from retfwheel.targets.environment import Environment, emulated_command, prepare_environment
from retfwheel.targets.recipe import Recipe
from retfwheel.tree import probe
from retfwheel.wheelfile.archive import MemberView, read_content
from retfwheel.wheelfile.wheel import read_wheel

Progress = Callable[[str], None]
_PROBE_SOURCE = """#include <charconv>
extern "C" int retf_probe_format(char* out, double value) {
  return static_cast<int>(std::to_chars(out, out + 31, value).ptr - out);
}
"""


CLUSTER_STEPS = 5
CLUSTER_TIMEOUT = 180.0


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "pass", "FAIL" or "n/a"
    detail: str


@dataclass(frozen=True)
class Verification:
    wheel: Path
    recipe: str
    checks: tuple[Check, ...]
    environment: Path | None  # kept environment, if asked for

    @property
    def passed(self) -> bool:
        return all(c.status != "FAIL" for c in self.checks)


def verify_wheel(wheel_path: Path, recipe: Recipe, cache: Path, *, scripts: tuple[Path, ...] = (), keep: Path | None = None,
                 python: Path | None = None, progress: Progress = lambda m: None) -> Verification:
    """Run every check; a failed check is reported, never raised."""
    wheel_path = Path(wheel_path).resolve()  # pip runs from the environment's folder, not the caller's
    wheel = read_wheel(wheel_path)
    settings = wheel_settings(wheel)
    for script in scripts:
        if not Path(script).is_file():
            raise InputFileError(f"{script}: no such script", hint="pass an existing Python file to --script")
    kept = _kept_folder(Path(keep)) if keep else None
    base = prepare_environment(recipe, cache, python, progress)
    try:
        probe = probe_extension(cache, progress)
    except InputFileError as exc:  # e.g. GCC 7 inside an old image: the extension checks cannot run
        probe = None
        progress(f"no GLIBCXX_3.4.29 probe: {exc}")
    folder = kept or Path(tempfile.mkdtemp(prefix="retfwheel-verify-"))  # after the refusals: none leaves it behind
    try:
        progress(f"copying the {recipe.name} environment")
        env = base.copy_to(folder)
        checks = _run_checks(env, wheel_path, str(canonicalize_name(wheel.metadata_name)), wheel, settings, probe, scripts,
                             progress, keep=keep is not None)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    return Verification(wheel_path, recipe.name, tuple(checks), folder if keep else None)


KEPT_MARKER = ".retfwheel-kept-environment"  # in every folder `verify --keep-env` made: it may replace it


def _kept_folder(folder: Path) -> Path:
    """``folder`` emptied for a kept environment: only a missing or empty folder, or one this command made."""
    if folder.exists() and not folder.is_dir():
        raise InputFileError(f"{folder}: --keep-env needs a folder, and this is a file", hint="pass a new folder")
    if folder.is_dir() and any(folder.iterdir()):
        if not (folder / KEPT_MARKER).is_file():
            raise InputFileError(f"{folder}: not empty, and not an environment `retfwheel verify --keep-env` made; "
                                 "nothing in it was touched", hint="pass a new or empty folder to --keep-env")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / KEPT_MARKER).write_text("Made by `retfwheel verify --keep-env`; verify replaces this folder when "
                                      "given it again.\n")
    return folder


def _run_checks(env: Environment, wheel_path: Path, name: str, wheel, settings: dict, probe: Path | None, scripts,
                progress: Progress, keep: bool = False) -> list[Check]:
    checks: list[Check] = []
    before = _snapshot(env)
    pip = _python(env, ["-m", "pip", "--version"]).stdout.split()[1:2] or ["unknown"]
    progress(f"pip {pip[0]} install --no-index {wheel_path.name}")
    install = _python(env, ["-m", "pip", "install", "--disable-pip-version-check", "--no-index", str(wheel_path)])
    checks.append(_status("pip install --no-index", install.returncode == 0,
                          last_line(install) if install.returncode else f"installed offline with the environment's pip {pip[0]}"))
    if install.returncode != 0:
        return checks + [Check("remaining checks", "FAIL", "skipped: the wheel did not install")]
    after = _snapshot(env)
    checks.append(_unchanged(before, after, name, lambda path: _command_fails(env, str(env.venv / path))))
    pip_check = _python(env, ["-m", "pip", "check", "--disable-pip-version-check"])
    checks.append(_status("pip check", pip_check.returncode == 0, last_line(pip_check)))

    if env.system_runtime is not None and probe is not None:
        progress("loading the GLIBCXX_3.4.29 probe without tensorflow (must fail under the old runtime)")
        alone = _python(env, [_probe_script("extension.py"), str(probe)], emulate=True)
        checks.append(_status("old runtime is emulated", alone.returncode != 0,
                              "probe fails without tensorflow: " + last_line(alone) if alone.returncode else
                              "the probe loaded without tensorflow: the old libstdc++ is not in effect"))
    else:
        checks.append(Check("old runtime is emulated", "n/a", "the recipe's environment has no old system libstdc++ (use its docker image)"))

    progress("importing tensorflow and training a step in the old environment")
    run = _python(env, [_probe_script("runtime.py"), str(probe or "")], emulate=True)
    report = _json(run)
    expected = str(wheel.version.public)
    if report is None:
        checks.append(Check("import tensorflow", "FAIL", last_line(run)))
    else:
        api = report.get("api_version")
        reports = f", reports the 1.x API's {api}" if api and api != report.get("version") else ""
        checks.append(_status("import tensorflow", report.get("version") == expected,
                              f"tensorflow {report.get('version')} in {report.get('import_seconds')} s "
                              f"(expected {expected}{reports})"))
        vendored = wheel.archive.member(f"{RUNTIME_DIR}/libstdc++.so.6") is not None
        mapped = report.get("libstdcxx_mapped", [])
        if vendored and env.system_runtime is not None:
            checks.append(_status("vendored libstdc++ mapped", any(f"/{RUNTIME_DIR}/" in m for m in mapped), ", ".join(mapped) or "none"))
        else:
            checks.append(Check("vendored libstdc++ mapped", "n/a", f"mapped: {', '.join(mapped) or 'none'}"))
        loss = report.get("loss", [0, 0])
        checks.append(_status("tf.compat.v1 training step", loss[1] < loss[0], f"Adam loss {loss[0]:.4f} -> {loss[1]:.4f}"))
        extension = report.get("extension", {})
        if probe is None:
            checks.append(Check("GLIBCXX_3.4.29 extension after import", "n/a", "no compiler here builds the probe (g++ >= 11)"))
        else:
            checks.append(_status("GLIBCXX_3.4.29 extension after import", extension.get("loaded") is True,
                                  f"std::to_chars gave {extension.get('output')!r}" if extension.get("loaded") else extension.get("error", "")))
        ops = report.get("ops", {})
        if not ops.get("present"):
            checks.append(Check("op library sparse update", "FAIL" if settings.get("ops") else "n/a",
                                ops.get("error", "the wheel ships no retf op library")))
        else:
            checks.append(_status("op library sparse update", ops.get("ok") is True,
                                  f"fused lazy Adam on duplicated rows, max error {ops.get('max_error'):.2e} vs NumPy"))
    if settings.get("api") == "v1":
        progress("running a TensorFlow 1.15 program unchanged")
        with tempfile.TemporaryDirectory(prefix="retf-export-") as exports:
            program = _python(env, [_probe_script("tf1_program.py"), exports], emulate=True)
            result = _json(program)
            if result is None:
                checks.append(Check("TF 1.15 program unchanged", "FAIL", last_line(program)))
            else:
                losses = result.get("losses", [0, 0])
                good = not result.get("executing_eagerly") and losses[1] < losses[0] and "tf.contrib" in result.get("contrib", "")
                checks.append(_status("TF 1.15 program unchanged", good,
                                      f"graph mode, feature columns + tf.layers + Adam: loss {losses[0]:.3f} -> {losses[1]:.3f}, "
                                      f"AUC {result.get('auc', 0):.3f}; tf.contrib explains its replacements"))
                checks.append(_export_check(env, result.get("export", "")))
    checks.append(_cluster_check(env, settings, progress))
    if wheel.archive.member(BOOTSTRAP_FILE) is not None:
        modules = environment_modules(before, name)
        checks.append(_imports_before(env, first_imports(modules, cxx_extension_modules(before, name, env.venv)),
                                      progress))
        checks.append(_imports_after(env, modules, progress))
        checks.append(_tf1_extensions_check(env, tf1_extensions(before, env.venv), progress))
    for script in scripts:
        progress(f"running {script}")
        ran = _python(env, [str(Path(script).resolve())], emulate=True)
        checks.append(_status(f"script {Path(script).name}", ran.returncode == 0, last_line(ran) or "exit 0"))

    progress("pip uninstall")
    checks.append(_uninstall_check(env, wheel, name, keep))
    return checks


def _uninstall_check(env: Environment, wheel, name: str, keep: bool) -> Check:
    """pip uninstall of the wheel leaves nothing behind; with ``keep``, the environment is then put back as it was
    with the wheel installed, whatever pip did."""
    installed = _linked_copy(env.venv) if keep else None
    try:
        uninstall = _python(env, ["-m", "pip", "uninstall", "-y", "--disable-pip-version-check", name])
        left, empty = _left_behind(env, wheel) if uninstall.returncode == 0 else ([], [])
    finally:
        if installed is not None:
            shutil.rmtree(env.venv, ignore_errors=True)
            installed.rename(env.venv)
    detail = f"left: {', '.join(left[:5])}" if left else (last_line(uninstall) if uninstall.returncode else "clean")
    if empty and not left:  # pip leaves an emptied top folder that is not a package (intel-tensorflow's _solib_k8/)
        detail += f"; pip leaves the empty {', '.join(empty)}, as it does uninstalling the input itself"
    return _status("pip uninstall leaves nothing", uninstall.returncode == 0 and not left, detail)


def _cluster_check(env: Environment, settings: dict, progress: Progress) -> Check:
    """1 ps + 1 worker on localhost, sparse Adam over a partitioned table, the wheel's shipped settings."""
    optimizer = "adam" if settings.get("api") == "v1" or not settings.get("ops") else "lazy"
    progress(f"training on a local parameter-server cluster ({optimizer})")
    spec = json.dumps(cluster_spec({"ps": 1, "worker": 1}))
    python = str(env.python)
    tasks = [
        Task("ps", 0, tuple(emulated_command(env, [python, _probe_script("ps_server.py"), spec, "0"])), server=True),
        Task("worker", 0, tuple(emulated_command(env, [python, _probe_script("ps_worker.py"), spec, "0", "--steps",
                                                       str(CLUSTER_STEPS), "--rows", "20000", "--optimizer", optimizer]))),
    ]
    shipped = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    run = run_cluster(tasks, CLUSTER_TIMEOUT, env=shipped)
    report = run.of("worker")[0].json if run.ok else None
    if report is None:
        return Check("parameter-server training", "FAIL", run.failure() or "the worker printed no report")
    losses = report.get("losses", [])
    good = len(losses) == CLUSTER_STEPS and all(math.isfinite(x) for x in losses)
    return _status("parameter-server training", good,
                   f"1 ps + 1 worker, {len(losses)} steps of {report.get('optimizer')} on a 2-way partitioned table "
                   f"(loss {losses[0]:.4f} -> {losses[-1]:.4f})" if losses else "no steps ran")


def _export_check(env: Environment, export: str) -> Check:
    """The wheel's console script reads the SavedModel the TF 1.x program wrote from its training session."""
    name = "export readable by TF 1.15"
    script = env.venv / "bin" / TF115_CHECK_SCRIPT
    if not export or not script.is_file():
        return Check(name, "FAIL", "the program wrote no SavedModel" if not export else f"the wheel installed no {script.name}")
    run = subprocess.run(emulated_command(env, [str(script), export]), capture_output=True, text=True, timeout=300)
    return _status(name, run.returncode == 0,
                   f"{script.name}: its SavedModel (tf.saved_model.simple_save of the training session) loads on TF 1.15.5's op "
                   "registry" if run.returncode == 0 else f"{script.name} exit {run.returncode}: {last_line(run)}")


def environment_modules(snapshot: dict, replaced: str) -> dict[str, str]:
    """{module: distribution} for the top-level modules (and namespace portions) of the environment's
    distributions, as listed by the snapshot probe; private ones ("_name") and the replaced distribution's left out."""
    modules: dict[str, str] = {}
    for dist, info in sorted(snapshot.items()):
        if dist == replaced:
            continue
        files = [(path.split("site-packages/", 1)[1], info["version"]) for path in info["files"] if "site-packages/" in path]
        found, _namespaces = importable_names(files)
        for module in found:
            if not module.startswith("_") and module != "tensorflow":
                modules.setdefault(module, dist)
    return modules


def cxx_extension_modules(snapshot: dict, replaced: str, prefix: Path) -> dict[str, str]:
    """{module: distribution}: for each distribution of the environment (but the replaced one), its first C++
    extension (an ELF file that links libstdc++), which maps the system libstdc++ when imported."""
    found: dict[str, str] = {}
    for dist, info in sorted(snapshot.items()):
        if dist == replaced:
            continue
        for path in sorted(p for p in info["files"] if "site-packages/" in p and p.endswith(".so")):
            needed = needed_libraries(prefix / path)
            module = path.split("site-packages/", 1)[1][: -len(".so")].split(".", 1)[0].replace("/", ".")
            if all(part.isidentifier() for part in module.split(".")) and any(n.startswith("libstdc++.so") for n in needed):
                found[module] = dist
                break
    return found


def first_imports(modules: dict[str, str], extensions: dict[str, str]) -> dict[str, str]:
    """What to import before tensorflow: each module, but a package with a C++ extension by that extension, whose
    import runs the package's own first."""
    tops = {extension.split(".")[0] for extension in extensions}
    chosen = {module: dist for module, dist in modules.items() if module.split(".")[0] not in tops}
    return dict(sorted({**chosen, **extensions}.items()))


def _imports_before(env: Environment, modules: dict[str, str], progress: Progress) -> Check:
    """Each module imported before tensorflow, then a training step: it works, or fails with the bootstrap's
    explanation of a private module's range. A libstdc++ mapped first is never a reason to refuse."""
    progress(f"importing each of {len(modules)} environment modules before tensorflow, then training a step")
    probe = _probe_script("import_first.py")

    def attempt(module: str) -> tuple[str, dict | str]:
        result = _python(env, [probe, module], emulate=True)
        report = _json(result)
        if report is not None:
            loss = report.get("loss", [0, 0])
            return ("works", report) if loss[1] < loss[0] else ("broken", f"loss {loss[0]} -> {loss[1]}")
        if "was already imported from" in result.stderr and "Fix: import tensorflow before" in result.stderr:
            return "explained", ""
        alone = _python(env, ["-c", "import importlib, sys; importlib.import_module(sys.argv[1])", module], emulate=True)
        return ("unimportable", "") if alone.returncode != 0 else ("broken", last_line(result))

    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        outcomes = dict(zip(modules, pool.map(attempt, modules)))
    kinds = {kind: sorted(m for m, (k, _) in outcomes.items() if k == kind)
             for kind in ("works", "explained", "unimportable")}
    broken = [f"{m}: {why}" for m, (kind, why) in sorted(outcomes.items()) if kind == "broken"]
    if broken:
        return Check("imported before tensorflow", "FAIL", "; ".join(broken[:3]))
    reports = {m: r for m, (k, r) in outcomes.items() if k == "works" and isinstance(r, dict)}
    first = sorted(m for m, r in reports.items() if r.get("mapped_before"))
    left_out = sorted(m for m, r in reports.items() if r.get("ops_left_out"))
    detail = f"{len(kinds['works'])} of {len(modules)} modules work and train a step"
    if first:
        detail += f"; {len(first)} of them map the system libstdc++ first ({', '.join(first)})"
    if left_out:
        detail += f"; without the op library after {', '.join(left_out)} (their libstdc++ is older than it needs)"
    if kinds["explained"]:
        detail += f"; {len(kinds['explained'])} refused with the range and the fix ({', '.join(kinds['explained'])})"
    if kinds["unimportable"]:
        detail += f"; {len(kinds['unimportable'])} fail without tensorflow too ({', '.join(kinds['unimportable'])})"
    return Check("imported before tensorflow", "pass", detail)


def _imports_after(env: Environment, modules: dict[str, str], progress: Progress) -> Check:
    """Imported after tensorflow, each module is the environment's own wherever its version is in range."""
    progress("importing the environment's modules after tensorflow")
    run = _python(env, [_probe_script("imports_after.py"), *modules], emulate=True)
    report = _json(run)
    if report is None:
        return Check("imported after tensorflow", "FAIL", last_line(run))
    private = {str(canonicalize_name(name)): info for name, info in report["private"].items()}
    wrong, shared, served = [], [], set()
    for module, dist in modules.items():
        outcome = report["modules"].get(module, {})
        if "error" in outcome:
            continue
        if str(canonicalize_name(dist)) in private:
            served.add(str(canonicalize_name(dist)))
            if not outcome["private"]:
                wrong.append(f"{module} is the environment's, though {dist} is served privately")
        elif outcome["private"]:
            wrong.append(f"{module} came from the private folder, though the environment's {dist} is in range")
        else:
            shared.append(module)
    if wrong:
        return Check("imported after tensorflow", "FAIL", "; ".join(wrong[:3]))
    described = [f"{name} {private[name]['version']} (environment {private[name]['environment'] or 'none'}, needs "
                 f"{private[name]['range'] or 'any'})" for name in sorted(served)]
    return Check("imported after tensorflow", "pass",
                 f"{len(shared)} of {len(modules)} modules are the environment's own; private: {', '.join(described) or 'none'}")


_LOAD_LIBRARY = "import sys, tensorflow as tf; tf.load_op_library(sys.argv[1])"


def _tf1_extensions_check(env: Environment, extensions: dict[str, tuple[str, ...]], progress: Progress) -> Check:
    """The environment's libraries built for TF 1.x: listed, and loading each says what it is and what to do."""
    if not extensions:
        return Check("libraries built for TF 1.x", "pass", "none of the environment's distributions links "
                     "libtensorflow_framework.so.1")
    explained = []
    for owner, files in extensions.items():
        progress(f"loading {files[0]} of {owner}, built for TF 1.x")
        ran = _python(env, ["-c", _LOAD_LIBRARY, str(env.venv / files[0])], emulate=True)
        said = ran.stderr.lower().replace("_", "-")  # the distribution as its .dist-info folder spells it
        explained.append(ran.returncode != 0 and owner.lower() in said and "was built for tensorflow 1.x" in said)
    listing = "; ".join(f"{owner} ({', '.join(files)})" for owner, files in extensions.items())
    return _status("libraries built for TF 1.x", all(explained),
                   f"{len(extensions)} cannot load into TF 2.x: {listing}; "
                   + ("loading one names it and the fix" if all(explained) else
                      f"loading {sum(not e for e in explained)} of them does not say why"))


def wheel_settings(wheel) -> dict:
    """What a wheel does at run time (API, op library, switches), as its provenance records it; {} for a wheel
    retfwheel did not make."""
    if wheel.provenance is None:
        return {}
    try:
        settings = json.loads(wheel.provenance).get("settings")
    except (ValueError, AttributeError):
        settings = None
    if not isinstance(settings, dict):
        raise InputFileError(f"{wheel.path}: its provenance ({wheel.dist_info}/retfwheel.json) records no settings: an "
                             "older retfwheel made it", hint="rebuild it with this retfwheel, then verify it")
    return settings


def probe_extension(cache: Path, progress: Progress = lambda message: None) -> Path:
    """A C++ library that needs GLIBCXX_3.4.29 (std::to_chars for double), compiled once with g++
    (or given prebuilt as $RETF_PROBE_EXTENSION, e.g. inside an image whose compiler is older)."""
    if os.environ.get("RETF_PROBE_EXTENSION"):
        return Path(os.environ["RETF_PROBE_EXTENSION"])
    digest = hashlib.sha256(_PROBE_SOURCE.encode()).hexdigest()[:12]
    target = entry_path(cache, "probes", f"to_chars-{digest}.so")
    with entry_lock(target):
        if not usable(target, "probes", progress, "probe extension", "compiling it again"):
            publish_file(target, "probes", _compile_probe())
    return target


def _compile_probe() -> bytes:
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "probe.cc"
        source.write_text(_PROBE_SOURCE)
        built = Path(scratch) / "probe.so"
        result = subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-o", str(built), str(source)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise InputFileError(f"compiling the GLIBCXX_3.4.29 probe with g++ failed: {last_line(result)}",
                                 hint="verify needs g++ >= 11 to build its probe extension")
        data = built.read_bytes()
    needs = read_elf("probe.so", MemberView(iter([data]), len(data))).newest("GLIBCXX")
    if not needs or needs < (3, 4, 29):
        raise InputFileError("this machine's g++ builds a probe that does not need GLIBCXX_3.4.29",
                             hint="use g++ >= 11, or give a prebuilt probe as $RETF_PROBE_EXTENSION")
    return data


def _probe_script(name: str) -> str:
    return probe(name)


def _python(env: Environment, arguments: list[str], *, emulate: bool = False) -> subprocess.CompletedProcess:
    """``arguments`` run by the environment's Python, from its own folder: a working folder holding other
    distributions' metadata (a source checkout's *.egg-info) would join what pip and pkg_resources see."""
    command = [str(env.python), *arguments]
    if emulate:
        command = emulated_command(env, command)
    return subprocess.run(command, capture_output=True, text=True, cwd=env.venv.parent)


def _snapshot(env: Environment) -> dict:
    result = _python(env, [_probe_script("snapshot.py")])
    return json.loads(result.stdout) if result.returncode == 0 else {}


def _command_fails(env: Environment, path: str) -> str | None:
    """Why the environment's command at ``path`` does not run (``--help``, in the old runtime), or None."""
    if not Path(path).is_file():
        return "gone"
    try:
        run = subprocess.run(emulated_command(env, [path, "--help"]), capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "still running after 120 s"
    return None if run.returncode == 0 else f"exit {run.returncode}: {last_line(run)}"


def _unchanged(before: dict, after: dict, replaced: str, command_fails: Callable[[str], str | None]) -> Check:
    """Other distributions keep their versions and files. Files they shared with the replaced one may change
    (pip removed them with it, the wheel put its own), but a command among them must still run."""
    co_owned = set(before.get(replaced, {}).get("files", {}))
    changed: list[str] = []
    shared: list[str] = []
    for name, old in before.items():
        if name == replaced:
            continue
        new = after.get(name)
        if new is None or new["version"] != old["version"]:
            changed.append(f"{name} {old['version']} -> {new['version'] if new else 'gone'}")
            continue
        for path, digest in old["files"].items():
            if new["files"].get(path) != digest:
                (shared if path in co_owned else changed).append(path)
    if not before:
        return Check("other distributions unchanged", "FAIL", "could not list the environment's distributions")
    for path in sorted(p for p in shared if Path(p).parent.name == "bin"):
        problem = command_fails(path)
        if problem:
            changed.append(f"command {path} no longer runs ({problem})")
    detail = f"{len(before) - 1} distributions, versions and file hashes identical"
    if shared:
        detail += (f"; {', '.join(sorted(shared))}, shared with the replaced {replaced}, rewritten by this wheel "
                   "(commands still run)")
    return _status("other distributions unchanged", not changed, ", ".join(changed[:5]) if changed else detail)


def _left_behind(env: Environment, wheel) -> tuple[list[str], list[str]]:
    """What of the wheel is still in site-packages after pip uninstall: files and folders holding files, and
    top folders left empty."""
    text = read_content(wheel.archive, wheel.archive.member(wheel.record_path)).decode()
    site = _python(env, ["-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip()
    left: list[str] = []
    empty: list[str] = []
    for line in text.splitlines():
        path = line.rsplit(",", 2)[0]
        if path and (Path(site) / path).exists():
            left.append(path)
    for folder in {p.split("/", 1)[0] for p in (line.rsplit(",", 2)[0] for line in text.splitlines()) if "/" in p}:
        where = Path(site) / folder
        if where.exists() and not folder.endswith(".data"):
            (left if any(p.is_file() or p.is_symlink() for p in where.rglob("*")) else empty).append(folder + "/")
    return sorted(set(left)), sorted(empty)


def _linked_copy(venv: Path) -> Path:
    """A copy of ``venv`` beside it whose files are hard links: pip uninstall moves the files it removes away, so
    the copy keeps them as they were (the few files pip rewrites in place, ``*.pth``, are copied)."""
    copy = venv.with_name(venv.name + ".installed")
    shutil.rmtree(copy, ignore_errors=True)

    def link(source: str, target: str) -> None:
        if source.endswith(".pth"):
            shutil.copy2(source, target)
        else:
            os.link(source, target)

    shutil.copytree(venv, copy, symlinks=True, copy_function=link)
    return copy


def _json(result: subprocess.CompletedProcess) -> dict | None:
    return last_json(result.stdout) if result.returncode == 0 else None


def _status(name: str, passed: bool, detail: str) -> Check:
    return Check(name, "pass" if passed else "FAIL", detail)
