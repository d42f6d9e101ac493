"""The command line: the only place that prints, writes reports and chooses exit codes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

import click

from retfwheel import __version__
from retfwheel.cache import clear, ensure_writable, prune, usage
from retfwheel.errors import InputFileError, RetfError, VerificationFailed
from retfwheel.features import BY_KEY
from retfwheel.features import reference as features_reference
from retfwheel.native.elf import FAMILIES, format_version
from retfwheel.native.inspection import (
    Inspection,
    correction_reason,
    environment_sharing,
    inspect_wheel,
    inspection_json,
)
from retfwheel.native.tf1 import TF1_FRAMEWORK, tf1_extensions
from retfwheel.proof.verify import verify_wheel
from retfwheel.stages.pipeline import BuildResult, build_wheel, lock_wheel
from retfwheel.stages.plan import BuildOps, InjectBootstrap, VendorDependencies, VendorRuntime
from retfwheel.targets.environment import Environment, emulated_command, installed_distributions, prepare_environment
from retfwheel.targets.fetch import cache_root, fetch_default_input
from retfwheel.targets.recipe import builtin_recipes, find_recipe, load_recipe


class _Context:
    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self.started = time.monotonic()
        self.cache_dir = Path()  # `retfwheel cache`'s folder, for its subcommands

    def progress(self, message: str) -> None:
        click.echo(f"[{time.monotonic() - self.started:6.1f}s] {message}", err=True)


def _fail(error: RetfError) -> None:
    for line in error.lines:
        click.echo(f"ERROR: {line}", err=True)
    if error.hint:
        click.echo(f"hint: {error.hint}", err=True)
    sys.exit(error.exit_code)


def main() -> None:
    debug = "--debug" in sys.argv[1:]
    try:
        cli.main(standalone_mode=False, prog_name="retfwheel")
    except RetfError as error:
        if debug:
            traceback.print_exc()
        _fail(error)
    except click.exceptions.Abort:
        click.echo("ERROR: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        click.echo("ERROR: interrupted", err=True)
        sys.exit(130)
    except Exception as error:  # a bug: say so plainly, traceback only on request
        if debug:
            traceback.print_exc()
        click.echo(f"ERROR: internal error: {type(error).__name__}: {error}", err=True)
        click.echo("hint: rerun with --debug for the traceback and report it", err=True)
        sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="retfwheel")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Rebuild TensorFlow 2.x wheels so they install and run on old Python 3.6 stacks."""
    ctx.obj = _Context(debug)


def _recipe(value: str):
    """The recipe ``value`` names, with a warning line per deprecated spelling it uses."""
    recipe = load_recipe(find_recipe(value))
    for line in recipe.deprecations:
        click.echo(f"warning: {line}", err=True)
    return recipe


_recipe_option = click.option("--recipe", "recipe_path", help="Target recipe: a built-in one's name (`retfwheel recipes`) or a .toml file.")


@cli.command()
@click.argument("wheel", type=click.Path(path_type=Path))
@_recipe_option
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def inspect(wheel: Path, recipe_path: str | None, as_json: bool) -> None:
    """Show what WHEEL needs from the machine it will run on."""
    recipe = _recipe(recipe_path) if recipe_path else None
    inspection = inspect_wheel(wheel, recipe)
    made = installed_distributions(recipe, cache_root(None)) if recipe else None
    environment = {n: info["version"] for n, info in made[1].items()} if made and inspection.private_dependencies else None
    tf1_libraries = tf1_extensions(made[1], made[0]) if made else None
    if as_json:
        click.echo(json.dumps(inspection_json(inspection, environment, tf1_libraries), indent=2))
    else:
        _show_inspection(inspection, environment, recipe.name if recipe else None)
        if tf1_libraries is not None and recipe is not None:
            _show_tf1_libraries(tf1_libraries, recipe.name)


def _show_tf1_libraries(found: dict[str, tuple[str, ...]], recipe: str) -> None:
    if not found:
        click.echo(f"\nlibraries built for TF 1.x in {recipe}'s environment: none (no distribution links "
                   f"{TF1_FRAMEWORK})")
        return
    click.echo(f"\nlibraries built for TF 1.x in {recipe}'s environment ({len(found)}; they link {TF1_FRAMEWORK} and "
               "cannot load into TensorFlow 2.x: install releases built for it, or rebuild them against it):")
    for owner, files in found.items():
        click.echo(f"  {owner:<36} {', '.join(files)}")


