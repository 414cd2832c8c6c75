"""A job's request is declared once: its model (``flows/<job>.py``) holds the fields, types,
constraints and defaults; the command's options and the flow's parameters are pinned equal to
it here, over every job, so that a default or a bound changed in one place alone fails."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from types import NoneType, UnionType
from typing import Any

import click
import pytest
from annotated_types import Ge, Le
from pydantic import TypeAdapter
from pydantic.fields import FieldInfo

from mempipe.cli import cli
from mempipe.flows.backfill import Backfill, backfill_flow
from mempipe.flows.copy import Copy, copy_flow
from mempipe.flows.erase import Erase, erase_flow
from mempipe.flows.export import Export, export_flow
from mempipe.flows.forget import Forget, retention_flow
from mempipe.flows.import_ import Import, import_memories_flow
from mempipe.flows.indexes import RebuildIndexes, rebuild_indexes_flow
from mempipe.flows.job import Job
from mempipe.flows.promote import Promote, promote_flow
from mempipe.flows.reembed import (
    Finalize,
    FitBridge,
    Reembed,
    Rollback,
    reembed_bridge_flow,
    reembed_finalize_flow,
    reembed_flow,
    reembed_rollback_flow,
)
from mempipe.flows.replay import Replay, replay_flow
from mempipe.flows.report import Report, audit_report_flow

JOBS: list[tuple[str, type[Job[Any]], Callable[..., Any]]] = [
    ("backfill", Backfill, backfill_flow),
    ("promote", Promote, promote_flow),
    ("replay", Replay, replay_flow),
    ("report", Report, audit_report_flow),
    ("reembed", Reembed, reembed_flow),
    ("reembed finalize", Finalize, reembed_finalize_flow),
    ("reembed rollback", Rollback, reembed_rollback_flow),
    ("reembed bridge", FitBridge, reembed_bridge_flow),
    ("rebuild-indexes", RebuildIndexes, rebuild_indexes_flow),
    ("export", Export, export_flow),
    ("import", Import, import_memories_flow),
    ("erase", Erase, erase_flow),
    ("forget", Forget, retention_flow),
    ("copy", Copy, copy_flow),
]

RUNNER = {"store", "config", "store_secret", "lock_wait_s"}
"""A flow's parameters that are no job's request: where the store and configuration are (the
runner's context), and how long a run waits for its lock (a deployment's setting)."""


def _jobs() -> set[type[Job[Any]]]:
    found: set[type[Job[Any]]] = set()
    stack = list(Job.__subclasses__())
    while stack:
        job = stack.pop()
        stack += job.__subclasses__()
        if not job.__subclasses__():
            found.add(job)
    return found


def _command(path: str) -> click.Command:
    command: click.Command = cli
    for name in path.split():
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _parameters(flow: Callable[..., Any]) -> dict[str, FieldInfo]:
    fn = flow.fn  # type: ignore[attr-defined]
    hints = typing.get_type_hints(fn, include_extras=True)
    return {
        name: FieldInfo.from_annotated_attribute(hints[name], p.default)
        if p.default is not inspect.Parameter.empty
        else FieldInfo.from_annotation(hints[name])
        for name, p in inspect.signature(fn).parameters.items()
    }


def _shape(field: FieldInfo) -> tuple[str, list[object], object]:
    """A field's type as it is spelled (a bound nested in an optional type is a FieldInfo,
    which compares by identity), its bounds, its default."""
    return repr(field.annotation), list(field.metadata), field.default


def _bounds(field: FieldInfo) -> tuple[object, object]:
    ge = next((m.ge for m in field.metadata if isinstance(m, Ge)), None)
    le = next((m.le for m in field.metadata if isinstance(m, Le)), None)
    return ge, le


def _base(annotation: object) -> object:
    args = typing.get_args(annotation)
    if (typing.get_origin(annotation) in (typing.Union, UnionType)) and NoneType in args:
        (inner,) = [a for a in args if a is not NoneType]
        return inner
    return annotation


def test_every_job_is_pinned() -> None:
    assert _jobs() == {job for _, job, _ in JOBS}


@pytest.mark.parametrize(("path", "job", "flow"), JOBS, ids=[path for path, _, _ in JOBS])
def test_the_flows_parameters_are_the_request(
    path: str, job: type[Job[Any]], flow: Callable[..., Any]
) -> None:
    """Names, types with their bounds, and defaults; a request's command-only fields (a
    confirmation, a secret, a preview) are no flow's parameters."""
    parameters = _parameters(flow)
    fields = {n: f for n, f in job.model_fields.items() if n not in job.command_only}
    assert set(parameters) - RUNNER == set(fields)
    for name, field in fields.items():
        assert _shape(parameters[name]) == _shape(field), f"{path}: {name}"


@pytest.mark.parametrize(("path", "job", "flow"), JOBS, ids=[path for path, _, _ in JOBS])
def test_the_commands_options_are_the_request(
    path: str, job: type[Job[Any]], flow: Callable[..., Any]
) -> None:
    """Each field is an option (or argument) of the same name, whose default the request reads
    as its own default, whose numeric range is the field's bounds, and which is a flag where
    the field is a bool."""
    options = {p.name: p for p in _command(path).params}
    for name, field in job.model_fields.items():
        assert name in options, f"{path}: no option for {name}"
        option = options[name]
        if field.is_required():
            assert option.required, f"{path}: {name} is required"
            continue
        read = TypeAdapter(field.annotation).validate_python(option.default)
        assert read == field.default, f"{path}: {name} defaults to {option.default!r}"
        base = _base(field.annotation)
        if base is bool:
            assert isinstance(option, click.Option), f"{path}: {name}"
            assert option.is_flag, f"{path}: {name} is a flag"
        if base in (int, float):
            ranged = isinstance(option.type, click.IntRange | click.FloatRange)
            given = (option.type.min, option.type.max) if ranged else (None, None)
            assert given == _bounds(field), f"{path}: {name}'s range"
