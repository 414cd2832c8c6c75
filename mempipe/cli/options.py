"""Options, error reporting and output shared by every command."""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn, TypeVar

import click
import orjson
from pydantic import BaseModel

from mempipe.domain.failures import ContentError, EnvironmentalError
from mempipe.errors import (
    ArchiveError,
    ConfigError,
    IncompleteRunError,
    InterruptedRunError,
    JobBusyError,
    MempipeError,
    ResourceError,
    StoreError,
    TransientError,
    error_line,
)

F = TypeVar("F", bound=Callable[..., Any])


def renamed(option: str, value: str | None, old_names: dict[str, str]) -> str | None:
    """A value's current name; an old spelling still works for a while, with a deprecation
    line on stderr saying what to write instead."""
    if value in old_names:
        new = old_names[value]
        click.echo(f"deprecated: {option} {value} is now {option} {new}", err=True)
        return new
    return value


def store_options(command: F) -> F:
    """``--store``, ``--store-secret`` and ``--config``, shared by every command."""
    command = click.option(
        "--store-secret",
        "store_secret",
        default=None,
        metavar="NAME",
        help="A Prefect Secret block holding the store URL, or the password of the user "
        "--store names (env MEMPIPE_STORE_SECRET). The password never leaves the process.",
    )(command)
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
        "default sqlite:///mempipe.db). A MongoDB password may come from "
        "MEMPIPE_STORE_PASSWORD or --store-secret instead of the URL.",
    )(command)


def json_option(command: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, default=False, help="Print one JSON document on stdout."
    )(command)


def store_command(command: F) -> F:
    """A command over a store: its ``--store`` options, ``--json``, and one failure contract
    (:func:`reports_errors`)."""
    return store_options(json_option(reports_errors(command)))


def audit_dir_option(command: F) -> F:
    return click.option(
        "--audit-dir", default="audit", show_default=True, help="Parquet audit folder."
    )(command)


def rejects_dir_option(command: F) -> F:
    return click.option(
        "--rejects-dir",
        default="mempipe-rejects",
        show_default=True,
        type=click.Path(file_okay=False),
        help="Where the rejects file of the run is written (only when something is rejected).",
    )(command)


def duration(text: str, option: str) -> timedelta:
    """``30m``, ``12h``, ``2d`` as a duration (the configuration's notation)."""
    from mempipe.schemas.config import parse_duration

    value = parse_duration(text)
    if not isinstance(value, timedelta):
        raise click.BadParameter(
            f"{text!r}: give a number and s, m, h or d (12h)", param_hint=option
        )
    return value


def counted(counts: dict[str, int]) -> str:
    """``3 turns, 2 semantic``: the non-zero counts, in their order."""
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n)


_IDENTITY = [
    ("org-id", "org"),
    ("project-id", "project"),
    ("user-id", "user"),
    ("agent-id", "agent"),
]


def identity_options(command: F) -> F:
    """The identity the records brought in are written under, and ``--identity``: what a record
    carrying another id of its own gets (:mod:`mempipe.domain.identity`)."""
    from mempipe.schemas.identity import IdentityPolicy

    command = click.option(
        "--identity",
        type=click.Choice([p.value for p in IdentityPolicy]),
        default=IdentityPolicy.STRICT.value,
        show_default=True,
        help="A record whose own id differs from an id given here: strict rejects it, naming "
        "both; record keeps the record's (archives of many users); command writes the one given.",
    )(command)
    for name, what in reversed(_IDENTITY):
        command = click.option(
            f"--{name}",
            default=None,
            help=f"The {what} of the records brought in (a record's own differing: --identity).",
        )(command)
    return command


def identity_filters(command: F) -> F:
    """The identity a search or a selection is limited to."""
    for name, what in reversed(_IDENTITY):
        command = click.option(f"--{name}", default=None, help=f"Only this {what}'s records.")(
            command
        )
    return command


ERROR_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (InterruptedRunError, "interrupted"),
    (IncompleteRunError, "incomplete"),
    (JobBusyError, "busy"),
    (ConfigError, "config"),
    (StoreError, "store"),
    (ArchiveError, "archive"),
    (ResourceError, "resource"),
    (EnvironmentalError, "provider"),
    (ContentError, "provider"),
    (TransientError, "transient"),
    (MempipeError, "error"),
)
"""The ``kind`` of a failure, as ``--json`` reports it; the troubleshooting page's failure
table lists them."""


def error_kind(exc: BaseException) -> str:
    return next((kind for cls, kind in ERROR_KINDS if isinstance(exc, cls)), "internal")


def reports_errors(command: F) -> F:
    """One failure contract for every command: one ``error:`` line on stderr and exit status 1;
    with ``--json`` also one JSON document ``{"error": ..., "kind": ...}`` on stdout. An
    unexpected exception is reported the same way (kind ``internal``); set
    ``MEMPIPE_TRACEBACK=1`` to see its traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if _wants_traceback():
                traceback.print_exc()
            fail(exc, bool(kwargs.get("as_json")))

    return wrapper  # type: ignore[return-value]


def _wants_traceback() -> bool:
    from mempipe.settings import process_environment

    try:
        return process_environment().traceback
    except ConfigError:
        return True  # a value that is not a yes or a no: show it rather than hide it


def fail(exc: BaseException, as_json: bool, result: BaseModel | None = None) -> NoReturn:
    message = error_line(exc)
    if as_json:
        document = result.model_dump(mode="json") if result is not None else {}
        click.echo(
            orjson.dumps(
                {**document, "error": message, "kind": error_kind(exc)}, option=orjson.OPT_INDENT_2
            ).decode()
        )
    click.echo(f"error: {message}", err=True)
    sys.exit(getattr(exc, "exit_code", 1))


R = TypeVar("R")


def run_flow(flow: Callable[..., R], **parameters: Any) -> tuple[R, IncompleteRunError | None]:
    """The flow's summary, with the error of a run that did not do all its work: the command
    prints what it did, then fails (:func:`emit`); one that did nothing to show fails at once."""
    try:
        return flow(**parameters), None
    except IncompleteRunError as exc:
        if exc.summary is None:
            raise
        return exc.summary, exc  # type: ignore[return-value]


def emit(
    result: BaseModel,
    as_json: bool,
    human: Callable[[], None],
    error: IncompleteRunError | None = None,
) -> None:
    """Print the result; a run that did not do all its work prints what it did, then fails."""
    if error is not None:
        if not as_json:
            human()
        fail(error, as_json, result)
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


def partitions_option(help: str) -> Callable[[F], F]:
    """``--partitions``: the parts a job's work is cut into, run at once (``help`` says what)."""
    return click.option(
        "--partitions", default=1, show_default=True, type=click.IntRange(1, 256), help=help
    )


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


def seed_option(command: F) -> F:
    """``--seed``: the draw of a preview's ``--sample`` (replay, reembed)."""
    return click.option(
        "--seed", type=int, default=0, show_default=True, help="The --sample draw's seed."
    )(command)


def plan_option(command: F) -> F:
    return click.option(
        "--plan",
        is_flag=True,
        default=False,
        help="Write nothing; print the requests, tokens, cost (live and batch) and duration.",
    )(command)


def via_option(command: F) -> F:
    return click.option(
        "--via",
        type=click.Choice(["live", "batch"]),
        default="live",
        show_default=True,
        help="live: requests as the run goes; batch: the provider's Batch API (half price, "
        "within 24 h; OpenAI-compatible providers).",
    )(command)
