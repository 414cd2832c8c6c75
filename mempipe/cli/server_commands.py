"""``mempipe server``: see, start and stop mempipe's Prefect server for a session of commands."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel, ConfigDict

from mempipe.cli import session_server
from mempipe.cli.options import emit, json_option, reports_errors


class ServerView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefect_home: str
    running: bool
    server: session_server.ServerRecord | None = None
    clients: list[int] = []
    configured_api: str | None = None
    """``PREFECT_API_URL`` where set: the commands report there, not to this server."""


def _view(server: session_server.ServerRecord | None) -> ServerView:
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    home = Path(settings.home)
    return ServerView(
        prefect_home=str(home),
        running=server is not None,
        server=server,
        clients=session_server.live_clients(home) if server is not None else [],
        configured_api=settings.api.url,
    )


def _describe(view: ServerView, said: str) -> None:
    if view.server is None:
        click.echo(f"No mempipe Prefect server runs for the Prefect home {view.prefect_home}.")
    else:
        server = view.server
        using = f"; {len(view.clients)} command(s) using it now" if view.running else ""
        click.echo(
            f"mempipe's Prefect server {said}: {server.api_url} (pid {server.pid}, since "
            f"{server.started_at.isoformat(timespec='seconds')}), database {server.database}, "
            f"stops after {server.idle_seconds:.0f} s unused{using}."
        )
        mine = "this installation" if server.ours else "another installation"
        click.echo(f"started by {mine}: {server.installation or 'unrecorded'}")
    if view.configured_api:
        click.echo(f"PREFECT_API_URL is set: commands report to {view.configured_api} instead.")


@click.group(short_help="mempipe's Prefect server for a session of commands.")
def server() -> None:
    """mempipe's Prefect server for a session of commands: a command that needs a Prefect API
    and finds no PREFECT_API_URL starts it, the commands after reuse it, and it stops itself
    after MEMPIPE_SERVER_IDLE_SECONDS unused (900 by default)."""


@server.command(short_help="Where the session server runs, if it does.")
@json_option
@reports_errors
def status(as_json: bool) -> None:
    """Where the server runs (its API URL, pid and database), or that none runs."""
    from prefect.settings import get_current_settings

    view = _view(session_server.running(Path(get_current_settings().home)))
    emit(view, as_json, lambda: _describe(view, "runs"))


@server.command(short_help="Start the session server now.")
@json_option
@reports_errors
def start(as_json: bool) -> None:
    """Start the server now (or find the one running), so that the next command need not."""
    from prefect.settings import get_current_settings

    from mempipe.settings import ServerSettings

    record, started = session_server.start(get_current_settings(), ServerSettings().idle_seconds)
    view = _view(record)
    emit(view, as_json, lambda: _describe(view, "started" if started else "already running"))


@server.command(short_help="Stop the session server now.")
@click.option(
    "--force",
    is_flag=True,
    default=False,
    help="Stop it even while commands use it, or when another installation started it.",
)
@json_option
@reports_errors
def stop(force: bool, as_json: bool) -> None:
    """Stop the server now; it finishes the requests it is serving first. One that commands
    are using, or that another installation started, is left running without --force."""
    from prefect.settings import get_current_settings

    stopped = session_server.stop(Path(get_current_settings().home), force=force)
    view = _view(None).model_copy(update={"server": stopped})
    emit(view, as_json, lambda: _describe(view, "stopped"))