@cli.group(invoke_without_command=True)
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Download/build cache.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def cache(ctx: click.Context, cache_dir: Path | None, as_json: bool) -> None:
    """Show what is cached and how big (`cache prune`, `cache clear` to remove)."""
    ctx.obj.cache_dir = cache_root(cache_dir)
    if ctx.invoked_subcommand is not None:
        return
    rows = usage(ctx.obj.cache_dir)
    if as_json:
        click.echo(json.dumps({"version": 1, "cache": str(ctx.obj.cache_dir),
                               "kinds": [dataclasses.asdict(row) for row in rows]}, indent=2))
        return
    click.echo(f"{ctx.obj.cache_dir}: {_size(sum(r.bytes for r in rows))}")
    for row in rows:
        click.echo(f"  {row.kind:<13} {row.entries:>4} entries {_size(row.bytes):>9}  {row.description}")


@cache.command("prune")
@click.option("--older-than", "older_than", type=float, help="Also remove entries unchanged for this many days.")
@click.pass_obj
def cache_prune(ctx: _Context, older_than: float | None) -> None:
    """Remove half-made and damaged entries (and, with --older-than, old ones); never a running build's."""
    removed = prune(ctx.cache_dir, older_than)
    click.echo(f"removed {len(removed)} entries from {ctx.cache_dir}")


@cache.command("clear")
@click.pass_obj
def cache_clear(ctx: _Context) -> None:
    """Remove every cached entry (the next build downloads and compiles everything again)."""
    removed = clear(ctx.cache_dir)
    click.echo(f"cleared {', '.join(p.name for p in removed) or 'nothing'} from {ctx.cache_dir}")


def _writable_cache(cache_dir: Path | None) -> Path:
    return ensure_writable(cache_root(cache_dir))


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def recipes(as_json: bool) -> None:
    """List the recipes that ship with retfwheel (use one with --recipe NAME)."""
    rows = []
    for path in builtin_recipes():
        recipe = load_recipe(path)
        rows.append({"name": recipe.name, "python": ".".join(map(str, recipe.target.python)),
                     "glibc": ".".join(map(str, recipe.target.glibc)), "glibcxx": ".".join(map(str, recipe.target.glibcxx)),
                     "api": recipe.api, "input": str(recipe.input_requirement or "-"),
                     "description": recipe.description.strip().splitlines()[0] if recipe.description.strip() else ""})
    if as_json:
        click.echo(json.dumps({"version": 1, "recipes": rows}, indent=2))
        return
    columns = ("name", "python", "glibc", "glibcxx", "api", "input")
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) if rows else len(c) for c in columns}
    click.echo("  ".join(c.ljust(widths[c]) for c in columns).rstrip())
    for row in rows:
        click.echo("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())


@cli.command()
@click.argument("input_wheel", required=False, type=click.Path(path_type=Path))
@click.option("--recipe", "recipe_path", required=True, help="Target recipe: a built-in one's name (`retfwheel recipes`) or a .toml file.")
@click.option("--out-dir", required=True, type=click.Path(path_type=Path, file_okay=False), help="Where the wheel goes.")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), help="Write a JSON report.")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Download/build cache.")
@click.option("--python", "python", type=click.Path(path_type=Path, dir_okay=False),
              help="Target interpreter for building locked sdists (default: $RETF_PYTHON36-style variable, pyenv, PATH).")
@click.option("--lock-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Look here first for the lock of this recipe and input (made by `retfwheel lock --lock-dir`).")
@click.pass_obj
def build(ctx: _Context, input_wheel: Path | None, recipe_path: str, out_dir: Path, dry_run: bool,
          report_path: Path | None, cache_dir: Path | None, python: Path | None, lock_dir: Path | None) -> None:
    """Rebuild INPUT_WHEEL (default: the recipe's [input]) for the recipe's target."""
    recipe = _recipe(recipe_path)
    if input_wheel is None:
        ctx.progress(f"fetching {recipe.input_requirement} for {recipe.target.python_tag} (cached after the first time)")
        input_wheel = fetch_default_input(recipe, _writable_cache(cache_dir), ctx.progress)
    result = build_wheel(input_wheel, recipe, out_dir, cache=cache_root(cache_dir), dry_run=dry_run,
                         python=python, lock_dir=lock_dir, progress=ctx.progress)
    _show_plan(result, dry_run)
    if report_path:
        report_path.write_text(json.dumps(_build_json(result), indent=2) + "\n")
    if result.output:
        ctx.progress(f"done in {time.monotonic() - ctx.started:.1f}s")
        click.echo(str(result.output))


