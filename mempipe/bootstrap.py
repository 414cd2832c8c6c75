"""All wiring in one place: settings, project configuration, the store's public URL, identity
defaults, and the step that writes what a run's provider requests spent.

Flows and the CLI call these; nothing is built at import time. What travels (to a task, a
thread, a Dask worker) is the store's public URL; a task opens its unit of work from it in its
body, where a reader sees it (``with unit_of_work(store_url) as uow:``), as a cosmicpython
handler is handed its ``uow``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from mempipe import spend
from mempipe.adapters.embedding.registry import declare_options
from mempipe.adapters.llm.registry import extractor_for, require_extractor
from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork, unit_of_work
from mempipe.credentials import keep_endpoints, load_store_secret, remember
from mempipe.errors import MempipeError
from mempipe.retention import keep_policy
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.identity import IdentityDefaults, IdentityPolicy
from mempipe.schemas.replay import ReplaySettings
from mempipe.settings import (
    Settings,
    load_llm_settings,
    load_project_config,
    load_retry_policy,
    load_settings,
)

DEFAULT_ORG = "default"
DEFAULT_PROJECT = "default"


@dataclass
class AppContext:
    settings: Settings
    config: ProjectConfig
    prepared: bool = field(default=False, compare=False, repr=False)
    """This command prepared the store (the runner does, before the flow starts), so the flow's
    run record does not prepare it again. Any preparation serves every later ask: the store is
    there, migrated and declared, whether or not the job that prepared it may create one."""

    @property
    def store_url(self) -> str:
        return self.settings.store

    def flow_options(self) -> dict[str, str]:
        """The store and configuration file as a flow this command starts takes them: the
        public URL (the password stays in this process) and the file's path."""
        return {"store": self.store_url, "config": str(self.settings.config)}

    def replay_settings(self, extractor: str, *, asking: bool = False) -> ReplaySettings:
        """What an extraction or a memory import runs with: the extractor (which must be
        registered), the configured embedding model and thresholds, the LLM and retry settings
        of the environment. ``asking``: the work will ask the extractor, so it is built once
        now, and one that cannot be asked (no key for its endpoint) is refused before any run
        is recorded."""
        require_extractor(extractor)
        memory = self.config.memory
        settings = ReplaySettings(
            extractor=extractor,
            embedding_model=memory.embedding.model,
            llm=load_llm_settings().model_copy(
                update={
                    "prompts": memory.extraction.prompts,
                    "offline_rules": memory.extraction.offline_rules,
                }
            ),
            thresholds=memory.reconcile,
            retry=load_retry_policy(),
            kept_answers=str(self.kept_answers),
        )
        if asking:
            extractor_for(extractor, settings.llm)
        return settings

    @property
    def kept_answers(self) -> Path:
        """The folder of the provider answers previews kept (:mod:`mempipe.adapters.llm.kept`)."""
        folder = Path(self.config.memory.extraction.kept_answers)
        return (self.settings.config.parent / folder).absolute()

    @property
    def declarations(self) -> ProjectConfig | None:
        """The project configuration to record in the store (write-once), when a project
        configuration file is present."""
        return self.config if self.settings.config.exists() else None

    def prepare_store(self, *, create: bool = False) -> None:
        """Migrate the store and record this project's declarations: the one step before a
        job writes. ``create``: for the jobs that bring data in; every other job refuses a
        store that is not there."""
        prepare_store(self.store_url, self.declarations, create=create)
        self.prepared = True

    def identity_defaults(
        self,
        org_id: str | None = None,
        project_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        policy: IdentityPolicy = IdentityPolicy.STRICT,
    ) -> IdentityDefaults:
        """Arguments over ``MEMPIPE_ORG_ID`` / ``MEMPIPE_PROJECT_ID`` over the config file; the
        arguments given are the identity the operator named (:mod:`mempipe.domain.identity`)."""
        given = {"org_id": org_id, "project_id": project_id, "user_id": user_id}
        return IdentityDefaults(
            org_id=org_id or self.settings.org_id or self.config.org_id or DEFAULT_ORG,
            project_id=project_id
            or self.settings.project_id
            or self.config.project_id
            or DEFAULT_PROJECT,
            user_id=user_id,
            agent_id=agent_id,
            named=frozenset(k for k, v in {**given, "agent_id": agent_id}.items() if v),
            policy=policy,
        )


