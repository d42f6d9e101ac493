"""docs/reference.md is the commands' own description: regenerate it with `make reference`."""

from pathlib import Path

import click

from retfwheel.cli import cli, command_reference

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


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
