"""Options, error reporting and output shared by every command."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from mempipe.errors import MempipeError

F = TypeVar("F", bound=Callable[..., Any])


def store_options(command: F) -> F:
    """``--store`` and ``--config``, shared by every command."""
    command = click.option(
        "--config",
        "config",
        type=click.Path(dir_okay=False),
        default=None,
        help="project-config.yaml to read (env MEMPIPE_CONFIG; default ./project-config.yaml).",
    )(command)
    return click.option(
        "--store",
        "store",
        default=None,
        metavar="URL",
        help="Store URL, e.g. sqlite:///path/to/memory.db (env MEMPIPE_STORE; "
        "default sqlite:///mempipe.db).",
    )(command)


def json_option(command: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(command)


def identity_options(command: F) -> F:
    for name, what in reversed(
        [("org-id", "org"), ("project-id", "project"), ("user-id", "user"), ("agent-id", "agent")]
    ):
        command = click.option(
            f"--{name}", default=None, help=f"Default {what} for records that carry none."
        )(command)
    return command


def reports_errors(command: F) -> F:
    """Turn mempipe's errors into one clear line on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MempipeError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def emit(result: BaseModel, as_json: bool, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        human()


def pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE", param_hint=option)
        mapping[name.strip()] = value.strip()
    return mapping


def split_list(value: str | None) -> list[str] | None:
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items() if key != "total")


def scale_out_options(command: F) -> F:
    """``--task-runner`` and ``--dask-address``: where a flow's partitions run."""
    command = click.option(
        "--dask-address",
        default=None,
        metavar="URL",
        help="An existing Dask scheduler (tcp://host:8786) instead of a local cluster.",
    )(command)
    return click.option(
        "--task-runner",
        type=click.Choice(["threads", "dask"]),
        default="threads",
        show_default=True,
        help="threads in this process, or Dask worker processes (prefect-dask).",
    )(command)
