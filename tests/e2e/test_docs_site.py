"""The documentation site builds with ``mkdocs build --strict`` (no broken link, no missing
page, no warning), and its command-line reference is generated from the click commands
themselves: every command and every option of ``mempipe`` is on it, so it cannot drift."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import click

from mempipe.cli import cli

ROOT = Path(__file__).parents[2]


def _commands(group: click.Group, prefix: str = "mempipe") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        found[f"{prefix} {name}"] = command
        if isinstance(command, click.Group):
            found |= _commands(command, f"{prefix} {name}")
    return found


def test_the_site_builds_strictly_and_its_cli_reference_has_every_command_and_option(
    tmp_path,
) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (site / "reference" / "cli" / "index.html").read_text()
    assert "Sentinel" not in reference, "no option shows click's no-default sentinel"
    home = (site / "index.html").read_text()
    assert "example.invalid" not in home
    assert "stylesheets/extra.css" in home, "long console lines wrap rather than being cut"
    assert "pre-wrap" in (site / "stylesheets" / "extra.css").read_text()
    for name, command in _commands(cli).items():
        assert name in reference, f"{name} is not in the CLI reference"
        assert html.escape(command.short_help or "", quote=False) in reference, name
        for option in command.params:
            for flag in getattr(option, "opts", []):
                if flag.startswith("--"):
                    assert flag in reference, f"{name} {flag} is not in the CLI reference"
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "spend_recorded" in api
    assert "FormatKind" in api
