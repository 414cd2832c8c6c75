"""The ``mempipe`` command line: thin kebab-case commands, each calling one flow or store method.

``--json`` prints exactly one JSON document on stdout; logs and progress go to stderr.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

import click

from mempipe import __version__
from mempipe.cli.backfill_commands import backfill, promote
from mempipe.cli.embedding_commands import rebuild_indexes_command, reembed
from mempipe.cli.extraction_commands import replay, report
from mempipe.cli.retrieval_commands import evaluate_queries, models, search
from mempipe.cli.run_commands import recover, runs
from mempipe.cli.server_commands import server
from mempipe.cli.store_commands import init, migrate, stats
from mempipe.cli.transfer_commands import copy, erase, export, forget, import_command, users

# A laptop run starts a local Prefect server; neither it nor the command sends usage telemetry
# (offline, Prefect's attempt ends in an error on stderr), and on a busy machine the server may
# take longer than Prefect's default 20 s to answer: wait for it rather than fail the command (a
# server started with `prefect server start` avoids the wait altogether).
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mempipe", default=False)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    default=False,
    help="Show Prefect's logs (INFO) on stderr as well.",
)
def cli(verbose: bool) -> None:
    """mempipe: the ops-side data pipeline of an agent-memory store."""
    if not verbose:
        # Quiet on the terminal only: the runs' logs still reach the Prefect server in full.
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
        # Prefect's client services say they are still sending events as a command ends: not
        # the user's concern, and they are sent all the same.
        for service in ("EventsWorker", "APILogWorker"):
            logging.getLogger(service).setLevel(logging.ERROR)


for command in (
    init,
    migrate,
    backfill,
    promote,
    replay,
    report,
    search,
    reembed,
    models,
    evaluate_queries,
    rebuild_indexes_command,
    stats,
    runs,
    recover,
    export,
    import_command,
    copy,
    erase,
    forget,
    users,
    server,
):
    cli.add_command(command)


def main() -> None:
    """The ``mempipe`` command. Once it has ended and every exit handler has run (Prefect's
    clients have sent what they hold, the orphan guard has been told), the process leaves
    without tearing down its modules one by one: with Prefect loaded that teardown alone took
    0.15-0.2 s of a 1.6 s command."""
    from mempipe.watchdog import orphan_guard

    ended: list[int] = []
    atexit.register(_leave, ended)
    try:
        with orphan_guard():
            cli()
    except SystemExit as exc:
        ended.append(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
        raise


def _leave(ended: list[int]) -> None:
    """Registered first, so run last of the exit handlers: exit with the command's status.
    A command that ended by an uncaught exception or a signal exits as Python would."""
    if ended:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(ended[0])
