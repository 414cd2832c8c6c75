"""``mempipe --help`` and each group's list every command with a summary written whole (its
short help), never a first sentence cut at the column's width with "..."; and every option
has a real default, or none (click's "no default" sentinel is what the reference would show)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from mempipe.cli import cli


def groups(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += groups(command, (*path, name))
    return found


def commands(group: click.Group) -> list[click.Command]:
    found: list[click.Command] = [group]
    for command in group.commands.values():
        found += commands(command) if isinstance(command, click.Group) else [command]
    return found


def test_every_command_is_listed_with_its_summary_whole() -> None:
    for path in groups(cli):
        shown = CliRunner().invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0
        listed = shown.stdout.split("Commands:\n", 1)[1]
        assert "..." not in listed, f"mempipe {' '.join(path)} --help cuts a summary"
        group = cli
        for name in path:
            group = group.commands[name]
        for name, command in group.commands.items():
            assert command.short_help, f"{name} has no summary of its own"
            assert command.short_help.endswith("."), name
            assert " ".join(command.short_help.split()) in " ".join(listed.split()), name


def test_every_option_has_a_real_default_or_none() -> None:
    for command in commands(cli):
        for param in command.params:
            if isinstance(param, click.Option) and not param.required:
                assert "Sentinel" not in repr(param.default), f"{command.name} {param.opts}"
