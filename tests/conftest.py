"""Shared fixtures: fixture archives, a fresh SQLite store, and one Prefect test server."""

from __future__ import annotations

import compileall
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Commands the tests run without a Prefect API share mempipe's session server; it should not
# outlive the suite by the 15 minutes a user's session gets.
os.environ.setdefault("MEMPIPE_SERVER_IDLE_SECONDS", "60")

import mempipe
from mempipe.adapters.store import Store, open_store
from mempipe.schemas.identity import IdentityDefaults
from tests import processes

FIXTURES = Path(__file__).parent / "fixtures"
SHARED_SERVER = "MEMPIPE_TEST_PREFECT_API_URL"
"""Where the xdist controller's Prefect test server listens, for its workers to share."""
SHARED_DATABASE = "MEMPIPE_TEST_PREFECT_DATABASE_URL"
"""Its database, for the tests that read what Prefect holds."""


def pytest_configure(config: pytest.Config) -> None:
    """mempipe compiled once, by the suite's first process: the suite starts some 700 mempipe
    processes, and where ``PYTHONDONTWRITEBYTECODE`` is set (as on CI's machines) each would
    compile every module it imports again, 0.34 CPU-s of a 4.3 s replay."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(Path(mempipe.__file__).parent, quiet=1)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist the controller starts one Prefect test server before its workers, and they
    share it (:func:`prefect_server`): a server's start is 12 CPU-s, once instead of once a
    worker. Closed when the session ends."""
    config = session.config
    workers = getattr(config.option, "numprocesses", None)
    if workers and not hasattr(config, "workerinput") and not config.option.collectonly:
        from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_DATABASE_CONNECTION_URL

        stack = ExitStack()
        stack.enter_context(_test_server())
        os.environ[SHARED_SERVER] = str(PREFECT_API_URL.value())
        os.environ[SHARED_DATABASE] = PREFECT_SERVER_DATABASE_CONNECTION_URL.value()
        config.stash[_server_key] = stack


def pytest_sessionfinish(session: pytest.Session) -> None:
    stack = session.config.stash.get(_server_key, None)
    if stack is not None:
        stack.close()


_server_key = pytest.StashKey[ExitStack]()


@contextmanager
def _test_server() -> Iterator[None]:
    """A real, temporary Prefect server (Prefect's test harness) that records no task runs from
    their events (the task-run recorder, 55 % of its CPU per command measured on 3.9): no test
    reads a task run back, and flow runs, states, logs, events, artifacts and concurrency limits
    are served as ever."""
    from prefect.settings import PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED as RECORDER
    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with temporary_settings({RECORDER: False}), prefect_test_harness(server_startup_timeout=120):
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files whose tests start processes first, the most first (each file's own order
    kept): the README's ``--dist loadfile`` hands whole files to workers in this order
    (``--no-loadscope-reorder``, in the configuration), so the long files start at once instead
    of last, when one of them would keep a worker busy after the others have finished."""
    started = Counter(item.path for item in items if item.get_closest_marker("process"))
    items.sort(key=lambda item: -started[item.path])


@pytest.fixture(autouse=True)
def _running(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test being run, for :mod:`tests.processes` to check its ``process`` marker."""
    processes.running = request.node
    yield
    processes.running = None


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test leaves the worker's environment as it found it: an in-process command sets
    variables of its process (a quiet command, ``PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL``), and a
    later test's child process would inherit them (a ``mempipe -v`` with no logs)."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memory.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url, migrate=True)
    yield opened
    opened.close()


@pytest.fixture
def defaults() -> IdentityDefaults:
    return IdentityDefaults(org_id="acme", project_id="support")


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """A real, temporary Prefect server for the whole session (the xdist controller's, shared by
    its workers; else one of this process's own); yields its API URL. The runs in this process
    do not ship their logs to it (a third of an in-process command's cost, and no test reads
    them but those that ask, :func:`logs_to_api`); processes started from here do."""
    from prefect.context import _temporary_global_settings_context, get_settings_context
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_LOGGING_TO_API_ENABLED,
        PREFECT_SERVER_DATABASE_CONNECTION_URL,
        temporary_settings,
    )

    with ExitStack() as stack:
        shared = os.environ.get(SHARED_SERVER)
        if shared:
            database = os.environ[SHARED_DATABASE]
            stack.enter_context(
                temporary_settings(
                    {PREFECT_API_URL: shared, PREFECT_SERVER_DATABASE_CONNECTION_URL: database}
                )
            )
            # as the harness does: threads whose context was copied before (Prefect's global
            # event loop, which acquires concurrency slots) see the shared server too
            stack.enter_context(_temporary_global_settings_context(get_settings_context()))
        else:
            stack.enter_context(_test_server())
        stack.enter_context(temporary_settings({PREFECT_LOGGING_TO_API_ENABLED: False}))
        yield str(PREFECT_API_URL.value())


@pytest.fixture
def logs_to_api(prefect_server: str) -> Iterator[str]:
    """The runs in this process ship their logs to the test server, for a test that reads them."""
    from prefect.settings import PREFECT_LOGGING_TO_API_ENABLED, temporary_settings

    with temporary_settings({PREFECT_LOGGING_TO_API_ENABLED: True}):
        yield prefect_server


@pytest.fixture(scope="session")
def secantus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MongoDB wire-protocol server for the session (SecantusDB: a replica set named
    ``secantus``, transactions, no search), on a free loopback port; yields its base URI."""
    from secantus import SecantusDBServer

    data = tmp_path_factory.mktemp("secantus")
    with SecantusDBServer(storage_path=str(data), cache_size="256M") as server:
        yield server.uri.rstrip("/")


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Store]:
    """A store of every kind of record, each collection embedded (``tests.stores``)."""
    from tests.stores import bundle_source

    store = bundle_source(tmp_path)
    yield store
    store.close()