@cli.command()
@click.argument("input_wheel", required=False, type=click.Path(path_type=Path))
@click.option("--recipe", "recipe_path", required=True,
              help="Target recipe: a built-in one's name (`retfwheel recipes`) or a .toml file.")
@click.option("--python", "python", type=click.Path(path_type=Path, dir_okay=False),
              help="Target interpreter (default: $RETF_PYTHON36-style variable, pyenv, PATH).")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Download/build cache.")
@click.option("--lock-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Write the lock here (default: next to a recipe file of yours; for a built-in recipe, the cache).")
@click.pass_obj
def lock(ctx: _Context, input_wheel: Path | None, recipe_path: str, python: Path | None, cache_dir: Path | None,
         lock_dir: Path | None) -> None:
    """Pin INPUT_WHEEL's requirement closure (hash-pinned) for the recipe's target."""
    recipe = _recipe(recipe_path)
    cache = _writable_cache(cache_dir)
    if input_wheel is None:
        input_wheel = fetch_default_input(recipe, cache, ctx.progress)
    written = lock_wheel(input_wheel, recipe, cache, python, lock_dir, progress=ctx.progress)
    click.echo(f"locked {len(written.packages)} packages "
               f"({sum(p.kind == 'sdist' for p in written.packages)} from sdists) for {recipe.name}")
    click.echo(str(written.path))


@cli.command()
@click.argument("wheel", type=click.Path(path_type=Path))
@_recipe_option
@click.option("--script", "scripts", multiple=True, type=click.Path(path_type=Path, dir_okay=False),
              help="A program to run in the environment after installing (repeatable); it must exit 0.")
@click.option("--keep-env", type=click.Path(path_type=Path, file_okay=False), help="Keep the environment copy here.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--python", "python", type=click.Path(path_type=Path, dir_okay=False), help="Target interpreter.")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Download/build cache.")
@click.pass_obj
def verify(ctx: _Context, wheel: Path, recipe_path: str | None, scripts: tuple[Path, ...], keep_env: Path | None,
           as_json: bool, python: Path | None, cache_dir: Path | None) -> None:
    """Install WHEEL into a fresh copy of the recipe's old environment and prove it works there."""
    if recipe_path is None:
        raise click.UsageError("--recipe is required")
    recipe = _recipe(recipe_path)
    result = verify_wheel(wheel, recipe, _writable_cache(cache_dir), scripts=scripts, keep=keep_env, python=python,
                          progress=ctx.progress)
    if as_json:
        click.echo(json.dumps({"version": 1, "wheel": str(result.wheel), "recipe": result.recipe, "passed": result.passed,
                               "checks": [vars(c) for c in result.checks]}, indent=2))
    else:
        width = max(len(c.name) for c in result.checks)
        click.echo(f"verify {result.wheel.name} in {result.recipe}:")
        for check in result.checks:
            click.echo(f"  {check.status:<4}  {check.name:<{width}}  {check.detail}")
        if result.environment:
            click.echo(f"environment kept at {result.environment}")
    failed = [c.name for c in result.checks if c.status == "FAIL"]
    if failed:
        raise VerificationFailed(f"{wheel}: {len(failed)} of {len(result.checks)} checks failed: {', '.join(failed)}")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_recipe_option
@click.option("--env", "env_dir", type=click.Path(path_type=Path, file_okay=False),
              help="A venv kept by `verify --keep-env DIR` (DIR/venv); default: the recipe's own environment.")
@click.option("--python", "python", type=click.Path(path_type=Path, dir_okay=False), help="Target interpreter.")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Download/build cache.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def run(ctx: _Context, recipe_path: str | None, env_dir: Path | None, python: Path | None, cache_dir: Path | None,
        command: tuple[str, ...]) -> None:
    """Run COMMAND in the recipe's emulated old environment (`python` means the environment's)."""
    if recipe_path is None:
        raise click.UsageError("--recipe is required")
    recipe = _recipe(recipe_path)
    base = prepare_environment(recipe, _writable_cache(cache_dir), python, ctx.progress)
    env = Environment(env_dir, env_dir / "bin" / "python", base.system_runtime) if env_dir else base
    if not env.python.exists():
        raise InputFileError(f"{env_dir}: not a venv (no bin/python)", hint="pass DIR/venv of `retfwheel verify --keep-env DIR`")
    argv = [str(env.python) if i == 0 and c in ("python", "python3") else c for i, c in enumerate(command)]
    sys.exit(subprocess.run(emulated_command(env, argv)).returncode)


