"""How the flows a command calls in its own process are run."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, Field

from mempipe.cli import session_server


@contextmanager
def reporting_to_prefect() -> Iterator[None]:
    """The Prefect settings of the runs a command starts, applied once for the command.

    Their API: the configured one; else mempipe's server for this session of commands
    (:mod:`mempipe.cli.session_server`), started by the first command that needs it; or, with
    ``MEMPIPE_SERVER_MODE=temporary``, Prefect's own temporary server for this command alone.
    Either server runs in a session of its own, so that a Ctrl-C to the terminal's process
    group reaches the command (which stops its work and records it) and not the server the
    command still needs to record that with.

    No flow-run heartbeat, unless the user set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``
    (environment or profile). Prefect emits it so that an automation can mark a deployment's
    run Crashed when its worker dies; a command's run is not a deployment's, mempipe's own run
    records already say whether it is alive (``mempipe runs``), and at the end of every run
    Prefect's engine waits for the heartbeat thread's next one-second tick: measured on the
    20-turn sample, 1.08 s a run with it, 0.43 s without."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    from mempipe.settings import ServerSettings

    settings = get_current_settings()
    updates: dict[Any, Any] = {}
    if "heartbeat_frequency" not in settings.flows.model_fields_set:
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    with ExitStack() as stack:
        if not settings.api.url:
            chosen = ServerSettings()
            if chosen.mode == "temporary":
                server = _temporary_server_class()()
                server.start()
                updates[PREFECT_API_URL] = server.api_url
            else:
                # marked as using the server first: one that is about to stop when idle sees it
                stack.enter_context(session_server.client(Path(settings.home)))
                updates[PREFECT_API_URL] = _session_server(settings, chosen.idle_seconds)
        if updates:
            stack.enter_context(temporary_settings(updates=updates))
        context = click.get_current_context(silent=True)
        if context is None or not context.find_root().params.get("verbose"):
            stack.enter_context(_without_engine_tracebacks())
        yield


class _EngineTraceback(logging.Filter):
    """The flow and task engines' report of the exception that ended a run. The command says
    it as its one ``error:`` line; the run's logs on the Prefect server keep it in full."""

    REPORTS = (
        "error: ",
        "Encountered exception during execution",
        "Task run failed with exception",
        "Finished in state",
        "Crash detected",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        engine = record.name in ("prefect.flow_runs", "prefect.task_runs")
        reported = str(record.msg).startswith(self.REPORTS)
        return not (engine and record.levelno >= logging.ERROR and reported)


@contextmanager
def _without_engine_tracebacks() -> Iterator[None]:
    """On the terminal's handlers only (the root logger's, where the runs' logs propagate),
    once Prefect has set its logging up (as its first run would)."""
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()
    quiet = _EngineTraceback()
    handlers = [
        h for h in logging.getLogger().handlers if type(h).__name__ == "PrefectConsoleHandler"
    ]
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def _session_server(settings: Any, idle_seconds: float) -> str:
    """The session's server's API. A verbose command (``mempipe -v``) that starts it says where
    on stderr; otherwise stderr stays for errors and progress, and ``mempipe server status``
    says where it runs."""
    record, started = session_server.start(settings, idle_seconds)
    context = click.get_current_context(silent=True)
    if started and context is not None and context.find_root().params.get("verbose"):
        click.echo(
            f"Prefect: started mempipe's server for this session at {record.api_url} "
            f"(pid {record.pid}); later commands reuse it, it stops after "
            f"{record.idle_seconds:.0f} s unused, `mempipe server stop` stops it now",
            err=True,
        )
    return record.api_url


def _temporary_server_class() -> type:
    from prefect.server.api.server import SubprocessASGIServer

    class OwnSessionServer(SubprocessASGIServer):
        """Prefect's temporary server, started in a session of its own; its own logs (the
        tracebacks of tasks it cancels as it stops) stay out of the command's stderr."""

        _instances: dict[int | None, Any] = {}

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            with _new_sessions():
                return super()._run_uvicorn_command()

    return OwnSessionServer


@contextmanager
def _new_sessions() -> Iterator[None]:
    """``subprocess.Popen`` starting its processes in a new session, quiet, for the block."""
    original = subprocess.Popen
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        return original(*args, **{**kwargs, **quiet, "start_new_session": True})

    subprocess.Popen = popen  # type: ignore[assignment, misc]
    try:
        yield
    finally:
        subprocess.Popen = original  # type: ignore[misc]


class PrefectFlowRun(BaseModel):
    """A flow run as Prefect recorded it: what ``runs show`` says of a run its store never
    recorded (one that failed before it reached its store)."""

    run_id: str
    flow: str
    name: str
    state: str | None
    message: str | None = Field(description="the state's message: the run's one-line error")
    parameters: dict[str, Any]
    start_time: str | None
    end_time: str | None
    api: str = Field(description="the Prefect API that holds the record")


def prefect_flow_run(run_id: str) -> PrefectFlowRun | None:
    """Prefect's record of a flow run (a run id is the flow run's id), from the API the
    environment names or this Prefect home's session server; None where neither knows it."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    try:
        flow_run_id = UUID(run_id)
    except ValueError:
        return None
    settings = get_current_settings()
    api = settings.api.url
    if not api:
        record = session_server.running(Path(settings.home))
        api = record.api_url if record is not None else None
    if not api:
        return None
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        try:
            run = client.read_flow_run(flow_run_id)
            flow = client.read_flow(run.flow_id)
        except (ObjectNotFound, OSError):
            return None
    state = run.state
    return PrefectFlowRun(
        run_id=run_id,
        flow=flow.name,
        name=run.name,
        state=state.name if state else None,
        message=state.message if state else None,
        parameters=run.parameters,
        start_time=run.start_time.isoformat() if run.start_time else None,
        end_time=run.end_time.isoformat() if run.end_time else None,
        api=str(api),
    )
