"""docs/reference.md is the commands' own description: regenerate it with `make reference`."""

import re
from pathlib import Path

import click

from retfwheel.cli import cli, command_reference

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "reference.md"


def test_the_reference_page_is_what_the_commands_say():
    assert PAGE.read_text() == command_reference(), "docs/reference.md differs from the commands: run `make reference`"


def test_the_page_has_every_visible_command_and_option():
    page = PAGE.read_text()
    for name, command in cli.commands.items():
        if command.hidden:
            continue
        assert f"## `retfwheel {name} " in page
        for option in command.params:
            if isinstance(option, click.Option) and not option.hidden:
                for spelling in option.opts:
                    assert f"`{spelling}" in page, f"{name} {spelling}"


# Where the code reads an environment variable by a literal name.
_READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\(|_os\.environ\.get\()\s*["']((?:RETF|RETFWHEEL)_[A-Z0-9_]+)["']""")
_CODE = ("runtime", "tools/retfwheel")


def variables_read() -> dict[str, str]:
    """{variable: a file that reads it} over the code that ships in the tool and in the wheel."""
    found = {}
    for folder in _CODE:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".py", ".cc", ".h"):
                for name in _READ.findall(path.read_text()):
                    found.setdefault(name, str(path.relative_to(REPO)))
    return found


def test_every_variable_the_code_reads_is_in_a_table_and_every_row_is_read():
    from retfwheel.features import FEATURES, VARIABLES

    switches = {f.env for f in FEATURES if f.env}  # read by name from the wheel's settings, never as a literal
    others = {v.name for v in VARIABLES if "," not in v.name}  # RETF_PYTHON36, ...: a pattern
    read = variables_read()
    assert {name: where for name, where in read.items() if name not in others} == {}
    assert others - set(read) == set()
    assert switches & set(read) == set()


def test_the_variable_scan_sees_each_way_of_reading_one():
    assert _READ.findall('os.environ.get("RETF_A", "1"); os.environ["RETF_B"]; std::getenv("RETF_C")') == [
        "RETF_A", "RETF_B", "RETF_C"]


RECIPES_PAGE = REPO / "docs" / "recipes.md"


def keys_shown() -> dict[str, set[str]]:
    """{table: keys} the recipe example of docs/recipes.md shows, set or as a commented-out alternative."""
    import tomllib

    text = RECIPES_PAGE.read_text().split("```toml\n", 1)[1].split("\n```", 1)[0]
    shown: dict[str, set[str]] = {}

    def collect(table: dict, prefix: str) -> None:
        for key, value in table.items():
            shown.setdefault(prefix.rstrip("."), set()).add(key)
            if isinstance(value, dict) and (prefix or key != "runtime_env"):
                collect(value, f"{prefix}{key}.")

    collect(tomllib.loads(text), "")
    section = ""
    for line in text.splitlines():
        if header := re.match(r"^\[([a-z_.]+)\]", line):
            section = header.group(1)
        elif commented := re.match(r"^# ([a-z_]+) = ", line):
            shown.setdefault(section, set()).add(commented.group(1))
    return shown


def test_the_recipe_page_shows_every_key_a_recipe_may_hold():
    from retfwheel.targets.recipe import KEYS

    shown = keys_shown()
    assert {table: set(keys) for table, keys in KEYS.items()} == {table: shown.get(table, set()) for table in KEYS}