@cli.command(hidden=True)
def reference() -> None:
    """Print the command reference (docs/reference.md; `make reference` writes it)."""
    click.echo(command_reference(), nl=False)


def command_reference() -> str:
    """Every command with its usage, help and options, in Markdown, read from the commands themselves."""
    lines = ["# Reference", "",
             "Every `retfwheel` command and option, generated from the commands themselves (`make reference`;",
             "`tests/test_reference.py` fails when this page and the code differ), then every switch and",
             "environment variable, from their tables in `tools/retfwheel/features.py`. The recipe format, every",
             "key: [recipes.md](recipes.md); what the 1.x API's switches do, at length: [guide.md](guide.md).", ""]
    root = click.Context(cli, info_name="retfwheel", **cli.context_settings)
    _describe(cli, root, lines)
    return "\n".join(lines + features_reference())


def _describe(command: click.Command, ctx: click.Context, lines: list[str]) -> None:
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines += [f"## `{usage}`", "", (command.help or "").strip(), ""]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    options.append(command.get_help_option(ctx))  # type: ignore[arg-type]
    lines += ["| option | what it does |", "|---|---|"]
    for option in options:
        if option is None:
            continue
        metavar = "" if option.is_flag else f" {option.make_metavar(ctx)}"
        name = ", ".join(f"`{o}{metavar}`" for o in option.opts)
        extra = " (required)" if option.required else ""
        lines.append(f"| {name} | {(option.help or '').replace('|', '/')}{extra} |")
    lines.append("")
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                _describe(sub, click.Context(sub, info_name=name, parent=ctx), lines)


def _show_plan(result: BuildResult, dry_run: bool) -> None:
    plan = result.plan
    click.echo(f"{'plan' if dry_run else 'built'}: {plan.filename}")
    click.echo(f"  from {plan.input_filename} (sha256 {plan.input_sha256[:16]}...) with recipe {plan.recipe_name}")
    for change in plan.changes:
        click.echo(f"  - {change}")
    for step in plan.steps:
        click.echo(f"  - step: {_describe_step(step)}")
    copied = sum(1 for m in plan.members if m.__class__.__name__ == "CopyMember")
    click.echo(f"  members: {copied} copied unchanged, {len(plan.members) - copied} new or rewritten, plus RECORD")
    if result.audit:
        for check in result.audit.checks:
            click.echo(f"  audit ok: {check}")
    if dry_run:
        if plan.steps:
            click.echo("  (platform tags may change once the steps have run: every shipped ELF file counts)")
        click.echo("dry run: nothing written")


def _describe_string_abi(ins) -> str:
    if ins.string_abi_symbols is None:
        return "unknown (no libtensorflow_framework)"
    cxx11, old = ins.string_abi_symbols
    value = f"_GLIBCXX_USE_CXX11_ABI={ins.cxx11_abi}" if ins.cxx11_abi is not None else "unknown"
    return f"{value} (tensorflow:: symbols: {old} old std::string, {cxx11} C++11)"


def _describe_step(step) -> str:
    if isinstance(step, VendorRuntime):
        return f"vendor libstdc++.so.6 from {step.spec.source} as {step.dest} ({step.reason})"
    if isinstance(step, VendorDependencies):
        kinds = sum(p.kind == "sdist" for p in step.lock.packages)
        return f"vendor {len(step.lock.packages)} locked distributions ({kinds} built from sdists) into {step.dest}/"
    if isinstance(step, BuildOps):
        flags = step.flags
        return (f"compile the retf op library with {step.compiler} ({step.builder}"
                f"{' ' + step.suite if step.builder == 'debian-root' else ''}): -std={flags.std}, "
                f"_GLIBCXX_USE_CXX11_ABI={flags.cxx11_abi}, EIGEN_MAX_ALIGN_BYTES={flags.eigen_align}")
    if isinstance(step, InjectBootstrap):
        extra = "; the 1.x API, exports in TF 1.15's form" if step.api == "v1" else ""
        extra += "".join(f"; {words}" for key, value in step.features if (words := BY_KEY[key].describe(value)))
        return f"inject the bootstrap into {step.init_name}; conflicts: {step.conflicts}{extra}"
    return repr(step)


