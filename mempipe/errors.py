"""One error root for mempipe.

Every error says whether trying again can help (``retryable``), so retry policies key on the
marker and never on message strings. Adapters translate driver and HTTP errors into these.
"""

from __future__ import annotations

from mempipe.redaction import scrub


class MempipeError(Exception):
    """Root of every error mempipe raises on purpose. Its message is scrubbed of every
    credential the process knows as it is made (``mempipe.redaction``): whatever records or
    prints it later (the store, Prefect's state, a log, the CLI) never sees one."""

    retryable: bool = False

    def __init__(self, *args: object) -> None:
        super().__init__(*(scrub(a) if isinstance(a, str) else a for a in args))


def error_line(exc: BaseException) -> str:
    """A failure as the one ``error:`` line says it, wherever it is said (the command's stderr,
    the run's log, event and state): mempipe's own message, else the foreign error's type and
    message; scrubbed either way."""
    return scrub(str(exc) if isinstance(exc, MempipeError) else f"{type(exc).__name__}: {exc}")


class TransientError(MempipeError):
    """The condition can change without the request changing: retrying may succeed."""

    retryable = True


class TerminalError(MempipeError):
    """Retrying the same request cannot change the outcome."""

    retryable = False


class ConfigError(TerminalError):
    """The configuration (file, environment or arguments) is invalid."""


class StoreError(TerminalError):
    """The store cannot be opened or used as asked."""


class StoreDamagedError(StoreError):
    """The store's file does not hold what its format promises (a damaged page): named, with
    the way out, before anything more is written to it."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(
            f"{where}: the store file is damaged ({detail}); nothing more was written to it. "
            "`mempipe stats --check` lists what SQLite finds; restore the file from a backup, "
            "or salvage what is readable into a new file with the sqlite3 shell's `.recover`"
        )


CREATE_HINT = (
    "`mempipe init` creates an empty one; backfill, import and copy create one as they write"
)
"""How a store comes to be, for the errors of commands that need one that exists."""


class ArchiveError(TerminalError):
    """An archive path cannot be read at all (as opposed to a bad record inside it)."""


class ResourceError(TransientError):
    """The store's medium is full or failing (disk full, an I/O error): retryable once there is
    space again, and named as such rather than as whatever failed after it."""


class IncompleteRunError(TerminalError):
    """The run did what it could and recorded it, but not all of its work: it fails (exit 1)
    and still hands back its summary, so the caller can print what was done."""

    def __init__(self, message: str, summary: object) -> None:
        super().__init__(message)
        self.summary = summary


class JobBusyError(TransientError):
    """Another live run holds the lock this job needs; trying later can succeed."""


class InterruptedRunError(IncompleteRunError):
    """A SIGTERM or SIGINT stopped the run after the work in flight: it is recorded
    interrupted with what it did, and the command exits 128 + the signal's number."""

    def __init__(self, message: str, summary: object, signum: int) -> None:
        super().__init__(message, summary)
        self.signum = signum
        self.exit_code = 128 + signum