def prepare_store(store_url: str, config: ProjectConfig | None, *, create: bool = False) -> None:
    """Apply pending migrations, then record ``config``'s partition keys and custom types
    (write-once: a removal or a change is refused before any work starts), its vector indexes'
    quantization (changeable), and what the store's server can do. Without ``create`` a store
    that is not there is refused, and nothing is created."""
    with closing(open_store(store_url, migrate=True, existing=not create)) as store:
        store.record_capabilities()
        if config is not None:
            store.declare(config.memory.metadata_partition_keys, config.memory.custom_types)
            store.declare_quantization(config.memory.vector_index.declared())


_COMMAND_CONTEXT: ContextVar[AppContext | None] = ContextVar("command_context", default=None)


@contextmanager
def command_context(context: AppContext) -> Iterator[AppContext]:
    """The context a command loaded, handed to the flow it runs in this process: the flow's
    :func:`load_context` of the same store and configuration is this one, so a command loads its
    context once and prepares its store once."""
    token = _COMMAND_CONTEXT.set(context)
    try:
        yield context
    finally:
        _COMMAND_CONTEXT.reset(token)


def load_context(
    store: str | None = None, config: str | Path | None = None, store_secret: str | None = None
) -> AppContext:
    """The context of a command or a flow run; its ``store_url`` is the store's public URL,
    the password kept in the process (:mod:`mempipe.credentials`). ``MEMPIPE_STORE_SECRET``
    stands for ``store_secret`` where no store is given (a worker's default store). A flow run
    a command started in this process gets the command's context (:func:`command_context`)."""
    given = _COMMAND_CONTEXT.get()
    asked = {"store": store, "config": str(config)}
    if given is not None and not store_secret and given.flow_options() == asked:
        return given
    settings = load_settings(store=store, config=config, store_secret=store_secret)
    secret = store_secret or (settings.store_secret if store is None else None)
    if secret:
        given = settings.store if "store" in settings.model_fields_set else None
        public = load_store_secret(secret, given)
    else:
        public = remember(settings.store)
    settings = settings.model_copy(update={"store": public, "store_secret": None})
    config = load_project_config(settings.config)
    declare_options(config.memory.embedding.options)
    keep_endpoints(config.memory.embedding.endpoints)
    keep_policy(config.memory.retention)
    return AppContext(settings=settings, config=config)


@contextmanager
def spend_recorded(uow: UnitOfWork) -> Iterator[None]:
    """A step that asks a provider: what this process's requests spent for the run is written
    to the store as the step ends, failed or not (a Dask worker's part of a run ends with its
    task; the flow's with the run, :class:`~mempipe.flows.recorded_run.RecordedRun`)."""
    try:
        yield
    finally:
        record_spend(uow)


def record_spend(uow: UnitOfWork) -> None:
    """Write what this process's provider requests spent for the run since they were last
    written: where a run's part in a process ends (the flow's run, a Dask worker's task).
    Counts that cannot be written are kept for the next write (the step's own error, if any, is
    the one that counts)."""
    run = spend.current_run()
    rows = spend.take(run) if run != spend.PROCESS else []
    if not rows:
        return
    try:
        uow.runs.add_spend(rows)
    except MempipeError:
        spend.give_back(rows)


def require_store(store_url: str) -> None:
    """Refuse a store that is not there, or not mempipe's, or not migrated; change nothing (the
    jobs that only read, before they start)."""
    unit_of_work(store_url, read_only=True).close()


def reach_store(store_url: str, *, creates: bool) -> None:
    """Before a job starts: a store that must be there is (it may still need migrations); a
    server store a job may create answers. A SQLite file is created only by the job itself.
    Opening is the check."""
    if not creates:
        unit_of_work(store_url, existing=True).close()
    elif not store_url.startswith("sqlite") and "://" in store_url:
        unit_of_work(store_url).close()