def _build_json(result: BuildResult) -> dict:
    plan = result.plan
    return {
        "version": 1,
        "input": {"filename": plan.input_filename, "sha256": plan.input_sha256},
        "recipe": plan.recipe_name,
        "output": str(result.output) if result.output else None,
        "filename": plan.filename,
        "name": plan.name,
        "version_string": plan.version,
        "tags": list(plan.tags),
        "changes": list(plan.changes),
        "audit": list(result.audit.checks) if result.audit else None,
    }


def _show_inspection(ins: Inspection, environment: dict[str, str] | None, recipe: str | None) -> None:
    w = ins.wheel
    newest = {}
    for family in FAMILIES:
        found = [v for e in ins.elves if (v := e.newest(family)) is not None]
        if found:
            newest[family] = format_version(max(found))
    rows = [
        ("wheel", w.filename),
        ("name / version", f"{w.metadata_name} {w.version}"),
        ("tags", ", ".join(sorted(str(t) for t in w.tags))),
        ("python / abi", f"{', '.join(sorted({t.interpreter for t in w.tags}))} / {', '.join(sorted({t.abi for t in w.tags}))}"),
        ("tensorflow", ins.tensorflow_version or "no (not a TensorFlow wheel)"),
        ("C++ ABI", _describe_string_abi(ins)),
        ("manylinux", " / ".join([ins.policy.name, *ins.policy.aliases]) if ins.policy else "none (linux only)"),
        ("needs at most", ", ".join(f"{k}_{v}" for k, v in newest.items()) or "-"),
        ("retfwheel", "already processed" if ins.processed else "not processed"),
        ("requires", ", ".join(w.requires_dist) or "-"),
    ]
    for key, value in rows:
        click.echo(f"{key + ':':<16} {value}")
    if ins.private_dependencies:
        click.echo(f"\nprivate dependencies ({len(ins.private_dependencies)}; each served only where the environment "
                   "lacks it or has it outside the range):")
        sharing = {s["name"]: s for s in environment_sharing(ins, environment)} if environment is not None else {}
        for dep in ins.private_dependencies:
            why = correction_reason(dep["name"], dep["range"])
            shared = sharing.get(dep["name"])
            where = ""
            if shared is not None:
                where = (f"  {recipe}: its {shared['environment']} serves" if shared["serves"] else
                         f"  {recipe}: private ({'has ' + shared['environment'] if shared['environment'] else 'none installed'}"
                         f"{'; after import tensorflow, `import ' + ', '.join(dep['modules']) + '` gives the private copy' if shared['environment'] else ''})")
            click.echo(f"  {dep['name']:<24} {dep['version']:<12} range {dep['range'] or 'any'}{where}"
                       f"{'  (' + why + ')' if why else ''}")
        if environment is None and recipe:
            click.echo(f"  ({recipe}'s environment is not made yet; `retfwheel verify` makes it, then this shows what it serves)")
    if ins.sbom:
        click.echo(f"\nSBOM ({w.dist_info}/sboms/retfwheel.cdx.json, {len(ins.sbom)} components):")
        for component in ins.sbom:
            click.echo(f"  {component['role']:<11} {component['name']:<28} {component['version']:<16} "
                       f"sha256 {component['sha256'][:16]}...")
    verdicts = {v.path: v for v in ins.verdicts or ()}
    click.echo(f"\nELF files ({len(ins.elves)}):")
    for elf in ins.elves:
        versions = " ".join(f"{k}_{v}" for k, v in elf.newest_by_family().items())
        click.echo(f"  {elf.path}  [{versions}]")
        click.echo(f"      needed: {', '.join(elf.needed) or '-'}")
        if elf.rpath or elf.runpath:
            click.echo(f"      {'rpath' if elf.rpath else 'runpath'}: {':'.join(elf.rpath or elf.runpath)}")
        if elf.path in verdicts:
            verdict = verdicts[elf.path]
            click.echo(f"      verdict: {verdict.fit.value}{': ' + '; '.join(verdict.reasons) if verdict.reasons else ''}")
    if verdicts:
        counts: dict[str, int] = {}
        for verdict in verdicts.values():
            counts[verdict.fit.value] = counts.get(verdict.fit.value, 0) + 1
        click.echo("\nverdict: " + ", ".join(f"{n} {fit}" for fit, n in counts.items()))
